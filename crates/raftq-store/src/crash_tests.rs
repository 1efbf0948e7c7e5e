//! Power losses while the log writes: every crash image (see [`crate::crash_disk`]) of the
//! moments a power loss can strike must open, hold every entry whose append was acknowledged,
//! byte for byte, hold nothing that was never appended, and keep the vote saved.
//!
//! The moments are the start of every fsync (power lost while it runs: what was written since
//! the last one may or may not be on the disk) and the end of every operation. The segments
//! alone are tried for each way the log can be cut short; the whole log store, with its
//! metadata in RocksDB, through a workload of appends (awaited and a leader's), votes,
//! truncations and purges across segments.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex, PoisonError};

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{Entry, EntryPayload, LogId, RaftLogReader, Vote};
use rocksdb::{IteratorMode, WriteBatch, DB};

use crate::crash_disk::{CrashDisk, Frozen};
use crate::disk::{Disk, DiskFile};
use crate::layout::META_CF;
use crate::log_store::{LogStore, KEY_VOTE};
use crate::segments::{LogOptions, Segments};
use crate::work::Work;

/// Bytes of a segment here: 16 sectors, a few records each.
const SEGMENT: u64 = 8192;
/// The data directory (durable before a test starts) and the log's directory in it.
const DATA: &str = "/node";
const LOG: &str = "/node/log";

/// At most this many images of one moment of the segments alone are tried (all of them when
/// there are fewer); of the whole store, [`STORE_IMAGES`].
const SEGMENT_IMAGES: usize = 2048;
const STORE_IMAGES: usize = 400;

type Encoded = Vec<(u64, Vec<u8>)>;
/// Entries by index, encoded.
type Log = BTreeMap<u64, Vec<u8>>;
/// A row of the metadata column family.
type Row = (Box<[u8]>, Box<[u8]>);

/// A disk holding the data directory, durably.
fn new_disk() -> CrashDisk {
    let disk = CrashDisk::new();
    disk.create_dir(Path::new(DATA)).expect("data directory");
    disk.sync_dir(Path::new("/")).expect("sync /");
    disk
}

/// A disk holding the data directory and the log's directory, both durably, and the log opened
/// on it holding `acked` durably.
fn disk_with_log(acked: &Encoded) -> (CrashDisk, Segments) {
    let disk = new_disk();
    disk.create_dir(Path::new(LOG)).expect("log directory");
    disk.sync_dir(Path::new(DATA))
        .expect("sync the data directory");
    let log = log_holding(&disk, acked);
    (disk, log)
}

fn options(disk: &CrashDisk) -> LogOptions {
    LogOptions {
        disk: Arc::new(disk.clone()),
        segment_bytes: SEGMENT,
        work: Work::Threads,
        spare_thread: false,
    }
}

/// Entries `range`, each of about `size` bytes (sizes vary, so records start anywhere in a
/// sector) filled with a byte of its own.
fn entries(range: std::ops::Range<u64>, size: usize) -> Encoded {
    range
        .map(|i| (i, vec![i as u8 ^ 0x5a; size + (i as usize % 3) * 50]))
        .collect()
}

/// The log opened on `disk`, holding `acked` durably.
fn log_holding(disk: &CrashDisk, acked: &Encoded) -> Segments {
    let mut log = Segments::open(&options(disk), Path::new(LOG), None).expect("open");
    sync(log.append(acked).expect("append"));
    log
}

fn sync(files: Vec<Arc<dyn DiskFile>>) {
    for file in files {
        file.sync_data().expect("sync");
    }
}

/// Calls `check` with every crash image of `frozen` (or a sample drawn from `seed`), and
/// panics naming the image and its error at the first that fails.
fn each_image(
    frozen: &Frozen,
    limit: usize,
    seed: u64,
    mut check: impl FnMut(&CrashDisk) -> Result<(), String>,
) -> usize {
    let images = frozen.images(limit, seed);
    for image in &images {
        if let Err(error) = check(&image.disk) {
            panic!(
                "crash image {:?} (of {} at this moment, seed {seed}): {error}",
                image.choices,
                frozen.count()
            );
        }
    }
    images.len()
}

