//! The leader-only timer: while this node leads, it proposes a tick whenever a lease, delay,
//! retention or deduplication timer of the state machine is due. It reads the due time from the
//! local applied state (no Raft traffic) and stops proposing as soon as leadership moves.

use std::sync::Arc;
use std::time::Duration;

use raftq_engine::Command;
use tokio::sync::watch;

use crate::error::NodeError;
use crate::member::GroupCore;

/// The longest the timer sleeps before looking at the next due time again (new leases and
/// delays can bring it forward).
const MAX_SLEEP: Duration = Duration::from_millis(100);

pub(crate) async fn run(core: Arc<GroupCore>, mut shutdown: watch::Receiver<bool>) {
    // Server metrics, as `GroupCore::is_leader` reads: a follower waits without waking per entry.
    let mut leadership = core.raft.server_metrics();
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
                _ = tokio::time::sleep(MAX_SLEEP) => {}
                _ = shutdown.changed() => {}
            }
            continue;
        };
        let due = core.reader.with_engine(|e| e.next_due()).flatten();
        let pause = match due {
            Some(due) if due <= now => match core.propose(Command::Tick).await {
                Ok(_) | Err(NodeError::NotLeader(_)) => continue,
                Err(e) => {
                    tracing::warn!(group = %core.group, error = %e, "tick not committed");
                    MAX_SLEEP
                }
            },
            Some(due) => Duration::from_millis(due - now).min(MAX_SLEEP),
            None => MAX_SLEEP,
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
    }
}
