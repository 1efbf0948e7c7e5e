//! Which peer calls a node admits, and what it may do in its cluster.
//!
//! Raft is safe only while every voter remembers its log and its vote. A node whose data
//! directory was lost forgot both: if it voted again, a candidate missing acknowledged entries
//! could win with its vote, and the cluster would go on without them. So a node keeps, besides
//! its log, an [`Enrolment`] in its data directory:
//! - the *cluster id*, written by the node that forms the cluster before it does, and by every
//!   other node when it first hears from a leader. Every peer call carries the sender's id (the
//!   [`CLUSTER_HEADER`] header); a node refuses Raft traffic from another cluster, or without an
//!   id once it has one;
//! - whether the node is *joining*: it must be added to the cluster before it may vote or stand
//!   for election. A node is joining when it was started to join (`--join`), found its directory
//!   blank while its cluster existed (see `formation`), or was first told of the cluster by an
//!   append before it could ask its peers. The leader that adds it (as a learner, until it
//!   caught up) tells it so before it makes it a voter; a member that lost its directory is
//!   removed first (`raftq cluster replace`).
//!
//! A node's [`Standing`] sums this up, and is what it tells its peers when they ping it.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use openraft::LogId;
use raftq_store::{Enrolment, LogStore, NodeId, TypeConfig};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The gRPC metadata key of the sender's cluster id on peer calls.
pub(crate) const CLUSTER_HEADER: &str = "raftq-cluster-id";

/// What a node is to its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Standing {
    /// Its data directory holds no Raft state, and it has not yet heard from every listed peer.
    Blank,
    /// Blank, and so was every listed peer when it asked: a member of a cluster being formed.
    Fresh,
    /// It holds its cluster's state and takes part in it fully.
    Member,
    /// It must be added to the cluster (as a learner) before it votes or stands for election.
    Joining,
}

/// What a node answers a ping with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    pub cluster_id: Option<Uuid>,
    pub standing: Standing,
    /// The id of the last entry of its log: a candidate with an older log cannot get its vote.
    pub last_log: Option<LogId<NodeId>>,
    /// Its wall clock when it answered (milliseconds since the Unix epoch).
    pub clock_ms: u64,
}

impl PeerStatus {
    /// Whether the node that answered shows that a cluster exists.
    pub(crate) fn shows_a_cluster(&self) -> bool {
        self.cluster_id.is_some() || matches!(self.standing, Standing::Member | Standing::Joining)
    }

    /// Whether the node that answered would vote for a candidate whose log ends at `last_log`
    /// (Raft's rule: the candidate's log is at least as up to date), as far as its standing and
    /// log tell.
    pub(crate) fn would_vote_for(&self, last_log: Option<&LogId<NodeId>>) -> bool {
        matches!(self.standing, Standing::Fresh | Standing::Member)
            && self.last_log.as_ref() <= last_log
    }
}

/// How far a node has come: what it knows committed and what its state machine applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The highest log index it knows committed.
    pub commit_index: u64,
    /// The last log index its state machine applied.
    pub applied_index: u64,
}

/// How lately a node heard from a leader, as it answers a ping. A node that hears a leader
/// refuses a candidate its vote (openraft's leader lease), so the election gate of a node that
/// wants to stand counts such a node as refusing: a node that stands without the votes would
/// only raise its term, and that term would depose the working leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaderContact {
    /// It leads (and is not handing its leadership over).
    Leading,
    /// A leader's last append or heartbeat reached it this many milliseconds before it answered.
    HeardMsAgo(u64),
    /// No leader's append has reached it since it started.
    NotHeard,
}

impl LeaderContact {
    /// Whether the node that answered `age` ago still hears a leader, taking a leader heard
    /// within `lease` as heard.
    pub(crate) fn hears_a_leader(&self, age: Duration, lease: Duration) -> bool {
        match self {
            LeaderContact::Leading => true,
            LeaderContact::HeardMsAgo(ms) => Duration::from_millis(*ms).saturating_add(age) < lease,
            LeaderContact::NotHeard => false,
        }
    }
}

