//! The pace of the node's periodic tasks: a tick every period (a late tick delays the next
//! ones rather than bunching them) until the node's shutdown signal.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Interval, MissedTickBehavior};

/// Ticks every period until shutdown (see the module).
pub(crate) struct Pace {
    tick: Interval,
    shutdown: watch::Receiver<bool>,
}

impl Pace {
    /// Ticks every `period`, the first at once, until `shutdown` turns true.
    pub fn new(period: Duration, shutdown: watch::Receiver<bool>) -> Pace {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Pace { tick, shutdown }
    }

    /// Waits for the next tick; `false` once the node shuts down (or its signal is gone).
    pub async fn tick(&mut self) -> bool {
        let ticked = tokio::select! {
            _ = self.tick.tick() => true,
            _ = self.shutdown.wait_for(|stop| *stop) => false,
        };
        ticked && !*self.shutdown.borrow()
    }

    /// Waits for `event` as well, between ticks; `false` once the node shuts down.
    pub async fn wait<T>(&mut self, event: impl std::future::Future<Output = T>) -> bool {
        let happened = tokio::select! {
            _ = event => true,
            _ = self.shutdown.wait_for(|stop| *stop) => false,
        };
        happened && !*self.shutdown.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn ticks_until_the_shutdown_signal() {
        let (stop, signal) = watch::channel(false);
        let mut pace = Pace::new(Duration::from_millis(100), signal);
        assert!(pace.tick().await, "the first tick comes at once");
        let started = tokio::time::Instant::now();
        assert!(pace.tick().await);
        assert_eq!(started.elapsed(), Duration::from_millis(100));
        stop.send(true).expect("a receiver");
        assert!(!pace.tick().await);
        assert!(!pace.tick().await, "and stays stopped");
    }
}
