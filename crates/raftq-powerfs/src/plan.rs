//! Which unsynced changes a power loss keeps: pure decisions over a journal, made by a
//! [`Choose`]r (a seeded one in use, a scripted one in tests that enumerate every outcome).
//!
//! The crash model: every write not covered by a completed fsync of its file may be lost per
//! 512-byte sector (a lost sector keeps its content as of the fsync; past the synced size that
//! is zeros); the file's size is its synced size, its current size, or (after growing) a
//! sector boundary in between; every directory operation not covered by an fsync of its
//! directories may be lost, each on its own. A lost operation that a later one depended on
//! (a rename of a file whose creation was lost) makes that one impossible: it is lost too.
//!
//! Each file, and the directory operations together, first draw a style: lose everything
//! unsynced (what a power cut right after the writes leaves), keep everything (a power cut
//! after the kernel wrote the page cache out), or decide each sector or operation by a coin.

use std::collections::BTreeMap;

use crate::dirlog::{Binding, DirOp};
use crate::journal::{FileJournal, SECTOR};

/// The source of a power loss's decisions.
pub trait Choose {
    /// A fair coin: `true` keeps the change.
    fn coin(&mut self) -> bool;
    /// A number in `0..n` (`0` when `n` is 0).
    fn below(&mut self, n: u64) -> u64;
}

/// Decisions from a seed (splitmix64): the same seed and journal give the same outcome.
#[derive(Debug, Clone)]
pub struct Seeded {
    state: u64,
}

impl Seeded {
    /// The decisions of `seed`.
    pub fn new(seed: u64) -> Self {
        Seeded { state: seed }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Choose for Seeded {
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// How one file's (or the directories') unsynced changes fare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// All lost.
    LoseAll,
    /// All kept.
    KeepAll,
    /// Each kept or lost by a coin.
    Each,
}

impl Style {
    /// Draws a style: a quarter each for all lost and all kept, half for each on its own.
    pub fn draw(choose: &mut impl Choose) -> Style {
        match choose.below(4) {
            0 => Style::LoseAll,
            1 => Style::KeepAll,
            _ => Style::Each,
        }
    }

    fn lose(self, choose: &mut impl Choose) -> bool {
        match self {
            Style::LoseAll => true,
            Style::KeepAll => false,
            Style::Each => !choose.coin(),
        }
    }
}

/// What a power loss leaves of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePlan {
    /// Its length.
    pub size: u64,
    /// Sectors to write back: the offset and the 512 bytes it held at the last fsync.
    pub writes: Vec<(u64, Vec<u8>)>,
    /// How many unsynced sectors (within `size`) there were.
    pub unsynced: usize,
    /// How many of them are lost.
    pub lost: usize,
}

/// The plan for a file with journal `journal` whose size is now `current`.
pub fn plan_file(journal: &FileJournal, current: u64, choose: &mut impl Choose) -> FilePlan {
    let style = Style::draw(choose);
    let size = final_size(journal.synced_size, current, style, choose);
    let mut plan = FilePlan {
        size,
        writes: Vec::new(),
        unsynced: 0,
        lost: 0,
    };
    for (&sector, pre) in &journal.sectors {
        let at = sector * SECTOR;
        if at >= size {
            continue;
        }
        plan.unsynced += 1;
        // A sector the file no longer reaches can only come back as it was.
        if at >= current || style.lose(choose) {
            plan.lost += 1;
            plan.writes.push((at, pre.sector()));
        }
    }
    // Sectors past the synced size: written since, they hold zeros when lost.
    for sector in journal.synced_size.div_ceil(SECTOR)..size.min(current).div_ceil(SECTOR) {
        plan.unsynced += 1;
        if style.lose(choose) {
            plan.lost += 1;
            plan.writes
                .push((sector * SECTOR, vec![0; SECTOR as usize]));
        }
    }
    plan
}

/// The file's length after the power loss: the synced one, the current one, or (when it grew)
/// a sector boundary between them.
fn final_size(synced: u64, current: u64, style: Style, choose: &mut impl Choose) -> u64 {
    if synced == current {
        return synced;
    }
    match style {
        Style::LoseAll => synced,
        Style::KeepAll => current,
        Style::Each if current < synced => {
            if choose.coin() {
                current
            } else {
                synced
            }
        }
        Style::Each => {
            let mut sizes = vec![synced];
            let first = synced / SECTOR + 1;
            sizes.extend((first..current.div_ceil(SECTOR)).map(|s| s * SECTOR));
            sizes.push(current);
            sizes[choose.below(sizes.len() as u64) as usize]
        }
    }
}

/// A directory entry: the directory's backing inode number and the name.
pub type Key = (u64, Vec<u8>);

/// What a power loss leaves of the pending directory operations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirPlan {
    /// Every entry a pending operation changed, and what it is bound to afterwards.
    pub bindings: BTreeMap<Key, Option<Binding>>,
    /// How many operations are kept.
    pub kept: usize,
    /// How many are lost.
    pub lost: usize,
}

