//! Time as this node reads it: the machine's wall clock, and the time a leader stamps on the
//! entries it proposes (the state machine never reads a clock; see docs/durability.md#time).
//!
//! A wall clock may be wrong, and one wrong clock is all one node has: two clocks that disagree
//! cannot tell which of them is wrong. So a node takes the cluster's time only from a majority
//! of the voters' clocks that agree with each other within the bound (`--max-clock-skew-ms`):
//! the election gate measures every voter's clock against this node's on each round of pings
//! ([`read_clocks`]), and when a majority agree, their median is the cluster's time. A leader
//! stamps that time, carried forward by the monotonic clock from the moment it was measured: a
//! jump of its own wall clock, either way, moves no stamp, and a lease lasts as long as it says
//! in real time. A node that never saw a majority of clocks agree stamps nothing (its writes
//! are refused as unavailable), and the gate keeps it from standing for election while it
//! cannot show that agreement or its own clock is outside the bound.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use raftq_store::NodeId;
use tokio::time::Instant;

use crate::error::NodeError;

/// Milliseconds since the Unix epoch, by this machine's clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Where a node reads the wall time (milliseconds since the Unix epoch): the machine's clock,
/// or any other source (a test skews one node's).
#[derive(Clone)]
pub struct WallClock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl WallClock {
    /// The machine's clock.
    pub fn system() -> WallClock {
        WallClock(Arc::new(now_ms))
    }

    /// A clock that reads `source`.
    pub fn new(source: impl Fn() -> u64 + Send + Sync + 'static) -> WallClock {
        WallClock(Arc::new(source))
    }

    pub fn now(&self) -> u64 {
        (self.0)()
    }
}

impl fmt::Debug for WallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WallClock({})", self.now())
    }
}

/// What one round of pings tells of the voters' clocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    /// This node's clock minus the cluster's time; `None` when no majority of the voters'
    /// clocks agree (too few answered, or those that did disagree).
    pub offset_ms: Option<i64>,
    /// The voters whose clocks agree with the cluster's time within the bound (empty when
    /// there is no cluster time).
    pub agreeing: BTreeSet<NodeId>,
}

/// Reads the voters' clocks: `clocks` holds, for each voter that answered lately (this node
/// included if it votes), its clock minus this node's; `voters` is how many voters there are.
/// The cluster's time is the lower median of those clocks, if a majority of all voters' clocks
/// lie within `bound_ms` of it. If a majority of the clocks are right, the median lies among
/// theirs, so a wrong clock, ahead or behind, can neither move it nor be taken for it; the lower
/// median of two is the earlier clock, so a lease never ends early by the other one.
pub(crate) fn read_clocks(clocks: &BTreeMap<NodeId, i64>, voters: usize, bound_ms: u64) -> Reading {
    let mut sorted: Vec<i64> = clocks.values().copied().collect();
    sorted.sort_unstable();
    let Some(&median) = sorted.get(sorted.len().saturating_sub(1) / 2) else {
        return Reading::default();
    };
    let agreeing: BTreeSet<NodeId> = clocks
        .iter()
        .filter(|(_, clock)| clock.abs_diff(median) <= bound_ms)
        .map(|(id, _)| *id)
        .collect();
    debug_assert!(agreeing.len() <= clocks.len());
    if agreeing.len() * 2 <= voters {
        return Reading::default();
    }
    Reading {
        offset_ms: Some(median.saturating_neg()),
        agreeing,
    }
}

/// The cluster's time as this node last measured it, and its wall clock's place beside it.
pub(crate) struct LeaderClock {
    wall: WallClock,
    bound_ms: u64,
    measured: Mutex<Measured>,
}

#[derive(Default)]
struct Measured {
    /// The latest reading of the voters' clocks.
    reading: Reading,
    /// The cluster's time at the last reading on which a majority agreed, and when (by the
    /// monotonic clock) it was taken.
    anchor: Option<(u64, Instant)>,
}

impl LeaderClock {
    pub(crate) fn new(wall: WallClock, bound_ms: u64) -> LeaderClock {
        LeaderClock {
            wall,
            bound_ms,
            measured: Mutex::default(),
        }
    }

    /// The machine's wall time, unbounded.
    pub(crate) fn wall(&self) -> u64 {
        self.wall.now()
    }

