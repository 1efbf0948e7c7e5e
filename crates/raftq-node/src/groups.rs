//! The Raft groups on this node: starting one ([`Launcher::start`]: its openraft instance, its
//! group commit and its tasks) and following the placement that the metadata group applies
//! ([`run`]).
//!
//! A node starts group 1, the metadata group (every node a member), and every group its
//! database holds state of. Then [`run`] reads the placement group 1 applied, every [`EVERY`]:
//! - while the placement is not bootstrapped, the leader of group 1 proposes the bootstrap,
//!   over group 1's voters, when this node was started to lay out more than one group
//!   (`NodeConfig::groups`); a cluster that ran as one group until then keeps its queues in
//!   group 1 (the bootstrap adopts them);
//! - on group 1's leader, it records group 1's voters as its members, and sets every data
//!   group's target to the placement's even layout of the replicas over the active nodes
//!   (`Placement::replica_targets`), which changes once a node was added or began to leave;
//! - it starts every data group whose members or target include this node, and, for a group
//!   it leads, records itself as the group's leader in the placement when the placement says
//!   another leads (`LeaderSeen`: where nodes with no replica of the group forward first),
//!   records the group's voters as its members (`SetMembers`), and brings the voters to the
//!   target one change at a time (`GroupCore::converge`);
//! - it stops its replica of a group that neither has this node as a member nor in its target
//!   any more, and then drops the group's data;
//! - it hands a group it leads over to another member when it leads more than its share of the
//!   groups (`Placement::leader_move`: at most ceil(G / N) each), one group at a time and
//!   [`MOVE_PAUSE`] apart, so that the leaders spread again after a node stopped or came back;
//! - the former of a group not yet formed (its members in turn by group number:
//!   `GroupEntry::former`) initializes it, but only when its own log of
//!   the group is empty and every other member answered that it holds no log of the group
//!   either, and then has `GroupFormed` recorded through group 1's leader. A formed group is
//!   never initialized again; a member that crashed between the two finds its log not empty
//!   and only records `GroupFormed`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::join_all;
use openraft::error::RaftError;
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use raftq_engine::placement::{
    GroupEntry, Placement, PlacementCommand, PlacementError, METADATA_GROUP,
};
use raftq_engine::{Command, EngineError};
use raftq_store::{GroupId, GroupStorage, NodeId, NodeStore, TypeConfig};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::admission::Standing;
use crate::config::NodeConfig;
use crate::error::StartError;
use crate::group_commit::GroupCommit;
use crate::member::membership::ANSWERED_WITHIN;
use crate::member::routing::LEADER_WAIT;
use crate::member::{GroupCore, Groups, Members, NodeCore};
use crate::network::Network;
use crate::pace::Pace;
use crate::receiving::SnapshotReceiver;
use crate::{snapshots, timer};

/// Log entries one replication request may cover (openraft's default is 300). The network sends
/// them in requests of at most [`APPEND_BYTES`](crate::network::APPEND_BYTES); a new leader
/// probes where a follower's log matches its own with this many entries at a time, which fewer
/// keeps cheap, while more let a follower that fell behind catch up in fewer round trips.
const MAX_PAYLOAD_ENTRIES: u64 = 32;

/// How often the lifecycle reads the placement.
const EVERY: Duration = Duration::from_millis(200);
/// How long a member may take to answer whether it holds a log of a group being formed.
const PING_TIMEOUT: Duration = Duration::from_millis(250);
/// How long after handing a group over this node waits before it hands over another: the new
/// leader records itself in the placement within a pass or two (a pass is [`EVERY`]), and a
/// decision made on the older word of it could move a leader twice. Where this node holds a
/// replica of the group, its own replica's word is fresh at once. Two seconds let a node that
/// came back to three nodes of 64 groups get its share (about ten moves from each of the
/// others) within 30 s.
const MOVE_PAUSE: Duration = Duration::from_secs(2);
/// The replicas of each data group a bootstrap lays out.
pub(crate) const DATA_REPLICAS: u32 = 3;
/// The new replicas a node takes at once: each is a snapshot to receive and a log to catch up,
/// which many at once would slow down together (and its clients' requests with them).
const REPLICAS_TAKEN_AT_ONCE: usize = 2;