/// Opens the segments of a crash image and checks them: every entry of `acked` (past
/// `purged`) is there as written, and every entry there is one of `written`.
fn segments_hold(
    image: &CrashDisk,
    purged: Option<u64>,
    acked: &Encoded,
    written: &Encoded,
) -> Result<(), String> {
    let log = Segments::open(&options(image), Path::new(LOG), purged).map_err(|e| e.to_string())?;
    let held: BTreeMap<u64, Vec<u8>> = log
        .read(0, u64::MAX)
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    for (index, bytes) in acked.iter().filter(|(i, _)| purged.is_none_or(|p| *i > p)) {
        if held.get(index) != Some(bytes) {
            return Err(format!(
                "acknowledged entry {index} is missing or different"
            ));
        }
    }
    for (index, bytes) in &held {
        if !written.iter().any(|(i, b)| i == index && b == bytes) {
            return Err(format!("entry {index} was never written so"));
        }
    }
    let names = image.list_dir(Path::new(LOG)).map_err(|e| e.to_string())?;
    if let Some(tmp) = names.iter().find(|n| n.ends_with(".tmp")) {
        return Err(format!("{tmp} is left behind"));
    }
    Ok(())
}

/// The moments at the start of each sync from now on, frozen.
pub(crate) fn record_syncs(disk: &CrashDisk) -> Arc<Mutex<Vec<Frozen>>> {
    let moments = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&moments);
    disk.on_sync(move |disk| {
        let frozen = disk.freeze();
        kept.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(frozen);
    });
    moments
}

