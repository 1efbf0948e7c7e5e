//! raftq: a newly committed log id waits `COMMITTED_ALONE_AFTER` for the next append to carry
//! it, and goes alone in an empty append only if none came (RAFTQ.md, "A commit index waits a
//! moment for the next append"). A replication stream runs here against a network that records
//! what the follower receives, under tokio's paused clock, so the times are exact.
//!
//! It needs the `storage-v2` feature (which raftq enables): the mock log store's trait is sealed
//! without it.

use std::ops::RangeBounds;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::request::Replicate;
use super::ReplicationCore;
use super::ReplicationHandle;
use super::ReplicationSessionId;
use super::COMMITTED_ALONE_AFTER;
use crate::core::notify::Notify;
use crate::core::sm;
use crate::engine::testing::UTConfig;
use crate::entry::RaftEntry;
use crate::error::RPCError;
use crate::error::RaftError;
use crate::log_id_range::LogIdRange;
use crate::network::RPCOption;
use crate::raft::AppendEntriesRequest;
use crate::raft::AppendEntriesResponse;
use crate::raft::VoteRequest;
use crate::raft::VoteResponse;
use crate::replication::request_id::RequestId;
use crate::storage::LogFlushed;
use crate::storage::RaftLogStorage;
use crate::storage::RaftStateMachine;
use crate::testing::log_id;
use crate::Config;
use crate::Entry;
use crate::LogId;
use crate::LogState;
use crate::OptionalSend;
use crate::RaftLogId;
use crate::RaftLogReader;
use crate::RaftNetwork;
use crate::RaftNetworkFactory;
use crate::RaftSnapshotBuilder;
use crate::Snapshot;
use crate::SnapshotMeta;
use crate::StorageError;
use crate::StoredMembership;
use crate::Vote;

/// What the follower received: when, after which log id, up to which log id, and the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Received {
    at: Instant,
    prev: Option<LogId<u64>>,
    last: Option<LogId<u64>>,
    commit: Option<LogId<u64>>,
}

/// A follower that holds every entry it is sent, and records each append.
struct Net {
    tx: mpsc::UnboundedSender<Received>,
}

impl RaftNetwork<UTConfig> for Net {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<UTConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, (), RaftError<u64>>> {
        let last = rpc.entries.last().map(|e| *e.get_log_id()).or(rpc.prev_log_id);
        let _ = self.tx.send(Received {
            at: Instant::now(),
            prev: rpc.prev_log_id,
            last,
            commit: rpc.leader_commit,
        });
        Ok(AppendEntriesResponse::Success)
    }

    #[cfg(not(feature = "generic-snapshot-data"))]
    async fn install_snapshot(
        &mut self,
        _rpc: crate::raft::InstallSnapshotRequest<UTConfig>,
        _option: RPCOption,
    ) -> Result<
        crate::raft::InstallSnapshotResponse<u64>,
        RPCError<u64, (), RaftError<u64, crate::error::InstallSnapshotError>>,
    > {
        unimplemented!("no snapshot in these tests")
    }

    #[cfg(feature = "generic-snapshot-data")]
    async fn full_snapshot(
        &mut self,
        _vote: Vote<u64>,
        _snapshot: Snapshot<UTConfig>,
        _cancel: impl std::future::Future<Output = crate::error::ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<crate::raft::SnapshotResponse<u64>, crate::error::StreamingError<UTConfig, crate::error::Fatal<u64>>>
    {
        unimplemented!("no snapshot in these tests")
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, (), RaftError<u64>>> {
        unimplemented!("no vote in these tests")
    }
}

struct NetFactory;

impl RaftNetworkFactory<UTConfig> for NetFactory {
    type Network = Net;

    async fn new_client(&mut self, _target: u64, _node: &()) -> Net {
        unimplemented!("the network is handed to the replication stream directly")
    }
}

/// A leader's log of blank entries `(1,1,i)`.
struct Reader;

impl RaftLogReader<UTConfig> for Reader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<UTConfig>>, StorageError<u64>> {
        let start = match range.start_bound() {
            std::ops::Bound::Included(s) => *s,
            std::ops::Bound::Excluded(s) => *s + 1,
            std::ops::Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            std::ops::Bound::Included(e) => *e + 1,
            std::ops::Bound::Excluded(e) => *e,
            std::ops::Bound::Unbounded => unimplemented!(),
        };
        Ok((start..end).map(|i| Entry::new_blank(log_id(1, 1, i))).collect())
    }
}

/// Only its `LogReader` type is used: the replication stream reads the log through a `Reader`.
struct LogStore;

impl RaftLogReader<UTConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + OptionalSend>(
        &mut self,
        _range: RB,
    ) -> Result<Vec<Entry<UTConfig>>, StorageError<u64>> {
        unimplemented!()
    }
}