/// What starting a group needs, kept by the lifecycle for the groups it starts later.
pub(crate) struct Launcher {
    pub config: NodeConfig,
    pub node: Arc<NodeCore>,
    pub store: NodeStore,
    pub groups: Arc<Groups>,
    pub signal: watch::Receiver<bool>,
}

/// A group started on this node: its shared state, its tasks (snapshot policy,
/// timer), which end on the shutdown signal, and its group-commit task, which is aborted.
pub(crate) struct Started {
    pub core: Arc<GroupCore>,
    pub tasks: Vec<JoinHandle<()>>,
    pub committing: JoinHandle<()>,
}

impl Launcher {
    /// Starts openraft for `group` on `storage`, its group commit and its tasks, and adds it to
    /// the node's groups. The snapshot policy tells `not_due` when it finds no snapshot due.
    pub async fn start(
        &self,
        group: GroupId,
        storage: GroupStorage,
        not_due: watch::Sender<Option<u64>>,
    ) -> Result<Started, StartError> {
        let GroupStorage { log, state_machine } = storage;
        let reader = state_machine.reader();
        let awaited = state_machine.awaited();
        let network = Network {
            peers: self.node.raft_peers.clone(),
            group,
        };
        let raft = Raft::new(
            self.config.id,
            Arc::new(raft_config(&self.config)?),
            network.clone(),
            log.clone(),
            state_machine,
        )
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?;
        // The election gate keeps them so; off from the start for a node that may not stand.
        raft.runtime_config().elect(self.node.admission.may_stand());
        if group == GroupId::FIRST {
            log_if_flags_differ(&self.config, &raft, self.node.admission.standing()).await;
        }
        // The group's tasks stop with the node, or when this node leaves the group.
        let (stop, signal) = watch::channel(false);
        tokio::spawn(stop_with_the_node(stop.clone(), self.signal.clone()));
        let (group_commit, committing) = GroupCommit::start(
            raft.clone(),
            LEADER_WAIT,
            awaited,
            Arc::clone(&self.node.clock),
        );
        let core = Arc::new(GroupCore {
            group,
            node: Arc::clone(&self.node),
            raft,
            group_commit,
            reader,
            log,
            network,
            receiver: SnapshotReceiver::new(self.config.log.work),
            handing_over: Default::default(),
            changing: tokio::sync::Mutex::new(()),
            elections_held_back: Default::default(),
            leader_commit: Default::default(),
            appends: Default::default(),
            quiet: Default::default(),
            quiet_leader_heard: Default::default(),
            stop,
        });
        let tasks = self.spawn_tasks(&core, not_due, signal);
        self.groups.insert(Arc::clone(&core));
        Ok(Started {
            core,
            tasks,
            committing,
        })
    }

    /// Spawns `core`'s group's snapshot policy and timer, which end once `stop` is set.
    fn spawn_tasks(
        &self,
        core: &Arc<GroupCore>,
        not_due: watch::Sender<Option<u64>>,
        stop: watch::Receiver<bool>,
    ) -> Vec<JoinHandle<()>> {
        vec![
            tokio::spawn(snapshots::run(
                core.raft.clone(),
                core.reader.clone(),
                core.log.appended(),
                self.config.snapshot_after_logs,
                not_due,
                stop.clone(),
            )),
            tokio::spawn(timer::run(Arc::clone(core), stop)),
        ]
    }

