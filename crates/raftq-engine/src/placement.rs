//! The cluster's placement, applied in its metadata group: the nodes, the Raft groups that hold
//! the queues (their members, whether they were formed, the last leader seen, the messages they
//! reported) and the directory of queues, each in one group. A deterministic machine like the
//! engine: [`Placement::apply`] takes a [`PlacementCommand`] and the leader's clock reading,
//! and returns its outcome with the rows it changed.
//!
//! ## The metadata group
//! Group [`METADATA_GROUP`] (1) is the cluster's own: every node is a member, it is formed with
//! the cluster, and it applies this placement. It takes queues like the data groups (2 and up,
//! laid by `Bootstrap`), and a cluster that ran as one group before it was bootstrapped keeps
//! every queue it had there: the bootstrap adopts them into the directory as they are.
//!
//! ## Choosing a new queue's group
//! A queue goes to the group it is given, or else to the formed group with the fewest queues
//! in the directory, then the fewest messages last reported, then the lowest id. The choice is made
//! in the apply, from the replicated state, so concurrent creations spread over the groups in
//! the order they commit.
//!
//! ## Creating a queue in two steps
//! A name is first *reserved* in the directory (`Reserve`, with the queue's id), then the queue
//! is created in its group, then the reservation is confirmed (`Confirm`) or, when the group
//! refused the creation, released (`Release`). A second `Reserve` of a name reserved or
//! confirmed answers the entry already there, so a retried creation lands in the same group
//! with the same id.
//!
//! A deletion retires the entry first (`Retire`: the state `Deleting`), deletes the queue in
//! its group, then deregisters the entry (`Deregister`), or confirms it again (`Confirm`) when
//! the group refused the deletion. A `Reserve` of a retired name answers the retired entry,
//! whose creator finishes the deletion before it reserves the name again.
//!
//! ## Leaders
//! [`Placement::leader_move`] (in `leaders`) tells a node leading more than its share of the
//! groups which one to hand over, and to whom.
//!
//! ## Replicas
//! A group's `members` are its Raft voters as its leader last recorded them (`SetMembers`); its
//! *target* is the members it should have (`SetTarget`; none set: its members).
//! [`Placement::replica_targets`] (in `replicas`) lays the data groups' replicas over the
//! active nodes, evenly, moving as few as it can: what the metadata group's leader sets as
//! targets after a node was added or began to leave, and what each group's leader then makes
//! its voters, one change at a time.
//!
//! ## Rows
//! Every entry is one row under tags 11 to 15 of the state's key space ([`PlacementKey`]); the
//! counts of queues per group are derived from the directory when the rows are read back.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A node of the cluster, by id.
pub type NodeId = u64;
/// A Raft group of the cluster, by id.
pub type GroupNumber = u32;

/// The most groups a cluster may have, the metadata group among them.
pub const MAX_GROUPS: u32 = 128;

/// The group that applies the placement, with every node a member.
pub const METADATA_GROUP: GroupNumber = 1;

/// What the cluster knows of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEntry {
    /// Its peer address.
    pub addr: String,
    pub state: NodeState,
}

/// Whether a node takes its share of the groups' leaders and replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeState {
    Active,
    /// Leads no group until it restarts (a new `boot_id`) or is undrained.
    Draining {
        boot_id: u64,
    },
    /// Its replicas move to other nodes, then it leaves the cluster.
    Leaving,
}

/// What the cluster knows of a group (the metadata group or a data group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupEntry {
    /// The nodes holding a replica: its voters, as its leader last recorded them.
    pub members: BTreeSet<NodeId>,
    /// Whether its former ([`GroupEntry::former`]) initialized it (it is never initialized
    /// again).
    pub formed: bool,
    /// The node last seen leading it.
    pub leader_hint: Option<NodeId>,
    /// The messages it last reported holding.
    pub messages: u64,
}

impl GroupEntry {
    /// The member that forms group `number`: the members taken in turn by group number, so
    /// that the groups' first leaders (a group's former stands first) are spread over the
    /// nodes from the start rather than all on the lowest id.
    pub fn former(&self, number: GroupNumber) -> Option<NodeId> {
        let turn = usize::try_from(number).ok()? % self.members.len().max(1);
        self.members.iter().nth(turn).copied()
    }
}

