//! The queues' names: each queue's number by account and name, and by id.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

/// Every queue's number by account and name (in name order, for listings), and by id. An
/// account with no queue has no entry.
#[derive(Debug, Clone, Default)]
pub(super) struct QueueNames {
    by_name: BTreeMap<String, BTreeMap<String, u32>>,
    by_id: HashMap<Uuid, u32>,
}

impl QueueNames {
    /// Records queue `qid`, named `name` in `account`, with id `id`.
    pub fn insert(&mut self, account: &str, name: &str, id: Uuid, qid: u32) {
        let names = self.by_name.entry(account.to_string()).or_default();
        names.insert(name.to_string(), qid);
        self.by_id.insert(id, qid);
    }

    /// Forgets the queue named `name` in `account`, with id `id`.
    pub fn remove(&mut self, account: &str, name: &str, id: Uuid) {
        if let Some(names) = self.by_name.get_mut(account) {
            names.remove(name);
            if names.is_empty() {
                self.by_name.remove(account);
            }
        }
        self.by_id.remove(&id);
    }

    /// The queue named `name` in `account`.
    pub fn by_name(&self, account: &str, name: &str) -> Option<u32> {
        self.by_name.get(account)?.get(name).copied()
    }

    /// The queue with id `id`.
    pub fn by_id(&self, id: Uuid) -> Option<u32> {
        self.by_id.get(&id).copied()
    }

    /// The queues of `account`, by name (none: no queue).
    pub fn of(&self, account: &str) -> Option<&BTreeMap<String, u32>> {
        self.by_name.get(account)
    }

    /// Every account with its queues by name, in account order.
    pub fn accounts(&self) -> impl Iterator<Item = (&String, &BTreeMap<String, u32>)> {
        self.by_name.iter()
    }
}