/// The plan for the pending operations `ops` (oldest first): from the entries as the last
/// fsyncs left them, the kept operations are done again in order, each only if the entries
/// it changed are still as it found them.
pub fn plan_dirs(ops: &[DirOp], choose: &mut impl Choose) -> DirPlan {
    let mut plan = DirPlan::default();
    for op in ops {
        for entry in &op.entries {
            plan.bindings
                .entry((entry.dir, entry.name.clone()))
                .or_insert(entry.before);
        }
    }
    if ops.is_empty() {
        return plan;
    }
    let style = Style::draw(choose);
    for op in ops {
        let wanted = !style.lose(choose);
        let possible = op
            .entries
            .iter()
            .all(|e| plan.bindings.get(&(e.dir, e.name.clone())) == Some(&e.before));
        if wanted && possible {
            for entry in &op.entries {
                plan.bindings
                    .insert((entry.dir, entry.name.clone()), entry.after);
            }
            plan.kept += 1;
        } else {
            plan.lost += 1;
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::dirlog::{Entry, Kind};
    use crate::journal::PreImage;

    /// Decisions read from a script: `below` answers in turn, coins are the bits of a mask.
    struct Script {
        below: Vec<u64>,
        mask: u64,
        coins: u32,
    }

    impl Script {
        fn new(below: &[u64], mask: u64) -> Script {
            Script {
                below: below.iter().rev().copied().collect(),
                mask,
                coins: 0,
            }
        }
    }

    impl Choose for Script {
        fn coin(&mut self) -> bool {
            let bit = self.mask >> self.coins & 1 == 1;
            self.coins += 1;
            bit
        }

        fn below(&mut self, n: u64) -> u64 {
            self.below.pop().unwrap_or(0).min(n.saturating_sub(1))
        }
    }

    /// Applies `plan` to `file` as the revert does: the writes, then the length.
    fn apply(file: &[u8], plan: &FilePlan) -> Vec<u8> {
        let mut out = file.to_vec();
        for (at, bytes) in &plan.writes {
            let end = *at as usize + bytes.len();
            if out.len() < end {
                out.resize(end, 0);
            }
            out[*at as usize..end].copy_from_slice(bytes);
        }
        out.resize(plan.size as usize, 0);
        out
    }

    /// The journal the daemon would have kept: `old` was synced, `new` is the file now and
    /// every sector of it was written.
    fn journal_of(old: &[u8], new: &[u8]) -> FileJournal {
        let mut journal = FileJournal {
            synced_size: old.len() as u64,
            sectors: BTreeMap::new(),
        };
        for (i, chunk) in old.chunks(SECTOR as usize).enumerate() {
            if i * (SECTOR as usize) < new.len() || new.len() < old.len() {
                journal.sectors.insert(i as u64, PreImage::of(chunk));
            }
        }
        journal
    }

    /// The content of sector `s` of `bytes` within `size`, zero-padded.
    fn sector_of(bytes: &[u8], s: usize, size: usize) -> Vec<u8> {
        let start = s * SECTOR as usize;
        let end = (start + SECTOR as usize).min(size);
        let mut out = vec![0u8; end - start];
        let have = bytes.len().min(end).saturating_sub(start);
        if have > 0 {
            out[..have].copy_from_slice(&bytes[start..start + have]);
        }
        out
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed | 1)
            .collect()
    }

    #[test]
    fn every_subset_of_unsynced_sectors_is_a_state_and_each_sector_is_old_or_new() {
        // Synced: 3.5 sectors; now: 5.25 sectors, all rewritten; 6 sectors unsynced.
        let old = pattern(1792, 0x10);
        let new = pattern(2688, 0x77);
        let journal = journal_of(&old, &new);
        let sectors = new.len().div_ceil(SECTOR as usize);
        let mut seen = BTreeSet::new();
        for mask in 0..1u64 << sectors {
            // Style `Each` (below 2), the current size (the last of the candidates).
            let plan = plan_file(&journal, new.len() as u64, &mut Script::new(&[2, 99], mask));
            assert_eq!(plan.size, new.len() as u64);
            assert_eq!(plan.unsynced, sectors);
            let after = apply(&new, &plan);
            for s in 0..sectors {
                let got = sector_of(&after, s, after.len());
                let was_new = got == sector_of(&new, s, after.len());
                assert!(
                    was_new || got == sector_of(&old, s, after.len()),
                    "sector {s}"
                );
                assert_eq!(was_new, mask >> s & 1 == 1, "mask {mask:b} sector {s}");
            }
            seen.insert(after);
        }
        assert_eq!(seen.len(), 1 << sectors);
    }

    #[test]
    fn a_shorter_length_keeps_old_sectors_and_lost_growth_reads_as_zeros() {
        let old = pattern(1024, 1);
        let new = pattern(2048, 2);
        let journal = journal_of(&old, &new);
        // The lengths offered: 1024, 1536, 2048.
        for pick in 0..3u64 {
            for mask in 0..1u64 << 4 {
                let plan = plan_file(&journal, 2048, &mut Script::new(&[2, pick], mask));
                assert_eq!(plan.size, 1024 + 512 * pick);
                let after = apply(&new, &plan);
                for s in 0..after.len() / SECTOR as usize {
                    let got = sector_of(&after, s, after.len());
                    let old_s = sector_of(&old, s, after.len());
                    assert!(got == sector_of(&new, s, after.len()) || got == old_s);
                }
            }
        }
    }

    #[test]
    fn an_unsynced_truncation_comes_back_whole_or_stays() {
        let old = pattern(2048, 3);
        let mut new = pattern(100, 4);
        new.truncate(100);
        let journal = journal_of(&old, &new);
        for keep_short in [false, true] {
            for mask in 0..2u64 {
                let coins = u64::from(keep_short) | mask << 1;
                let plan = plan_file(&journal, 100, &mut Script::new(&[2], coins));
                let after = apply(&new, &plan);
                if keep_short {
                    assert_eq!(after.len(), 100);
                } else {
                    assert_eq!(after.len(), 2048);
                    assert_eq!(after[512..], old[512..], "the cut sectors are old");
                }
            }
        }
    }

    #[test]
    fn the_seeded_choice_reaches_every_subset_and_both_extremes() {
        let old = pattern(1024, 5);
        let new = pattern(1024, 6);
        let journal = journal_of(&old, &new);
        let mut seen = BTreeSet::new();
        for seed in 0..400 {
            let plan = plan_file(&journal, 1024, &mut Seeded::new(seed));
            seen.insert(apply(&new, &plan));
        }
        assert_eq!(seen.len(), 4);
        assert_eq!(
            plan_file(&journal, 1024, &mut Seeded::new(7)),
            plan_file(&journal, 1024, &mut Seeded::new(7))
        );
    }

    fn file(ino: u64) -> Option<Binding> {
        Some(Binding {
            ino,
            kind: Kind::File,
        })
    }

    fn op(id: u64, entries: &[(&str, Option<Binding>, Option<Binding>)]) -> DirOp {
        DirOp::new(
            id,
            entries
                .iter()
                .map(|(name, before, after)| Entry {
                    dir: 1,
                    name: name.as_bytes().to_vec(),
                    before: *before,
                    after: *after,
                })
                .collect(),
        )
    }

    #[test]
    fn every_subset_of_directory_operations_gives_a_consistent_directory() {
        // create a.tmp (5); rename a.tmp -> a over 4; unlink b (6).
        let ops = [
            op(1, &[("a.tmp", None, file(5))]),
            op(2, &[("a.tmp", file(5), None), ("a", file(4), file(5))]),
            op(3, &[("b", file(6), None)]),
        ];
        let mut seen = BTreeSet::new();
        for mask in 0..8u64 {
            let plan = plan_dirs(&ops, &mut Script::new(&[2], mask));
            let get = |name: &str| plan.bindings[&(1, name.as_bytes().to_vec())];
            // The rename is whole: never both names, never neither file under `a`.
            assert!(get("a").is_some());
            assert!(!(get("a") == file(5) && get("a.tmp").is_some()));
            // A rename whose creation was lost cannot happen.
            if mask & 1 == 0 {
                assert_eq!(get("a"), file(4));
            }
            assert_eq!(get("b"), if mask & 4 == 0 { file(6) } else { None });
            seen.insert(format!("{:?}", plan.bindings));
        }
        // Lost creation makes the rename impossible: 2 states of (a.tmp, a) short of 4.
        assert_eq!(seen.len(), 6);
    }
}