/// A queue in the directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    pub account: String,
    pub name: String,
    pub id: Uuid,
    pub group: GroupNumber,
    pub state: QueueEntryState,
}

/// Where a queue is between its creation and its deletion in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueEntryState {
    /// Reserved at this time (milliseconds), its creation in the group not yet confirmed.
    Creating {
        at: u64,
    },
    Ready,
    /// Its deletion began at this time (milliseconds): the queue may still be in its group, and
    /// the next creation of its name finishes the deletion before it reserves the name anew.
    Deleting {
        at: u64,
    },
}

/// A change to the placement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlacementCommand {
    /// Records the first nodes and lays out `groups` groups: the metadata group (1) on every
    /// node, and the data groups 2 to `groups` of `replicas` members each, round robin: the
    /// nodes in id order, repeated, dealt out `replicas` at a time, data group `g` taking the
    /// `(g - 1)`-th deal (fewer members when there are fewer nodes), so that no node holds two
    /// replicas more than another.
    Bootstrap {
        groups: u32,
        replicas: u32,
        nodes: BTreeMap<NodeId, String>,
    },
    /// Reserves `name` in `account` for a new queue `id`, in `group` or the group chosen.
    Reserve {
        account: String,
        name: String,
        id: Uuid,
        group: Option<GroupNumber>,
    },
    /// The queue `id` is in its group: it was created there, or its group refused its deletion.
    Confirm { id: Uuid },
    /// The group refused to create the queue `id`: its reservation goes.
    Release { id: Uuid },
    /// The queue `id` was deleted from its group.
    Deregister { id: Uuid },
    /// Group `group` holds `messages` messages.
    ReportLoad { group: GroupNumber, messages: u64 },
    /// Group `group`'s replicas are now on `members`.
    SetMembers {
        group: GroupNumber,
        members: BTreeSet<NodeId>,
    },
    /// Group `group` was initialized.
    GroupFormed { group: GroupNumber },
    /// Node `node` was seen leading group `group`.
    LeaderSeen { group: GroupNumber, node: NodeId },
    /// Adds node `id` at `addr` (or records its new address); a node that was leaving becomes
    /// active again.
    AddNode { id: NodeId, addr: String },
    /// Node `id` is to leave the cluster: its replicas move to the other nodes.
    RemoveNode { id: NodeId },
    /// Node `id`, started as `boot_id`, is to lead no group.
    Drain { id: NodeId, boot_id: u64 },
    /// Node `id` takes its share of leaders again.
    Undrain { id: NodeId },
    /// The deletion of queue `id` begins: its entry is kept, marked, until `Deregister`.
    Retire { id: Uuid },
    /// Group `group`'s replicas are to move onto `members` (see the module's Replicas).
    SetTarget {
        group: GroupNumber,
        members: BTreeSet<NodeId>,
    },
}

/// What a placement command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlacementOutcome {
    /// The entry of the queue reserved: the new one, or the one the name already had
    /// (`existing`).
    Reserved { entry: QueueEntry, existing: bool },
    /// The change is made (or was made already).
    Done,
}

/// Why a placement command changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum PlacementError {
    #[error("the placement is bootstrapped already")]
    AlreadyBootstrapped,
    #[error("the placement is not bootstrapped yet")]
    NotBootstrapped,
    #[error("groups must be 1 to {MAX_GROUPS}, replicas at least 1 and nodes at least one, not {groups} groups of {replicas} over {nodes} nodes")]
    BadLayout {
        groups: u32,
        replicas: u32,
        nodes: usize,
    },
    #[error("no group {0}")]
    UnknownGroup(GroupNumber),
    #[error("no node {0}")]
    UnknownNode(NodeId),
    #[error("no queue {0} in the directory")]
    UnknownQueue(Uuid),
    #[error("queue {0} is confirmed: only a reservation can be released")]
    NotReserved(Uuid),
    #[error("a group needs at least one member")]
    NoMembers,
    #[error("queue id {0} is another queue's")]
    IdInUse(Uuid),
    #[error("queue {0} was not reserved in the directory: create it again")]
    Unreserved(Uuid),
}