/// The moments recorded so far, taken out.
pub(crate) fn taken(moments: &Mutex<Vec<Frozen>>) -> Vec<Frozen> {
    std::mem::take(&mut moments.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Every image of every moment in `moments` (each with its index as the seed of its images)
/// opens as a log that holds every entry of `acked` and a prefix of `written`.
fn hold_at_every(moments: &[Frozen], acked: &Encoded, written: &Encoded) {
    for (seed, moment) in moments.iter().enumerate() {
        each_image(moment, SEGMENT_IMAGES, seed as u64, |image| {
            segments_hold(image, None, acked, written)
        });
    }
}

#[test]
fn a_group_commit_cut_short_inside_its_first_record_opens_without_it() {
    let acked = entries(1..4, 1150);
    let (disk, mut log) = disk_with_log(&acked);
    // Records 4 and 5 in one write; the power goes during its fsync. Record 4 spans three
    // sectors: the middle one alone may be lost while record 5 is whole.
    let unacked = entries(4..6, 1150);
    log.append(&unacked).expect("append");
    let written: Encoded = acked.iter().chain(&unacked).cloned().collect();
    hold_at_every(&[disk.freeze()], &acked, &written);
}

#[test]
fn a_roll_whose_new_segment_reached_the_disk_before_the_old_ones_tail_opens() {
    // Five records of 1216 to 1316 bytes leave room in the first segment for one more.
    let acked = entries(1..6, 1200);
    let (disk, mut log) = disk_with_log(&acked);
    let moments = record_syncs(&disk);
    let unacked = entries(6..9, 1200);
    let files = log.append(&unacked).expect("append");
    assert_eq!(files.len(), 2, "the append rolls to a second segment");
    // The power goes during the append's fsyncs, the new segment's first.
    let mut frozen = vec![disk.freeze()];
    for file in files.into_iter().rev() {
        file.sync_data().expect("sync");
    }
    frozen.extend(taken(&moments));
    let written: Encoded = acked.iter().chain(&unacked).cloned().collect();
    hold_at_every(&frozen, &acked, &written);
}

#[test]
fn a_truncation_removing_several_segments_opens_at_any_moment() {
    let written = entries(1..22, 1200);
    let (disk, mut log) = disk_with_log(&written);
    assert!(
        disk.list_dir(Path::new(LOG)).expect("list").len() >= 5,
        "four segments"
    );
    let moments = record_syncs(&disk);
    log.truncate(3).expect("truncate");
    let mut frozen = taken(&moments);
    frozen.push(disk.freeze());
    let kept: Encoded = written[..2].to_vec();
    hold_at_every(&frozen, &kept, &written);
}

#[test]
fn a_new_segment_cut_short_while_it_was_filled_is_removed() {
    let acked = entries(1..3, 500);
    let (disk, mut log) = disk_with_log(&acked);
    // Larger than a segment: a file of its own, filled with zeros under a temporary name.
    let moments = record_syncs(&disk);
    let large = vec![(3, vec![3; SEGMENT as usize + 100])];
    log.append(&large).expect("append");
    let frozen = taken(&moments);
    let written: Encoded = acked.iter().chain(&large).cloned().collect();
    hold_at_every(&frozen, &acked, &written);
}

#[test]
fn the_log_directory_outlives_a_power_loss_once_entries_are_acknowledged() {
    let disk = new_disk();
    let acked = entries(1..3, 500);
    let _log = log_holding(&disk, &acked);
    hold_at_every(&[disk.freeze()], &acked, &acked);
}

#[test]
fn a_disk_too_full_for_a_new_segment_stops_an_append_before_it_without_damage() {
    let acked = entries(1..6, 1200);
    let (disk, mut log) = disk_with_log(&acked);
    let room = log.room();
    assert!(room > SEGMENT, "the spare is ready: {room}");
    // From now on no file may grow: writes inside the segments still succeed.
    disk.set_capacity(Some(0));
    let moments = record_syncs(&disk);
    let more = entries(6..30, 1200);
    let written = log
        .append_until_full(&more)
        .expect("an append stopped by a full disk");
    let (done, left) = more.split_at(written.count);
    assert!(
        !done.is_empty() && !left.is_empty(),
        "the spare takes some, the next segment finds no room: {} of {}",
        written.count,
        more.len()
    );
    let files = written.files;
    sync(files);
    assert!(log.room() < 1400, "no spare and no room for another record");
    let names = disk.list_dir(Path::new(LOG)).expect("list");
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp") && n != "spare"),
        "no file half made is left to hold the space: {names:?}"
    );
    // A power loss at any moment of it keeps what was acknowledged, and finds no damage.
    let now: Encoded = acked.iter().chain(done).cloned().collect();
    disk.no_sync_hook();
    hold_at_every(&taken(&moments), &acked, &now);
    hold_at_every(&[disk.freeze()], &now, &now);
    // Space freed: the rest goes on where the append stopped, and everything reads back.
    disk.set_capacity(None);
    sync(log.append(left).expect("the rest, once there is room"));
    drop(log);
    let all: Encoded = acked.iter().chain(&more).cloned().collect();
    let log = Segments::open(&options(&disk), Path::new(LOG), None).expect("reopen");
    assert_eq!(log.read(0, u64::MAX).expect("read"), all);
}

/// openraft's entries of the store tests: `String` payloads.
mod store {
    use super::*;
    use std::io::Cursor;

    openraft::declare_raft_types!(
        /// The test's type configuration: `String` requests and responses, `u64` node ids.
        pub Config
    );

    pub type Store = LogStore<Config>;

    pub fn entry(term: u64, index: u64, size: usize) -> Entry<Config> {
        let fill = char::from(b'a' + (index % 26) as u8);
        Entry {
            log_id: log_id(term, index),
            payload: EntryPayload::Normal(
                fill.to_string().repeat(size + (index as usize % 4) * 90),
            ),
        }
    }

    pub fn log_id(term: u64, index: u64) -> LogId<u64> {
        openraft::testing::log_id(term, 0, index)
    }
}

use store::{entry, Store};

/// What the workload did, as the checks of an image need it.
#[derive(Debug, Clone, Default)]
struct Model {
    /// Entries acknowledged durable (their callback was called, or their awaited append
    /// returned), without those truncated since, encoded.
    acked: BTreeMap<u64, Vec<u8>>,
    /// The log as the store holds it: every entry appended and not truncated since.
    held: BTreeMap<u64, Vec<u8>>,
    /// Every value ever appended at each index.
    written: BTreeMap<u64, Vec<Vec<u8>>>,
    /// For each vote saved, the log the store held when it was asked to save it: durable
    /// before the vote is.
    before_vote: Vec<(Vote<u64>, Log)>,
}

impl Model {
    fn appended(&mut self, entries: &[Entry<store::Config>]) -> Vec<(u64, Vec<u8>)> {
        let encoded: Vec<(u64, Vec<u8>)> = entries
            .iter()
            .map(|e| (e.log_id.index, postcard::to_allocvec(e).expect("encode")))
            .collect();
        for (index, bytes) in &encoded {
            self.held.insert(*index, bytes.clone());
            self.written.entry(*index).or_default().push(bytes.clone());
        }
        encoded
    }

    fn truncated(&mut self, from: u64) {
        self.acked.retain(|i, _| *i < from);
        self.held.retain(|i, _| *i < from);
        for (_, log) in &mut self.before_vote {
            log.retain(|i, _| *i < from);
        }
    }
}

/// A moment of the workload: the disk, what the model said then, and the metadata rows.
struct Moment {
    label: String,
    frozen: Frozen,
    model: Model,
    meta: Vec<Row>,
}

/// The workload's store, its disk and database, and the moments recorded so far.
struct Workload {
    disk: CrashDisk,
    db: Arc<DB>,
    model: Arc<Mutex<Model>>,
    moments: Arc<Mutex<Vec<Moment>>>,
    _dir: tempfile::TempDir,
}

fn open_db(path: &Path) -> Arc<DB> {
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    let db = DB::open_cf_descriptors(&options, path, crate::log_store::column_families())
        .expect("open RocksDB");
    Arc::new(db)
}

fn meta_rows(db: &DB) -> Vec<Row> {
    let meta = &db.cf_handle(META_CF).expect("meta family");
    db.iterator_cf(meta, IteratorMode::Start)
        .map(|row| row.expect("meta row"))
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Workload {
    fn new() -> Workload {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let workload = Workload {
            disk: new_disk(),
            db: open_db(&dir.path().join("db")),
            model: Arc::default(),
            moments: Arc::default(),
            _dir: dir,
        };
        let (db, model, moments) = (
            Arc::clone(&workload.db),
            Arc::clone(&workload.model),
            Arc::clone(&workload.moments),
        );
        workload.disk.on_sync(move |disk| {
            let moment = freeze(disk, &db, &model, "during a sync".into());
            lock(&moments).push(moment);
        });
        workload
    }

    fn open(&self) -> Store {
        let store = Store::open_on(
            Arc::clone(&self.db),
            META_CF,
            Path::new(LOG),
            &options(&self.disk),
        )
        .expect("open the log store");
        self.moment("opened");
        store
    }

    fn moment(&self, label: &str) {
        let moment = freeze(&self.disk, &self.db, &self.model, label.into());
        lock(&self.moments).push(moment);
    }

    async fn append(&self, store: &mut Store, entries: Vec<Entry<store::Config>>) {
        let encoded = lock(&self.model).appended(&entries);
        store.blocking_append(entries).await.expect("append");
        lock(&self.model).acked.extend(encoded);
        self.moment("appended");
    }

    /// Appends as a leader does; the returned receiver hears the outcome.
    async fn lead(
        &self,
        store: &mut Store,
        entries: Vec<Entry<store::Config>>,
    ) -> mpsc::Receiver<bool> {
        let encoded = lock(&self.model).appended(&entries);
        let (tx, rx) = mpsc::channel();
        let model = Arc::clone(&self.model);
        store
            .append_as_leader(entries, move |result| {
                if result.is_ok() {
                    lock(&model).acked.extend(encoded);
                }
                let _ = tx.send(result.is_ok());
            })
            .await
            .expect("append");
        self.moment("led");
        rx
    }

    async fn vote(&self, store: &mut Store, vote: Vote<u64>) -> bool {
        {
            let mut model = lock(&self.model);
            let held = model.held.clone();
            model.before_vote.push((vote, held));
        }
        let saved = store.save_vote(&vote).await.is_ok();
        self.moment("voted");
        saved
    }

    async fn truncate(&self, store: &mut Store, from: u64) {
        lock(&self.model).truncated(from);
        store
            .truncate(store::log_id(1, from))
            .await
            .expect("truncate");
        self.moment("truncated");
    }

    async fn purge(&self, store: &mut Store, upto: u64) {
        store.purge(store::log_id(1, upto)).await.expect("purge");
        self.moment("purged");
    }
}

/// The state of this moment: the disk, and with it the model and the metadata rows (no disk
/// operation runs in between, so they agree with it).
fn freeze(disk: &CrashDisk, db: &DB, model: &Mutex<Model>, label: String) -> Moment {
    let (frozen, (model, meta)) = disk.freeze_with(|| (lock(model).clone(), meta_rows(db)));
    Moment {
        label,
        frozen,
        model,
        meta,
    }
}

/// Replaces the metadata rows of `db` with `rows`.
fn reset_meta(db: &DB, rows: &[Row]) {
    let meta = &db.cf_handle(META_CF).expect("meta family");
    let mut batch = WriteBatch::default();
    for (key, _) in meta_rows(db) {
        batch.delete_cf(meta, key);
    }
    for (key, value) in rows {
        batch.put_cf(meta, key, value);
    }
    db.write(batch).expect("reset the metadata");
}

/// Opens the store of a crash image on `db` (its metadata reset to the moment's) and checks it.
async fn store_holds(image: &CrashDisk, db: &Arc<DB>, moment: &Moment) -> Result<(), String> {
    reset_meta(db, &moment.meta);
    let mut store = Store::open_on(Arc::clone(db), META_CF, Path::new(LOG), &options(image))
        .map_err(|e| format!("refused: {e}"))?;
    let vote = store.read_vote().await.map_err(|e| e.to_string())?;
    let saved: Option<Vote<u64>> = moment
        .meta
        .iter()
        .find(|(key, _)| &key[..] == KEY_VOTE)
        .map(|(_, value)| postcard::from_bytes(value).expect("a vote"));
    if vote != saved {
        return Err(format!("vote {vote:?}, saved {saved:?}"));
    }
    let purged = store
        .last_purged()
        .map_err(|e| e.to_string())?
        .map(|id| id.index);
    let held: BTreeMap<u64, Vec<u8>> = store
        .try_get_log_entries(..)
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .map(|e| (e.log_id.index, postcard::to_allocvec(e).expect("encode")))
        .collect();
    let model = &moment.model;
    let before_vote = model
        .before_vote
        .iter()
        .filter(|(v, _)| Some(*v) == vote)
        .flat_map(|(_, log)| log);
    for (index, bytes) in model.acked.iter().chain(before_vote) {
        if purged.is_none_or(|p| *index > p) && held.get(index) != Some(bytes) {
            return Err(format!(
                "entry {index}, acknowledged or before the vote, is missing or different"
            ));
        }
    }
    for (index, bytes) in &held {
        if !model.written.get(index).is_some_and(|w| w.contains(bytes)) {
            return Err(format!("entry {index} was never appended so"));
        }
    }
    let names = image.list_dir(Path::new(LOG)).map_err(|e| e.to_string())?;
    match names.iter().find(|n| n.ends_with(".tmp")) {
        Some(tmp) => Err(format!("{tmp} is left behind")),
        None => Ok(()),
    }
}

/// Checks every moment of `workload` (`limit` images each), the seeds counting up from `seed`.
async fn check_moments(workload: &Workload, limit: usize, seed: u64) -> usize {
    let dir = tempfile::TempDir::new().expect("temp dir");
    let db = open_db(&dir.path().join("db"));
    let moments = std::mem::take(&mut *lock(&workload.moments));
    let mut tried = 0;
    for (at, moment) in moments.iter().enumerate() {
        let seed = seed + at as u64;
        for image in moment.frozen.images(limit, seed) {
            if let Err(error) = store_holds(&image.disk, &db, moment).await {
                panic!(
                    "moment {at} ({}), crash image {:?} (seed {seed}): {error}",
                    moment.label, image.choices
                );
            }
            tried += 1;
        }
    }
    tried
}

#[tokio::test]
async fn every_crash_image_of_a_log_store_at_work_opens_with_what_it_acknowledged() {
    let workload = Workload::new();
    let mut store = workload.open();
    let batch = |term, range: std::ops::Range<u64>| -> Vec<Entry<store::Config>> {
        range.map(|i| entry(term, i, 700)).collect()
    };
    assert!(workload.vote(&mut store, Vote::new(1, 1)).await);
    workload.append(&mut store, batch(1, 0..3)).await;
    // A leader's appends, which the sync thread syncs (together when they queue together).
    let a = workload.lead(&mut store, batch(1, 3..5)).await;
    let b = workload.lead(&mut store, batch(1, 5..7)).await;
    assert!(a.recv().expect("flushed") && b.recv().expect("flushed"));
    workload.append(&mut store, batch(1, 7..12)).await;
    assert!(workload.vote(&mut store, Vote::new(2, 2)).await);
    let a = workload.lead(&mut store, batch(1, 12..16)).await;
    let b = workload.lead(&mut store, batch(1, 16..20)).await;
    assert!(a.recv().expect("flushed") && b.recv().expect("flushed"));
    workload.truncate(&mut store, 9).await;
    workload.append(&mut store, batch(2, 9..14)).await;
    workload.purge(&mut store, 5).await;
    workload.append(&mut store, batch(2, 14..30)).await;
    // A vote right behind a leader's append: it waits for the append's fsync.
    let led = workload.lead(&mut store, batch(2, 30..33)).await;
    assert!(workload.vote(&mut store, Vote::new(3, 3)).await);
    assert!(led.recv().expect("flushed"));
    workload.purge(&mut store, 20).await;
    workload.append(&mut store, batch(3, 33..40)).await;
    drop(store);
    let tried = check_moments(&workload, STORE_IMAGES, 1000).await;
    eprintln!("{tried} crash images of the log store opened and checked");
    assert!(tried > 5_000, "{tried} crash images");
}

#[tokio::test]
async fn a_failed_fsync_stops_the_store_before_a_vote_can_pass_the_appends_it_lost() {
    let workload = Workload::new();
    let mut store = workload.open();
    for i in 0..3 {
        workload.append(&mut store, vec![entry(1, i, 700)]).await;
    }
    workload.disk.fail_syncs(1);
    let led = workload.lead(&mut store, vec![entry(1, 3, 700)]).await;
    assert!(!led.recv().expect("flushed"), "the fsync fails");
    let voted = workload.vote(&mut store, Vote::new(2, 2)).await;
    check_moments(&workload, 256, 0).await;
    assert!(
        !voted,
        "a vote is not saved behind appends whose fsync failed"
    );
    let after = store.blocking_append([entry(1, 6, 10)]).await;
    assert!(after.is_err(), "nor is any later append");
}

#[tokio::test]
async fn an_append_waits_for_room_and_goes_on_by_itself_once_space_is_freed() {
    let disk = new_disk();
    let dir = tempfile::TempDir::new().expect("temp dir");
    let db = open_db(&dir.path().join("db"));
    let open = || {
        Store::open_on(Arc::clone(&db), META_CF, Path::new(LOG), &options(&disk))
            .expect("open the log store")
    };
    let mut store = open();
    let first: Vec<_> = (0..3).map(|i| entry(1, i, 700)).collect();
    store.blocking_append(first).await.expect("append");
    disk.set_capacity(Some(0));
    let room = store.room();
    let mut appending = store.clone();
    let rest: Vec<_> = (3..40).map(|i| entry(1, i, 700)).collect();
    let append = tokio::spawn(async move { appending.blocking_append(rest).await });
    for _ in 0..500 {
        if room.waiting() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        room.waiting(),
        "the append waits for room for a new segment"
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !append.is_finished(),
        "and neither fails nor returns meanwhile"
    );
    assert_eq!(room.waits(), 1);
    disk.set_capacity(None);
    append
        .await
        .expect("the append's task")
        .expect("the append, once there is room");
    assert!(!room.waiting());
    let read = store.try_get_log_entries(0..40).await.expect("read");
    assert_eq!(read.len(), 40);
    drop(store);
    let mut reopened = open();
    let read = reopened
        .try_get_log_entries(0..40)
        .await
        .expect("read after reopening");
    let indexes: Vec<u64> = read.iter().map(|e| e.log_id.index).collect();
    assert_eq!(indexes, (0..40).collect::<Vec<_>>());
}
