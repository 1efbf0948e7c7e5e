//! # raftq-check
//!
//! The history of a run against a raftq cluster and the checker that judges it, shared by the
//! two that record such histories: the chaos run (`raftq-chaos`, a compose cluster under
//! faults) and the simulation (`raftq-sim`, a whole cluster in one process), so that both are
//! held to exactly the same invariants.
//!
//! - [`history`]: what a recorder keeps, every operation a client attempted with its outcome and
//!   the times it started and ended, and every fault injected ([`history::Event`]), in a log
//!   its workers share ([`history::History`]).
//! - [`checker`]: the invariants of a replicated queue ([`checker::INVARIANTS`]), counted over a
//!   history and the final state read after the cluster healed ([`checker::Final`]) by
//!   [`checker::check`] into a [`checker::Report`].
//! - [`workers`]: the producers and consumers a run starts against its queues.
//! - [`producer`]: what a producer sends and records, whatever cluster it sends to.
//!
//! Times are milliseconds on the clock the recorder uses, the same clock the nodes stamp their
//! entries with: in the chaos run the machine's clock since the Unix epoch, in a simulation its
//! simulated time. The library reads no clock itself.

pub mod checker;
pub mod history;
pub mod producer;
pub mod workers;
