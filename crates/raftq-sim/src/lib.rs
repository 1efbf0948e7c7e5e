//! # raftq-sim
//!
//! raftq's nodes in one process, talking over a network in memory ([`net`]) instead of HTTP/2:
//! the real node (routing, group commit, the timer, the election gate, membership, handover and
//! the clock), the real Raft core and the real storage, with every peer call's delay, loss and
//! partition decided by the network's seeded random source.

pub mod net;