    /// Starts group 1 on `first` (its snapshot policy telling `not_due`), then every other
    /// group the node's database holds state of; group 1 is the first of the list.
    pub async fn start_held(
        &self,
        first: GroupStorage,
        not_due: watch::Sender<Option<u64>>,
    ) -> Result<Vec<Started>, StartError> {
        let mut started = vec![self.start(GroupId::FIRST, first, not_due).await?];
        for group in self
            .store
            .groups()
            .into_iter()
            .filter(|g| *g != GroupId::FIRST)
        {
            let storage = self.store.open_group(group).map_err(StartError::opening)?;
            started.push(self.start(group, storage, watch::Sender::new(None)).await?);
        }
        Ok(started)
    }

    /// Opens `group`'s storage and starts it, unless it runs already, or its replica that
    /// this node left (`left`) is still held by a task that has not let go of it yet.
    async fn start_missing(
        &self,
        group: GroupId,
        left: &mut BTreeMap<GroupId, Weak<GroupCore>>,
    ) -> Result<Option<Started>, StartError> {
        if self.groups.get(group).is_some() {
            return Ok(None);
        }
        if left.get(&group).is_some_and(|core| core.strong_count() > 0) {
            return Ok(None);
        }
        left.remove(&group);
        let storage = self.store.open_group(group).map_err(StartError::opening)?;
        let started = self.start(group, storage, watch::Sender::new(None)).await?;
        tracing::info!(node = self.config.id, %group, "started the group");
        Ok(Some(started))
    }
}

/// Sets `stop` once the node shuts down (`signal`); ends early when the group stopped.
async fn stop_with_the_node(stop: watch::Sender<bool>, mut signal: watch::Receiver<bool>) {
    let mut stopped = stop.subscribe();
    tokio::select! {
        _ = signal.wait_for(|shut| *shut) => {
            stop.send_replace(true);
        }
        _ = stopped.wait_for(|stopped| *stopped) => {}
    }
}

/// The tasks of a group the lifecycle started, and its group commit's.
type GroupTasks = (Vec<JoinHandle<()>>, JoinHandle<()>);

/// openraft's settings for a group on this node.
fn raft_config(config: &NodeConfig) -> Result<Config, StartError> {
    Config {
        cluster_name: "raftq".into(),
        heartbeat_interval: config.heartbeat_ms,
        // The longest timeout is also the followers' leader lease, which a leader handing
        // over waits out: 7 heartbeats keep a planned handover under half a second.
        election_timeout_min: 5 * config.heartbeat_ms,
        election_timeout_max: 7 * config.heartbeat_ms,
        // `snapshots::run` asks for them.
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 0,
        max_payload_entries: MAX_PAYLOAD_ENTRIES,
        ..Default::default()
    }
    .validate()
    .map_err(|e| StartError::Config(e.to_string()))
}

/// Says when a restarted node's membership, which it goes by, differs from its flags. Read
/// from the Raft state, which holds the membership loaded from the log (the metrics may not
/// show it yet). Only group 1's membership is the cluster's.
async fn log_if_flags_differ(config: &NodeConfig, raft: &Raft<TypeConfig>, standing: Standing) {
    if standing != Standing::Member || config.join.is_some() {
        return;
    }
    let Ok(stored) = raft
        .with_raft_state(|st| {
            st.membership_state
                .effective()
                .membership()
                .nodes()
                .map(|(id, n)| (*id, n.addr.clone()))
                .collect::<BTreeMap<NodeId, String>>()
        })
        .await
    else {
        return;
    };
    if stored != config.peers {
        tracing::info!(
            ?stored,
            flags = ?config.peers,
            "the membership in the log differs from --peers; the log's is used"
        );
    }
}

/// What the lifecycle reads of the placement: the groups with their targets, the replicas
/// they may add now, and the nodes' addresses.
struct Layout {
    groups: BTreeMap<u32, GroupEntry>,
    targets: BTreeMap<u32, BTreeSet<NodeId>>,
    /// (group, node): the replicas whose turn it is (`Placement::replica_turns`).
    turns: BTreeSet<(u32, NodeId)>,
    nodes: BTreeMap<NodeId, String>,
}

