//! The state a restored backup starts a new cluster with: nothing of it may wait on the clients
//! of the cluster it came from, nor on its nodes.

use crate::placement::NodeId;
use crate::queue::State;

use super::redrive::LeaseEnd;
use super::Engine;

impl Engine {
    /// Ends every parked receive with nothing delivered, then every lease as if its consumer had
    /// released it (the message is visible again, or moves on as its redrive policy says):
    /// their receipts and waits belong to the clients of the cluster the state was copied
    /// from, which will never settle them here. Returns how many leases it ended. The changes
    /// and wait answers are dropped: the caller writes every row afresh ([`Engine::export_rows`]).
    pub fn end_leases_and_waits(&mut self) -> usize {
        let leased: Vec<(u32, u64)> = self
            .queues
            .iter()
            .flat_map(|(&qid, q)| {
                q.messages
                    .iter()
                    .filter(|(_, m)| m.state == State::Leased)
                    .map(move |(&seq, _)| (qid, seq))
            })
            .collect();
        let queues: Vec<u32> = self.queues.keys().copied().collect();
        for qid in queues {
            self.end_waits_on(qid);
        }
        for &(qid, seq) in &leased {
            self.settle(qid, seq, LeaseEnd::Released { delay_ms: 0 });
        }
        debug_assert!(
            self.context.changes.payloads.is_empty(),
            "a lease or wait that ends keeps every payload, which the caller copies as they are"
        );
        self.context.changes = Default::default();
        self.context.answers.clear();
        debug_assert!(self.parked.is_empty(), "every parked receive was ended");
        leased.len()
    }

    /// Lays the placement (group 1's; empty elsewhere) on node `id` at `addr` alone, as the
    /// one node of the cluster restored there ([`crate::placement::Placement::restart_on`]). Its rows are written
    /// afresh with the rest ([`Engine::export_rows`]).
    pub fn restart_placement_on(&mut self, id: NodeId, addr: &str) {
        self.placement.restart_on(id, addr);
    }
}
