//! Parked receives: a receive that may wait and finds nothing parks in its queue; entries that
//! make messages deliverable there serve the parked receives in the order they parked, in the
//! same entry; a deadline, an end-of-wait or the queue's deletion ends a wait with nothing.
//! Every parked receive gets exactly one [`WaitAnswer`].

use uuid::Uuid;

use crate::command::{Outcome, WaitAnswer};
use crate::context::Timer;
use crate::error::{EngineError, Result};
use crate::queue::{Parked, ReceiveRequest};
use crate::rows::RowKey;
use crate::validate;

use super::Engine;

impl Engine {
    /// A receive that parks when it finds nothing: its options (`max_messages`,
    /// `lease_seconds`) checked, then [`Engine::receive_or_park`].
    pub(super) fn receive_wait(
        &mut self,
        account: &str,
        queue: &str,
        (max_messages, lease_seconds): (Option<i64>, Option<i64>),
        wait_seconds: i64,
        waiter: Uuid,
    ) -> Result<Outcome> {
        let request = self.receive_request(account, queue, max_messages, lease_seconds)?;
        self.receive_or_park(request, wait_seconds, waiter)
    }

    /// Receives what is deliverable now or, finding nothing, parks the receive as `waiter`
    /// until `wait_seconds` from now.
    pub(super) fn receive_or_park(
        &mut self,
        request: ReceiveRequest,
        wait_seconds: i64,
        waiter: Uuid,
    ) -> Result<Outcome> {
        let wait = validate::wait_seconds(wait_seconds)?;
        if self.parked.contains_key(&waiter) {
            return Err(EngineError::invalid("waiter", "is already waiting"));
        }
        let deliveries = self.lease(&request, None);
        if !deliveries.is_empty() {
            return Ok(Outcome::Received(deliveries));
        }
        let order = self.alloc_seq();
        let parked = Parked {
            waiter,
            request,
            deadline: self.context.now.saturating_add(u64::from(wait) * 1000),
        };
        self.park(order, parked);
        Ok(Outcome::Parked)
    }

    /// Adds a parked receive (from a receive, or read back from its row).
    pub(super) fn park(&mut self, order: u64, parked: Parked) {
        let qid = parked.request.qid;
        let Some(q) = self.queues.get_mut(&qid) else {
            return;
        };
        let taken = q.waiters.insert(order, parked);
        debug_assert!(
            taken.is_none(),
            "a parked receive's place {order} is its own"
        );
        let twice = self.parked.insert(parked.waiter, (qid, order));
        debug_assert!(
            twice.is_none(),
            "a waiter is parked once: a second receive under its id is refused"
        );
        let timer = Timer::Wait { qid, order };
        let armed = self.context.timers.insert((parked.deadline, timer));
        debug_assert!(armed, "a parked receive's deadline is its own timer");
        self.context.changes.rows.push(RowKey::Waiter(qid, order));
    }

    /// Takes the receive parked in `qid` as `order` out of the queue, with its timer.
    fn unpark(&mut self, qid: u32, order: u64) -> Option<Parked> {
        let parked = self.queues.get_mut(&qid)?.waiters.remove(&order)?;
        self.parked.remove(&parked.waiter);
        let timer = Timer::Wait { qid, order };
        self.context.timers.remove(&(parked.deadline, timer));
        self.context.changes.rows.push(RowKey::Waiter(qid, order));
        Some(parked)
    }

    /// Ends a wait with nothing delivered, if it is still parked.
    pub(super) fn end_wait(&mut self, qid: u32, order: u64) {
        if let Some(parked) = self.unpark(qid, order) {
            self.context.answers.push(WaitAnswer {
                waiter: parked.waiter,
                deliveries: Vec::new(),
            });
        }
    }

    /// Ends the wait of `waiter`, whichever queue it is parked on.
    pub(super) fn end_wait_of(&mut self, waiter: Uuid) -> Outcome {
        if let Some(&(qid, order)) = self.parked.get(&waiter) {
            self.end_wait(qid, order);
        }
        Outcome::WaitEnded
    }

    /// Ends every wait parked on `qid` (before the queue is deleted).
    pub(super) fn end_waits_on(&mut self, qid: u32) {
        let orders: Vec<u64> = self
            .queues
            .get(&qid)
            .map(|q| q.waiters.keys().copied().collect())
            .unwrap_or_default();
        for order in orders {
            self.end_wait(qid, order);
        }
    }

    /// Serves the parked receives of every queue that gained a deliverable message since they
    /// were last served, oldest first, until each queue has nothing more to deliver or no receive
    /// parked. A delivery can make messages deliverable again (a zero-length lease, a redrive),
    /// so this repeats until no queue is left woken.
    pub(super) fn serve_waiters(&mut self) {
        loop {
            let mut woken = std::mem::take(&mut self.context.woken);
            if woken.is_empty() || self.parked.is_empty() {
                return;
            }
            woken.sort_unstable();
            woken.dedup();
            for qid in woken {
                self.serve_queue(qid);
            }
        }
    }

    fn serve_queue(&mut self, qid: u32) {
        loop {
            let Some(q) = self.queues.get(&qid) else {
                return;
            };
            if q.ready_len() == 0 {
                return;
            }
            let Some(&order) = q.waiters.keys().next() else {
                return;
            };
            let Some(parked) = self.unpark(qid, order) else {
                return;
            };
            let deliveries = self.lease(&parked.request, None);
            self.context.answers.push(WaitAnswer {
                waiter: parked.waiter,
                deliveries,
            });
        }
    }
}
