//! Requests paired at compile time with the type of their answer. A [`Typed`] request is a
//! command (or a query of the node) built by a constructor of [`proposal`] (or of the node's
//! `question`), each of which names the kind of answer the engine gives to that request and
//! takes it apart, in the one match of its kind: whoever proposes a `Proposal<T>` gets a `T`
//! back, never an [`Outcome`] to match.
//!
//! The request travels as the plain enum (through Raft, or to the leader and back) and its
//! answer comes back as the plain enum, so a mismatch cannot be ruled out by the compiler; it
//! would be a bug of the engine or of these tables, and [`Answer::take`] panics naming the
//! request and the answer.

use std::fmt::Debug;

use uuid::Uuid;

use crate::command::{
    AckResult, BatchEntry, BatchResult, Command, Delivery, MoveTaskInput, NewMessage, Outcome,
    QueueAttributes, SendResult,
};
use crate::model::{Millis, MoveTaskView, QueueView};
use crate::placement::{PlacementCommand, PlacementOutcome};

/// A request (`R`) whose answer (`A`) is taken apart into a `T`.
pub struct Typed<R, A, T> {
    request: R,
    answer: Answer<A, T>,
}

/// What takes the answer to one kind of request apart.
pub struct Answer<A, T> {
    /// The request's kind, for the message of a mismatch.
    kind: &'static str,
    take: fn(A) -> Result<T, A>,
}

// By hand: a derive would ask `A` and `T` to be `Clone` and `Debug` too.
impl<A, T> Clone for Answer<A, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A, T> Copy for Answer<A, T> {}

impl<A, T> Debug for Answer<A, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Answer({})", self.kind)
    }
}

impl<R, A, T> Typed<R, A, T> {
    /// `request`, whose answers `take` takes apart (`Err`: an answer of another kind); built by
    /// [`typed_requests!`](crate::typed_requests).
    pub fn new(request: R, kind: &'static str, take: fn(A) -> Result<T, A>) -> Self {
        Typed {
            request,
            answer: Answer { kind, take },
        }
    }

    pub fn request(&self) -> &R {
        &self.request
    }

    /// The request to send, and what takes its answer apart.
    pub fn split(self) -> (R, Answer<A, T>) {
        (self.request, self.answer)
    }
}

impl<A: Debug, T> Answer<A, T> {
    /// The kind of request answered.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The answer as `T`.
    ///
    /// # Panics
    /// On an answer of another kind than the request's: the engine answers each kind of request
    /// with one kind of answer, so this is a programming error, named with both.
    pub fn take(self, answer: A) -> T {
        (self.take)(answer)
            .unwrap_or_else(|other| panic!("{} was answered with {other:?}", self.kind))
    }
}

/// A command with the type of its outcome.
pub type Proposal<T> = Typed<Command, Outcome, T>;

/// Declares constructors of typed requests, one a line: the function, its arguments (the
/// variant's fields), the type of its answer, the variant, and the arms that take the answer of
/// that variant apart.
///
/// ```ignore
/// typed_requests! {
///     Command => Outcome;
///     fn purge(account: String, queue: String) -> () = Purge { Outcome::Purged => () };
/// }
/// ```
#[macro_export]
macro_rules! typed_requests {
    (
        $request:ident => $answer:ident;
        $(
            $(#[$meta:meta])*
            fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty
                = $variant:ident { $($pattern:pat => $value:expr),+ $(,)? };
        )*
    ) => {$(
        $(#[$meta])*
        pub fn $name($($arg: $ty),*) -> $crate::typed::Typed<$request, $answer, $out> {
            $crate::typed::Typed::new(
                $request::$variant { $($arg),* },
                stringify!($variant),
                |answer| match answer {
                    $($pattern => Ok($value),)+
                    other => Err(other),
                },
            )
        }
    )*};
}

/// A lease as changed: the answer to [`proposal::change_lease`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseChange {
    pub receipt: String,
    pub lease_expires_at: Millis,
}

/// How a [`proposal::receive_wait`] began: with messages delivered at once, or parked until
/// an entry answers its waiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitStart {
    Delivered(Vec<Delivery>),
    Parked,
}

