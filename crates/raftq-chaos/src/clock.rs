//! The chaos run's clock: the machine's wall clock, which the nodes of the compose cluster stamp
//! their entries with as well. Every time in the run's history is read from it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