impl RaftLogStorage<UTConfig> for LogStore {
    type LogReader = Reader;

    async fn get_log_state(&mut self) -> Result<LogState<UTConfig>, StorageError<u64>> {
        unimplemented!()
    }

    async fn get_log_reader(&mut self) -> Reader {
        Reader
    }

    async fn save_vote(&mut self, _vote: &Vote<u64>) -> Result<(), StorageError<u64>> {
        unimplemented!()
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError<u64>> {
        unimplemented!()
    }

    async fn append<I>(&mut self, _entries: I, _callback: LogFlushed<UTConfig>) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<UTConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        unimplemented!()
    }

    async fn truncate(&mut self, _log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        unimplemented!()
    }

    async fn purge(&mut self, _log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        unimplemented!()
    }
}

/// A state machine that is never asked for anything: it only backs the `SnapshotReader` that a
/// replication stream is given.
struct StateMachine;

impl RaftSnapshotBuilder<UTConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<UTConfig>, StorageError<u64>> {
        unimplemented!()
    }
}

impl RaftStateMachine<UTConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId<u64>>, StoredMembership<u64, ()>), StorageError<u64>> {
        unimplemented!()
    }

    async fn apply<I>(&mut self, _entries: I) -> Result<Vec<()>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<UTConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        unimplemented!()
    }

    async fn get_snapshot_builder(&mut self) -> StateMachine {
        unimplemented!()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<std::io::Cursor<Vec<u8>>>, StorageError<u64>> {
        unimplemented!()
    }

    async fn install_snapshot(
        &mut self,
        _meta: &SnapshotMeta<u64, ()>,
        _snapshot: Box<std::io::Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        unimplemented!()
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<UTConfig>>, StorageError<u64>> {
        unimplemented!()
    }
}

/// A replication stream from leader 1 (term 1) to node 2, which holds the leader's log up to
/// `(1,1,2)`; `(1,1,1)` is committed and node 2 knows it.
struct Stream {
    handle: ReplicationHandle<UTConfig>,
    rx: mpsc::UnboundedReceiver<Received>,
    // Kept alive for the stream: the core's notification channel and the state machine worker.
    _rx_notify: mpsc::UnboundedReceiver<Notify<UTConfig>>,
    _sm: sm::handle::Handle<UTConfig>,
}

impl Stream {
    fn spawn() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (tx_notify, rx_notify) = mpsc::unbounded_channel();
        let sm_handle = sm::worker::Worker::spawn(StateMachine, tx_notify.clone());

        let handle = ReplicationCore::<UTConfig, NetFactory, LogStore>::spawn(
            2,
            ReplicationSessionId::new(Vote::new_committed(1, 1), Some(log_id(1, 1, 1))),
            Arc::new(Config::default()),
            Some(log_id(1, 1, 1)),
            Some(log_id(1, 1, 2)),
            Net { tx: tx.clone() },
            Net { tx },
            Reader,
            sm_handle.new_snapshot_reader(),
            tx_notify,
            tracing::Span::none(),
        );

        Self {
            handle,
            rx,
            _rx_notify: rx_notify,
            _sm: sm_handle,
        }
    }

    fn send(&self, event: Replicate<UTConfig>) {
        self.handle.tx_repl.send(event).unwrap();
    }

    /// The next append the follower receives.
    async fn next(&mut self) -> Received {
        self.rx.recv().await.unwrap()
    }

    /// Lets the clock run `d` (the stream acts meanwhile) and returns what the follower got.
    async fn received_within(&mut self, d: Duration) -> Vec<Received> {
        tokio::time::sleep(d).await;
        let mut got = vec![];
        while let Ok(r) = self.rx.try_recv() {
            got.push(r);
        }
        got
    }
}

fn logs(id: u64, prev: LogId<u64>, last: LogId<u64>) -> Replicate<UTConfig> {
    Replicate::logs(
        RequestId::new_append_entries(id),
        LogIdRange::new(Some(prev), Some(last)),
    )
}

