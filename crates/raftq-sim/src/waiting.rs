//! Callers waiting for another node's answer, held outside that node's tasks: a crash drops a
//! node's tasks in an order tokio draws from process-wide task ids, and a caller woken by that
//! drop would be woken in that order. The world ends a crashed node's calls itself, oldest
//! first ([`Waiting::crashed`]).

use std::collections::BTreeMap;

use raftq_node::NodeId;
use tokio::sync::oneshot;

/// The calls whose answers have not come, by number, each with the node asked.
#[derive(Debug)]
pub(crate) struct Waiting<T> {
    calls: BTreeMap<u64, (NodeId, oneshot::Sender<T>)>,
    next: u64,
}

impl<T> Default for Waiting<T> {
    fn default() -> Self {
        Waiting {
            calls: BTreeMap::new(),
            next: 0,
        }
    }
}

impl<T> Waiting<T> {
    /// A new call to `node`: its number, and where its caller waits.
    pub(crate) fn add(&mut self, node: NodeId) -> (u64, oneshot::Receiver<T>) {
        let number = self.next;
        self.next += 1;
        let (answer, answered) = oneshot::channel();
        self.calls.insert(number, (node, answer));
        (number, answered)
    }

    /// The caller of call `number`, no longer waiting here (answered or given up).
    pub(crate) fn take(&mut self, number: u64) -> Option<oneshot::Sender<T>> {
        self.calls.remove(&number).map(|(_, answer)| answer)
    }

    /// The callers of every call to `node`, oldest first, for the world to end unanswered:
    /// dropped in this order (outside the caller's lock), they wake in call order.
    pub(crate) fn crashed(&mut self, node: NodeId) -> Vec<oneshot::Sender<T>> {
        let ended: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, (asked, _))| *asked == node)
            .map(|(number, _)| *number)
            .collect();
        ended.into_iter().filter_map(|n| self.take(n)).collect()
    }
}
