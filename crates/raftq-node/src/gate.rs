//! The election gate: a node stands for election only while it reaches a majority of the
//! cluster. openraft 0.9 has no pre-vote, so a follower cut off from the others stood for
//! election every half second, raising its term each time; when it came back, its higher term
//! deposed a working leader and cost the cluster an election (seconds under load). Here every
//! node pings its peers all the time, and turns openraft's elections off while too few of them
//! answered lately. A node that cannot reach a majority could never win an election anyway, so
//! the gate takes nothing away: once it reaches a majority again, it stands as before.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::node::Core;

/// How often every peer is pinged.
const EVERY: Duration = Duration::from_millis(100);
/// How long a ping may take.
const PING_TIMEOUT: Duration = Duration::from_millis(250);
/// A peer counts as reached while its last answer is at most this old: shorter than the time
/// a follower waits for its leader (0.75 s) before it stands.
const FRESH: Duration = Duration::from_millis(600);

/// Whether `reached` peers plus this node make a majority of `members`.
fn majority(reached: usize, members: usize) -> bool {
    (reached + 1) * 2 > members
}

pub(crate) async fn run(
    core: Arc<Core>,
    peers: Vec<(u64, String)>,
    mut shutdown: watch::Receiver<bool>,
) {
    let members = peers.len() + 1;
    let mut answered: Vec<Option<Instant>> = vec![None; peers.len()];
    let mut open = true;
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let pings = peers.iter().map(|(id, addr)| {
            let mut client = core.network.peers.get(*id, addr);
            async move { client.ping(PING_TIMEOUT).await }
        });
        let now = Instant::now();
        for (last, ok) in answered.iter_mut().zip(join_all(pings).await) {
            if ok {
                *last = Some(now);
            }
        }
        let reached = answered
            .iter()
            .filter(|last| last.is_some_and(|t| t.elapsed() <= FRESH))
            .count();
        let allow = majority(reached, members);
        if allow != open {
            open = allow;
            core.raft.runtime_config().elect(allow);
            tracing::info!(reached, members, elections = allow, "election gate");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::majority;

    #[test]
    fn a_node_stands_only_with_a_majority_in_reach() {
        assert!(majority(0, 1));
        assert!(!majority(0, 3));
        assert!(majority(1, 3));
        assert!(!majority(1, 5));
        assert!(majority(2, 5));
    }
}