#[test]
fn test_committed_alone_after_is_2ms() {
    assert_eq!(Duration::from_millis(2), COMMITTED_ALONE_AFTER);
}

/// No append comes: the commit goes alone, in an empty append, exactly `COMMITTED_ALONE_AFTER`
/// after it was known, and only once.
#[tokio::test(start_paused = true)]
async fn test_commit_alone_goes_when_due() {
    let mut s = Stream::spawn();
    let t0 = Instant::now();

    s.send(Replicate::Committed(Some(log_id(1, 1, 2))));

    assert_eq!(
        Received {
            at: t0 + COMMITTED_ALONE_AFTER,
            prev: Some(log_id(1, 1, 2)),
            last: Some(log_id(1, 1, 2)),
            commit: Some(log_id(1, 1, 2)),
        },
        s.next().await
    );
    assert_eq!(Vec::<Received>::new(), s.received_within(Duration::from_secs(1)).await);
}

/// An append that comes within `COMMITTED_ALONE_AFTER` carries the commit, and no empty append
/// follows it.
#[tokio::test(start_paused = true)]
async fn test_next_append_carries_the_commit() {
    let mut s = Stream::spawn();
    let t0 = Instant::now();

    s.send(Replicate::Committed(Some(log_id(1, 1, 2))));
    assert_eq!(
        Vec::<Received>::new(),
        s.received_within(Duration::from_millis(1)).await
    );

    s.send(logs(1, log_id(1, 1, 2), log_id(1, 1, 3)));

    assert_eq!(
        Received {
            at: t0 + Duration::from_millis(1),
            prev: Some(log_id(1, 1, 2)),
            last: Some(log_id(1, 1, 3)),
            commit: Some(log_id(1, 1, 2)),
        },
        s.next().await
    );
    assert_eq!(Vec::<Received>::new(), s.received_within(Duration::from_secs(1)).await);
}

/// Commits that come while one waits are sent together, in one empty append with the latest,
/// when the first is due: a stream of commits cannot put its sending off.
#[tokio::test(start_paused = true)]
async fn test_commits_in_the_window_go_together_when_the_first_is_due() {
    let mut s = Stream::spawn();
    let t0 = Instant::now();

    s.send(Replicate::Committed(Some(log_id(1, 1, 2))));
    assert_eq!(
        Vec::<Received>::new(),
        s.received_within(Duration::from_millis(1)).await
    );
    s.send(Replicate::Committed(Some(log_id(1, 1, 3))));

    assert_eq!(
        Received {
            at: t0 + COMMITTED_ALONE_AFTER,
            prev: Some(log_id(1, 1, 2)),
            last: Some(log_id(1, 1, 2)),
            commit: Some(log_id(1, 1, 3)),
        },
        s.next().await
    );
    assert_eq!(Vec::<Received>::new(), s.received_within(Duration::from_secs(1)).await);
}

/// A commit that comes while an append is queued rides on that append, as published; a heartbeat
/// sends the commit at once, as published, and a commit then waiting is not sent again.
#[tokio::test(start_paused = true)]
async fn test_queued_append_and_heartbeat_carry_the_commit_at_once() {
    let mut s = Stream::spawn();
    let t0 = Instant::now();

    // Both events are queued before the stream runs: the append is the next action.
    s.send(logs(1, log_id(1, 1, 2), log_id(1, 1, 3)));
    s.send(Replicate::Committed(Some(log_id(1, 1, 2))));

    assert_eq!(
        Received {
            at: t0,
            prev: Some(log_id(1, 1, 2)),
            last: Some(log_id(1, 1, 3)),
            commit: Some(log_id(1, 1, 2)),
        },
        s.next().await
    );
    assert_eq!(
        Vec::<Received>::new(),
        s.received_within(Duration::from_millis(10)).await
    );

    let t1 = Instant::now();
    s.send(Replicate::Committed(Some(log_id(1, 1, 3))));
    assert_eq!(
        Vec::<Received>::new(),
        s.received_within(Duration::from_millis(1)).await
    );
    s.send(Replicate::Heartbeat);

    assert_eq!(
        Received {
            at: t1 + Duration::from_millis(1),
            prev: Some(log_id(1, 1, 3)),
            last: Some(log_id(1, 1, 3)),
            commit: Some(log_id(1, 1, 3)),
        },
        s.next().await
    );
    assert_eq!(Vec::<Received>::new(), s.received_within(Duration::from_secs(1)).await);
}
