//! The one interface every system under test implements, and the message shapes the workloads
//! hand to it. A workload only speaks this trait, so every system runs the same code path: the
//! same task structure, the same body, the same clock.

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::{Deserialize, Serialize};

/// A queue as a workload wants it; each driver maps it onto its system's nearest equivalent
/// (documented in its [`SystemNotes`]).
#[derive(Debug, Clone)]
pub struct QueueSpec {
    /// Unique in the run; ASCII letters, digits and `_` only, so that it is a valid queue, stream
    /// and subject token name in every system.
    pub name: String,
    /// Ordered per message group (a raftq FIFO queue).
    pub fifo: bool,
    /// How long a received, unacknowledged message stays invisible.
    pub lease: Duration,
    /// A queue (already created) that a message moves to once a delivery of it is abandoned.
    pub dead_letter: Option<String>,
}

impl QueueSpec {
    /// A standard queue with a 30 s lease and no dead-letter queue.
    pub fn standard(name: String) -> QueueSpec {
        QueueSpec {
            name,
            fifo: false,
            lease: Duration::from_secs(30),
            dead_letter: None,
        }
    }
}

/// One message to send.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// Starts with the send time (see [`stamp_body_at`]), padded to the message size.
    pub body: String,
    /// FIFO: the message group. Standard queue: the tenant (see
    /// [`Driver::supports_fair_queues`]).
    pub group: Option<String>,
    /// FIFO: the deduplication ID (unique per message in these workloads).
    pub dedup_id: Option<String>,
}

/// One delivered message.
#[derive(Debug)]
pub struct Received<R> {
    /// When it was sent, in nanoseconds since [`epoch`], read back from its body.
    pub sent_nanos: Option<u64>,
    /// Who sent it, read back from a body made by [`sender_body`].
    pub sender: Option<u32>,
    /// Whether this is a second or later delivery.
    pub redelivered: bool,
    /// What [`Driver::ack`] and [`Driver::abandon`] take.
    pub receipt: R,
}

/// What a system promises and how the workloads are mapped onto it, printed next to its numbers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SystemNotes {
    pub durability: String,
    /// Whether a send is acknowledged only after the message was synced to disk (on a majority,
    /// when replicated). Reports written before this was recorded read as `false`.
    #[serde(default)]
    pub syncs_before_ack: bool,
    pub fifo: String,
    pub redelivery: String,
    pub dead_letter: String,
}