/// A row of the placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PlacementKey {
    /// The directory's epoch.
    Meta,
    Node(NodeId),
    Group(GroupNumber),
    Queue(Uuid),
    /// The members a group should have.
    Target(GroupNumber),
}

impl PlacementKey {
    /// The first byte of each kind of row's key.
    const TAG_META: u8 = 11;
    const TAG_NODE: u8 = 12;
    const TAG_GROUP: u8 = 13;
    const TAG_QUEUE: u8 = 14;
    const TAG_TARGET: u8 = 15;

    /// The row's key: its tag, then the id big-endian, so rows sort by kind and id.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            PlacementKey::Meta => vec![Self::TAG_META],
            PlacementKey::Node(id) => [&[Self::TAG_NODE][..], &id.to_be_bytes()].concat(),
            PlacementKey::Group(id) => [&[Self::TAG_GROUP][..], &id.to_be_bytes()].concat(),
            PlacementKey::Queue(id) => [&[Self::TAG_QUEUE][..], id.as_bytes()].concat(),
            PlacementKey::Target(id) => [&[Self::TAG_TARGET][..], &id.to_be_bytes()].concat(),
        }
    }

    /// The key `bytes` encode; `None` for a row that is not the placement's.
    pub fn decode(bytes: &[u8]) -> Option<PlacementKey> {
        let (tag, rest) = bytes.split_first()?;
        match *tag {
            Self::TAG_META if rest.is_empty() => Some(PlacementKey::Meta),
            Self::TAG_NODE => rest
                .try_into()
                .ok()
                .map(u64::from_be_bytes)
                .map(PlacementKey::Node),
            Self::TAG_GROUP | Self::TAG_TARGET => {
                let group = u32::from_be_bytes(rest.try_into().ok()?);
                Some(match *tag {
                    Self::TAG_GROUP => PlacementKey::Group(group),
                    _ => PlacementKey::Target(group),
                })
            }
            Self::TAG_QUEUE => Uuid::from_slice(rest).ok().map(PlacementKey::Queue),
            _ => None,
        }
    }
}

/// A placement row that does not read back.
#[derive(Debug, thiserror::Error)]
#[error("placement row {key:?}: {reason}")]
pub struct PlacementRowError {
    pub key: Vec<u8>,
    pub reason: String,
}

/// The cluster's placement (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    nodes: BTreeMap<NodeId, NodeEntry>,
    groups: BTreeMap<GroupNumber, GroupEntry>,
    /// The members each group should have, where a target was set.
    targets: BTreeMap<GroupNumber, BTreeSet<NodeId>>,
    /// Queues by account and name.
    directory: BTreeMap<(String, String), QueueEntry>,
    /// The directory's key of each queue id.
    ids: BTreeMap<Uuid, (String, String)>,
    /// Queues in the directory per group (none: no entry).
    queues: BTreeMap<GroupNumber, u64>,
    /// Counts the directory's changes: a route read at one epoch is current while it holds.
    epoch: u64,
}

impl Placement {
    /// Applies `command` at the leader's time `now` (milliseconds); returns its outcome and the
    /// rows it changed, none when it was refused.
    pub fn apply(
        &mut self,
        now: u64,
        command: PlacementCommand,
    ) -> (Result<PlacementOutcome, PlacementError>, Vec<PlacementKey>) {
        let mut changed = Vec::new();
        let outcome = self.apply_changing(now, command, &mut changed);
        debug_assert!(
            outcome.is_ok() || changed.is_empty(),
            "a refused command changes nothing"
        );
        (outcome, changed)
    }

