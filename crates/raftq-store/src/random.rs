//! The random choices a node makes: openraft's election timeouts and the ids of new clusters,
//! segment sets and snapshot files. They come from the thread's random source, unless a
//! simulation seeds this thread ([`seed`]) so that the same seed makes the same choices in the
//! same order (every simulated node runs on the simulation's one thread).

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use openraft::{AsyncRuntime, OptionalSend, TokioRuntime};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use uuid::Uuid;

thread_local! {
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Makes this thread's random choices come from `seed` (`None`: from the thread's random source
/// again).
pub fn seed(seed: Option<u64>) {
    SEEDED.with(|seeded| *seeded.borrow_mut() = seed.map(StdRng::seed_from_u64));
}

/// A random (version 4) UUID, from this thread's source.
pub fn uuid() -> Uuid {
    let mut bytes = [0u8; 16];
    Source.fill_bytes(&mut bytes);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// This thread's random source: seeded by [`seed`], or the thread's own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Source;

impl Source {
    fn with<T>(draw: impl FnOnce(&mut dyn RngCore) -> T) -> T {
        SEEDED.with(|seeded| match seeded.borrow_mut().as_mut() {
            Some(rng) => draw(rng),
            None => draw(&mut rand::thread_rng()),
        })
    }
}

impl RngCore for Source {
    fn next_u32(&mut self) -> u32 {
        Source::with(|rng| rng.next_u32())
    }

    fn next_u64(&mut self) -> u64 {
        Source::with(|rng| rng.next_u64())
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        Source::with(|rng| rng.fill_bytes(dest));
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        Source::with(|rng| rng.try_fill_bytes(dest))
    }
}

/// openraft's tokio runtime, drawing its random election timeouts from [`Source`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Runtime;

type Tokio = TokioRuntime;

impl AsyncRuntime for Runtime {
    type JoinError = <Tokio as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <Tokio as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <Tokio as AsyncRuntime>::Sleep;
    type Instant = <Tokio as AsyncRuntime>::Instant;
    type TimeoutError = <Tokio as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <Tokio as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = Source;
    type OneshotSender<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError = <Tokio as AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        Tokio::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        Tokio::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        Tokio::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        Tokio::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        Tokio::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        Tokio::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        Source
    }

    fn oneshot<T: OptionalSend>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>) {
        Tokio::oneshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn draws() -> (Vec<u64>, Uuid) {
        let timeouts = (0..8)
            .map(|_| Runtime::thread_rng().gen_range(150..300))
            .collect();
        (timeouts, uuid())
    }

    #[test]
    fn a_seed_makes_the_same_choices_and_no_seed_the_threads_own() {
        seed(Some(42));
        let first = draws();
        seed(Some(42));
        assert_eq!(draws(), first, "the same seed, the same choices");
        seed(Some(43));
        assert_ne!(draws(), first, "another seed, other choices");
        seed(None);
        let unseeded = (draws(), draws());
        assert_ne!(unseeded.0, unseeded.1, "the thread's own source");
        assert_eq!(first.1.get_version_num(), 4);
    }
}
