//! # raftq-store
//!
//! raftq's durable Raft storage on RocksDB: the Raft log (entries, vote, committed index, purge
//! marker) for openraft's storage-v2 traits. Every vote and every append is synced to disk before
//! openraft is told it is done; one append call (a batch of entries) costs one fsync.

pub mod log_store;

pub use log_store::{column_families, MissingColumnFamily, RocksLogStore, LOGS_CF, META_CF};