impl Layout {
    /// The layout of `placement`, with `answering` the nodes that answer this node's pings.
    fn of(placement: &Placement, answering: &BTreeSet<NodeId>) -> Layout {
        let groups = placement.groups().clone();
        let targets = (groups.keys())
            .filter_map(|g| Some((*g, placement.target(*g)?.clone())))
            .collect();
        Layout {
            groups,
            targets,
            turns: placement.replica_turns(answering, REPLICAS_TAKEN_AT_ONCE),
            nodes: placement.addresses(),
        }
    }

    /// The members group `number` should have.
    fn target(&self, number: u32) -> BTreeSet<NodeId> {
        self.targets.get(&number).cloned().unwrap_or_default()
    }

    /// The nodes group `number` may add a replica on now.
    fn turns(&self, number: u32) -> BTreeSet<NodeId> {
        let turns = self
            .turns
            .range((number, NodeId::MIN)..=(number, NodeId::MAX));
        turns.map(|(_, node)| *node).collect()
    }

    /// Whether group `number` has node `id` as a member or in its target.
    fn gives(&self, number: u32, id: NodeId) -> bool {
        let member = self
            .groups
            .get(&number)
            .is_some_and(|e| e.members.contains(&id));
        member || self.targets.get(&number).is_some_and(|t| t.contains(&id))
    }
}

/// Follows the placement that `metadata` (group 1) applies, as the module says, until
/// `shutdown`; then waits for the tasks of the groups it started (the node shuts their Raft
/// instances down) and stops their group commits.
pub(crate) async fn run(
    launcher: Launcher,
    metadata: Arc<GroupCore>,
    shutdown: watch::Receiver<bool>,
) {
    let mut started = Vec::new();
    let mut left = BTreeMap::new();
    let mut moved: Option<Instant> = None;
    let mut pace = Pace::new(EVERY, shutdown);
    while pace.tick().await {
        let me = launcher.config.id;
        let answering = metadata.node.answering(ANSWERED_WITHIN);
        let Some((layout, draining)) = metadata.reader.with_engine(|engine| {
            let placement = engine.placement();
            (Layout::of(placement, &answering), placement.draining(me))
        }) else {
            continue;
        };
        metadata.node.draining.store(draining, Ordering::Relaxed);
        if !layout.groups.is_empty() {
            launcher.groups.note_laid_out();
        }
        if metadata.node.admission.standing() != Standing::Member {
            continue;
        }
        if layout.groups.is_empty() {
            bootstrap(&metadata, launcher.config.groups, &launcher.signal).await;
            continue;
        }
        if metadata.is_leader() {
            lay_replicas(&metadata, &layout, &launcher.signal).await;
        }
        follow(&launcher, &metadata, &layout, &mut started, &mut left).await;
        forget_left(&launcher, &layout, &mut left);
        if (draining || moved.is_none_or(|at| at.elapsed() >= MOVE_PAUSE))
            && spread_leaders(&launcher.groups, &metadata, &layout).await
        {
            moved = Some(Instant::now());
        }
    }
    for (tasks, committing) in started {
        for task in tasks {
            let _ = task.await;
        }
        committing.abort();
        let _ = committing.await;
    }
}

/// Proposes the bootstrap of `groups` groups over group 1's voters, when this node leads group
/// 1 and more than one group is asked for.
async fn bootstrap(metadata: &Arc<GroupCore>, groups: u32, stop: &watch::Receiver<bool>) {
    if groups <= 1 || !metadata.is_leader() {
        return;
    }
    // The groups are laid over the voters: not while a membership change moves them.
    let Ok(_no_change) = metadata.changing.try_lock() else {
        return;
    };
    let members = metadata.members();
    let voters = members.voters();
    let nodes = members
        .nodes
        .into_iter()
        .filter(|(id, _)| voters.contains(id))
        .collect();
    let change = PlacementCommand::Bootstrap {
        groups,
        replicas: DATA_REPLICAS,
        nodes,
    };
    match place(metadata, change, stop).await {
        Ok(()) => tracing::info!(groups, "bootstrapped the placement of the groups"),
        Err(e) => tracing::warn!(groups, error = %e, "cannot bootstrap the placement yet"),
    }
}