    /// How far this node's clock may differ from the cluster's.
    pub(crate) fn bound_ms(&self) -> u64 {
        self.bound_ms
    }

    /// Records a reading of the voters' clocks, taken now; one on which a majority agreed
    /// becomes the cluster's time from here on.
    pub(crate) fn record(&self, reading: Reading) {
        let mut measured = self.measured.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(offset) = reading.offset_ms {
            let cluster = self
                .wall
                .now()
                .saturating_add_signed(offset.saturating_neg());
            measured.anchor = Some((cluster, Instant::now()));
        }
        measured.reading = reading;
    }

    /// This node's clock minus the cluster's time, when the latest reading could tell.
    pub(crate) fn offset(&self) -> Option<i64> {
        self.measured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reading
            .offset_ms
    }

    /// Whether the latest reading found a majority of the voters' clocks in agreement.
    pub(crate) fn confirmed(&self) -> bool {
        self.offset().is_some()
    }

    /// Whether this node's clock differs from the cluster's time by more than the bound.
    pub(crate) fn skewed(&self) -> bool {
        self.offset()
            .is_some_and(|offset| offset.unsigned_abs() > self.bound_ms)
    }

    /// Whether this node may lead by its clock: a majority of the voters' clocks agree on the
    /// cluster's time, and its own is within the bound of it.
    pub(crate) fn may_lead(&self) -> bool {
        self.confirmed() && !self.skewed()
    }

    /// Whether the latest reading found `id`'s clock within the bound of the cluster's time.
    pub(crate) fn agrees(&self, id: NodeId) -> bool {
        self.measured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reading
            .agreeing
            .contains(&id)
    }

    /// The time to stamp on an entry, or to read the state at, now: the cluster's time as last
    /// measured plus the real time since. `None` while no majority of clocks ever agreed.
    pub(crate) fn now(&self) -> Option<u64> {
        let measured = self.measured.lock().unwrap_or_else(PoisonError::into_inner);
        measured.anchor.map(|(cluster, at)| {
            let since = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
            cluster.saturating_add(since)
        })
    }

