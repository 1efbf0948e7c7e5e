//! One simulated machine: a single-threaded tokio runtime whose clock is paused and whose random
//! source (the one `select!` draws from) is seeded, so that what runs on it depends only on what
//! reaches it. The world steps every machine by one tick at a time, in a fixed order; a crash
//! drops the runtime, and every task on it with it, at once.

use std::future::Future;
use std::io;
use std::time::Duration;

use tokio::runtime::{Builder, RngSeed, Runtime};

/// A machine, running or not.
#[derive(Debug, Default)]
pub struct Host {
    runtime: Option<Runtime>,
}

impl Host {
    /// Starts `software` on a new runtime seeded with `seed`.
    pub fn boot<F>(seed: u64, software: F) -> io::Result<Host>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let runtime = Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .rng_seed(RngSeed::from_bytes(&seed.to_le_bytes()))
            .build()?;
        drop(runtime.spawn(software));
        Ok(Host {
            runtime: Some(runtime),
        })
    }

    /// Whether the machine runs.
    pub fn is_up(&self) -> bool {
        self.runtime.is_some()
    }

    /// Lets the machine run for `tick` of its time: every task that is or becomes ready runs,
    /// and the clock moves through the timers due meanwhile.
    pub fn tick(&self, tick: Duration) {
        if let Some(runtime) = &self.runtime {
            runtime.block_on(async move { tokio::time::sleep(tick).await });
        }
    }

    /// Stops the machine at once: every task ends where it is.
    pub fn crash(&mut self) {
        self.runtime = None;
    }
}
