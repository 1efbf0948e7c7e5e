//! The workers a run starts against its queues, the same in the chaos run and the simulation:
//! two producers per source queue and two consumers per queue (a source and its dead-letter
//! queue), each with a seed of its own drawn from the run's.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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

impl Switches {
    /// Stops the producers and has the consumers acknowledge every delivery from now on, so that
    /// the queues drain.
    pub fn begin_drain(&self) {
        self.stop_producing.store(true, Ordering::SeqCst);
        self.ack_per_mille.store(1000, Ordering::SeqCst);
    }

    /// Stops the consumers.
    pub fn stop_consumers(&self) {
        self.stop_consuming.store(true, Ordering::SeqCst);
    }
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

/// How many messages one page of [`remaining`] asks for.
pub const PAGE: u64 = 100;

/// One page of a peek: each message's ID with when it was moved to that dead-letter queue
/// (`None` for one that was not moved), and the sequence number the next page starts after
/// (`None` when there is none).
pub type Page = (Vec<(String, Option<u64>)>, Option<u64>);

/// The messages left in every queue of `dead_letter` (each source queue and its dead-letter
/// queue), read a page of [`PAGE`] at a time by `peek(queue, after)`. A queue no member can
/// read (`peek` answers `None`) ends the reading with an error: taking it for empty would
/// report its messages as lost.
pub async fn remaining<F>(
    dead_letter: &BTreeMap<String, String>,
    mut peek: impl FnMut(String, Option<u64>) -> F,
) -> Result<BTreeMap<String, BTreeMap<String, Option<u64>>>, String>
where
    F: Future<Output = Option<Page>>,
{
    let mut out = BTreeMap::new();
    for queue in dead_letter.iter().flat_map(|(s, d)| [s, d]) {
        let mut messages = BTreeMap::new();
        let mut after = None;
        loop {
            let Some((listed, next)) = peek(queue.clone(), after).await else {
                return Err(format!(
                    "no member answers a peek of {queue}: the remaining messages are unknown"
                ));
            };
            let full = listed.len() as u64 >= PAGE;
            messages.extend(listed);
            after = next;
            if !full || after.is_none() {
                break;
            }
        }
        out.insert(queue.clone(), messages);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_has_two_producers_and_every_queue_two_consumers_with_distinct_seeds() {
        let dead_letter = BTreeMap::from([("a".to_string(), "a-dlq".to_string())]);
        let produce = |id, seed| Worker::Produce {
            queue: "a".to_string(),
            id,
            seed,
        };
        let consume = |queue: &str, seed| Worker::Consume {
            queue: queue.to_string(),
            seed,
        };
        assert_eq!(
            plan(&dead_letter, 0x100),
            [
                produce(0, 0x101),
                produce(1, 0x102),
                consume("a", 0x103),
                consume("a", 0x104),
                consume("a-dlq", 0x105),
                consume("a-dlq", 0x106),
            ]
        );
    }

    #[tokio::test]
    async fn remaining_reads_every_queue_page_by_page_and_fails_on_one_no_member_reads() {
        let dead_letter = BTreeMap::from([("a".to_string(), "a-dlq".to_string())]);
        // `a` holds a full page and one message more; `a-dlq` one moved message.
        let left = remaining(&dead_letter, |queue, after| async move {
            match (queue.as_str(), after) {
                ("a", None) => {
                    let full = (0..PAGE).map(|i| (format!("m{i}"), None)).collect();
                    Some((full, Some(PAGE)))
                }
                ("a", Some(PAGE)) => Some((vec![("last".to_string(), None)], Some(PAGE + 1))),
                ("a-dlq", None) => Some((vec![("moved".to_string(), Some(5))], Some(1))),
                _ => None,
            }
        })
        .await
        .expect("every queue answers");
        assert_eq!(left["a"].len() as u64, PAGE + 1);
        assert!(left["a"].contains_key("last"));
        assert_eq!(
            left["a-dlq"],
            BTreeMap::from([("moved".to_string(), Some(5))])
        );
        let unread = remaining(&dead_letter, |queue, _| async move {
            (queue == "a").then(|| (Vec::new(), None))
        })
        .await;
        assert!(
            unread.as_ref().is_err_and(|e| e.contains("a-dlq")),
            "{unread:?}"
        );
    }
}
