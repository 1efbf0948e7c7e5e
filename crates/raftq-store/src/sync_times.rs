//! How long the operating system's fsyncs of the Raft log's files and directory take
//! ([`RealDisk`](crate::disk::RealDisk)'s): a process-wide histogram with fixed buckets, counted
//! with atomics (an fsync is far slower than the count), read by the node's metrics.
//! A log append is acknowledged only after its fsync, so these times bound every write's latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The upper bounds of the buckets, in microseconds: 100 µs doubling to ~3.3 s (16 buckets),
/// then everything slower.
const BOUNDS_MICROS: [u64; 16] = {
    let mut bounds = [0; 16];
    let mut i = 0;
    while i < bounds.len() {
        bounds[i] = 100 << i;
        i += 1;
    }
    bounds
};

/// The histogram of every fsync of the log's files since the process started.
static LOG_SYNCS: SyncTimes = SyncTimes::new();

/// Counts of fsyncs by how long they took.
#[derive(Debug)]
pub struct SyncTimes {
    /// One per bound, then one for the slower ones (not cumulative).
    buckets: [AtomicU64; BOUNDS_MICROS.len() + 1],
    total_nanos: AtomicU64,
}

/// One reading of a [`SyncTimes`].
#[derive(Debug, Clone, PartialEq)]
pub struct SyncTimesReading {
    /// Each bucket's upper bound in seconds (`f64::INFINITY` for the last) with the fsyncs that
    /// took longer than the previous bound and at most this one.
    pub buckets: Vec<(f64, u64)>,
    /// The fsyncs counted.
    pub count: u64,
    /// Their total time, in seconds.
    pub sum_seconds: f64,
}

impl SyncTimes {
    const fn new() -> SyncTimes {
        SyncTimes {
            buckets: [const { AtomicU64::new(0) }; BOUNDS_MICROS.len() + 1],
            total_nanos: AtomicU64::new(0),
        }
    }

    fn record(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_MICROS.partition_point(|&bound| bound < micros);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.total_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn read(&self) -> SyncTimesReading {
        let counts = self.buckets.iter().map(|b| b.load(Ordering::Relaxed));
        let bounds = BOUNDS_MICROS
            .iter()
            .map(|&micros| micros as f64 / 1e6)
            .chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(counts).collect();
        SyncTimesReading {
            count: buckets.iter().map(|(_, n)| n).sum(),
            sum_seconds: self.total_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            buckets,
        }
    }
}

/// Runs `sync`, an fsync of a log file or directory, and counts how long it took.
pub(crate) fn timed<T>(sync: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = sync();
    LOG_SYNCS.record(started.elapsed());
    result
}

/// The fsyncs of the Raft log's files and directory on this process's real disk so far.
pub fn log_sync_times() -> SyncTimesReading {
    LOG_SYNCS.read()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_time_lands_in_the_first_bucket_that_holds_it() {
        let times = SyncTimes::new();
        times.record(Duration::from_micros(40));
        times.record(Duration::from_micros(100));
        times.record(Duration::from_micros(101));
        times.record(Duration::from_millis(3));
        times.record(Duration::from_secs(10));
        let reading = times.read();
        assert_eq!(reading.count, 5);
        assert!(
            (reading.sum_seconds - 10.003_241).abs() < 1e-9,
            "{reading:?}"
        );
        assert_eq!(reading.buckets.len(), 17);
        assert_eq!(reading.buckets[0], (0.0001, 2));
        assert_eq!(reading.buckets[1], (0.0002, 1));
        // 3 ms is over 1.6 ms (100 µs << 4) and at most 3.2 ms.
        assert_eq!(reading.buckets[4].1, 0);
        assert_eq!(reading.buckets[5], (0.0032, 1));
        assert_eq!(reading.buckets[16], (f64::INFINITY, 1));
    }
}
