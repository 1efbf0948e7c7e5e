//! The producers' loop, the same in the chaos run and the simulation: which messages a producer
//! sends, in which groups, how it retries a send whose outcome is unknown, when it resends a
//! FIFO message on purpose, and how it records every send in the history. How a send reaches
//! the cluster, the clock it is timed by and the random numbers it draws are the recorder's
//! ([`Producer`]).

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::sleep;

use crate::history::{Event, History, Outcome, Placement, QueueKind};
use crate::workers::Switches;

/// How many times a producer sends one message at the most.
const ATTEMPTS: usize = 20;

/// The pause after a send whose outcome is unknown.
const UNKNOWN_PAUSE: Duration = Duration::from_millis(100);

/// One message as a producer sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub body: String,
    /// On a FIFO queue, its deduplication ID: the body of the message it stands for, so that a
    /// resend on purpose repeats the first send's ID.
    pub dedup: Option<String>,
    pub group: String,
    pub placement: Placement,
}

/// What the server answered to a send that committed; empty for one that did not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sent {
    pub message_id: Option<String>,
    /// The server took it for a resend of a message it already had.
    pub duplicate: bool,
    pub sequence_number: Option<u64>,
}

/// What a recorder gives its producers: its clock, a random source of the producer's own, and
/// a way to send one message to the cluster.
pub trait Producer {
    /// The recorder's clock, in milliseconds.
    fn now_ms(&self) -> u64;

    /// A random number from the producer's source.
    fn draw(&mut self) -> u64;

    /// True one time in `n`, drawn from the producer's source.
    fn one_in(&mut self, n: u32) -> bool;

    /// Sends `message` to `queue` through a node of the producer's choice.
    fn send(
        &mut self,
        queue: &str,
        message: &Message,
    ) -> impl Future<Output = (Outcome, Sent)> + Send;

    /// How long to wait before sending again a message the server refused; `None` to give it
    /// up.
    fn after_refusal(&self) -> Option<Duration>;

    /// How long to wait after one message before the next, if at all.
    fn pause(&mut self) -> Option<Duration>;
}

/// The group of a producer's `n`th message: on a FIFO queue one of three groups of producer
/// `id`; on a standard queue, tenants of a fair queue: one tenant all producers share sends
/// three times as much as each producer's own.
fn group(fifo: bool, id: usize, n: u64) -> String {
    match (fifo, n % 4) {
        (true, _) => format!("p{id}-g{}", n % 3),
        (false, 0) => format!("tenant-{id}"),
        (false, _) => "tenant-shared".to_string(),
    }
}

/// Sends messages to `queue` (a queue of `kind`) as producer `id` until `switches` stop the
/// producers. The `n`th message's body is `{queue}/{id}/{n}`. A send whose outcome is unknown
/// is retried on a FIFO queue (with the same deduplication ID) and not on a standard one, which
/// would get a second copy; and now and then a FIFO message that was sent is resent on purpose
/// with its deduplication ID.
pub async fn produce<P: Producer>(
    producer: &mut P,
    history: &History,
    (queue, kind): (&str, QueueKind),
    id: usize,
    switches: &Switches,
) {
    let fifo = queue.ends_with(".fifo");
    let mut n = 0u64;
    while !switches.stop_producing.load(Ordering::SeqCst) {
        n += 1;
        let body = format!("{queue}/{id}/{n}");
        let placement = Placement::pick(kind, producer.now_ms(), producer.draw());
        let message = Message {
            dedup: fifo.then(|| body.clone()),
            body,
            group: group(fifo, id, n),
            placement,
        };
        let mut ok = false;
        for _attempt in 0..ATTEMPTS {
            match send(producer, history, queue, &message).await {
                Outcome::Unknown(_) if fifo => sleep(UNKNOWN_PAUSE).await,
                Outcome::Unknown(_) => {
                    // Not retried, but not hammered either.
                    sleep(UNKNOWN_PAUSE).await;
                    break;
                }
                Outcome::Ok => {
                    ok = true;
                    break;
                }
                Outcome::Failed(_) => match producer.after_refusal() {
                    Some(wait) => sleep(wait).await,
                    None => break,
                },
            }
        }
        if fifo && ok && producer.one_in(8) {
            let resend = Message {
                body: format!("resend:{}", message.body),
                ..message
            };
            send(producer, history, queue, &resend).await;
        }
        if let Some(pause) = producer.pause() {
            sleep(pause).await;
        }
    }
}

