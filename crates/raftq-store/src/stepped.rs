//! Files written out to the disk a step at a time while they are written.
//!
//! Linux keeps what a process writes in the page cache until an fsync or its own writeback
//! (after about 30 s, or once dirty pages pass a share of memory: gigabytes on a large machine).
//! A large file synced only at its end, a new log segment's zeros or a snapshot, therefore
//! reaches the disk in one burst, and every fsync of the log that comes meanwhile waits behind
//! it, on every node at about the same entry. A [`SteppedFile`] writes its bytes out every
//! [`STEP`] bytes and waits for each step (`sync_file_range`, as RocksDB's `bytes_per_sync`), so
//! such a file takes the disk a step at a time, between the log's fsyncs. The final fsync still
//! makes the file durable.

use std::io::{self, Write};
use std::sync::Arc;

use crate::disk::DiskFile;

/// Bytes written out at a time: a log fsync that comes while a step is under way waits for that
/// step alone.
pub(crate) const STEP: u64 = 256 << 10;

/// A file being written from its start, written out to the disk every [`STEP`] bytes.
#[derive(Debug)]
pub(crate) struct SteppedFile {
    file: Arc<dyn DiskFile>,
    written: u64,
    written_out: u64,
}

impl SteppedFile {
    /// Writes `file` from its first byte on.
    pub(crate) fn new(file: Arc<dyn DiskFile>) -> SteppedFile {
        SteppedFile {
            file,
            written: 0,
            written_out: 0,
        }
    }

    /// Writes out the bytes not written out yet and returns the file, for its fsync.
    pub(crate) fn finish(mut self) -> io::Result<Arc<dyn DiskFile>> {
        self.write_out()?;
        Ok(self.file)
    }

    fn write_out(&mut self) -> io::Result<()> {
        if self.written > self.written_out {
            self.file
                .write_out(self.written_out, self.written - self.written_out)?;
            self.written_out = self.written;
        }
        Ok(())
    }
}

impl Write for SteppedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write_all_at(buf, self.written)?;
        self.written += buf.len() as u64;
        if self.written - self.written_out >= STEP {
            self.write_out()?;
        }
        debug_assert!(self.written - self.written_out < STEP);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::{Disk, Open};

    #[test]
    fn a_stepped_file_holds_every_byte_written_across_steps() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stepped");
        let disk = crate::disk::RealDisk;
        let mut out = SteppedFile::new(disk.open(&path, Open::Create).expect("create"));
        let bytes: Vec<u8> = (0..(STEP as usize * 2 + 1000)).map(|i| i as u8).collect();
        for chunk in bytes.chunks(4096) {
            out.write_all(chunk).expect("write");
        }
        assert_eq!(out.written_out, STEP * 2, "written out at each whole step");
        out.finish().expect("finish").sync_all().expect("sync");
        assert_eq!(std::fs::read(&path).expect("read"), bytes);
    }
}