    fn apply_changing(
        &mut self,
        now: u64,
        command: PlacementCommand,
        changed: &mut Vec<PlacementKey>,
    ) -> Result<PlacementOutcome, PlacementError> {
        use PlacementCommand as C;
        match command {
            C::Bootstrap {
                groups,
                replicas,
                nodes,
            } => self.bootstrap(groups, replicas, nodes, changed),
            C::Reserve {
                account,
                name,
                id,
                group,
            } => self.reserve(now, account, name, id, group, changed),
            C::Confirm { id } => self.confirm(id, changed),
            C::Release { id } => self.release(id, false, changed),
            C::Deregister { id } => self.release(id, true, changed),
            C::Retire { id } => {
                let entry = self.queue_mut(id)?;
                if !matches!(entry.state, QueueEntryState::Deleting { .. }) {
                    entry.state = QueueEntryState::Deleting { at: now };
                    self.directory_changed(PlacementKey::Queue(id), changed);
                }
                Ok(PlacementOutcome::Done)
            }
            C::ReportLoad { group, messages } => {
                self.group_mut(group, changed)?.messages = messages;
                Ok(PlacementOutcome::Done)
            }
            C::SetMembers { group, members } => self.set_members(group, members, false, changed),
            C::SetTarget { group, members } => self.set_members(group, members, true, changed),
            C::GroupFormed { group } => {
                self.group_mut(group, changed)?.formed = true;
                Ok(PlacementOutcome::Done)
            }
            C::LeaderSeen { group, node } => {
                self.group_mut(group, changed)?.leader_hint = Some(node);
                Ok(PlacementOutcome::Done)
            }
            C::AddNode { id, addr } => {
                self.bootstrapped()?;
                let state = match self.nodes.get(&id).map(|n| n.state) {
                    None | Some(NodeState::Leaving) => NodeState::Active,
                    Some(state) => state,
                };
                self.nodes.insert(id, NodeEntry { addr, state });
                changed.push(PlacementKey::Node(id));
                Ok(PlacementOutcome::Done)
            }
            C::RemoveNode { id } => self.set_node_state(id, NodeState::Leaving, changed),
            C::Drain { id, boot_id } => {
                self.set_node_state(id, NodeState::Draining { boot_id }, changed)
            }
            C::Undrain { id } => self.set_node_state(id, NodeState::Active, changed),
        }
    }

    fn bootstrap(
        &mut self,
        groups: u32,
        replicas: u32,
        nodes: BTreeMap<NodeId, String>,
        changed: &mut Vec<PlacementKey>,
    ) -> Result<PlacementOutcome, PlacementError> {
        if !self.groups.is_empty() {
            return Err(PlacementError::AlreadyBootstrapped);
        }
        if !(1..=MAX_GROUPS).contains(&groups) || replicas == 0 || nodes.is_empty() {
            return Err(PlacementError::BadLayout {
                groups,
                replicas,
                nodes: nodes.len(),
            });
        }
        let ids: Vec<NodeId> = nodes.keys().copied().collect();
        let per_group = (replicas as usize).min(ids.len());
        for group in METADATA_GROUP..=groups {
            let members = match group {
                METADATA_GROUP => ids.iter().copied().collect(),
                _ => {
                    let deal = (group - METADATA_GROUP - 1) as usize;
                    let first = deal * per_group % ids.len();
                    (0..per_group)
                        .map(|k| ids[(first + k) % ids.len()])
                        .collect()
                }
            };
            let entry = GroupEntry {
                members,
                formed: group == METADATA_GROUP,
                leader_hint: None,
                messages: 0,
            };
            self.groups.insert(group, entry);
            changed.push(PlacementKey::Group(group));
        }
        for (id, addr) in nodes {
            let state = NodeState::Active;
            self.nodes.insert(id, NodeEntry { addr, state });
            changed.push(PlacementKey::Node(id));
        }
        Ok(PlacementOutcome::Done)
    }

    fn reserve(
        &mut self,
        now: u64,
        account: String,
        name: String,
        id: Uuid,
        group: Option<GroupNumber>,
        changed: &mut Vec<PlacementKey>,
    ) -> Result<PlacementOutcome, PlacementError> {
        self.bootstrapped()?;
        let key = (account, name);
        if let Some(entry) = self.directory.get(&key) {
            let entry = entry.clone();
            return Ok(PlacementOutcome::Reserved {
                entry,
                existing: true,
            });
        }
        if self.ids.contains_key(&id) {
            return Err(PlacementError::IdInUse(id));
        }
        let group = match group {
            Some(group) if self.groups.contains_key(&group) => group,
            Some(group) => return Err(PlacementError::UnknownGroup(group)),
            None => self.least_loaded().ok_or(PlacementError::NotBootstrapped)?,
        };
        let entry = QueueEntry {
            account: key.0.clone(),
            name: key.1.clone(),
            id,
            group,
            state: QueueEntryState::Creating { at: now },
        };
        self.enter(entry.clone(), changed);
        Ok(PlacementOutcome::Reserved {
            entry,
            existing: false,
        })
    }