/// On group 1's leader: records group 1's voters as nodes of the placement and as group 1's
/// members, and sets the data groups' targets to the placement's layout of their replicas
/// (`Placement::replica_targets`).
async fn lay_replicas(metadata: &Arc<GroupCore>, layout: &Layout, stop: &watch::Receiver<bool>) {
    let mut changes = Vec::new();
    // A voter the placement lacks (its add stopped before it was recorded) is recorded, so
    // that it takes its share of the replicas.
    let members = metadata.members();
    let voters = settled(&members).unwrap_or_default();
    for id in voters.iter().filter(|id| !layout.nodes.contains_key(id)) {
        if let Some(addr) = members.nodes.get(id).cloned() {
            changes.push(PlacementCommand::AddNode { id: *id, addr });
        }
    }
    let recorded = layout.groups.get(&METADATA_GROUP);
    changes.extend(record_voters(METADATA_GROUP, Some(voters), recorded));
    let targets = metadata.reader.with_engine(|engine| {
        let replicas = DATA_REPLICAS as usize;
        engine.placement().replica_targets(replicas)
    });
    for (group, members) in targets.unwrap_or_default() {
        if layout.targets.get(&group) != Some(&members) {
            changes.push(PlacementCommand::SetTarget { group, members });
        }
    }
    for change in changes {
        if let Err(e) = place(metadata, change, stop).await {
            tracing::warn!(error = %e, "cannot record the groups' replicas yet");
        }
    }
}

/// The voters of `members` when no membership change is under way (one voter set).
fn settled(members: &Members) -> Option<BTreeSet<NodeId>> {
    (members.configs.len() == 1).then(|| members.voters())
}

/// The change that records `voters` (settled, and not empty) as group `group`'s members,
/// where the placement's entry (`recorded`) holds others.
fn record_voters(
    group: u32,
    voters: Option<BTreeSet<NodeId>>,
    recorded: Option<&GroupEntry>,
) -> Option<PlacementCommand> {
    let members = voters.filter(|voters| !voters.is_empty())?;
    let changed = recorded.is_none_or(|entry| entry.members != members);
    changed.then_some(PlacementCommand::SetMembers { group, members })
}

/// Starts the data groups the placement gives this node (as members or in their targets), forms
/// those it is the first member of, and, for those it leads, records itself as their leader
/// and their voters as their members and brings their voters to their targets; stops its
/// replicas of the groups that neither have it as a member nor in their target any more
/// (`left` keeps them until every task let go of them).
async fn follow(
    launcher: &Launcher,
    metadata: &Arc<GroupCore>,
    layout: &Layout,
    started: &mut Vec<GroupTasks>,
    left: &mut BTreeMap<GroupId, Weak<GroupCore>>,
) {
    let me = launcher.config.id;
    for (&number, entry) in &layout.groups {
        let group = GroupId(number);
        if number == METADATA_GROUP {
            continue;
        }
        if !layout.gives(number, me) {
            leave(&launcher.groups, group, left).await;
            continue;
        }
        match launcher.start_missing(group, left).await {
            // The tasks are kept, not the group: a group this node leaves must be let go of.
            Ok(Some(Started {
                tasks, committing, ..
            })) => started.push((tasks, committing)),
            Ok(None) => {}
            Err(e) => {
                tracing::error!(%group, error = %e, "cannot start the group");
                continue;
            }
        }
        let Some(core) = launcher.groups.get(group) else {
            continue;
        };
        if entry.formed && core.is_leader() {
            lead(&core, metadata, (number, entry), layout, &launcher.signal).await;
        }
        if !entry.formed && entry.former(number) == Some(me) {
            form(
                &core,
                metadata,
                &entry.members,
                &layout.nodes,
                &launcher.signal,
            )
            .await;
        }
    }
}

