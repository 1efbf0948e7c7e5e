//! The leader-only timer: while this node leads, it proposes a tick whenever a lease, delay,
//! retention or deduplication timer of the state machine is due. It reads the due time from the
//! local applied state (no Raft traffic) and stops proposing as soon as leadership moves.
//!
//! Only an applied entry can bring the next due time forward, so between entries the timer
//! sleeps until the due time (or [`LONGEST_SLEEP`]): a group that takes no entry costs one
//! wake-up a second, not ten. After an entry it looks again within [`LOOK_AGAIN`], however many
//! entries come meanwhile.

use std::sync::Arc;
use std::time::Duration;

use raftq_engine::Command;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::NodeError;
use crate::member::GroupCore;

/// How soon after an entry is applied the timer looks at the next due time again, at the
/// latest (the entry may have brought it forward).
const LOOK_AGAIN: Duration = Duration::from_millis(100);
/// The longest the timer sleeps without an entry applied: the cluster time the due times are
/// in may run a little apart from this process's timers.
const LONGEST_SLEEP: Duration = Duration::from_secs(1);

pub(crate) async fn run(core: Arc<GroupCore>, mut shutdown: watch::Receiver<bool>) {
    // Server metrics, as `GroupCore::is_leader` reads: a follower waits without waking per entry.
    let mut leadership = core.raft.server_metrics();
    // Data metrics change with every entry applied (and not with a quiet group's passing time).
    let mut data = core.raft.data_metrics();
    loop {
        if *shutdown.borrow() {
            return;
        }
        if !core.is_leader() {
            tokio::select! {
                changed = leadership.changed() => if changed.is_err() { return },
                _ = shutdown.changed() => {}
            }
            continue;
        }
        let Some(now) = core.node.clock.now() else {
            // No cluster time yet: no entry can be stamped.
            tokio::select! {
                _ = tokio::time::sleep(LOOK_AGAIN) => {}
                _ = shutdown.changed() => {}
            }
            continue;
        };
        let looked = Instant::now();
        let applied = data.borrow_and_update().last_applied;
        let due = core.reader.with_engine(|e| e.next_due()).flatten();
        let pause = match due {
            Some(due) if due <= now => match core.propose(Command::Tick).await {
                Ok(_) | Err(NodeError::NotLeader(_)) => continue,
                Err(e) => {
                    tracing::warn!(group = %core.group, error = %e, "tick not committed");
                    LOOK_AGAIN
                }
            },
            Some(due) => Duration::from_millis(due - now).min(LONGEST_SLEEP),
            None => LONGEST_SLEEP,
        };
        let entry_applied = async {
            // An error means Raft stopped: the shutdown signal follows.
            let _ = data.wait_for(|m| m.last_applied != applied).await;
            tokio::time::sleep_until(looked + LOOK_AGAIN).await;
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = entry_applied => {}
            changed = leadership.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => {}
        }
    }
}