    fn confirm(
        &mut self,
        id: Uuid,
        changed: &mut Vec<PlacementKey>,
    ) -> Result<PlacementOutcome, PlacementError> {
        let entry = self.queue_mut(id)?;
        if entry.state == QueueEntryState::Ready {
            return Ok(PlacementOutcome::Done);
        }
        entry.state = QueueEntryState::Ready;
        self.directory_changed(PlacementKey::Queue(id), changed);
        Ok(PlacementOutcome::Done)
    }

    /// Takes queue `id` out of the directory: a reservation only, unless confirmed and retired
    /// ones go too (`confirmed`: a deregistration).
    fn release(
        &mut self,
        id: Uuid,
        confirmed: bool,
        changed: &mut Vec<PlacementKey>,
    ) -> Result<PlacementOutcome, PlacementError> {
        let reserved = matches!(self.queue_mut(id)?.state, QueueEntryState::Creating { .. });
        if !reserved && !confirmed {
            return Err(PlacementError::NotReserved(id));
        }
        self.remove_queue(id, changed);
        Ok(PlacementOutcome::Done)
    }

    /// Enters `queues` (account, name, id), which the metadata group held before the
    /// placement was bootstrapped, into the directory as its queues, confirmed. Returns the
    /// rows changed.
    pub fn adopt(
        &mut self,
        queues: impl IntoIterator<Item = (String, String, Uuid)>,
    ) -> Vec<PlacementKey> {
        let mut changed = Vec::new();
        for (account, name, id) in queues {
            let entry = QueueEntry {
                account,
                name,
                id,
                group: METADATA_GROUP,
                state: QueueEntryState::Ready,
            };
            self.enter(entry, &mut changed);
        }
        changed
    }

    /// Enters `entry` into the directory, counted in its group. Its name and id are new: a
    /// reservation checks them, and the engine adopts only its own queues, right after the
    /// bootstrap.
    fn enter(&mut self, entry: QueueEntry, changed: &mut Vec<PlacementKey>) {
        let key = (entry.account.clone(), entry.name.clone());
        debug_assert!(
            !self.directory.contains_key(&key) && !self.ids.contains_key(&entry.id),
            "a queue enters the directory once, under a name and id of its own"
        );
        let id = entry.id;
        *self.queues.entry(entry.group).or_default() += 1;
        self.ids.insert(id, key.clone());
        self.directory.insert(key, entry);
        self.directory_changed(PlacementKey::Queue(id), changed);
    }

    /// The group a new queue goes to: of the formed groups (a group not formed yet cannot
    /// create it), the fewest queues, then the fewest messages, then the lowest id.
    fn least_loaded(&self) -> Option<GroupNumber> {
        self.groups
            .iter()
            .filter(|(_, entry)| entry.formed)
            .min_by_key(|(group, entry)| {
                let queues = self.queues.get(group).copied().unwrap_or(0);
                (queues, entry.messages, **group)
            })
            .map(|(group, _)| *group)
    }

    /// Whether the metadata group may create the queue `id`: any queue before the bootstrap,
    /// and after it only one reserved in the directory for this group (a creation that raced
    /// the bootstrap went around the directory, and is made again through it).
    pub fn admits(&self, id: Uuid) -> Result<(), PlacementError> {
        let reserved_here = self
            .queue_by_id(id)
            .is_some_and(|entry| entry.group == METADATA_GROUP);
        match self.groups.is_empty() || reserved_here {
            true => Ok(()),
            false => Err(PlacementError::Unreserved(id)),
        }
    }

    /// Records `members` as group `group`'s members, or as its target (`target`).
    fn set_members(
        &mut self,
        group: GroupNumber,
        members: BTreeSet<NodeId>,
        target: bool,
        changed: &mut Vec<PlacementKey>,
    ) -> Result<PlacementOutcome, PlacementError> {
        self.known_nodes(&members)?;
        if !target {
            self.group_mut(group, changed)?.members = members;
            return Ok(PlacementOutcome::Done);
        }
        if !self.groups.contains_key(&group) {
            return Err(PlacementError::UnknownGroup(group));
        }
        self.targets.insert(group, members);
        changed.push(PlacementKey::Target(group));
        Ok(PlacementOutcome::Done)
    }