/// What the leader of a formed data group does on each pass: records itself as the leader
/// where the placement names another (where nodes with no replica of the group forward its
/// requests first), records the group's voters as its members, and, while they are not its
/// target in `layout`, makes the next change towards it (in a task of its own: a new member's
/// catch-up may take a while).
async fn lead(
    core: &Arc<GroupCore>,
    metadata: &Arc<GroupCore>,
    (number, entry): (u32, &GroupEntry),
    layout: &Layout,
    stop: &watch::Receiver<bool>,
) {
    let (group, me) = (core.group, core.node.id);
    let mut changes = Vec::new();
    if entry.leader_hint != Some(me) {
        changes.push(PlacementCommand::LeaderSeen {
            group: group.0,
            node: me,
        });
    }
    let members = core.members();
    let voters = settled(&members);
    changes.extend(record_voters(group.0, voters.clone(), Some(entry)));
    for change in changes {
        if let Err(e) = place(metadata, change, stop).await {
            tracing::debug!(%group, error = %e, "cannot record the group's leader or members yet");
        }
    }
    let learners = members.nodes.len() > members.voters().len();
    let target = layout.target(number);
    if voters.as_ref() != Some(&target) || learners {
        let (core, nodes) = (Arc::clone(core), layout.nodes.clone());
        let turns = layout.turns(number);
        tokio::spawn(async move {
            if let Err(e) = core.converge(&target, &turns, &nodes).await {
                tracing::warn!(group = %core.group, error = %e, "cannot change the group's members yet");
            }
        });
    }
}

/// Stops this node's replica of `group`, if it runs one and does not lead it: the group's
/// tasks and Raft instance stop, and it is taken out of the node's groups; its data goes once
/// nothing holds the group any more ([`forget_left`]).
async fn leave(groups: &Groups, group: GroupId, left: &mut BTreeMap<GroupId, Weak<GroupCore>>) {
    let Some(core) = groups.get(group).filter(|core| !core.is_leader()) else {
        return;
    };
    tracing::info!(%group, "this node left the group: stopping its replica");
    groups.remove(group);
    core.stop.send_replace(true);
    if let Err(e) = core.raft.shutdown().await {
        tracing::warn!(%group, error = %e, "raft shutdown");
    }
    left.insert(group, Arc::downgrade(&core));
}

/// Drops from this node's store the data of the groups it left (`left`) that nothing holds any
/// more and that the placement does not give it again; one that cannot be dropped yet is tried
/// again on the next pass. A node given a group again starts a blank replica of it, which its
/// leader adds as a learner and brings up to date.
fn forget_left(
    launcher: &Launcher,
    layout: &Layout,
    left: &mut BTreeMap<GroupId, Weak<GroupCore>>,
) {
    let me = launcher.config.id;
    left.retain(|group, core| {
        if core.strong_count() > 0 || layout.gives(group.0, me) {
            return true;
        }
        match launcher.store.drop_group(*group) {
            Ok(()) => {
                tracing::info!(%group, "dropped the data of a group this node left");
                false
            }
            Err(e) => {
                tracing::warn!(%group, error = %e, "cannot drop the data of a group this node left");
                true
            }
        }
    });
}

