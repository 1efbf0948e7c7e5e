//! When a node builds a snapshot. openraft's own policy counts entries only, so a node holding a
//! large state would write all of it to a new file every so many entries, however little those
//! entries added. Here a snapshot is due once the log since the last one holds at least
//! `min_entries` entries *and* at least as many bytes as the messages the state holds (their
//! bodies and attributes, most of what a snapshot writes): a snapshot then takes the place of
//! a log at least about its size. The bytes written to snapshot files stay below about the bytes
//! appended to the log, whether the state keeps its size, shrinks or grows (a state that only
//! grows, as a backlog builds, is snapshotted rarely: its log is mostly the messages it holds),
//! and the log kept on disk below about the size of the state (or `min_entries` entries, when
//! that is more).
//!
//! Each node decides for itself, as with openraft's policy, and openraft purges the log behind
//! each snapshot as before. The log's bytes are counted from the node's start: after a restart
//! the log already on disk is not counted, so the first snapshot may come later than otherwise.

use std::time::Duration;

use openraft::{LogId, Raft};
use raftq_store::{Appended, NodeId, StateReader, TypeConfig};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::pace::Pace;

/// How often the policy looks at the log's growth.
const CHECK_EVERY: Duration = Duration::from_millis(200);
/// A snapshot asked for and not built within this long is asked for again.
const ASK_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// How much the log grew since the last snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Growth {
    pub entries: u64,
    pub bytes: u64,
}

/// Whether a snapshot is due after `growth`, when the state holds `message_bytes` of messages.
pub(crate) fn due(growth: Growth, message_bytes: u64, min_entries: u64) -> bool {
    growth.entries >= min_entries && growth.bytes >= message_bytes
}

/// Entries up to and including `id`.
fn entries_through(id: Option<LogId<NodeId>>) -> u64 {
    id.map_or(0, |id| id.index + 1)
}

/// Asks `raft` for a snapshot whenever one is [`due`], until `shutdown` or until Raft stops.
/// Each time it finds none due, it puts the applied index it judged at in `not_due` (tests
/// wait on it to know the policy has seen their entries).
pub(crate) async fn run(
    raft: Raft<TypeConfig>,
    reader: StateReader,
    appended: Appended,
    min_entries: u64,
    not_due: watch::Sender<Option<u64>>,
    shutdown: watch::Receiver<bool>,
) {
    // Data metrics change with every entry applied and every snapshot, not while the group idles.
    let mut metrics = raft.data_metrics();
    let mut snapshot = metrics.borrow().snapshot;
    // Log bytes appended when the current snapshot was asked for (or seen, if not asked here).
    let mut base = appended.bytes();
    let mut asked: Option<(Instant, u64)> = None;
    let mut pace = Pace::new(CHECK_EVERY, shutdown);
    while pace.tick().await {
        let (applied, current) = {
            let m = metrics.borrow_and_update();
            (m.last_applied, m.snapshot)
        };
        if current != snapshot {
            snapshot = current;
            base = asked.take().map_or_else(|| appended.bytes(), |(_, at)| at);
        }
        if asked.is_some_and(|(at, _)| at.elapsed() < ASK_AGAIN_AFTER) {
            continue;
        }
        let growth = Growth {
            entries: entries_through(applied).saturating_sub(entries_through(snapshot)),
            bytes: appended.bytes().saturating_sub(base),
        };
        let message_bytes = reader.message_bytes();
        if !due(growth, message_bytes, min_entries) {
            not_due.send_replace(applied.map(|id| id.index));
            // Only a new entry can make one due: an idle group's policy sleeps until one comes.
            let entry_applied = metrics.wait_for(|m| m.last_applied != applied);
            if !pace.wait(entry_applied).await {
                return;
            }
            continue;
        }
        tracing::info!(
            entries = growth.entries,
            log_bytes = growth.bytes,
            message_bytes,
            "asking for a snapshot"
        );
        asked = Some((Instant::now(), appended.bytes()));
        if raft.trigger().snapshot().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grown(entries: u64, bytes: u64) -> Growth {
        Growth { entries, bytes }
    }

    #[test]
    fn a_snapshot_waits_for_entries_and_for_a_log_outweighing_the_messages() {
        let held = 1 << 30;
        assert!(due(grown(100, 0), 0, 100), "an empty state: entries only");
        assert!(!due(grown(99, 1 << 40), 0, 100));
        assert!(!due(grown(1_000_000, held - 1), held, 100));
        assert!(due(grown(100, held), held, 100));
        assert!(!due(grown(99, held), held, 100));
    }

    #[test]
    fn entries_are_counted_through_a_log_id() {
        let id = |index| Some(LogId::new(openraft::CommittedLeaderId::new(1, 1), index));
        assert_eq!(entries_through(None), 0);
        assert_eq!(entries_through(id(0)), 1);
        assert_eq!(
            entries_through(id(41)).saturating_sub(entries_through(id(9))),
            32
        );
    }
}