/// What a node answers a ping with: its [`PeerStatus`], then its [`Progress`] and its
/// [`LeaderContact`], encoded one after the other. A node of an earlier version answers with the
/// status alone and reads only the status of a longer answer (a postcard value ignores the bytes
/// after it), so nodes of both versions can ping each other during a rolling upgrade.
///
/// A ping that names groups (one ping a peer, for every group the two share: see `gate`) is
/// answered with a [`GroupPing`] for each of them after those three, which a node of an earlier
/// version neither asks for nor reads; such a node answers with group 1's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingAnswer {
    pub status: PeerStatus,
    /// `None` from a node of an earlier version.
    pub progress: Option<Progress>,
    /// `None` from a node of an earlier version.
    pub leader: Option<LeaderContact>,
}

/// What a node answers of one group it was pinged for: what [`PingAnswer`] says of the group
/// the ping's header names, for each group a ping lists. A node that takes no part in the group
/// answers for it with no log, no progress and no leader heard, as it answers a ping of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPing {
    pub group: u32,
    /// The id of the last entry of its log of the group.
    pub last_log: Option<LogId<NodeId>>,
    pub progress: Progress,
    pub leader: LeaderContact,
    /// It leads the group quietly: with no heartbeats, every follower having all it committed,
    /// while no entry comes. Its followers take its answers to their pings for its appends.
    pub quiet: bool,
}

impl GroupPing {
    /// The group's answer, as a ping of that group alone would have had it, from the node's
    /// `status`.
    pub(crate) fn answer(&self, status: &PeerStatus) -> PingAnswer {
        PingAnswer {
            status: PeerStatus {
                last_log: self.last_log,
                ..*status
            },
            progress: Some(self.progress),
            leader: Some(self.leader),
        }
    }
}

impl PingAnswer {
    /// The answer's bytes, with `groups` after them when the ping named groups.
    pub(crate) fn encode(
        status: &PeerStatus,
        progress: &Progress,
        leader: &LeaderContact,
        groups: Option<&[GroupPing]>,
    ) -> Result<Vec<u8>, postcard::Error> {
        match groups {
            None => raftq_engine::codec::to_vec(&(status, progress, leader)),
            Some(groups) => raftq_engine::codec::to_vec(&(status, progress, leader, groups)),
        }
    }

    /// Reads an answer of either version.
    pub(crate) fn decode(bytes: &[u8]) -> Result<PingAnswer, postcard::Error> {
        Self::decode_with_groups(bytes).map(|(answer, _)| answer)
    }

    /// Reads an answer of either version and the groups it answers for; `None` from a node of
    /// an earlier version, or for a ping that named none.
    pub(crate) fn decode_with_groups(
        bytes: &[u8],
    ) -> Result<(PingAnswer, Option<Vec<GroupPing>>), postcard::Error> {
        let (status, rest) = postcard::take_from_bytes::<PeerStatus>(bytes)?;
        let ((progress, leader), groups) = match rest {
            [] => ((None, None), None),
            rest => {
                let ((progress, leader), rest) =
                    postcard::take_from_bytes::<(Progress, LeaderContact)>(rest)?;
                let groups = match rest {
                    [] => None,
                    rest => Some(postcard::from_bytes::<Vec<GroupPing>>(rest)?),
                };
                ((Some(progress), Some(leader)), groups)
            }
        };
        let answer = PingAnswer {
            status,
            progress,
            leader,
        };
        Ok((answer, groups))
    }
}

/// The Raft calls a peer makes, as far as admission tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerCall {
    Append,
    Snapshot,
    Vote,
    Forward,
    /// A leader hands its leadership to this node.
    Elect,
    /// A leader added this joining node.
    Admit,
}

/// Why a peer call was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("this node belongs to cluster {ours}; the call came from cluster {theirs}")]
    OtherCluster { ours: Uuid, theirs: Uuid },
    #[error("this node belongs to cluster {0}; the call carried no cluster id")]
    NoClusterId(Uuid),
    #[error("this node does not vote: {0:?} (see docs/operations.md)")]
    MayNotVote(Standing),
    #[error("cannot record the cluster id: {0}")]
    Storage(String),
}

/// The cluster id this node knows, shared with the peer clients that send it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClusterId(Arc<RwLock<Option<Uuid>>>);

impl ClusterId {
    pub(crate) fn get(&self) -> Option<Uuid> {
        *self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set(&self, id: Uuid) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(id);
    }
}

/// A node's enrolment, as read from its data directory and as it changes.
pub(crate) struct Admission {
    log: LogStore<TypeConfig>,
    cluster: ClusterId,
    standing: RwLock<Standing>,
    /// Serializes changes, which are saved before they take effect.
    change: tokio::sync::Mutex<()>,
}