/// Hands one group this node leads over to a member that leads fewer, when this node leads
/// more than its share, or every group it leads when it drains (see the module, and
/// `Placement::leader_moves`); each group's leader as this node's replica knows it, or as the
/// placement last saw it. Answers whether it tried to hand any over.
async fn spread_leaders(held: &Groups, metadata: &GroupCore, layout: &Layout) -> bool {
    let Layout { groups, nodes, .. } = layout;
    let leaders: BTreeMap<u32, NodeId> = (groups.iter())
        .filter_map(|(number, entry)| {
            let leader = match held.get(GroupId(*number)) {
                Some(core) => core.current_leader(),
                None => entry.leader_hint,
            };
            Some((*number, leader?))
        })
        .collect();
    let answering = metadata.node.answering(ANSWERED_WITHIN);
    let me = metadata.node.id;
    let decided = metadata
        .reader
        .with_engine(|engine| (engine.placement()).leader_moves(&leaders, me, &answering));
    let moves = decided
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(number, to)| {
            // Not while a membership change of the group runs: it needs its leader.
            let core = held.get(GroupId(number));
            let core = core.filter(|core| core.is_leader() && core.changing.try_lock().is_ok())?;
            Some(async move {
                match core.hand_over(&BTreeSet::from([to]), nodes).await {
                    Ok(leader) => tracing::info!(group = number, leader, "handed the group over"),
                    Err(e) => tracing::warn!(group = number, to, error = %e, "cannot hand over"),
                }
            })
        });
    !join_all(moves).await.is_empty()
}

/// Initializes `core`'s group with `members` when no member holds a log of it (see the
/// module), and records that it is formed.
async fn form(
    core: &GroupCore,
    metadata: &Arc<GroupCore>,
    members: &BTreeSet<NodeId>,
    nodes: &BTreeMap<NodeId, String>,
    stop: &watch::Receiver<bool>,
) {
    let group = core.group;
    let own = match core.last_log() {
        Ok(own) => own,
        Err(e) => {
            tracing::error!(%group, error = %e, "cannot read the group's log");
            return;
        }
    };
    if own.is_none() {
        if !others_blank(core, members, nodes).await {
            return;
        }
        let voters: BTreeMap<NodeId, BasicNode> = members
            .iter()
            .filter_map(|id| Some((*id, BasicNode::new(nodes.get(id)?))))
            .collect();
        match core.raft.initialize(voters).await {
            Ok(()) => tracing::info!(%group, ?members, "formed the group"),
            Err(RaftError::APIError(e)) => {
                tracing::info!(%group, reason = %e, "the group is formed already")
            }
            Err(e) => {
                tracing::error!(%group, error = %e, "cannot form the group");
                return;
            }
        }
    }
    let change = PlacementCommand::GroupFormed { group: group.0 };
    if let Err(e) = place(metadata, change, stop).await {
        tracing::warn!(%group, error = %e, "cannot record that the group is formed yet");
    }
}

/// Whether every member of `core`'s group other than this node answers that it holds no log
/// of the group.
async fn others_blank(
    core: &GroupCore,
    members: &BTreeSet<NodeId>,
    nodes: &BTreeMap<NodeId, String>,
) -> bool {
    let others = members.iter().filter(|id| **id != core.node.id);
    let pings = others.map(|id| {
        let addr = nodes.get(id).cloned().unwrap_or_default();
        let mut client = core.network.client(*id, &addr);
        async move { client.ping(PING_TIMEOUT).await }
    });
    let answers = join_all(pings).await;
    answers
        .iter()
        .all(|answer| answer.is_some_and(|a| a.status.last_log.is_none()))
}

/// Commits a placement change through group 1's leader (a bootstrap made already counts as
/// made); an error says why it did not commit. Given up once the node shuts down (`stop`).
async fn place(
    metadata: &Arc<GroupCore>,
    change: PlacementCommand,
    stop: &watch::Receiver<bool>,
) -> Result<(), String> {
    let mut stop = stop.clone();
    let command = Command::Place { change };
    let response = tokio::select! {
        routed = metadata.route(&command) => routed.map_err(|e| e.to_string())?,
        _ = stop.wait_for(|stop| *stop) => return Err("the node is shutting down".into()),
    };
    match response.result {
        Some(Ok(_)) | Some(Err(EngineError::Placement(PlacementError::AlreadyBootstrapped))) => {
            Ok(())
        }
        Some(Err(e)) => Err(e.to_string()),
        None => Err("applied without an outcome".into()),
    }
}
