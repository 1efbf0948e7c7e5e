//! One queue's messages and the indexes that keep every operation's cost independent of queue
//! depth and group count: messages by sequence number, the ready set (the levels of a standard
//! queue's tenants with visible messages in fair order, or the heads of unblocked groups of a
//! FIFO queue), FIFO groups, pending redrives, scheduled messages, counters per priority level,
//! deduplication records in window order, and the queue's entries in the global timer set.
//!
//! Every mutation goes through [`Queue::insert`], [`Queue::remove`] or [`Queue::set_state`], which
//! keep counters, timers, groups and the ready set consistent and record the rows they dirty.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use foldhash::HashMap;
use uuid::Uuid;

use crate::attempts::ReceiveAttempts;
use crate::context::{prune_due, ApplyContext, Timer};
use crate::error::EngineError;
use crate::interned::Interned;
use crate::model::{
    limits, DeduplicationScope, LevelStats, Millis, QueueConfig, QueueName, QueueType,
};
use crate::move_task::MoveTask;
use crate::rows::{AttemptLease, RowKey};

/// The group number of a message not in a FIFO group or tenant: before [`Queue::insert`] gives it
/// one, and in a reclaimed set when it had no group ID.
pub(crate) const NO_GROUP: u32 = u32::MAX;

/// A message's state; `until` of [`Msg`] is the delay end or lease end where one applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    Visible = 0,
    Delayed = 1,
    Leased = 2,
    Pending = 3,
}

impl State {
    pub(crate) fn from_u8(v: u8) -> Option<State> {
        Some(match v {
            0 => State::Visible,
            1 => State::Delayed,
            2 => State::Leased,
            3 => State::Pending,
            _ => return None,
        })
    }

    fn timed(self) -> bool {
        matches!(self, State::Delayed | State::Leased)
    }
}

/// A message's mutable metadata; its immutable payload lives in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Msg {
    /// Storage key of the payload: the sequence number the message was first sent with.
    pub storage_key: u64,
    /// When it entered this queue; retention counts from here.
    pub enqueued_at: Millis,
    /// Delay end or lease end.
    pub until: Millis,
    /// 0 until first leased.
    pub first_received_at: Millis,
    pub receive_count: u32,
    pub size: u32,
    pub group: u32,
    pub state: State,
    /// 0-9, higher first (standard queues; 0 on FIFO queues).
    pub priority: u8,
    /// The queue it was moved from by redrive; `enqueued_at` is then the move time.
    pub moved: Option<Box<QueueName>>,
}

impl Msg {
    /// A message moved into a queue: visible, never received, entered now (its retention counts
    /// from its arrival), with `moved` the dead-letter source it records (redrive only).
    pub(crate) fn arriving(
        storage_key: u64,
        now: Millis,
        size: u32,
        priority: u8,
        moved: Option<QueueName>,
    ) -> Msg {
        Msg {
            storage_key,
            enqueued_at: now,
            until: 0,
            first_received_at: 0,
            receive_count: 0,
            size,
            group: NO_GROUP,
            state: State::Visible,
            priority,
            moved: moved.map(Box::new),
        }
    }
}

/// A priority level's rank in the fair order: the highest priority ranks first.
fn rank(priority: u8) -> u8 {
    debug_assert!(i64::from(priority) <= limits::PRIORITY_MAX);
    limits::PRIORITY_MAX as u8 - priority
}

/// A receive's queue and options, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReceiveRequest {
    pub qid: u32,
    pub max_messages: u32,
    /// The lease it asked for; the queue's own when `None`, as of the delivery.
    pub lease_seconds: Option<u32>,
}

/// A receive parked in its queue until its deadline or until messages are delivered to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parked {
    pub waiter: Uuid,
    pub request: ReceiveRequest,
    pub deadline: Millis,
}

#[derive(Debug, Clone, Default)]
struct Group {
    /// Sequence numbers in order, each with its message's state (so the head's readiness needs
    /// no lookup); messages join at the back and mostly leave near the front.
    msgs: VecDeque<(u64, State)>,
    leased: u32,
    /// The head sequence number while the group sits in the ready set.
    ready_key: Option<u64>,
}

impl Group {
    /// Where `seq` is (`Ok`) or would go (`Err`) among the group's messages. Receives and acks
    /// mostly concern the head, which needs no search (and no visit to the rest of the buffer).
    fn position(&self, seq: u64) -> Result<usize, usize> {
        match self.msgs.front() {
            Some(&(head, _)) if head == seq => Ok(0),
            _ => self.msgs.binary_search_by_key(&seq, |&(s, _)| s),
        }
    }
}

/// The messages of one tenant of a standard queue: those sent with one message group ID, or
/// (under the empty name) those sent without one.
///
/// The tenant has one key in the fair order for each priority level at which it has a visible
/// message: `(rank, leased, oldest visible of that level, tenant)`.
#[derive(Debug, Clone, Default)]
struct Tenant {
    /// Visible messages as `(rank, seq)`: the highest priority first, then the oldest first.
    visible: BTreeSet<(u8, u64)>,
    /// The oldest visible message of each level that has one, as `(rank, seq)`, highest level
    /// first: with `leased`, the tenant's keys in the fair order (kept here so that a change of
    /// `leased` moves them without a lookup in `visible`).
    heads: Vec<(u8, u64)>,
    /// Messages leased now: the tenant's messages in flight.
    leased: u32,
    /// Every message of the tenant in the queue; the tenant is forgotten when none is left.
    held: u32,
}