    /// Refuses an empty set of members, or one naming a node the placement does not know.
    fn known_nodes(&self, members: &BTreeSet<NodeId>) -> Result<(), PlacementError> {
        if members.is_empty() {
            return Err(PlacementError::NoMembers);
        }
        match members.iter().find(|m| !self.nodes.contains_key(m)) {
            Some(unknown) => Err(PlacementError::UnknownNode(*unknown)),
            None => Ok(()),
        }
    }

    fn bootstrapped(&self) -> Result<(), PlacementError> {
        match self.groups.is_empty() {
            true => Err(PlacementError::NotBootstrapped),
            false => Ok(()),
        }
    }

    fn queue_mut(&mut self, id: Uuid) -> Result<&mut QueueEntry, PlacementError> {
        let key = self.ids.get(&id).ok_or(PlacementError::UnknownQueue(id))?;
        self.directory
            .get_mut(key)
            .ok_or(PlacementError::UnknownQueue(id))
    }

    fn group_mut(
        &mut self,
        group: GroupNumber,
        changed: &mut Vec<PlacementKey>,
    ) -> Result<&mut GroupEntry, PlacementError> {
        let entry = self
            .groups
            .get_mut(&group)
            .ok_or(PlacementError::UnknownGroup(group))?;
        changed.push(PlacementKey::Group(group));
        Ok(entry)
    }

    fn set_node_state(
        &mut self,
        id: NodeId,
        state: NodeState,
        changed: &mut Vec<PlacementKey>,
    ) -> Result<PlacementOutcome, PlacementError> {
        self.bootstrapped()?;
        let node = self
            .nodes
            .get_mut(&id)
            .ok_or(PlacementError::UnknownNode(id))?;
        node.state = state;
        changed.push(PlacementKey::Node(id));
        Ok(PlacementOutcome::Done)
    }

    fn remove_queue(&mut self, id: Uuid, changed: &mut Vec<PlacementKey>) {
        let Some(key) = self.ids.remove(&id) else {
            return;
        };
        if let Some(entry) = self.directory.remove(&key) {
            let count = self.queues.get(&entry.group).copied().unwrap_or(0);
            debug_assert!(
                count > 0,
                "a queue in the directory is counted in its group"
            );
            match count {
                0 | 1 => self.queues.remove(&entry.group),
                _ => self.queues.insert(entry.group, count - 1),
            };
        }
        self.directory_changed(PlacementKey::Queue(id), changed);
    }

    fn directory_changed(&mut self, key: PlacementKey, changed: &mut Vec<PlacementKey>) {
        self.epoch += 1;
        changed.push(key);
        changed.push(PlacementKey::Meta);
    }

    /// The queue `name` of `account`, if the directory has it.
    pub fn queue(&self, account: &str, name: &str) -> Option<&QueueEntry> {
        self.directory.get(&(account.to_string(), name.to_string()))
    }

    /// The queue with id `id`, if the directory has it.
    pub fn queue_by_id(&self, id: Uuid) -> Option<&QueueEntry> {
        self.ids.get(&id).and_then(|key| self.directory.get(key))
    }

    /// Every queue, by account and name.
    pub fn queues(&self) -> impl Iterator<Item = &QueueEntry> {
        self.directory.values()
    }

    /// Every node's peer address.
    pub fn addresses(&self) -> BTreeMap<NodeId, String> {
        let nodes = self.nodes.iter();
        nodes.map(|(id, node)| (*id, node.addr.clone())).collect()
    }

    /// The queues in the directory of group `group`.
    pub fn queue_count(&self, group: GroupNumber) -> u64 {
        self.queues.get(&group).copied().unwrap_or(0)
    }

    pub fn nodes(&self) -> &BTreeMap<NodeId, NodeEntry> {
        &self.nodes
    }

    pub fn groups(&self) -> &BTreeMap<GroupNumber, GroupEntry> {
        &self.groups
    }

