//! Time as this node reads it: the machine's wall clock, and the bounded time a leader stamps on
//! the entries it proposes (the state machine never reads a clock; see docs/cluster.md).
//!
//! A leader's wall clock may be wrong. Stamped as it is, one hour ahead, it would end every lease
//! at once and leave the state machine's clock an hour ahead after the next leader took over
//! (the state machine's time never goes back). So a leader stamps its wall clock, but never more
//! than `max_ahead` past
//! - the median of the voters' clocks, as the election gate last measured it (this node's
//!   clock minus that median is its *offset*), and
//! - its last stamp that was not bounded plus the real (monotonic) time that passed since, which
//!   holds from the moment a clock jumps, before the next measurement.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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

/// `wall`, but at most `max_ahead_ms` past each of the given limits: the cluster's time as
/// `wall - offset_ms`, and `last_ms` plus the `elapsed_ms` since it.
fn bounded(wall: u64, offset_ms: Option<i64>, last: Option<(u64, u64)>, max_ahead_ms: u64) -> u64 {
    let mut stamp = wall;
    if let Some(offset) = offset_ms {
        let cluster = wall.saturating_add_signed(offset.saturating_neg());
        stamp = stamp.min(cluster.saturating_add(max_ahead_ms));
    }
    if let Some((last_ms, elapsed_ms)) = last {
        stamp = stamp.min(
            last_ms
                .saturating_add(elapsed_ms)
                .saturating_add(max_ahead_ms),
        );
    }
    stamp
}

/// The time a leader stamps on the entries it proposes and reads its state at.
pub(crate) struct LeaderClock {
    wall: WallClock,
    max_ahead_ms: u64,
    /// This node's clock minus the voters' median, once measured.
    offset: Mutex<Option<i64>>,
    /// This node's last stamp of its wall clock as it was (not bounded), and when it was made.
    last: Mutex<Option<(u64, Instant)>>,
}

impl LeaderClock {
    pub(crate) fn new(wall: WallClock, max_ahead_ms: u64) -> LeaderClock {
        LeaderClock {
            wall,
            max_ahead_ms,
            offset: Mutex::new(None),
            last: Mutex::new(None),
        }
    }

    /// The machine's wall time, unbounded.
    pub(crate) fn wall(&self) -> u64 {
        self.wall.now()
    }

    /// How far this node's clock may differ from the cluster's.
    pub(crate) fn max_ahead_ms(&self) -> u64 {
        self.max_ahead_ms
    }

    /// Records this node's clock minus the voters' median (`None`: too few answered to tell).
    pub(crate) fn set_offset(&self, offset: Option<i64>) {
        *self.offset.lock().unwrap_or_else(PoisonError::into_inner) = offset;
    }

    /// This node's clock minus the voters' median, when known.
    pub(crate) fn offset(&self) -> Option<i64> {
        *self.offset.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this node's clock differs from the cluster's by more than the bound.
    pub(crate) fn skewed(&self) -> bool {
        self.offset()
            .is_some_and(|o| o.unsigned_abs() > self.max_ahead_ms)
    }

    /// The time to stamp on an entry, or to read the state at, now.
    pub(crate) fn now(&self) -> u64 {
        let wall = self.wall.now();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let since = last.map(|(ms, at)| (ms, at.elapsed().as_millis() as u64));
        let stamp = bounded(wall, self.offset(), since, self.max_ahead_ms);
        // Only a stamp of the wall clock as it is becomes the new reference: bounded stamps keep
        // the last good one, so a clock that jumped cannot creep ahead a bound at a time.
        if stamp == wall {
            *last = Some((stamp, Instant::now()));
        }
        stamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;
    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn a_clock_ahead_of_the_cluster_is_stamped_at_most_the_bound_ahead() {
        assert_eq!(bounded(NOW + HOUR, Some(HOUR as i64), None, 500), NOW + 500);
        assert_eq!(bounded(NOW, Some(200), None, 500), NOW, "within the bound");
        assert_eq!(
            bounded(NOW, Some(-(HOUR as i64)), None, 500),
            NOW,
            "behind is kept"
        );
        assert_eq!(bounded(NOW, None, None, 500), NOW, "nothing to judge by");
    }

    #[test]
    fn a_clock_that_jumps_moves_only_as_fast_as_real_time_since_the_last_stamp() {
        assert_eq!(bounded(NOW + HOUR, Some(0), Some((NOW, 0)), 500), NOW + 500);
        assert_eq!(
            bounded(NOW + HOUR, Some(0), Some((NOW, 8_000)), 500),
            NOW + 8_500
        );
        assert_eq!(
            bounded(NOW + 8_000, Some(0), Some((NOW, 8_000)), 500),
            NOW + 8_000
        );
    }

    #[test]
    fn stamps_follow_a_correct_clock_and_hold_back_a_jump() {
        let offset = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let seen = std::sync::Arc::clone(&offset);
        let clock = LeaderClock::new(
            WallClock::new(move || NOW + seen.load(std::sync::atomic::Ordering::Relaxed)),
            500,
        );
        clock.set_offset(Some(0));
        assert_eq!(clock.now(), NOW);
        offset.store(HOUR, std::sync::atomic::Ordering::Relaxed);
        let jumped = clock.now();
        assert!((NOW..NOW + 1_500).contains(&jumped), "{jumped}");
        clock.set_offset(Some(HOUR as i64));
        assert!(clock.skewed());
        for _ in 0..100 {
            assert!(
                clock.now() < NOW + 1_500,
                "bounded stamps do not creep ahead"
            );
        }
    }
}
