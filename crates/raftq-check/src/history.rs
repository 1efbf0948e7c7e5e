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