    /// The members group `group` should have: its target, or else its members; `None` for a
    /// group the placement does not know.
    pub fn target(&self, group: GroupNumber) -> Option<&BTreeSet<NodeId>> {
        let entry = self.groups.get(&group)?;
        Some(self.targets.get(&group).unwrap_or(&entry.members))
    }

    /// The count of the directory's changes so far.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The value of row `key` now; `None` when the row is gone.
    pub fn row_value(&self, key: &PlacementKey) -> Option<Vec<u8>> {
        let encoded = match key {
            // No row stands for epoch 0, as for every other default.
            PlacementKey::Meta if self.epoch == 0 => return None,
            PlacementKey::Meta => postcard::to_allocvec(&self.epoch),
            PlacementKey::Node(id) => postcard::to_allocvec(self.nodes.get(id)?),
            PlacementKey::Group(id) => postcard::to_allocvec(self.groups.get(id)?),
            PlacementKey::Queue(id) => postcard::to_allocvec(self.queue_by_id(*id)?),
            PlacementKey::Target(id) => postcard::to_allocvec(self.targets.get(id)?),
        };
        // A value of the types above always encodes; an empty row would not read back.
        Some(encoded.unwrap_or_default())
    }

    /// The placement of a cluster restored on node `id` alone (at `addr`), from this one of the
    /// cluster a backup came from: `id` is the one node, active, and every group's one member
    /// and last leader seen; targets are gone. The directory and the groups stay as they are.
    /// An empty placement (a cluster of one group) stays empty.
    pub fn restart_on(&mut self, id: NodeId, addr: &str) {
        if self.nodes.is_empty() {
            return;
        }
        self.nodes = BTreeMap::from([(
            id,
            NodeEntry {
                addr: addr.to_string(),
                state: NodeState::Active,
            },
        )]);
        for group in self.groups.values_mut() {
            group.members = BTreeSet::from([id]);
            group.leader_hint = Some(id);
        }
        self.targets.clear();
    }

    /// Every row, in key order.
    pub fn export_rows(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let keys = std::iter::once(PlacementKey::Meta)
            .chain(self.nodes.keys().map(|id| PlacementKey::Node(*id)))
            .chain(self.groups.keys().map(|id| PlacementKey::Group(*id)))
            .chain(self.ids.keys().map(|id| PlacementKey::Queue(*id)))
            .chain(self.targets.keys().map(|id| PlacementKey::Target(*id)));
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = keys
            .filter_map(|key| Some((key.encode(), self.row_value(&key)?)))
            .collect();
        rows.sort();
        rows
    }

    /// The placement `rows` hold; rows of other kinds are passed over.
    pub fn restore(
        rows: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<Placement, PlacementRowError> {
        let mut placement = Placement::default();
        for (key, value) in rows {
            let Some(decoded) = PlacementKey::decode(&key) else {
                continue;
            };
            let unreadable = |e: postcard::Error| PlacementRowError {
                key: key.clone(),
                reason: e.to_string(),
            };
            match decoded {
                PlacementKey::Meta => {
                    placement.epoch = postcard::from_bytes(&value).map_err(unreadable)?
                }
                PlacementKey::Node(id) => {
                    let entry = postcard::from_bytes(&value).map_err(unreadable)?;
                    placement.nodes.insert(id, entry);
                }
                PlacementKey::Group(id) => {
                    let entry = postcard::from_bytes(&value).map_err(unreadable)?;
                    placement.groups.insert(id, entry);
                }
                PlacementKey::Target(id) => {
                    let members = postcard::from_bytes(&value).map_err(unreadable)?;
                    placement.targets.insert(id, members);
                }
                PlacementKey::Queue(id) => {
                    let entry: QueueEntry = postcard::from_bytes(&value).map_err(unreadable)?;
                    let name = (entry.account.clone(), entry.name.clone());
                    *placement.queues.entry(entry.group).or_default() += 1;
                    placement.ids.insert(id, name.clone());
                    placement.directory.insert(name, entry);
                }
            }
        }
        Ok(placement)
    }
}

mod leaders;
mod replicas;
#[cfg(test)]
mod tests;
