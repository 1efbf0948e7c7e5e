//! The workers a run starts against its queues, the same in the chaos run and the simulation:
//! two producers per source queue and two consumers per queue (a source and its dead-letter
//! queue), each with a seed of its own drawn from the run's.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

/// The switches a run's workers watch: the run sets them to stop the producers, then the
/// consumers, and changes the share of deliveries the consumers acknowledge (the rest are left
/// to their leases).
#[derive(Debug, Clone, Default)]
pub struct Switches {
    /// Producers stop when set.
    pub stop_producing: Arc<AtomicBool>,
    /// Consumers stop when set.
    pub stop_consuming: Arc<AtomicBool>,
    /// Per mille of deliveries the consumers acknowledge.
    pub ack_per_mille: Arc<AtomicU32>,
}

/// One worker of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Worker {
    /// Sends to `queue`; `id` tells the two producers of a queue apart in the bodies they send.
    Produce { queue: String, id: usize, seed: u64 },
    /// Receives from `queue`, acknowledging some and abandoning the rest.
    Consume { queue: String, seed: u64 },
}

/// The workers of a run over `dead_letter` (each source queue with its dead-letter queue), each
/// seeded from `seed`.
pub fn plan(dead_letter: &BTreeMap<String, String>, seed: u64) -> Vec<Worker> {
    let mut workers = Vec::new();
    let mut n = 0u64;
    let mut next_seed = || {
        n += 1;
        seed ^ n
    };
    for (source, dlq) in dead_letter {
        for id in 0..2 {
            workers.push(Worker::Produce {
                queue: source.clone(),
                id,
                seed: next_seed(),
            });
        }
        for queue in [source, dlq] {
            for _ in 0..2 {
                workers.push(Worker::Consume {
                    queue: queue.clone(),
                    seed: next_seed(),
                });
            }
        }
    }
    workers
}

/// Spawns the workers of [`plan`], each producer's task made by `produce(queue, id, seed)` and
/// each consumer's by `consume(queue, seed)`.
pub fn start<P, C>(
    dead_letter: &BTreeMap<String, String>,
    seed: u64,
    produce: impl Fn(String, usize, u64) -> P,
    consume: impl Fn(String, u64) -> C,
) -> Vec<JoinHandle<()>>
where
    P: Future<Output = ()> + Send + 'static,
    C: Future<Output = ()> + Send + 'static,
{
    plan(dead_letter, seed)
        .into_iter()
        .map(|worker| match worker {
            Worker::Produce { queue, id, seed } => tokio::spawn(produce(queue, id, seed)),
            Worker::Consume { queue, seed } => tokio::spawn(consume(queue, seed)),
        })
        .collect()
}

/// Waits, up to `limit`, until a run's queues have drained: `held` (what they hold in all, an
/// unanswered queue counted as one) read 0 twice in a row, a second apart (a message that one
/// reading saw gone may still come back from an abandoned lease before the next).
pub async fn drain<F>(limit: Duration, mut held: impl FnMut() -> F) -> bool
where
    F: Future<Output = u64>,
{
    let deadline = Instant::now() + limit;
    let mut empty_in_a_row = 0;
    while Instant::now() < deadline {
        empty_in_a_row = if held().await == 0 {
            empty_in_a_row + 1
        } else {
            0
        };
        if empty_in_a_row >= 2 {
            return true;
        }
        sleep(Duration::from_secs(1)).await;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_has_two_producers_and_every_queue_two_consumers_with_distinct_seeds() {
        let dead_letter = BTreeMap::from([("a".to_string(), "a-dlq".to_string())]);
        let workers = plan(&dead_letter, 0x100);
        let producing: Vec<&String> = workers
            .iter()
            .filter_map(|w| match w {
                Worker::Produce { queue, .. } => Some(queue),
                Worker::Consume { .. } => None,
            })
            .collect();
        let consuming: Vec<&String> = workers
            .iter()
            .filter_map(|w| match w {
                Worker::Consume { queue, .. } => Some(queue),
                Worker::Produce { .. } => None,
            })
            .collect();
        assert_eq!(producing, ["a", "a"]);
        assert_eq!(consuming, ["a", "a", "a-dlq", "a-dlq"]);
        let seeds: Vec<u64> = workers
            .iter()
            .map(|w| match w {
                Worker::Produce { seed, .. } | Worker::Consume { seed, .. } => *seed,
            })
            .collect();
        assert_eq!(seeds, [0x101, 0x102, 0x103, 0x104, 0x105, 0x106]);
    }
}