/// The commands a client proposes, typed by their outcome (see [`Command`] for each).
pub mod proposal {
    use super::*;

    typed_requests! {
        Command => Outcome;
        fn create_queue(account: String, queue_id: Uuid, name: String, attributes: QueueAttributes)
            -> Box<QueueView> = CreateQueue { Outcome::Queue(view) => view };
        fn patch_queue(account: String, queue: String, attributes: QueueAttributes)
            -> Box<QueueView> = PatchQueue { Outcome::Queue(view) => view };
        fn delete_queue(account: String, queue: String)
            -> () = DeleteQueue { Outcome::Deleted => () };
        fn send(account: String, queue: String, message: NewMessage)
            -> SendResult = Send { Outcome::Sent(result) => result };
        fn send_batch(account: String, queue: String, entries: Vec<BatchEntry>)
            -> Vec<BatchResult> = SendBatch { Outcome::SentBatch(results) => results };
        fn receive(account: String, queue: String, max_messages: Option<i64>,
            lease_seconds: Option<i64>, attempt_id: Option<String>)
            -> Vec<Delivery> = Receive { Outcome::Received(deliveries) => deliveries };
        fn ack(account: String, queue: String, receipts: Vec<String>)
            -> Vec<AckResult> = Ack { Outcome::Acked(results) => results };
        fn change_lease(account: String, queue: String, receipt: String, lease_seconds: i64,
            delay_seconds: Option<i64>) -> LeaseChange = ChangeLease {
            Outcome::LeaseChanged { receipt, lease_expires_at } => LeaseChange {
                receipt,
                lease_expires_at,
            }
        };
        fn purge(account: String, queue: String) -> () = Purge { Outcome::Purged => () };
        fn start_move_task(account: String, queue: String, task_handle: Uuid, task: MoveTaskInput)
            -> Box<MoveTaskView> = StartMoveTask { Outcome::MoveTask(view) => view };
        fn cancel_move_task(account: String, queue: Option<String>, task_handle: String)
            -> Box<MoveTaskView> = CancelMoveTask { Outcome::MoveTask(view) => view };
        fn receive_wait(account: String, queue: String, max_messages: Option<i64>,
            lease_seconds: Option<i64>, wait_seconds: i64, waiter: Uuid)
            -> WaitStart = ReceiveWait {
            Outcome::Received(deliveries) => WaitStart::Delivered(deliveries),
            Outcome::Parked => WaitStart::Parked,
        };
        fn end_wait(waiter: Uuid) -> () = EndWait { Outcome::WaitEnded => () };
        fn cancel_scheduled(account: String, queue: String, id: Uuid)
            -> () = CancelScheduled { Outcome::ScheduledCancelled => () };
        fn place(change: PlacementCommand)
            -> PlacementOutcome = Place { Outcome::Placed(outcome) => outcome };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proposal_takes_the_outcome_of_its_kind_apart() {
        let (command, answer) = proposal::purge("dev".into(), "q".into()).split();
        assert!(matches!(command, Command::Purge { .. }));
        answer.take(Outcome::Purged);
        let (_, answer) =
            proposal::receive_wait("dev".into(), "q".into(), None, None, 5, Uuid::nil()).split();
        assert_eq!(answer.kind(), "ReceiveWait");
        assert_eq!(answer.take(Outcome::Parked), WaitStart::Parked);
    }

    #[test]
    #[should_panic(expected = "Purge was answered with Deleted")]
    fn an_outcome_of_another_kind_is_a_programming_error() {
        let (_, answer) = proposal::purge("dev".into(), "q".into()).split();
        answer.take(Outcome::Deleted);
    }
}