/// A system under test. Sessions are per task: a task creates one, then sends or receives
/// through it sequentially; the driver itself is shared by all tasks.
pub trait Driver: Send + Sync + 'static {
    /// Per-task state (a channel, a client handle, a consumer).
    type Session: Send + 'static;
    /// What acknowledges or abandons one delivery.
    type Receipt: Send + 'static;

    /// How the system is run and how each workload maps onto it.
    fn notes(&self) -> SystemNotes;

    /// Whether abandoned deliveries can move to a dead-letter queue.
    fn supports_dead_letter(&self) -> bool {
        true
    }

    /// Whether a standard queue shares its deliveries fairly among the tenants named by the
    /// messages' group IDs (raftq's fair queues); the fair-queue rows need it.
    fn supports_fair_queues(&self) -> bool {
        false
    }

    /// How many of `wanted` consumers may take from `spec` at once (fewer where keeping order
    /// needs a single consumer).
    fn consumers(&self, _spec: &QueueSpec, wanted: usize) -> usize {
        wanted
    }

    fn create_queue(&self, spec: &QueueSpec) -> impl Future<Output = Result<()>> + Send;

    fn delete_queue(&self, spec: &QueueSpec) -> impl Future<Output = Result<()>> + Send;

    /// The index (in endpoint order) of the node leading `spec`'s queue, when the system tells.
    fn leader(&self, spec: &QueueSpec) -> impl Future<Output = Result<Option<usize>>> + Send;

    /// A session on `spec` through the node with index `node`.
    fn session(
        &self,
        spec: &QueueSpec,
        node: usize,
    ) -> impl Future<Output = Result<Self::Session>> + Send;

    /// Sends `messages` (1 or a batch) and returns once the system confirmed all of them.
    fn send(
        &self,
        session: &mut Self::Session,
        messages: Vec<Outgoing>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Up to `max` messages, waiting up to about a second for the first one.
    fn receive(
        &self,
        session: &mut Self::Session,
        max: usize,
    ) -> impl Future<Output = Result<Vec<Received<Self::Receipt>>>> + Send;

    fn ack(
        &self,
        session: &mut Self::Session,
        receipts: Vec<Self::Receipt>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Gives deliveries up without acknowledging them, by the system's explicit abandonment:
    /// they are deliverable again at once, or move to the dead-letter queue when the queue has
    /// one.
    fn abandon(
        &self,
        session: &mut Self::Session,
        receipts: Vec<Self::Receipt>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Messages waiting for delivery in `spec`'s queue.
    fn depth(&self, spec: &QueueSpec) -> impl Future<Output = Result<u64>> + Send;
}

/// Digits of the send stamp at the start of every body.
const STAMP_DIGITS: usize = 20;
/// What follows the stamp in a body that names its sender, before the sender's digits.
const SENDER_MARK: u8 = b's';
/// Digits of the sender in a body that names it.
const SENDER_DIGITS: usize = 10;

/// The clock every stamp counts from (the first call in this process).
pub fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds since [`epoch`].
pub fn now_nanos() -> u64 {
    nanos_at(Instant::now())
}

/// Nanoseconds from [`epoch`] to `t` (0 for a time before it).
pub fn nanos_at(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX)
}

/// A body of `size` bytes (at least the stamp) that starts with the send time `sent_nanos`: the
/// current time, or in a fixed-rate run the time the message was meant to be sent.
pub fn stamp_body_at(sent_nanos: u64, size: usize) -> String {
    padded(format!("{sent_nanos:0width$}", width = STAMP_DIGITS), size)
}

/// A body of `size` bytes (at least the stamp and the sender) that starts with the send time
/// `sent_nanos` and then names `sender`, for workloads that measure their senders apart.
pub fn sender_body(sent_nanos: u64, sender: u32, size: usize) -> String {
    let head = format!(
        "{sent_nanos:0stamp$}{}{sender:0digits$}",
        char::from(SENDER_MARK),
        stamp = STAMP_DIGITS,
        digits = SENDER_DIGITS
    );
    padded(head, size)
}

/// `head` padded to `size` bytes.
fn padded(mut head: String, size: usize) -> String {
    // The padding is copied in one piece, not pushed a `char` at a time: the load generator
    // shares its cores with the servers.
    head.push_str(&"x".repeat(size.saturating_sub(head.len())));
    head
}

/// The send time written by [`stamp_body_at`] or [`sender_body`], if `body` has one.
pub fn read_stamp(body: &[u8]) -> Option<u64> {
    let digits = std::str::from_utf8(body.get(..STAMP_DIGITS)?).ok()?;
    digits.parse().ok()
}

/// The sender written by [`sender_body`], if `body` names one.
pub fn read_sender(body: &[u8]) -> Option<u32> {
    let (&mark, rest) = body.get(STAMP_DIGITS..)?.split_first()?;
    if mark != SENDER_MARK {
        return None;
    }
    let digits = std::str::from_utf8(rest.get(..SENDER_DIGITS)?).ok()?;
    digits.parse().ok()
}

/// The instant a stamp stands for.
pub fn instant_of(sent_nanos: u64) -> Instant {
    epoch() + Duration::from_nanos(sent_nanos)
}

/// How long ago a stamp was taken.
pub fn since_stamp(sent_nanos: u64) -> Duration {
    Duration::from_nanos(now_nanos().saturating_sub(sent_nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_carry_their_send_time_and_size() {
        let before = now_nanos();
        let body = stamp_body_at(now_nanos(), 1024);
        assert_eq!(body.len(), 1024);
        let stamp = read_stamp(body.as_bytes()).expect("stamp");
        assert!(stamp >= before && stamp <= now_nanos());
    }

    #[test]
    fn bodies_stamped_with_a_given_time_read_back_as_that_instant() {
        let body = stamp_body_at(5_000_000, 1024);
        assert_eq!(body.len(), 1024);
        assert_eq!(read_stamp(body.as_bytes()), Some(5_000_000));
        assert_eq!(instant_of(5_000_000), epoch() + Duration::from_millis(5));
    }

    #[test]
    fn bodies_without_a_stamp_have_none() {
        assert_eq!(read_stamp(b"hello"), None);
        assert_eq!(read_stamp(&[b'y'; 64]), None);
    }

    #[test]
    fn sender_bodies_carry_their_sender_send_time_and_size() {
        let body = sender_body(123_456_789, 7, 1024);
        assert_eq!(body.len(), 1024);
        assert_eq!(read_sender(body.as_bytes()), Some(7));
        assert_eq!(read_stamp(body.as_bytes()), Some(123_456_789));
        let longest = sender_body(u64::MAX, u32::MAX, 0);
        assert_eq!(read_stamp(longest.as_bytes()), Some(u64::MAX));
        assert_eq!(read_sender(longest.as_bytes()), Some(u32::MAX));
    }

    #[test]
    fn plain_bodies_name_no_sender() {
        assert_eq!(
            read_sender(stamp_body_at(now_nanos(), 1024).as_bytes()),
            None
        );
        assert_eq!(read_sender(stamp_body_at(now_nanos(), 0).as_bytes()), None);
        assert_eq!(read_sender(b"hello"), None);
    }

    #[test]
    fn times_before_the_epoch_count_as_its_start() {
        let start = epoch();
        assert_eq!(nanos_at(start), 0);
        assert_eq!(nanos_at(start + Duration::from_millis(3)), 3_000_000);
        if let Some(earlier) = start.checked_sub(Duration::from_secs(1)) {
            assert_eq!(nanos_at(earlier), 0);
        }
    }
}