impl Admission {
    /// Reads the enrolment of the node whose log is `log`.
    pub(crate) fn open(log: &LogStore<TypeConfig>) -> Result<Admission, openraft::AnyError> {
        let enrolment = log.enrolment()?;
        let standing = if enrolment.joining {
            Standing::Joining
        } else if log.holds_raft_state()? {
            Standing::Member
        } else {
            // A cluster id without Raft state was saved by a node that stopped while forming
            // the cluster, before it proposed anything: it forms it again.
            Standing::Blank
        };
        let cluster = ClusterId::default();
        if let (Some(id), false) = (enrolment.cluster_id, standing == Standing::Blank) {
            cluster.set(id);
        }
        Ok(Admission {
            log: log.clone(),
            cluster,
            standing: RwLock::new(standing),
            change: tokio::sync::Mutex::new(()),
        })
    }

    /// The cluster id, shared.
    pub(crate) fn cluster(&self) -> ClusterId {
        self.cluster.clone()
    }

    pub(crate) fn standing(&self) -> Standing {
        *self.standing.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// What this node answers a ping with, its wall clock reading `clock_ms` and the log of the
    /// group asked about ending at `last_log`.
    pub(crate) fn status(&self, clock_ms: u64, last_log: Option<LogId<NodeId>>) -> PeerStatus {
        PeerStatus {
            cluster_id: self.cluster.get(),
            standing: self.standing(),
            last_log,
            clock_ms,
        }
    }

    /// Whether this node may stand for election.
    pub(crate) fn may_stand(&self) -> bool {
        self.standing() == Standing::Member
    }

    /// Admits a peer call from a node of cluster `sender`, or says why not. The first append or
    /// snapshot of a cluster enrols a node that has no cluster id yet.
    pub(crate) async fn admit(&self, call: PeerCall, sender: Option<Uuid>) -> Result<(), Refusal> {
        match (self.cluster.get(), sender) {
            (Some(ours), Some(theirs)) if ours != theirs => {
                return Err(Refusal::OtherCluster { ours, theirs })
            }
            (Some(ours), None) => return Err(Refusal::NoClusterId(ours)),
            (None, Some(theirs)) if matches!(call, PeerCall::Append | PeerCall::Snapshot) => {
                self.enrol(theirs).await?;
            }
            _ => {}
        }
        let standing = self.standing();
        let votes = matches!(call, PeerCall::Vote | PeerCall::Elect);
        if votes && matches!(standing, Standing::Blank | Standing::Joining) {
            return Err(Refusal::MayNotVote(standing));
        }
        Ok(())
    }

    /// Takes `id` as this node's cluster on the first append or snapshot from its leader.
    async fn enrol(&self, id: Uuid) -> Result<(), Refusal> {
        let _change = self.change.lock().await;
        if self.cluster.get().is_some() {
            return Ok(());
        }
        let standing = match self.standing() {
            // A blank node that hears from a leader before it could ask its peers did not take
            // part in forming the cluster: it may be a member that lost its directory.
            Standing::Blank | Standing::Joining => Standing::Joining,
            Standing::Fresh | Standing::Member => Standing::Member,
        };
        self.save(Some(id), standing).await?;
        tracing::info!(cluster = %id, ?standing, "enrolled in the cluster");
        Ok(())
    }

    /// Blank, and so was every listed peer.
    pub(crate) fn become_fresh(&self) {
        self.set_standing(Standing::Fresh);
    }

    /// Blank while the cluster exists: this node must be added again before it votes.
    pub(crate) async fn become_joining(&self) -> Result<(), Refusal> {
        let _change = self.change.lock().await;
        self.save(self.cluster.get(), Standing::Joining).await
    }

    /// This node forms a new cluster: its id is saved before anything is proposed.
    pub(crate) async fn form(&self) -> Result<Uuid, Refusal> {
        let _change = self.change.lock().await;
        let id = raftq_store::random::uuid();
        self.save(Some(id), Standing::Member).await?;
        Ok(id)
    }

    /// A joining node was added and caught up: from now on it takes part fully.
    pub(crate) async fn readmitted(&self) -> Result<(), Refusal> {
        let _change = self.change.lock().await;
        self.save(self.cluster.get(), Standing::Member).await
    }

    async fn save(&self, cluster_id: Option<Uuid>, standing: Standing) -> Result<(), Refusal> {
        let enrolment = Enrolment {
            cluster_id,
            joining: standing == Standing::Joining,
        };
        self.log
            .save_enrolment(&enrolment)
            .await
            .map_err(|e| Refusal::Storage(e.to_string()))?;
        if let Some(id) = cluster_id {
            self.cluster.set(id);
        }
        self.set_standing(standing);
        Ok(())
    }

    fn set_standing(&self, standing: Standing) {
        *self
            .standing
            .write()
            .unwrap_or_else(PoisonError::into_inner) = standing;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::storage::RaftLogStorage;
    use raftq_store::{open_db, META_CF};

    fn store(dir: &tempfile::TempDir) -> LogStore<TypeConfig> {
        let db = open_db(&dir.path().join("db"), &Default::default()).expect("open database");
        LogStore::open(db, META_CF, &dir.path().join("log")).expect("log store")
    }

    fn id(n: u128) -> Option<Uuid> {
        Some(Uuid::from_u128(n))
    }

    #[test]
    fn a_peer_would_vote_only_for_a_log_as_up_to_date_as_its_own() {
        let log = |term, index| Some(openraft::testing::log_id(term, 1, index));
        let peer = |standing, last_log| PeerStatus {
            cluster_id: id(1),
            standing,
            last_log,
            clock_ms: 0,
        };
        let member = peer(Standing::Member, log(2, 10));
        assert!(member.would_vote_for(log(2, 10).as_ref()));
        assert!(
            member.would_vote_for(log(3, 5).as_ref()),
            "a later term wins"
        );
        assert!(!member.would_vote_for(log(2, 9).as_ref()));
        assert!(!member.would_vote_for(None));
        assert!(peer(Standing::Fresh, None).would_vote_for(None));
        for standing in [Standing::Blank, Standing::Joining] {
            assert!(!peer(standing, None).would_vote_for(log(9, 9).as_ref()));
        }
    }

    #[test]
    fn ping_answers_read_across_versions() {
        let status = PeerStatus {
            cluster_id: id(7),
            standing: Standing::Member,
            last_log: Some(openraft::testing::log_id(3, 1, 42)),
            clock_ms: 1_700_000_000_000,
        };
        let progress = Progress {
            commit_index: 41,
            applied_index: 40,
        };
        let leader = LeaderContact::HeardMsAgo(12);
        let answer = PingAnswer::encode(&status, &progress, &leader, None).expect("encode");
        assert_eq!(
            PingAnswer::decode_with_groups(&answer).expect("decode"),
            (
                PingAnswer {
                    status,
                    progress: Some(progress),
                    leader: Some(leader),
                },
                None
            )
        );
        // An answer for the groups a ping named reads as it was, and what it says of each
        // group as that group's answer; a node of the earlier version reads what it did before.
        let groups = [GroupPing {
            group: 5,
            last_log: Some(openraft::testing::log_id(2, 3, 9)),
            progress: Progress {
                commit_index: 9,
                applied_index: 9,
            },
            leader: LeaderContact::Leading,
            quiet: true,
        }];
        let grouped =
            PingAnswer::encode(&status, &progress, &leader, Some(&groups)).expect("encode");
        let (first, read) = PingAnswer::decode_with_groups(&grouped).expect("decode");
        assert_eq!(first, PingAnswer::decode(&answer).expect("decode"));
        assert_eq!(read.as_deref(), Some(&groups[..]));
        assert_eq!(
            groups[0].answer(&status),
            PingAnswer {
                status: PeerStatus {
                    last_log: groups[0].last_log,
                    ..status
                },
                progress: Some(groups[0].progress),
                leader: Some(LeaderContact::Leading),
            }
        );
        let (progress_read, leader_read): (Progress, LeaderContact) = postcard::from_bytes(
            postcard::take_from_bytes::<PeerStatus>(&grouped)
                .expect("status")
                .1,
        )
        .expect("earlier read");
        assert_eq!((progress_read, leader_read), (progress, leader));
        // A node of the earlier version reads the status and ignores what follows it.
        let read_by_earlier: PeerStatus = postcard::from_bytes(&answer).expect("earlier read");
        assert_eq!(read_by_earlier, status);
        // A node of the earlier version answers with the status alone.
        let earlier = raftq_engine::codec::to_vec(&status).expect("encode");
        assert_eq!(
            PingAnswer::decode(&earlier).expect("decode"),
            PingAnswer {
                status,
                progress: None,
                leader: None,
            }
        );
        assert!(PingAnswer::decode(&answer[..answer.len() - 1]).is_err());
    }

    #[test]
    fn a_node_hears_a_leader_while_it_leads_or_within_the_lease() {
        let ms = Duration::from_millis;
        let lease = ms(350);
        assert!(LeaderContact::Leading.hears_a_leader(ms(400), lease));
        assert!(LeaderContact::HeardMsAgo(0).hears_a_leader(ms(349), lease));
        assert!(!LeaderContact::HeardMsAgo(0).hears_a_leader(ms(350), lease));
        // The answer's age counts: it heard 200 ms before answering, 100 ms ago.
        assert!(LeaderContact::HeardMsAgo(200).hears_a_leader(ms(100), lease));
        assert!(!LeaderContact::HeardMsAgo(200).hears_a_leader(ms(150), lease));
        assert!(!LeaderContact::HeardMsAgo(u64::MAX).hears_a_leader(ms(1), lease));
        assert!(!LeaderContact::NotHeard.hears_a_leader(ms(0), lease));
    }

    #[tokio::test]
    async fn a_blank_node_votes_only_once_it_knows_it_is_fresh() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let admission = Admission::open(&store(&dir)).expect("open");
        assert_eq!(admission.standing(), Standing::Blank);
        assert!(matches!(
            admission.admit(PeerCall::Vote, id(1)).await,
            Err(Refusal::MayNotVote(Standing::Blank))
        ));
        admission.become_fresh();
        admission.admit(PeerCall::Vote, id(1)).await.expect("vote");
        assert_eq!(admission.cluster().get(), None, "a vote enrols nothing");
        admission
            .admit(PeerCall::Append, id(1))
            .await
            .expect("append");
        assert_eq!(
            (admission.cluster().get(), admission.standing()),
            (id(1), Standing::Member)
        );
        assert!(admission.may_stand());
    }

    #[tokio::test]
    async fn a_blank_node_first_told_by_an_append_must_be_added_again() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let log = store(&dir);
        let admission = Admission::open(&log).expect("open");
        admission
            .admit(PeerCall::Append, id(1))
            .await
            .expect("append");
        assert_eq!(admission.standing(), Standing::Joining);
        assert!(!admission.may_stand());
        assert!(admission.admit(PeerCall::Vote, id(1)).await.is_err());
        // Still joining after a restart, though it now holds state.
        let mut log = log;
        log.save_vote(&openraft::Vote::new(3, 2))
            .await
            .expect("vote");
        let again = Admission::open(&log).expect("reopen");
        assert_eq!(
            (again.cluster().get(), again.standing()),
            (id(1), Standing::Joining)
        );
        again.readmitted().await.expect("readmitted");
        assert!(again.may_stand());
        assert_eq!(
            Admission::open(&log).expect("reopen").standing(),
            Standing::Member
        );
    }