/// The oldest visible message of the level ranked `rank` of a tenant.
fn level_head(visible: &BTreeSet<(u8, u64)>, rank: u8) -> Option<u64> {
    visible
        .range((rank, 0)..=(rank, u64::MAX))
        .next()
        .map(|&(_, seq)| seq)
}

/// The name under which a standard queue keeps the messages sent without a group ID.
const UNNAMED_TENANT: &str = "";

/// A deduplication ID accepted within the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DedupRecord {
    pub message_id: Uuid,
    pub seq: u64,
    pub expires_at: Millis,
}

/// Everything a queue derives from its messages' states: the ready set of a FIFO queue (the
/// heads of its unblocked groups, as `(seq, group)`) and its groups, the tenants of a standard
/// queue in fair order, pending redrives, counters and message timers. Kept apart from the
/// message map so that a message can be changed and re-indexed with one map lookup.
#[derive(Debug, Clone)]
struct Index {
    qid: u32,
    fifo: bool,
    ready: BTreeSet<(u64, u32)>,
    groups: Interned<Group>,
    tenants: Interned<Tenant>,
    /// Each priority level of each tenant with a visible message, as `(rank, in flight, oldest
    /// visible, tenant)`: the highest level first, and within a level the tenant with the
    /// fewest in flight, then the oldest visible message: the order in which a standard queue
    /// serves them.
    fair: BTreeSet<(u8, u32, u64, u32)>,
    /// Named tenants with messages in flight, by how many.
    in_flight: BTreeSet<(u32, u32)>,
    pending: BTreeSet<u64>,
    counts: [u64; 4],
    /// The messages of each priority level (by priority) per state.
    levels: [[u64; 4]; limits::PRIORITY_LEVELS],
    /// The sizes (body and attributes) of the messages, added up.
    bytes: u64,
    /// Messages sent with a `deliver_at` still ahead, with their message IDs, in queue order;
    /// and where each ID is. A message leaves them when it becomes visible (or leaves).
    scheduled: BTreeMap<u64, Uuid>,
    scheduled_ids: HashMap<Uuid, u64>,
}

impl Index {
    fn new(qid: u32, fifo: bool) -> Index {
        Index {
            qid,
            fifo,
            ready: BTreeSet::new(),
            groups: Interned::default(),
            tenants: Interned::default(),
            fair: BTreeSet::new(),
            in_flight: BTreeSet::new(),
            pending: BTreeSet::new(),
            counts: [0; 4],
            levels: [[0; 4]; limits::PRIORITY_LEVELS],
            bytes: 0,
            scheduled: BTreeMap::new(),
            scheduled_ids: HashMap::default(),
        }
    }

    fn timer(&self, seq: u64) -> Timer {
        Timer::Message { qid: self.qid, seq }
    }

    /// The number of the FIFO group or tenant named `name`.
    fn intern(&mut self, name: &str) -> u32 {
        if self.fifo {
            self.groups.intern(name)
        } else {
            self.tenants.intern(name)
        }
    }

    /// The message group ID under `group`: a FIFO group's, or a named tenant's.
    fn group_name(&self, group: u32) -> Option<&str> {
        if self.fifo {
            self.groups.name(group)
        } else {
            self.tenants.name(group).filter(|n| *n != UNNAMED_TENANT)
        }
    }

    /// A message enters the queue.
    fn enter(&mut self, context: &mut ApplyContext, seq: u64, msg: &Msg) {
        let state = msg.state;
        self.count(msg.priority, state, 1);
        self.bytes += u64::from(msg.size);
        if state.timed() {
            let armed = context.timers.insert((msg.until, self.timer(seq)));
            debug_assert!(armed, "message {seq} entered with its timer already set");
        }
        if state == State::Pending {
            let added = self.pending.insert(seq);
            debug_assert!(added, "message {seq} entered already pending");
        }
        if !self.fifo {
            let tenant = self.tenants.get_mut(msg.group);
            debug_assert!(tenant.is_some(), "message {seq} entered without a tenant");
            if let Some(t) = tenant {
                t.held += 1;
            }
            let key = (seq, msg.group, msg.priority);
            self.tenant_change(context, key, None, Some(state));
        } else if let Some(g) = self.groups.get_mut(msg.group) {
            // A message joins at the tail: the group's readiness changes only when it was
            // empty or gains a lease.
            let was_empty = g.msgs.is_empty();
            match g.msgs.back() {
                Some(&(last, _)) if last > seq => {
                    let at = g.msgs.partition_point(|&(s, _)| s < seq);
                    g.msgs.insert(at, (seq, state));
                }
                _ => g.msgs.push_back((seq, state)),
            }
            if state == State::Leased {
                g.leased += 1;
            }
            if was_empty || state == State::Leased {
                self.refresh(context, msg.group);
            }
        }
    }

