//! The directory-operation log (`.powerfs/dirops`) and the operations it leaves pending.
//!
//! Each operation (create, mkdir, symlink, link, unlink, rmdir, rename) is a list of entry
//! changes: in directory `dir` (a backing inode number), the name `name` was bound to `before`
//! and is bound to `after`. A rename changes two entries at once and is one operation: a power
//! loss keeps it whole or not at all. An operation stays pending until every directory it
//! changed has been fsynced since; a cancelled one (the operation failed after it was logged)
//! never happened. Records are framed by their length (`u32`), so that a tail torn by a kill
//! is recognised and ignored.

/// What kind of inode a name is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else (fifos, sockets, devices: kept by hard links like files).
    Other,
}

/// An inode a name is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Binding {
    /// Its backing inode number.
    pub ino: u64,
    /// Its kind.
    pub kind: Kind,
}

/// One directory entry's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The directory's backing inode number.
    pub dir: u64,
    /// The name in it.
    pub name: Vec<u8>,
    /// What the name was bound to before.
    pub before: Option<Binding>,
    /// What it is bound to after.
    pub after: Option<Binding>,
}

/// A logged operation still pending: `unsynced` are the directories it changed that no fsync
/// has covered since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirOp {
    /// Its number, unique within the log.
    pub id: u64,
    /// The entries it changed.
    pub entries: Vec<Entry>,
    /// The directories still to be fsynced before it is durable.
    pub unsynced: Vec<u64>,
}

impl DirOp {
    /// A new operation over `entries`, none of whose directories is synced yet.
    pub fn new(id: u64, entries: Vec<Entry>) -> DirOp {
        let mut unsynced: Vec<u64> = entries.iter().map(|e| e.dir).collect();
        unsynced.sort_unstable();
        unsynced.dedup();
        DirOp {
            id,
            entries,
            unsynced,
        }
    }

    /// The inodes it names, before and after.
    pub fn inodes(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries
            .iter()
            .flat_map(|e| [e.before, e.after])
            .flatten()
            .map(|b| b.ino)
    }
}

/// One record of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// An operation, logged before (removals) or right after (additions) it was done.
    Op(DirOp),
    /// The operation `id` failed and never happened.
    Cancel(u64),
    /// The directory was fsynced: earlier operations on it are durable there.
    Synced(u64),
}

/// The operations pending, in the order they were done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pending {
    ops: Vec<DirOp>,
}