    #[tokio::test]
    async fn calls_from_another_cluster_or_without_an_id_are_refused() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let admission = Admission::open(&store(&dir)).expect("open");
        admission.become_fresh();
        admission
            .admit(PeerCall::Append, id(1))
            .await
            .expect("append");
        for call in [
            PeerCall::Append,
            PeerCall::Snapshot,
            PeerCall::Vote,
            PeerCall::Forward,
            PeerCall::Elect,
            PeerCall::Admit,
        ] {
            assert!(matches!(
                admission.admit(call, id(2)).await,
                Err(Refusal::OtherCluster { .. })
            ));
            assert!(matches!(
                admission.admit(call, None).await,
                Err(Refusal::NoClusterId(_))
            ));
            admission.admit(call, id(1)).await.expect("own cluster");
        }
    }

    #[tokio::test]
    async fn a_cluster_id_saved_before_forming_without_raft_state_is_forgotten() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let log = store(&dir);
        let admission = Admission::open(&log).expect("open");
        admission.become_fresh();
        admission.form().await.expect("form");
        assert_eq!(admission.standing(), Standing::Member);
        let reopened = Admission::open(&log).expect("reopen");
        assert_eq!(
            (reopened.cluster().get(), reopened.standing()),
            (None, Standing::Blank)
        );
    }
}