    /// A message leaves the queue.
    fn leave(&mut self, context: &mut ApplyContext, seq: u64, msg: &Msg) {
        debug_assert!(
            self.counts[msg.state as usize] > 0 && self.bytes >= u64::from(msg.size),
            "message {seq} leaves with its state and size counted"
        );
        self.count(msg.priority, msg.state, -1);
        self.bytes -= u64::from(msg.size);
        self.unschedule(seq);
        if msg.state.timed() {
            context.timers.remove(&(msg.until, self.timer(seq)));
        }
        if msg.state == State::Pending {
            let removed = self.pending.remove(&seq);
            debug_assert!(
                removed,
                "pending message {seq} left without being indexed so"
            );
        }
        if !self.fifo {
            let tenant = self.tenants.get_mut(msg.group);
            debug_assert!(
                tenant.is_some(),
                "message {seq} left a tenant it was not in"
            );
            if let Some(t) = tenant {
                t.held -= 1;
            }
            let key = (seq, msg.group, msg.priority);
            self.tenant_change(context, key, Some(msg.state), None);
        } else if let Some(g) = self.groups.get_mut(msg.group) {
            let at = g.position(seq);
            debug_assert!(at.is_ok(), "message {seq} left a group it was not in");
            if let Ok(at) = at {
                g.msgs.remove(at);
            }
            if g.msgs.capacity() > 4 * g.msgs.len() + 16 {
                g.msgs.shrink_to_fit();
            }
            if msg.state == State::Leased {
                g.leased -= 1;
            }
            self.refresh(context, msg.group);
        }
    }

    /// A message `(seq, group, priority)` moved from state `old` (with its `until`) to `new`.
    fn change(
        &mut self,
        context: &mut ApplyContext,
        (seq, group, priority): (u64, u32, u8),
        (old, old_until): (State, Millis),
        (new, new_until): (State, Millis),
    ) {
        let timer = self.timer(seq);
        // Not asserted: the timer that fires a change is taken out of the set before it fires.
        if old.timed() {
            context.timers.remove(&(old_until, timer));
        }
        if new.timed() {
            let armed = context.timers.insert((new_until, timer));
            debug_assert!(armed, "message {seq} changed to a timer already set");
        }
        self.count(priority, old, -1);
        self.count(priority, new, 1);
        if old == State::Delayed {
            self.unschedule(seq);
        }
        if old == State::Pending {
            let removed = self.pending.remove(&seq);
            debug_assert!(
                removed,
                "pending message {seq} changed without being indexed so"
            );
        }
        if new == State::Pending {
            let added = self.pending.insert(seq);
            debug_assert!(added, "message {seq} became pending twice");
        }
        if !self.fifo {
            self.tenant_change(context, (seq, group, priority), Some(old), Some(new));
        } else if let Some(g) = self.groups.get_mut(group) {
            let at = g.position(seq);
            debug_assert!(at.is_ok(), "message {seq} changed in a group it was not in");
            if let Ok(at) = at {
                g.msgs[at].1 = new;
            }
            if old == State::Leased {
                g.leased -= 1;
            }
            if new == State::Leased {
                g.leased += 1;
            }
            self.refresh(context, group);
        }
    }

    /// Counts a message of `priority` in `state` in (`delta` 1) or out (-1).
    fn count(&mut self, priority: u8, state: State, delta: i64) {
        let level = &mut self.levels[usize::from(priority)][state as usize];
        debug_assert!(
            delta > 0 || *level > 0,
            "a message leaves a state it was counted in"
        );
        *level = level.wrapping_add_signed(delta);
        let all = &mut self.counts[state as usize];
        *all = all.wrapping_add_signed(delta);
    }

    /// Forgets that message `seq` is scheduled, if it was.
    fn unschedule(&mut self, seq: u64) {
        if let Some(id) = self.scheduled.remove(&seq) {
            let removed = self.scheduled_ids.remove(&id);
            debug_assert_eq!(removed, Some(seq), "a scheduled message is found by its ID");
        }
    }

    /// Re-indexes a standard queue's message `(seq, tenant, priority)` in its tenant after it
    /// entered (`old` none), left (`new` none) or changed state, and puts the tenant's levels in
    /// their new places in the fair order; forgets the tenant once it holds no message.
    fn tenant_change(
        &mut self,
        context: &mut ApplyContext,
        (seq, tenant, priority): (u64, u32, u8),
        old: Option<State>,
        new: Option<State>,
    ) {
        let Some(t) = self.tenants.get_mut(tenant) else {
            return;
        };
        let rank = rank(priority);
        let leased_before = t.leased;
        let recount = old == Some(State::Leased) || new == Some(State::Leased);
        if old == Some(State::Visible) {
            t.visible.remove(&(rank, seq));
        }
        if old == Some(State::Leased) {
            t.leased -= 1;
        }
        if new == Some(State::Visible) {
            t.visible.insert((rank, seq));
            context.woken.push(self.qid);
        }
        if new == Some(State::Leased) {
            t.leased += 1;
        }
        let leased = t.leased;
        let at = t.heads.binary_search_by_key(&rank, |&(r, _)| r);
        let head_before = at.ok().map(|i| t.heads[i].1);
        let head = match old == Some(State::Visible) || new == Some(State::Visible) {
            true => level_head(&t.visible, rank),
            false => head_before,
        };
        // The keys that change leave the fair order under the count they were made with, and
        // come back under the new one: every level's when the count in flight changes, else
        // the message's level's when its oldest visible message changes.
        if recount {
            for &(r, oldest) in &t.heads {
                self.fair.remove(&(r, leased_before, oldest, tenant));
            }
        } else if let Some(oldest) = head_before.filter(|_| head != head_before) {
            self.fair.remove(&(rank, leased_before, oldest, tenant));
        }
        match (at, head) {
            (Ok(i), Some(oldest)) => t.heads[i].1 = oldest,
            (Ok(i), None) => {
                t.heads.remove(i);
            }
            (Err(i), Some(oldest)) => t.heads.insert(i, (rank, oldest)),
            (Err(_), None) => {}
        }
        if recount {
            for &(r, oldest) in &t.heads {
                self.fair.insert((r, leased, oldest, tenant));
            }
        } else if let Some(oldest) = head.filter(|_| head != head_before) {
            self.fair.insert((rank, leased, oldest, tenant));
        }
        debug_assert_eq!(
            t.heads.first().map(|&(r, oldest)| (r, oldest)),
            t.visible.first().copied(),
            "the first level's head is the tenant's first visible message"
        );
        let held = t.held;
        self.tenant_settled(tenant, (leased_before, leased), held);
    }