/// One send of `message` to `queue`, recorded with its outcome.
async fn send<P: Producer>(
    producer: &mut P,
    history: &History,
    queue: &str,
    message: &Message,
) -> Outcome {
    let start = producer.now_ms();
    let (outcome, sent) = producer.send(queue, message).await;
    let end = producer.now_ms();
    history.push(Event::Send {
        queue: queue.into(),
        body: message.body.clone(),
        group: Some(message.group.clone()),
        dedup: message.dedup.clone(),
        start,
        end,
        outcome: outcome.clone(),
        message_id: sent.message_id,
        duplicate: sent.duplicate,
        sequence_number: sent.sequence_number,
        priority: message.placement.priority,
        deliver_at: message.placement.deliver_at,
    });
    outcome
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// A producer whose sends end as scripted; the producers stop once the script is used up.
    struct Scripted {
        outcomes: VecDeque<Outcome>,
        sent: Vec<Message>,
        resend: bool,
        switches: Switches,
    }

    impl Scripted {
        fn new(outcomes: &[Outcome], resend: bool) -> Scripted {
            Scripted {
                outcomes: outcomes.iter().cloned().collect(),
                sent: Vec::new(),
                resend,
                switches: Switches::default(),
            }
        }

        /// Runs producer 1 on `queue` until the script is used up; answers the history.
        async fn run(&mut self, queue: &str, kind: QueueKind) -> Vec<Event> {
            let history = History::default();
            let switches = self.switches.clone();
            produce(self, &history, (queue, kind), 1, &switches).await;
            history.events()
        }

        /// Each send's body and deduplication ID.
        fn bodies(&self) -> Vec<(&str, Option<&str>)> {
            self.sent
                .iter()
                .map(|m| (m.body.as_str(), m.dedup.as_deref()))
                .collect()
        }
    }

    impl Producer for Scripted {
        fn now_ms(&self) -> u64 {
            1_000
        }

        fn draw(&mut self) -> u64 {
            0
        }

        fn one_in(&mut self, _n: u32) -> bool {
            self.resend
        }

        async fn send(&mut self, _queue: &str, message: &Message) -> (Outcome, Sent) {
            self.sent.push(message.clone());
            let outcome = self.outcomes.pop_front().unwrap_or(Outcome::Ok);
            if self.outcomes.is_empty() {
                self.switches.stop_producing.store(true, Ordering::SeqCst);
            }
            (outcome, Sent::default())
        }

        fn after_refusal(&self) -> Option<Duration> {
            None
        }

        fn pause(&mut self) -> Option<Duration> {
            None
        }
    }

    #[tokio::test]
    async fn a_fifo_send_of_unknown_outcome_is_retried_with_its_id_then_resent_on_purpose() {
        let unknown = Outcome::Unknown("timeout".into());
        let mut producer = Scripted::new(&[unknown, Outcome::Ok, Outcome::Ok], true);
        let events = producer.run("q.fifo", QueueKind::Fifo).await;
        assert_eq!(
            producer.bodies(),
            [
                ("q.fifo/1/1", Some("q.fifo/1/1")),
                ("q.fifo/1/1", Some("q.fifo/1/1")),
                ("resend:q.fifo/1/1", Some("q.fifo/1/1")),
            ]
        );
        assert!(producer.sent.iter().all(|m| m.group == "p1-g1"));
        assert_eq!(events.len(), 3);
    }

    #[tokio::test]
    async fn a_standard_send_is_neither_retried_nor_resent() {
        let unknown = Outcome::Unknown("timeout".into());
        let refused = Outcome::Failed("invalid_argument".into());
        let mut producer = Scripted::new(&[unknown, refused], true);
        let events = producer.run("q", QueueKind::Standard).await;
        assert_eq!(producer.bodies(), [("q/1/1", None), ("q/1/2", None)]);
        assert!(producer.sent.iter().all(|m| m.group == "tenant-shared"));
        // A draw of 0 schedules the message 100 ms ahead.
        assert!(producer
            .sent
            .iter()
            .all(|m| m.placement.deliver_at == Some(1_100)));
        let recorded: Vec<(&str, &Outcome)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Send { body, outcome, .. } => Some((body.as_str(), outcome)),
                _ => None,
            })
            .collect();
        assert_eq!(
            recorded,
            [
                ("q/1/1", &Outcome::Unknown("timeout".into())),
                ("q/1/2", &Outcome::Failed("invalid_argument".into())),
            ]
        );
    }

    #[test]
    fn groups_are_fifo_groups_of_the_producer_or_fair_queue_tenants() {
        let groups: Vec<String> = (1..=4).map(|n| group(true, 7, n)).collect();
        assert_eq!(groups, ["p7-g1", "p7-g2", "p7-g0", "p7-g1"]);
        let tenants: Vec<String> = (1..=4).map(|n| group(false, 7, n)).collect();
        assert_eq!(
            tenants,
            [
                "tenant-shared",
                "tenant-shared",
                "tenant-shared",
                "tenant-7"
            ]
        );
    }
}
