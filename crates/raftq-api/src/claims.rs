//! Claims of long polls on a queue's deliverable messages: a woken receive claims as many as it
//! may take, so that one wake-up does not send every waiter to the leader for the same
//! messages (see `longpoll`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio::sync::broadcast::{self, Receiver};
use uuid::Uuid;

/// How many wake-ups a waiter may fall behind on the ends of claims before it is told it lagged
/// (and so re-checks).
const ENDED_BACKLOG: usize = 1024;

/// The receives this node sent after wake-ups and that have not ended, by queue: how many
/// messages each may take (its `max_messages`). A claim ends when its receive is answered,
/// fails or is abandoned, and its end is broadcast so that the waiters it held back check again.
pub(crate) struct Claims {
    taken: Mutex<HashMap<Uuid, usize>>,
    ended: broadcast::Sender<Uuid>,
}

impl Default for Claims {
    fn default() -> Claims {
        Claims {
            taken: Mutex::default(),
            ended: broadcast::channel(ENDED_BACKLOG).0,
        }
    }
}

impl Claims {
    /// The queues whose claims end from now on.
    pub(crate) fn subscribe(&self) -> Receiver<Uuid> {
        self.ended.subscribe()
    }

    /// Claims `wants` messages of `queue`, which has `ready` places to start a receive from, if
    /// the claims already made take fewer than that; `None` when they take them all.
    pub(crate) fn claim(&self, queue: Uuid, ready: usize, wants: usize) -> Option<Claim<'_>> {
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        let held = taken.entry(queue).or_default();
        if *held >= ready {
            return None;
        }
        *held = held.saturating_add(wants);
        Some(Claim {
            claims: self,
            queue,
            wants,
        })
    }
}

/// One receive counted in [`Claims`] until it is dropped.
pub(crate) struct Claim<'a> {
    claims: &'a Claims,
    queue: Uuid,
    wants: usize,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut taken = self
            .claims
            .taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = taken.get_mut(&self.queue) {
            *held = held.saturating_sub(self.wants);
            if *held == 0 {
                taken.remove(&self.queue);
            }
        }
        drop(taken);
        // No subscriber is no error: nobody waits.
        let _ = self.claims.ended.send(self.queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_hold_back_waiters_while_they_take_every_ready_place() {
        let claims = Claims::default();
        let (queue, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        // One FIFO group ready: the first waiter goes, the next one waits.
        let first = claims.claim(queue, 1, 10).expect("the first claim");
        assert!(claims.claim(queue, 1, 10).is_none());
        let _apart = claims.claim(other, 1, 10).expect("queues are apart");
        // 25 messages ready: with the first claim, two more receives of 10 cover them.
        let _second = claims.claim(queue, 25, 10).expect("a second claim");
        let _third = claims.claim(queue, 25, 10).expect("a third claim");
        assert!(claims.claim(queue, 25, 10).is_none());
        drop(first);
        assert!(claims.claim(queue, 25, 10).is_some());
    }

    #[test]
    fn an_ended_claim_lets_the_next_waiter_go() {
        let claims = Claims::default();
        let queue = Uuid::from_u128(1);
        let mut ended = claims.subscribe();
        let first = claims.claim(queue, 1, 1).expect("the first claim");
        assert!(claims.claim(queue, 1, 1).is_none());
        drop(first);
        assert_eq!(ended.try_recv().ok(), Some(queue));
        assert!(claims.claim(queue, 1, 1).is_some());
        assert!(claims.claim(queue, 0, 1).is_none(), "nothing ready");
    }
}
