//! Counts the snapshots the nodes of this thread's run installed, from the store's tracing
//! event "installed a snapshot": a run that purges its logs should make a lagging node catch up
//! from one, and the count shows that it did.

use std::cell::Cell;

use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::{FilterFn, Filtered};
use tracing_subscriber::layer::{Context, Layer};

/// The store's module that reports an installed snapshot.
const TARGET: &str = "raftq_store::state_machine";
const INSTALLED: &str = "installed a snapshot";

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

/// Snapshots installed on this thread so far.
pub fn installed() -> u64 {
    COUNT.with(Cell::get)
}

/// The layer that counts them, listening to the store's state machine alone.
pub fn counter<S: Subscriber>() -> Filtered<Counter, FilterFn, S> {
    Counter.with_filter(FilterFn::new(|meta: &Metadata<'_>| meta.target() == TARGET))
}

/// Counts the events that say a snapshot was installed.
pub struct Counter;

impl<S: Subscriber> Layer<S> for Counter {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut message = Message(false);
        event.record(&mut message);
        if message.0 {
            COUNT.with(|count| count.set(count.get() + 1));
        }
    }
}

/// Whether an event's message is [`INSTALLED`].
struct Message(bool);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}") == INSTALLED;
        }
    }
}
