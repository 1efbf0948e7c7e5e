//! The parked receives of this node's clients: where the answer to each goes. Every node applies
//! every entry and so sees every [`WaitAnswer`](raftq_engine::WaitAnswer); only the node whose
//! client waits has the waiter registered, and only there are the delivered payloads read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;
use uuid::Uuid;

use crate::types::Delivered;

/// Waiter IDs registered on this node, each with the channel its answer goes to.
#[derive(Debug, Clone, Default)]
pub struct Waiters(Arc<Mutex<HashMap<Uuid, oneshot::Sender<Delivered>>>>);

impl Waiters {
    /// Registers `waiter` until the slot is dropped: register before proposing the receive, or
    /// an answer applied before the proposal returns finds no one.
    pub fn register(&self, waiter: Uuid) -> WaitSlot {
        let (sender, answer) = oneshot::channel();
        let earlier = self.lock().insert(waiter, sender);
        debug_assert!(
            earlier.is_none(),
            "waiter {waiter} is registered once: a second slot would take the first one's answer"
        );
        WaitSlot {
            waiter,
            answer,
            waiters: self.clone(),
        }
    }

    /// Whether any waiter is registered (an apply then keeps what its answers need).
    pub(crate) fn any(&self) -> bool {
        !self.lock().is_empty()
    }

    /// The channel of `waiter`, if it is registered here; an answer is taken once.
    pub(crate) fn take(&self, waiter: Uuid) -> Option<oneshot::Sender<Delivered>> {
        self.lock().remove(&waiter)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, oneshot::Sender<Delivered>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One registered waiter; dropping it unregisters the waiter.
#[derive(Debug)]
pub struct WaitSlot {
    waiter: Uuid,
    answer: oneshot::Receiver<Delivered>,
    waiters: Waiters,
}

impl WaitSlot {
    /// The answer to the waiter, once this node applies the entry that ended its wait: its
    /// deliveries and their payloads. `None` when the node stopped.
    pub async fn answer(&mut self) -> Option<Delivered> {
        (&mut self.answer).await.ok()
    }
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        self.waiters.take(self.waiter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_reaches_its_slot_once_and_a_dropped_slot_unregisters() {
        let waiters = Waiters::default();
        let (one, two) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut slot = waiters.register(one);
        let dropped = waiters.register(two);
        assert!(waiters.any());
        drop(dropped);
        assert!(waiters.take(two).is_none(), "a dropped slot unregisters");
        let sender = waiters.take(one).expect("registered");
        assert!(waiters.take(one).is_none(), "an answer is taken once");
        sender.send(Delivered::default()).expect("the slot listens");
        assert_eq!(slot.answer().await, Some(Delivered::default()));
        drop(slot);
        assert!(!waiters.any());
    }
}