    /// [`now`](Self::now), or the refusal of a request that would need it.
    pub(crate) fn stamp(&self) -> Result<u64, NodeError> {
        self.now().ok_or_else(|| {
            NodeError::Unavailable(
                "this node has not seen a majority of the voters' clocks agree on the time: it \
                 stamps no entry until they do"
                    .into(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::time::Duration;

    const HOUR: i64 = 3_600_000;
    const NOW: u64 = 1_800_000_000_000;
    const BOUND: u64 = 500;

    fn clocks(pairs: &[(NodeId, i64)]) -> BTreeMap<NodeId, i64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn two_clocks_that_disagree_tell_nothing() {
        // Node 1 with a true clock hears only node 2, an hour ahead, of three voters.
        assert_eq!(
            read_clocks(&clocks(&[(1, 0), (2, HOUR)]), 3, BOUND),
            Reading::default()
        );
        // Node 2, an hour ahead, hears only node 1.
        assert_eq!(
            read_clocks(&clocks(&[(2, 0), (1, -HOUR)]), 3, BOUND),
            Reading::default()
        );
    }

    #[test]
    fn two_clocks_that_agree_are_a_majority_of_three_and_the_earlier_one_counts() {
        let reading = read_clocks(&clocks(&[(1, 0), (2, 300)]), 3, BOUND);
        assert_eq!(reading.offset_ms, Some(0));
        assert_eq!(reading.agreeing, BTreeSet::from([1, 2]));
        let reading = read_clocks(&clocks(&[(1, 0), (2, -300)]), 3, BOUND);
        assert_eq!(reading.offset_ms, Some(300), "this node is 300 ms ahead");
    }

    #[test]
    fn a_majority_of_clocks_outvotes_a_wrong_one_either_way() {
        let reading = read_clocks(&clocks(&[(1, 0), (2, HOUR), (3, 20)]), 3, BOUND);
        assert_eq!(reading.offset_ms, Some(-20));
        assert_eq!(reading.agreeing, BTreeSet::from([1, 3]));
        // This node is the one an hour ahead: the others agree on a time an hour behind it.
        let reading = read_clocks(&clocks(&[(1, 0), (2, -HOUR), (3, -HOUR - 10)]), 3, BOUND);
        assert_eq!(reading.offset_ms, Some(HOUR));
        assert_eq!(reading.agreeing, BTreeSet::from([2, 3]));
        let reading = read_clocks(&clocks(&[(1, 0), (2, HOUR), (3, HOUR + 10)]), 3, BOUND);
        assert_eq!(reading.offset_ms, Some(-HOUR), "an hour behind the others");
    }

    #[test]
    fn too_few_clocks_tell_nothing() {
        assert_eq!(read_clocks(&clocks(&[]), 3, BOUND), Reading::default());
        assert_eq!(
            read_clocks(&clocks(&[(1, 0), (2, 5)]), 5, BOUND),
            Reading::default(),
            "two of five voters"
        );
        let reading = read_clocks(&clocks(&[(1, 0)]), 1, BOUND);
        assert_eq!(
            reading.offset_ms,
            Some(0),
            "a single voter is its own majority"
        );
        // Three of five, spread wider than the bound around their median.
        assert_eq!(
            read_clocks(&clocks(&[(1, 0), (2, 600), (3, 1_200)]), 5, BOUND),
            Reading::default()
        );
    }

    /// A clock reading `NOW` plus a shift that the test moves.
    fn shifted() -> (LeaderClock, Arc<AtomicI64>) {
        let shift = Arc::new(AtomicI64::new(0));
        let seen = Arc::clone(&shift);
        let wall = WallClock::new(move || NOW.saturating_add_signed(seen.load(Ordering::SeqCst)));
        (LeaderClock::new(wall, BOUND), shift)
    }

    fn agreed(offset_ms: i64) -> Reading {
        Reading {
            offset_ms: Some(offset_ms),
            agreeing: BTreeSet::from([1, 2]),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_that_never_saw_a_majority_of_clocks_agree_stamps_nothing() {
        let (clock, shift) = shifted();
        shift.store(HOUR, Ordering::SeqCst);
        assert_eq!(clock.now(), None);
        clock.record(Reading::default());
        assert_eq!(
            clock.now(),
            None,
            "its own clock, an hour ahead, is no time"
        );
        assert!(!clock.may_lead());
        clock.record(agreed(HOUR));
        assert_eq!(clock.now(), Some(NOW), "the cluster's time, not its own");
        assert!(clock.skewed() && !clock.may_lead());
    }

    #[tokio::test(start_paused = true)]
    async fn stamps_go_on_at_the_speed_of_real_time_through_jumps_of_the_own_clock() {
        let (clock, shift) = shifted();
        clock.record(agreed(0));
        assert!(clock.may_lead());
        assert_eq!(clock.now(), Some(NOW));
        tokio::time::advance(Duration::from_secs(1)).await;
        shift.store(1_000 - HOUR, Ordering::SeqCst);
        assert_eq!(clock.now(), Some(NOW + 1_000), "a jump back moves no stamp");
        clock.record(agreed(-HOUR));
        assert!(clock.skewed());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(clock.now(), Some(NOW + 2_000), "nor does measuring it");
        shift.store(2_000, Ordering::SeqCst);
        clock.record(agreed(0));
        assert!(clock.may_lead(), "put right, it agrees again");
        tokio::time::advance(Duration::from_secs(1)).await;
        shift.store(3_000 + HOUR, Ordering::SeqCst);
        assert_eq!(
            clock.now(),
            Some(NOW + 3_000),
            "a jump ahead moves no stamp"
        );
        clock.record(Reading::default());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            clock.now(),
            Some(NOW + 4_000),
            "a reading that tells nothing keeps the last agreed time"
        );
        assert!(!clock.confirmed() && !clock.may_lead());
    }

    #[test]
    fn only_clocks_that_agree_are_named() {
        let (clock, _) = shifted();
        clock.record(read_clocks(
            &clocks(&[(1, 0), (2, HOUR), (3, 20)]),
            3,
            BOUND,
        ));
        assert!(clock.agrees(1) && clock.agrees(3));
        assert!(!clock.agrees(2));
        clock.record(Reading::default());
        assert!(!clock.agrees(1), "a reading that tells nothing names none");
    }
}