    /// After a change to `tenant`: moves it in the in-flight order when its count of leased
    /// messages went from `before` to `after`, and forgets it once it holds no message.
    fn tenant_settled(&mut self, tenant: u32, (before, after): (u32, u32), held: u32) {
        if after != before && self.tenants.name(tenant) != Some(UNNAMED_TENANT) {
            self.in_flight.remove(&(before, tenant));
            if after > 0 {
                self.in_flight.insert((after, tenant));
            }
        }
        if held == 0 {
            self.tenants.forget(tenant);
        }
    }

    /// Puts a FIFO group in or out of the ready set after any change to it, and forgets it once
    /// it holds no message.
    fn refresh(&mut self, context: &mut ApplyContext, group: u32) {
        let Some(g) = self.groups.get_mut(group) else {
            return;
        };
        let want = match g.msgs.front() {
            Some(&(head, State::Visible)) if g.leased == 0 => Some(head),
            _ => None,
        };
        if g.ready_key != want {
            if let Some(old) = g.ready_key {
                self.ready.remove(&(old, group));
            }
            g.ready_key = want;
            if let Some(head) = want {
                self.ready.insert((head, group));
                context.woken.push(self.qid);
            }
        }
        if g.msgs.is_empty() {
            self.groups.forget(group);
        }
    }