impl Pending {
    /// The pending operations, oldest first.
    pub fn ops(&self) -> &[DirOp] {
        &self.ops
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Applies one record; returns the operations it made durable or cancelled.
    pub fn apply(&mut self, record: Record) -> Vec<DirOp> {
        match record {
            Record::Op(op) => {
                self.ops.push(op);
                Vec::new()
            }
            Record::Cancel(id) => self.take(|op| op.id == id),
            Record::Synced(dir) => {
                for op in &mut self.ops {
                    op.unsynced.retain(|&d| d != dir);
                }
                self.take(|op| op.unsynced.is_empty())
            }
        }
    }

    fn take(&mut self, done: impl Fn(&DirOp) -> bool) -> Vec<DirOp> {
        let (gone, kept) = std::mem::take(&mut self.ops).into_iter().partition(done);
        self.ops = kept;
        gone
    }

    /// The pending operations of a log read back.
    pub fn from_records(records: impl IntoIterator<Item = Record>) -> Pending {
        let mut pending = Pending::default();
        for record in records {
            pending.apply(record);
        }
        pending
    }
}

/// The framed bytes of `record`.
pub fn encode(record: &Record) -> Vec<u8> {
    let mut body = Vec::new();
    match record {
        Record::Op(op) => {
            body.push(1);
            body.extend_from_slice(&op.id.to_le_bytes());
            put_u64s(&mut body, &op.unsynced);
            body.extend_from_slice(&(op.entries.len() as u32).to_le_bytes());
            for entry in &op.entries {
                put_entry(&mut body, entry);
            }
        }
        Record::Cancel(id) => {
            body.push(2);
            body.extend_from_slice(&id.to_le_bytes());
        }
        Record::Synced(dir) => {
            body.push(3);
            body.extend_from_slice(&dir.to_le_bytes());
        }
    }
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn put_u64s(out: &mut Vec<u8>, values: &[u64]) {
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for value in values {
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn put_entry(out: &mut Vec<u8>, entry: &Entry) {
    out.extend_from_slice(&entry.dir.to_le_bytes());
    out.extend_from_slice(&(entry.name.len() as u32).to_le_bytes());
    out.extend_from_slice(&entry.name);
    for binding in [entry.before, entry.after] {
        match binding {
            None => out.push(0),
            Some(b) => {
                out.push(match b.kind {
                    Kind::File => 1,
                    Kind::Dir => 2,
                    Kind::Symlink => 3,
                    Kind::Other => 4,
                });
                out.extend_from_slice(&b.ino.to_le_bytes());
            }
        }
    }
}

/// The records of a log, up to a torn or unreadable tail.
pub fn decode(bytes: &[u8]) -> Vec<Record> {
    let mut records = Vec::new();
    let mut at = 0;
    while bytes.len() >= at + 4 {
        let len = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let end = at + 4 + len as usize;
        if bytes.len() < end {
            break;
        }
        match Reader(&bytes[at + 4..end]).record() {
            Some(record) => records.push(record),
            None => break,
        }
        at = end;
    }
    records
}

/// Reads the fields of one record's body.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Option<u64> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8)?);
        Some(u64::from_le_bytes(word))
    }

    fn record(&mut self) -> Option<Record> {
        match self.u8()? {
            1 => {
                let id = self.u64()?;
                let dirs = self.u32()?;
                let unsynced = (0..dirs).map(|_| self.u64()).collect::<Option<Vec<_>>>()?;
                let count = self.u32()?;
                let entries = (0..count)
                    .map(|_| self.entry())
                    .collect::<Option<Vec<_>>>()?;
                Some(Record::Op(DirOp {
                    id,
                    entries,
                    unsynced,
                }))
            }
            2 => Some(Record::Cancel(self.u64()?)),
            3 => Some(Record::Synced(self.u64()?)),
            _ => None,
        }
    }

    fn entry(&mut self) -> Option<Entry> {
        let dir = self.u64()?;
        let len = self.u32()? as usize;
        let name = self.take(len)?.to_vec();
        let before = self.binding()?;
        let after = self.binding()?;
        Some(Entry {
            dir,
            name,
            before,
            after,
        })
    }

    fn binding(&mut self) -> Option<Option<Binding>> {
        let kind = match self.u8()? {
            0 => return Some(None),
            1 => Kind::File,
            2 => Kind::Dir,
            3 => Kind::Symlink,
            4 => Kind::Other,
            _ => return None,
        };
        Some(Some(Binding {
            ino: self.u64()?,
            kind,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(ino: u64) -> Option<Binding> {
        Some(Binding {
            ino,
            kind: Kind::File,
        })
    }

    fn entry(dir: u64, name: &str, before: Option<Binding>, after: Option<Binding>) -> Entry {
        Entry {
            dir,
            name: name.as_bytes().to_vec(),
            before,
            after,
        }
    }

    #[test]
    fn records_read_back_up_to_a_torn_tail() {
        let rename = DirOp::new(
            1,
            vec![
                entry(10, "a.tmp", file(5), None),
                entry(10, "a", file(4), file(5)),
            ],
        );
        let records = vec![Record::Op(rename), Record::Cancel(9), Record::Synced(10)];
        let mut bytes: Vec<u8> = records.iter().flat_map(encode).collect();
        assert_eq!(decode(&bytes), records);
        bytes.pop();
        assert_eq!(decode(&bytes), records[..2].to_vec());
    }

    #[test]
    fn an_operation_is_durable_once_every_directory_it_changed_is_synced() {
        let across = DirOp::new(
            1,
            vec![entry(10, "x", file(5), None), entry(20, "y", None, file(5))],
        );
        let here = DirOp::new(2, vec![entry(10, "z", None, file(6))]);
        let failed = DirOp::new(3, vec![entry(30, "w", None, file(7))]);
        let mut pending = Pending::default();
        for op in [&across, &here, &failed] {
            pending.apply(Record::Op(op.clone()));
        }
        assert_eq!(pending.apply(Record::Cancel(3)), vec![failed]);
        assert_eq!(pending.apply(Record::Synced(10)).len(), 1);
        assert_eq!(pending.ops().len(), 1);
        assert_eq!(pending.ops()[0].unsynced, vec![20]);
        assert_eq!(pending.apply(Record::Synced(20))[0].id, 1);
        assert!(pending.is_empty());
        assert_eq!(across.inodes().collect::<Vec<_>>(), vec![5, 5]);
    }
}
