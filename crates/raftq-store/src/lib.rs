//! # raftq-store
//!
//! raftq's durable Raft storage on RocksDB, split as openraft's storage-v2 wants it:
//! - [`log_store`]: the Raft log (entries, vote, committed index, purge marker). Every vote and
//!   every append is synced to disk before openraft is told it is done; one append call (a batch
//!   of entries) costs one fsync.
//! - [`state_machine`]: the engine applied to committed entries, with its rows, the message
//!   payloads, the last applied log id and the membership written in one atomic batch per apply.
//! - [`snapshot`]: snapshot files, streamed from one view of the state to disk and back.
//! - [`types`]: the Raft type configuration both share.
//!
//! Both live in one RocksDB instance (one write-ahead log), opened with [`column_families`].

pub mod log_store;
mod recent;
pub mod snapshot;
pub mod state_machine;
pub mod types;

pub use log_store::{
    Appended, Enrolment, LogStoreError, MissingColumnFamily, RocksLogStore, LOGS_CF, META_CF,
};
pub use state_machine::{
    Awaited, AwaitedWrite, OpenError, PayloadView, RocksStateMachine, StateReader, SM_META_CF,
    STATE_CF,
};
pub use types::{Batch, NodeId, Response, TypeConfig};

/// Every column family of a raftq node's database.
pub fn column_families() -> Vec<rocksdb::ColumnFamilyDescriptor> {
    let mut all = log_store::column_families();
    all.extend(state_machine::state_column_families());
    all
}

/// Opens (creating when missing) a raftq node's database at `path`.
///
/// Column families flush together (`atomic_flush`): the state machine writes without the
/// write-ahead log, so its rows and its applied marker must reach disk at one point.
pub fn open_db(path: &std::path::Path) -> Result<std::sync::Arc<rocksdb::DB>, rocksdb::Error> {
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    options.set_atomic_flush(true);
    options.increase_parallelism(2);
    options.set_bytes_per_sync(1 << 20);
    rocksdb::DB::open_cf_descriptors(&options, path, column_families()).map(std::sync::Arc::new)
}
