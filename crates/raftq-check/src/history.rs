//! The recorded history of a run: every operation a client attempted, with its outcome and the
//! recorder's clock before and after, and every fault injected. Times are milliseconds on the
//! clock the recorder uses, the same clock the nodes stamp their entries with: the chaos run's is
//! the machine's clock since the Unix epoch, a simulation's its simulated time.

use std::sync::{Arc, Mutex};

use serde::Serialize;

/// How an operation ended, from the client's side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// Committed: the server said so.
    Ok,
    /// Definitely not done: the server refused it (a 4xx answer).
    Failed(String),
    /// Unknown: no answer, or 503 after the request may have been proposed.
    Unknown(String),
}

#[derive(Debug, Clone, Serialize)]
pub enum Event {
    Send {
        queue: String,
        body: String,
        group: Option<String>,
        dedup: Option<String>,
        start: u64,
        end: u64,
        outcome: Outcome,
        message_id: Option<String>,
        duplicate: bool,
        sequence_number: Option<u64>,
        /// The priority it was sent with, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        priority: Option<u8>,
        /// The `deliver_at` it was sent with, if any, in milliseconds since the Unix epoch.
        #[serde(skip_serializing_if = "Option::is_none")]
        deliver_at: Option<u64>,
    },
    Receive {
        queue: String,
        start: u64,
        end: u64,
        outcome: Outcome,
    },
    Deliver {
        queue: String,
        message_id: String,
        body: String,
        receipt: String,
        receive_count: u64,
        lease_expires_at: u64,
        sequence_number: Option<u64>,
        dead_letter_source: Option<String>,
        moved_at: Option<u64>,
        /// Standard queues: its priority.
        #[serde(skip_serializing_if = "Option::is_none")]
        priority: Option<u8>,
        /// When it was first leased in this queue, by the state's clock (the server's stamp).
        #[serde(skip_serializing_if = "Option::is_none")]
        first_received_at: Option<u64>,
        /// The receive that delivered it.
        start: u64,
        end: u64,
    },
    Ack {
        queue: String,
        message_id: String,
        receipt: String,
        start: u64,
        end: u64,
        outcome: Outcome,
    },
    Fault {
        kind: String,
        target: String,
        start: u64,
        end: u64,
        /// When every node the fault stopped was running again (`docker start` returned); set
        /// by the faults that kill nodes.
        #[serde(skip_serializing_if = "Option::is_none")]
        restarted: Option<u64>,
        /// The seed a power loss reverted unsynced writes with (`power_loss_all`: node N's is
        /// this plus N); a replay with the run's seed uses the same.
        #[serde(skip_serializing_if = "Option::is_none")]
        seed: Option<u64>,
        /// The nodes a power loss left unable to come back (each then replaced by a blank one).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        unrecovered: Vec<String>,
    },
}

/// What a producer's send asks for besides its body and group, as both recorders pick it: a
/// priority 0-9 on a queue of strict priorities (invariant 10), and on another standard queue
/// one message in six scheduled 100 ms to 3 s ahead (invariant 11).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placement {
    pub priority: Option<u8>,
    pub deliver_at: Option<u64>,
}

/// Which queue a producer sends to, for its [`Placement`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// A standard queue of strict priorities (sent without delays).
    Priorities,
    /// Another standard queue.
    Standard,
    Fifo,
}

impl Placement {
    /// The placement of a send to a queue of `kind` at `now` (the recorder's clock), drawn from
    /// the random number `draw`.
    pub fn pick(kind: QueueKind, now: u64, draw: u64) -> Placement {
        match kind {
            QueueKind::Priorities => Placement {
                priority: Some((draw % 10) as u8),
                deliver_at: None,
            },
            QueueKind::Standard => Placement {
                priority: None,
                deliver_at: draw
                    .is_multiple_of(6)
                    .then(|| now + 100 + (draw / 6) % 2_900),
            },
            QueueKind::Fifo => Placement::default(),
        }
    }
}

/// The shared log every worker appends to.
#[derive(Debug, Clone, Default)]
pub struct History {
    events: Arc<Mutex<Vec<Event>>>,
}

impl History {
    pub fn push(&self, event: Event) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event);
        }
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}