    /// The messages a receive takes next, at most `max`: a standard queue's oldest visible
    /// message of the tenant with the fewest in flight, of the highest level that has one (of
    /// the level ranked `rank` when given); a FIFO queue's consecutive visible messages of the
    /// group whose deliverable message is oldest.
    fn next_run(&self, max: usize, rank: Option<u8>) -> Vec<u64> {
        if !self.fifo {
            let from = (rank.unwrap_or(0), 0, 0, 0);
            return self
                .fair
                .range(from..)
                .next()
                .filter(|&&(r, ..)| rank.is_none_or(|want| r == want))
                .map(|&(_, _, seq, _)| seq)
                .into_iter()
                .collect();
        }
        let Some(&(head, group)) = self.ready.first() else {
            return Vec::new();
        };
        let Some(g) = self.groups.get(group) else {
            return Vec::new();
        };
        g.msgs
            .range(g.position(head).unwrap_or_else(|at| at)..)
            .take(max)
            .take_while(|(_, state)| *state == State::Visible)
            .map(|&(s, _)| s)
            .collect()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Queue {
    pub qid: u32,
    pub id: Uuid,
    pub account: String,
    pub name: String,
    pub created_at: Millis,
    /// When its settings last changed.
    pub modified_at: Millis,
    pub queue_type: QueueType,
    pub config: QueueConfig,
    pub tags: BTreeMap<String, String>,
    pub messages: BTreeMap<u64, Msg>,
    index: Index,
    pub dedup: HashMap<String, DedupRecord>,
    dedup_order: VecDeque<(Millis, String)>,
    /// Queues whose redrive policy names this queue.
    pub sources: BTreeSet<u32>,
    /// Messages redrive has moved out of this queue to its dead-letter queue, ever.
    pub dead_lettered: u64,
    /// Messages sent to this queue (duplicates not counted) and messages acknowledged on it
    /// since this node loaded it: kept in memory only, for the send and ack rates of monitoring.
    pub sent: u64,
    pub acked: u64,
    /// The queue's last move tasks, the newest (the only one that may be running) first.
    pub move_tasks: VecDeque<MoveTask>,
    /// FIFO receives by attempt ID.
    pub attempts: ReceiveAttempts,
    /// Receives parked on this queue, in the order they parked.
    pub waiters: BTreeMap<u64, Parked>,
    /// The credits of the smooth weighted round robin over priority levels (by priority),
    /// under `priority_weights`: replicated state, so that every replica serves the same level.
    pub credits: [i64; limits::PRIORITY_LEVELS],
    retention_timer: Option<Millis>,
    dedup_timer: Option<Millis>,
    move_timer: Option<Millis>,
}

impl Queue {
    pub(crate) fn new(
        qid: u32,
        id: Uuid,
        account: String,
        name: String,
        created_at: Millis,
        config: QueueConfig,
    ) -> Queue {
        let queue_type = QueueType::of_name(&name);
        Queue {
            qid,
            id,
            account,
            queue_type,
            name,
            created_at,
            modified_at: created_at,
            config,
            tags: BTreeMap::new(),
            messages: BTreeMap::new(),
            index: Index::new(qid, queue_type == QueueType::Fifo),
            dedup: HashMap::default(),
            dedup_order: VecDeque::new(),
            sources: BTreeSet::new(),
            dead_lettered: 0,
            sent: 0,
            acked: 0,
            move_tasks: VecDeque::new(),
            attempts: ReceiveAttempts::default(),
            waiters: BTreeMap::new(),
            credits: [0; limits::PRIORITY_LEVELS],
            retention_timer: None,
            dedup_timer: None,
            move_timer: None,
        }
    }

    pub(crate) fn fifo(&self) -> bool {
        self.queue_type == QueueType::Fifo
    }

    /// What a receive could start from: visible messages of a standard queue, unblocked groups
    /// of a FIFO queue (a receive takes one or more messages of each).
    pub(crate) fn ready_len(&self) -> usize {
        if self.fifo() {
            self.index.ready.len()
        } else {
            self.count(State::Visible) as usize
        }
    }

    /// How many message group IDs of a standard queue hold messages, and the most messages in
    /// flight (leased) of any one of them.
    pub(crate) fn tenants(&self) -> (u64, u64) {
        let unnamed = usize::from(self.index.tenants.contains(UNNAMED_TENANT));
        let active = self.index.tenants.len() - unnamed;
        let busiest = self.index.in_flight.last().map_or(0, |&(n, _)| n);
        (active as u64, u64::from(busiest))
    }

    /// Messages per state: visible, delayed, leased, pending redrive.
    pub(crate) fn count(&self, state: State) -> u64 {
        self.index.counts[state as usize]
    }

    /// The sizes (body and attributes) of the queue's messages, added up.
    pub(crate) fn bytes(&self) -> u64 {
        self.index.bytes
    }

    /// The messages of each priority level (index = priority), by state.
    pub(crate) fn level_stats(&self) -> [LevelStats; limits::PRIORITY_LEVELS] {
        self.index.levels.map(|c| LevelStats {
            visible: c[State::Visible as usize],
            leased: c[State::Leased as usize],
            delayed: c[State::Delayed as usize],
            pending_redrive: c[State::Pending as usize],
        })
    }

    /// Marks the delayed message `seq` as scheduled under its message ID, so that it is listed
    /// and can be cancelled until it becomes visible.
    pub(crate) fn schedule(&mut self, seq: u64, message_id: Uuid) {
        debug_assert!(
            self.messages
                .get(&seq)
                .is_some_and(|m| m.state == State::Delayed),
            "only a delayed message is scheduled"
        );
        self.index.scheduled.insert(seq, message_id);
        self.index.scheduled_ids.insert(message_id, seq);
    }

    /// The message ID of message `seq` while it is scheduled.
    pub(crate) fn scheduled_id(&self, seq: u64) -> Option<Uuid> {
        self.index.scheduled.get(&seq).copied()
    }

    /// The sequence number of the scheduled message with ID `message_id`.
    pub(crate) fn scheduled_seq(&self, message_id: Uuid) -> Option<u64> {
        self.index.scheduled_ids.get(&message_id).copied()
    }

    /// The scheduled messages from sequence number `start` on, in queue order.
    pub(crate) fn scheduled_from(&self, start: u64) -> impl Iterator<Item = (u64, &Msg)> + '_ {
        self.index
            .scheduled
            .range(start..)
            .filter_map(|(&seq, _)| Some((seq, self.messages.get(&seq)?)))
    }

    /// How many messages are scheduled.
    pub(crate) fn scheduled_len(&self) -> u64 {
        self.index.scheduled.len() as u64
    }

    /// The rank of the priority level a receive of a queue with `priority_weights` serves
    /// next, by a smooth weighted round robin over the levels with visible messages: each adds
    /// its weight to its credit, the one with the most (the higher priority on a tie) is
    /// served and gives back the weights of all. `None`: strict order (or nothing visible).
    fn weighted_rank(&mut self, context: &mut ApplyContext) -> Option<u8> {
        let weights = self.config.priority_weights.as_ref()?;
        let mut total = 0i64;
        let mut best: Option<usize> = None;
        for (priority, counts) in self.index.levels.iter().enumerate() {
            if counts[State::Visible as usize] == 0 {
                continue;
            }
            let weight = i64::from(weights.of(priority as u8));
            self.credits[priority] += weight;
            total += weight;
            if best.is_none_or(|b| self.credits[priority] >= self.credits[b]) {
                best = Some(priority);
            }
        }
        let chosen = best?;
        self.credits[chosen] -= total;
        debug_assert_eq!(
            self.credits.iter().sum::<i64>(),
            0,
            "the round robin's credits always add up to nothing"
        );
        context.changes.rows.push(RowKey::Queue(self.qid));
        Some(rank(chosen as u8))
    }

    /// Forgets the round robin's credits (when the weights change).
    pub(crate) fn reset_credits(&mut self) {
        self.credits = [0; limits::PRIORITY_LEVELS];
    }

    /// The messages waiting for redrive.
    pub(crate) fn pending(&self) -> Vec<u64> {
        self.index.pending.iter().copied().collect()
    }

    /// The message group ID of the FIFO group or tenant numbered `group`.
    pub(crate) fn group_name(&self, group: u32) -> Option<&str> {
        self.index.group_name(group)
    }

    /// Adds a message under `seq`; it joins the FIFO group or tenant named `group_name` (the
    /// empty name: none).
    pub(crate) fn insert(
        &mut self,
        context: &mut ApplyContext,
        seq: u64,
        mut msg: Msg,
        group_name: &str,
    ) {
        debug_assert!(
            self.messages
                .last_key_value()
                .is_none_or(|(&last, _)| last < seq),
            "message {seq} enters after every message held: sends and moves take a new, highest \
             sequence number, and a restore goes in key order"
        );
        msg.group = self.index.intern(group_name);
        self.index.enter(context, seq, &msg);
        self.messages.insert(seq, msg);
        context.changes.rows.push(RowKey::Message(self.qid, seq));
        self.schedule_retention(context);
        debug_assert!(self.counts_add_up(), "message {seq} entered counted once");
    }

    /// Whether the messages counted per state add up to the messages held.
    fn counts_add_up(&self) -> bool {
        self.index.counts.iter().sum::<u64>() == self.messages.len() as u64
    }

    /// Takes a message out of every index (its payload stays: the caller decides).
    pub(crate) fn remove(&mut self, context: &mut ApplyContext, seq: u64) -> Option<Msg> {
        let msg = self.messages.remove(&seq)?;
        self.index.leave(context, seq, &msg);
        context.changes.rows.push(RowKey::Message(self.qid, seq));
        debug_assert!(self.counts_add_up(), "message {seq} left uncounted");
        Some(msg)
    }

    /// Takes out the message whose lease `receive_count` made, if that lease is active at `now`.
    pub(crate) fn take_leased(
        &mut self,
        context: &mut ApplyContext,
        seq: u64,
        receive_count: u32,
        now: Millis,
    ) -> Option<Msg> {
        match self.messages.entry(seq) {
            Entry::Occupied(e) if is_active(e.get(), receive_count, now) => {
                let msg = e.remove();
                self.index.leave(context, seq, &msg);
                context.changes.rows.push(RowKey::Message(self.qid, seq));
                Some(msg)
            }
            _ => None,
        }
    }

    /// Why a receipt of the message at `seq` names no active lease: the message is still in
    /// the queue under another lease or none ([`EngineError::LeaseExpired`]), or it is gone
    /// ([`EngineError::MessageGone`]).
    pub(crate) fn lease_ended(&self, seq: u64) -> EngineError {
        if self.messages.contains_key(&seq) {
            EngineError::LeaseExpired
        } else {
            EngineError::MessageGone
        }
    }

    /// Moves a message to `state`, with `until` its delay or lease end.
    pub(crate) fn set_state(
        &mut self,
        context: &mut ApplyContext,
        seq: u64,
        state: State,
        until: Millis,
    ) {
        if let Some(msg) = self.messages.get_mut(&seq) {
            transition(&mut self.index, context, seq, msg, state, until);
        }
    }

    /// Leases up to `max` deliverable messages for `lease_ms`. In a standard queue each comes
    /// from the tenant with the fewest messages in flight, oldest first; in a FIFO queue the
    /// oldest unblocked group goes first, with consecutive visible messages of a group together.
    /// Returns the leased messages as they are after the lease.
    pub(crate) fn receive(
        &mut self,
        context: &mut ApplyContext,
        max: usize,
        lease_ms: u64,
    ) -> Vec<(u64, Msg)> {
        let until = context.now.saturating_add(lease_ms);
        let first_received = context.now.max(1);
        let mut out = Vec::with_capacity(max);
        while out.len() < max {
            let rank = if self.fifo() {
                None
            } else {
                self.weighted_rank(context)
            };
            let run = self.index.next_run(max - out.len(), rank);
            let before = out.len();
            for seq in run {
                let Some(msg) = self.messages.get_mut(&seq) else {
                    continue;
                };
                msg.receive_count = msg.receive_count.saturating_add(1);
                if msg.first_received_at == 0 {
                    msg.first_received_at = first_received;
                }
                transition(&mut self.index, context, seq, msg, State::Leased, until);
                out.push((seq, msg.clone()));
            }
            if out.len() == before {
                break;
            }
        }
        debug_assert!(
            out.len() <= max && out.iter().all(|(_, m)| m.state == State::Leased),
            "a receive leases at most what it asked for, and hands out only what it leased"
        );
        out
    }

    /// The message whose lease `receive_count` made, if that lease is active at `now`.
    pub(crate) fn active_lease(&self, seq: u64, receive_count: u32, now: Millis) -> Option<&Msg> {
        self.messages
            .get(&seq)
            .filter(|m| is_active(m, receive_count, now))
    }

    fn retention_ms(&self) -> u64 {
        u64::from(self.config.retention_seconds) * 1000
    }

    /// Makes sure a retention timer is set no later than the oldest message's expiry.
    pub(crate) fn schedule_retention(&mut self, context: &mut ApplyContext) {
        if self.retention_timer.is_some() {
            return;
        }
        if let Some(front) = self.messages.values().next() {
            let due = front.enqueued_at.saturating_add(self.retention_ms());
            context.timers.insert((due, Timer::Retention(self.qid)));
            self.retention_timer = Some(due);
        }
    }

    /// Drops the retention timer (before a retention change or when it fires).
    pub(crate) fn clear_retention_timer(&mut self, context: &mut ApplyContext) {
        if let Some(due) = self.retention_timer.take() {
            context.timers.remove(&(due, Timer::Retention(self.qid)));
        }
    }

    /// The messages whose retention has ended by `now`, oldest first.
    pub(crate) fn expired(&self, now: Millis) -> Vec<u64> {
        let limit = self.retention_ms();
        self.messages
            .iter()
            .take_while(|(_, m)| m.enqueued_at.saturating_add(limit) <= now)
            .map(|(&seq, _)| seq)
            .collect()
    }

    /// The key under which this queue records deduplication ID `id` of a message of `group`:
    /// the ID itself when it deduplicates per queue; the group, a NUL and the ID when it
    /// deduplicates per message group. Group and deduplication IDs are printable ASCII, so a key
    /// of one kind is never one of the other, and no two groups' keys meet.
    ///
    /// Records keep the key they were made with: for the 5 minutes after the queue's scope
    /// changes, an ID recorded under the earlier scope does not suppress a send under the new one.
    pub(crate) fn dedup_key(&self, group: &str, id: &str) -> String {
        debug_assert!(!group.contains('\0') && !id.contains('\0'));
        match self.config.deduplication_scope {
            DeduplicationScope::Queue => id.to_string(),
            DeduplicationScope::MessageGroup => format!("{group}\0{id}"),
        }
    }

    /// Records an accepted deduplication ID under its key ([`Queue::dedup_key`]).
    pub(crate) fn record_dedup(
        &mut self,
        context: &mut ApplyContext,
        id: String,
        record: DedupRecord,
    ) {
        let expires = record.expires_at;
        debug_assert!(
            self.dedup_order
                .back()
                .is_none_or(|(last, _)| *last <= expires),
            "records join the window in expiry order, so pruning looks at the front alone"
        );
        context
            .changes
            .rows
            .push(RowKey::Dedup(self.qid, id.clone()));
        self.dedup_order.push_back((expires, id.clone()));
        self.dedup.insert(id, record);
        if self.dedup_timer.is_none() {
            self.arm_dedup_timer(context, expires);
        }
    }

    /// Arms the deduplication timer for the record that leaves the window at `expires`.
    fn arm_dedup_timer(&mut self, context: &mut ApplyContext, expires: Millis) {
        let due = prune_due(expires);
        context.timers.insert((due, Timer::Dedup(self.qid)));
        self.dedup_timer = Some(due);
    }

    /// Forgets deduplication records that left the window, and re-arms the timer.
    pub(crate) fn prune_dedup(&mut self, context: &mut ApplyContext) {
        self.dedup_timer = None;
        while let Some(&(expires, _)) = self.dedup_order.front() {
            // At its timer's time, as receive attempts are (see `ReceiveAttempts::prune`).
            if prune_due(expires) > context.now {
                self.arm_dedup_timer(context, expires);
                break;
            }
            if let Some((expires, id)) = self.dedup_order.pop_front() {
                if self.dedup.get(&id).is_some_and(|r| r.expires_at == expires) {
                    self.dedup.remove(&id);
                    context.changes.rows.push(RowKey::Dedup(self.qid, id));
                }
            }
        }
        // Give back the memory of a burst once the window has passed it (amortized O(1)).
        if self.dedup.capacity() > 4 * self.dedup.len() + 64 {
            self.dedup.shrink_to_fit();
            self.dedup_order.shrink_to_fit();
        }
    }

    /// Loads a deduplication record during a restore; [`Queue::finish_restore`] orders them.
    pub(crate) fn restore_dedup(&mut self, id: String, record: DedupRecord) {
        self.dedup_order.push_back((record.expires_at, id.clone()));
        self.dedup.insert(id, record);
    }

    /// Puts restored deduplication records in window order and arms the queue's timers.
    pub(crate) fn finish_restore(&mut self, context: &mut ApplyContext) {
        self.dedup_order.make_contiguous().sort();
        if let Some(&(expires, _)) = self.dedup_order.front() {
            self.arm_dedup_timer(context, expires);
        }
        self.schedule_retention(context);
        self.arm_move_timer(context);
    }

    /// The running move task, if any.
    pub(crate) fn running_task(&mut self) -> Option<&mut MoveTask> {
        self.move_tasks.front_mut().filter(|t| t.running())
    }

    /// Sets the move timer to the running task's next step (none without one), replacing the
    /// timer set before.
    pub(crate) fn arm_move_timer(&mut self, context: &mut ApplyContext) {
        self.clear_move_timer(context);
        if let Some(due) = self.running_task().map(|t| t.next_due()) {
            context.timers.insert((due, Timer::MoveTask(self.qid)));
            self.move_timer = Some(due);
        }
    }

    /// Drops the move timer (for a step, a cancel, or deletion).
    pub(crate) fn clear_move_timer(&mut self, context: &mut ApplyContext) {
        if let Some(due) = self.move_timer.take() {
            context.timers.remove(&(due, Timer::MoveTask(self.qid)));
        }
    }

    /// Takes every message out at once (purge, deletion), in constant time: the queue is left
    /// empty. The messages' own timers stay in the timer set until [`ReclaimSet::pop`] removes
    /// them; one that fires first finds no message and does nothing.
    pub(crate) fn take_for_reclaim(&mut self, context: &mut ApplyContext) -> ReclaimSet {
        self.clear_retention_timer(context);
        let fifo = self.fifo();
        ReclaimSet {
            messages: std::mem::take(&mut self.messages),
            index: std::mem::replace(&mut self.index, Index::new(self.qid, fifo)),
        }
    }

    /// Drops the queue's deduplication timer (for deletion).
    pub(crate) fn clear_dedup_timer(&mut self, context: &mut ApplyContext) {
        if let Some(due) = self.dedup_timer.take() {
            context.timers.remove(&(due, Timer::Dedup(self.qid)));
        }
    }
}

/// Messages taken out of a queue at once by a purge or the queue's deletion: gone for clients,
/// while their rows and payloads are deleted a bounded number at a time, oldest first. The
/// index they were taken with names their FIFO groups, for their rows until then.
#[derive(Debug, Clone)]
pub(crate) struct ReclaimSet {
    messages: BTreeMap<u64, Msg>,
    index: Index,
}

impl ReclaimSet {
    /// An empty set of `qid`'s messages, for a restore to fill; it keeps each message's group
    /// ID as it was read (it needs no FIFO or fair order).
    pub(crate) fn new(qid: u32) -> ReclaimSet {
        ReclaimSet {
            messages: BTreeMap::new(),
            index: Index::new(qid, true),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Adds a message read back from its row (with no timer: it is never delivered again),
    /// with the message ID it was scheduled under, if any.
    pub(crate) fn restore(
        &mut self,
        seq: u64,
        mut msg: Msg,
        group_name: Option<&str>,
        scheduled: Option<Uuid>,
    ) {
        msg.group = group_name.map_or(NO_GROUP, |name| self.index.intern(name));
        self.messages.insert(seq, msg);
        if let Some(id) = scheduled {
            self.index.scheduled.insert(seq, id);
        }
    }

    /// The message under `seq`, its group's name and the ID it was scheduled under, as its row
    /// holds them.
    pub(crate) fn get(&self, seq: u64) -> Option<(&Msg, Option<&str>, Option<Uuid>)> {
        let msg = self.messages.get(&seq)?;
        let scheduled = self.index.scheduled.get(&seq).copied();
        Some((msg, self.index.group_name(msg.group), scheduled))
    }

    pub(crate) fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.messages.keys().copied()
    }

    /// Takes the oldest message out for good, with its timer, recording its row's deletion.
    pub(crate) fn pop(&mut self, context: &mut ApplyContext) -> Option<(u64, Msg)> {
        let (seq, msg) = self.messages.pop_first()?;
        self.index.scheduled.remove(&seq);
        if msg.state.timed() {
            context.timers.remove(&(msg.until, self.index.timer(seq)));
        }
        context
            .changes
            .rows
            .push(RowKey::Message(self.index.qid, seq));
        Some((seq, msg))
    }
}

fn is_active(msg: &Msg, receive_count: u32, now: Millis) -> bool {
    msg.state == State::Leased && msg.receive_count == receive_count && msg.until > now
}

/// Changes a message's state in place and re-indexes it.
fn transition(
    index: &mut Index,
    context: &mut ApplyContext,
    seq: u64,
    msg: &mut Msg,
    state: State,
    until: Millis,
) {
    let (old, old_until) = (msg.state, msg.until);
    msg.state = state;
    msg.until = if state.timed() { until } else { 0 };
    index.change(
        context,
        (seq, msg.group, msg.priority),
        (old, old_until),
        (state, msg.until),
    );
    context.changes.rows.push(RowKey::Message(index.qid, seq));
}

impl Queue {
    /// The answer of the receive recorded under attempt `id`, again, if the record is within
    /// its window and every message it leased is still under that lease, untouched: their
    /// leases start again now, for `lease_ms`. `None`: the receive is a new one.
    pub(crate) fn replay(
        &mut self,
        context: &mut ApplyContext,
        id: &str,
        lease_ms: u64,
    ) -> Option<Vec<(u64, Msg)>> {
        let now = context.now;
        let record = self.attempts.records.get(id)?;
        let untouched = record.expires_at > now
            && record.leases.iter().all(|l| {
                self.messages.get(&l.seq).is_some_and(|m| {
                    m.state == State::Leased
                        && m.receive_count == l.receive_count
                        && m.until == l.until
                        && m.until > now
                })
            });
        if !untouched {
            return None;
        }
        let seqs: Vec<u64> = record.leases.iter().map(|l| l.seq).collect();
        let until = now.saturating_add(lease_ms);
        let mut out = Vec::with_capacity(seqs.len());
        for seq in seqs {
            self.set_state(context, seq, State::Leased, until);
            if let Some(msg) = self.messages.get(&seq) {
                out.push((seq, msg.clone()));
            }
        }
        self.attempts.renew(context, self.qid, id, until);
        Some(out)
    }

    /// Records what a receive with attempt `id` leased, for its retries within the window.
    pub(crate) fn record_attempt(
        &mut self,
        context: &mut ApplyContext,
        id: String,
        leased: &[(u64, Msg)],
    ) {
        let leases = leased
            .iter()
            .map(|(seq, msg)| AttemptLease {
                seq: *seq,
                receive_count: msg.receive_count,
                until: msg.until,
            })
            .collect();
        self.attempts.record(context, self.qid, id, leases);
    }
}
