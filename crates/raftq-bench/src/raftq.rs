//! raftq through its two front ends: gRPC (`raftq.v1.Queues`, a tonic client) and REST (the
//! `raftq-client` crate). Both map the workloads the same way; only the transport differs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use futures_util::future::try_join_all;
use pb::queues_client::QueuesClient;
use raftq_proto::v1 as pb;
use serde_json::{json, Value};

use crate::driver::{read_sender, read_stamp, Driver, Outgoing, QueueSpec, Received, SystemNotes};
use crate::producer::Producer;
use raftq_h2::{H2Channel, Target};

/// Long-poll wait of a receive, in seconds.
const RECEIVE_WAIT_SECONDS: i64 = 1;
/// gRPC connections per node. Few connections carry many calls per read and write system call,
/// as the peers' clients do with their one connection each; two keep each connection under the
/// server's cap of 200 concurrent streams (hyper's default) at 256 calls in flight.
const GRPC_CONNECTIONS_PER_NODE: usize = 2;
/// How long connecting to a node may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait for a leader before giving up.
const LEADER_WAIT: Duration = Duration::from_secs(15);
/// How long to wait for a cluster's Raft groups to be formed, led and spread before giving up.
const GROUPS_WAIT: Duration = Duration::from_secs(180);

fn notes() -> SystemNotes {
    SystemNotes {
        durability: "every Raft log append fsynced (group commit), success after a majority \
                     committed and the leader applied it; receive and ack are Raft writes too"
            .into(),
        syncs_before_ack: true,
        fifo: "FIFO queue (`.fifo`), one message group per group, deduplication ID per message"
            .into(),
        redelivery: "the lease changed to 0 s (released, as SQS's ChangeMessageVisibility 0), one \
                     call and Raft entry per message: visible again at once"
            .into(),
        dead_letter: "redrive policy with max_receive_count 1: the released message moves to the \
                      dead-letter queue (exactly once, a Raft entry)"
            .into(),
    }
}

fn queue_name(spec: &QueueSpec) -> String {
    if spec.fifo {
        format!("{}.fifo", spec.name)
    } else {
        spec.name.clone()
    }
}

fn lease_seconds(spec: &QueueSpec) -> i64 {
    i64::try_from(spec.lease.as_secs()).unwrap_or(i64::MAX)
}

/// Which index in `ids` is `leader`, waiting while the cluster has none.
async fn leader_index<F, Fut>(ids: &[u64], mut leader: F) -> Result<Option<usize>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<u64>>>,
{
    let deadline = tokio::time::Instant::now() + LEADER_WAIT;
    loop {
        if let Some(id) = leader().await? {
            return Ok(ids.iter().position(|n| *n == id));
        }
        if tokio::time::Instant::now() > deadline {
            bail!("no leader after {LEADER_WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What each group of a cluster is, as the answers of all its nodes to `GetCluster` tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct GroupView {
    /// Whether any node says it was formed.
    formed: bool,
    /// Its leader as the member answering with the highest term names it, else as any node's
    /// hint names it.
    leader: Option<u64>,
}

/// Each group of `answers` (the groups every node answered with, all together), by number. A
/// node holding a replica of a group knows its leader better than one holding none (which
/// answers a hint that may be old), and of those holding one, the one with the highest term.
fn group_views(answers: &[pb::ClusterGroup]) -> BTreeMap<u32, GroupView> {
    let mut views: BTreeMap<u32, (GroupView, Option<u64>)> = BTreeMap::new();
    for answer in answers {
        let (view, best_term) = views.entry(answer.group).or_default();
        view.formed |= answer.formed;
        let Some(leader) = answer.leader else {
            continue;
        };
        // A member's word (its term) beats a hint (no term); a hint counts while none is known.
        let term = answer.role.as_ref().and(answer.term);
        let better = match (term, *best_term) {
            (Some(t), Some(best)) => t > best,
            (Some(_), None) => true,
            (None, _) => view.leader.is_none(),
        };
        if better {
            view.leader = Some(leader);
            *best_term = term.or(*best_term);
        }
    }
    views.into_iter().map(|(g, (view, _))| (g, view)).collect()
}

/// The leader a queue of `group` is best reached through: its group's, else the cluster's
/// (group 1's), which forwards to it.
fn queue_leader(
    group: u32,
    views: &BTreeMap<u32, GroupView>,
    cluster_leader: Option<u64>,
) -> Option<u64> {
    views
        .get(&group)
        .and_then(|view| view.leader)
        .or(cluster_leader)
}

/// Whether `views` shows the `expected` groups (numbered from 1), each formed and led, their
/// leaders spread over the `nodes` nodes as the cluster's balancer keeps them (none leading more
/// than ceil(expected / nodes)): a row measured while the balancer still moves leaders would
/// pay for the moves and for the forwarding to each moved leader.
fn groups_ready(views: &BTreeMap<u32, GroupView>, expected: u32, nodes: usize) -> bool {
    let mut led: BTreeMap<u64, u32> = BTreeMap::new();
    for g in 1..=expected {
        match views.get(&g) {
            Some(GroupView {
                formed: true,
                leader: Some(leader),
            }) => *led.entry(*leader).or_default() += 1,
            _ => return false,
        }
    }
    let most = expected.div_ceil(u32::try_from(nodes.max(1)).unwrap_or(u32::MAX));
    led.values().all(|&count| count <= most)
}

/// How the gRPC driver's connections use TLS: the CA's certificates (PEM), and per endpoint the
/// name its certificate must carry (empty: each endpoint's host).
pub struct Tls {
    pub ca_pem: Vec<u8>,
    pub names: Vec<String>,
}

/// raftq over gRPC.
pub struct RaftqGrpc {
    /// Per node (endpoint order): its id and its connections, each with its send stream.
    nodes: Vec<(u64, Vec<Connection>)>,
    next: AtomicUsize,
}

/// A client on one connection, and the stream its single sends share.
#[derive(Clone)]
struct Connection {
    client: QueuesClient<H2Channel>,
    producer: Producer,
}

/// One task's handle: one of the node's connections.
pub struct GrpcSession {
    connection: Connection,
    queue: String,
    lease_seconds: i64,
}

impl RaftqGrpc {
    /// Connects to every endpoint (`http://`, or `https://` with `tls`).
    pub async fn connect(endpoints: &[String], tls: Option<&Tls>) -> Result<RaftqGrpc> {
        if let Some(tls) = tls {
            if !tls.names.is_empty() && tls.names.len() != endpoints.len() {
                bail!("one TLS name per endpoint");
            }
        }
        let mut nodes = Vec::new();
        for (i, endpoint) in endpoints.iter().enumerate() {
            let mut clients = Vec::new();
            let origin: http::Uri = endpoint
                .parse()
                .with_context(|| format!("endpoint {endpoint}"))?;
            let authority = origin
                .authority()
                .ok_or_else(|| anyhow!("endpoint {endpoint} has no host:port"))?
                .to_string();
            let mut target = Target::plain(authority.clone(), CONNECT_TIMEOUT);
            if let Some(tls) = tls {
                let name = tls.names.get(i).map(String::as_str);
                target.tls = Some(crate::tls::client_config(&tls.ca_pem, name)?);
            }
            for _ in 0..GRPC_CONNECTIONS_PER_NODE {
                let channel = H2Channel::new(target.clone());
                channel
                    .connect()
                    .await
                    .with_context(|| format!("connecting to {authority}"))?;
                let client = QueuesClient::with_origin(channel, origin.clone());
                let producer = Producer::open(client.clone()).await?;
                clients.push(Connection { client, producer });
            }
            let cluster = clients[0]
                .client
                .clone()
                .get_cluster(pb::GetClusterRequest {})
                .await?
                .into_inner();
            nodes.push((cluster.node_id, clients));
        }
        Ok(RaftqGrpc {
            nodes,
            next: AtomicUsize::new(0),
        })
    }

    fn connection(&self, node: usize) -> Result<Connection> {
        let (_, connections) = self
            .nodes
            .get(node)
            .ok_or_else(|| anyhow!("no node {node}"))?;
        let i = self.next.fetch_add(1, Ordering::Relaxed) % connections.len();
        Ok(connections[i].clone())
    }

    fn client(&self, node: usize) -> Result<QueuesClient<H2Channel>> {
        Ok(self.connection(node)?.client)
    }

    /// The cluster's leader as the first node knows it, and its groups as all nodes see them.
    async fn groups(&self) -> Result<(Option<u64>, BTreeMap<u32, GroupView>)> {
        let mut leader = None;
        let mut answers = Vec::new();
        for node in 0..self.nodes.len() {
            let request = pb::GetClusterRequest {};
            let cluster = self.client(node)?.get_cluster(request).await?.into_inner();
            if node == 0 {
                leader = cluster.leader;
            }
            answers.extend(cluster.groups);
        }
        Ok((leader, group_views(&answers)))
    }

    /// Waits until the cluster shows `expected` Raft groups, each formed and led, the leaders
    /// spread over the nodes, so that new queues spread over all of them.
    pub async fn wait_for_groups(&self, expected: u32) -> Result<()> {
        let deadline = tokio::time::Instant::now() + GROUPS_WAIT;
        loop {
            let (_, views) = self.groups().await?;
            if groups_ready(&views, expected, self.nodes.len()) {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "{expected} groups not all formed, led and spread after {GROUPS_WAIT:?}: \
                     {views:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Driver for RaftqGrpc {
    type Session = GrpcSession;
    type Receipt = String;

    fn notes(&self) -> SystemNotes {
        notes()
    }

    fn supports_fair_queues(&self) -> bool {
        true
    }

    async fn create_queue(&self, spec: &QueueSpec) -> Result<()> {
        let redrive_policy = spec.dead_letter.as_ref().map(|dlq| pb::RedrivePolicyInput {
            dead_letter_target: Some(dlq.clone()),
            max_receive_count: Some(1),
        });
        self.client(0)?
            .create_queue(pb::CreateQueueRequest {
                name: queue_name(spec),
                lease_seconds: Some(lease_seconds(spec)),
                redrive_policy,
                ..Default::default()
            })
            .await?;
        Ok(())
    }

    async fn delete_queue(&self, spec: &QueueSpec) -> Result<()> {
        self.client(0)?
            .delete_queue(pb::DeleteQueueRequest {
                queue: queue_name(spec),
            })
            .await?;
        Ok(())
    }

    /// The leader of the queue's group (of the cluster's while that is not known).
    async fn leader(&self, spec: &QueueSpec) -> Result<Option<usize>> {
        let ids: Vec<u64> = self.nodes.iter().map(|(id, _)| *id).collect();
        let queue = queue_name(spec);
        leader_index(&ids, || async {
            let request = pb::GetQueueRequest {
                queue: queue.clone(),
            };
            let group = self.client(0)?.get_queue(request).await?.into_inner().group;
            let (cluster_leader, views) = self.groups().await?;
            Ok(queue_leader(group, &views, cluster_leader))
        })
        .await
    }

    async fn session(&self, spec: &QueueSpec, node: usize) -> Result<GrpcSession> {
        Ok(GrpcSession {
            connection: self.connection(node)?,
            queue: queue_name(spec),
            lease_seconds: lease_seconds(spec),
        })
    }

    async fn send(&self, session: &mut GrpcSession, messages: Vec<Outgoing>) -> Result<()> {
        if let [message] = messages.as_slice() {
            return session
                .connection
                .producer
                .send(pb::SendMessageRequest {
                    queue: session.queue.clone(),
                    body: message.body.clone(),
                    message_group_id: message.group.clone(),
                    message_deduplication_id: message.dedup_id.clone(),
                    ..Default::default()
                })
                .await;
        }
        let entries = messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| pb::SendMessageBatchEntry {
                id: i.to_string(),
                body: m.body,
                message_group_id: m.group,
                message_deduplication_id: m.dedup_id,
                ..Default::default()
            })
            .collect();
        let response = session
            .connection
            .client
            .send_message_batch(pb::SendMessageBatchRequest {
                queue: session.queue.clone(),
                entries,
            })
            .await?
            .into_inner();
        for result in response.results {
            if let Some(pb::send_message_batch_result::Outcome::Error(e)) = result.outcome {
                bail!("batch entry {}: {} {}", result.id, e.code, e.message);
            }
        }
        Ok(())
    }

    async fn receive(
        &self,
        session: &mut GrpcSession,
        max: usize,
    ) -> Result<Vec<Received<String>>> {
        let response = session
            .connection
            .client
            .receive_messages(pb::ReceiveMessagesRequest {
                queue: session.queue.clone(),
                max_messages: Some(i64::try_from(max)?),
                lease_seconds: Some(session.lease_seconds),
                wait_seconds: Some(RECEIVE_WAIT_SECONDS),
                receive_attempt_id: None,
            })
            .await?
            .into_inner();
        response
            .messages
            .into_iter()
            .map(|m| {
                Ok(Received {
                    sent_nanos: read_stamp(m.body.as_bytes()),
                    sender: read_sender(m.body.as_bytes()),
                    redelivered: m.receive_count > 1,
                    receipt: m
                        .receipt
                        .ok_or_else(|| anyhow!("a delivery without receipt"))?,
                })
            })
            .collect()
    }

    async fn ack(&self, session: &mut GrpcSession, receipts: Vec<String>) -> Result<()> {
        if receipts.is_empty() {
            return Ok(());
        }
        let response = session
            .connection
            .client
            .ack(pb::AckRequest {
                queue: session.queue.clone(),
                receipts,
            })
            .await?
            .into_inner();
        for result in response.results {
            if let Some(pb::ack_result::Outcome::Error(e)) = result.outcome {
                bail!("ack: {} {}", e.code, e.message);
            }
        }
        Ok(())
    }

    /// Releases every lease (lease changed to 0 s), each by its own call, all at once.
    async fn abandon(&self, session: &mut GrpcSession, receipts: Vec<String>) -> Result<()> {
        let client = &session.connection.client;
        try_join_all(receipts.into_iter().map(|receipt| {
            let mut client = client.clone();
            let request = pb::ChangeLeaseRequest {
                queue: session.queue.clone(),
                receipt,
                lease_seconds: Some(0),
                delay_seconds: None,
            };
            async move { client.change_lease(request).await }
        }))
        .await?;
        Ok(())
    }

    async fn depth(&self, spec: &QueueSpec) -> Result<u64> {
        let stats = self
            .client(0)?
            .get_queue_stats(pb::GetQueueStatsRequest {
                queue: queue_name(spec),
            })
            .await?
            .into_inner();
        Ok(stats.visible)
    }
}

/// raftq over REST/JSON.
pub struct RaftqRest {
    /// Per node (endpoint order): its id and a client (a pool of HTTP/1.1 connections).
    nodes: Vec<(u64, raftq_client::Client)>,
}

/// One task's handle: a clone of the node's client (sharing its connection pool).
pub struct RestSession {
    client: raftq_client::Client,
    queue: String,
    lease_seconds: i64,
}

impl RaftqRest {
    pub async fn connect(endpoints: &[String]) -> Result<RaftqRest> {
        let mut nodes = Vec::new();
        for endpoint in endpoints {
            let client = raftq_client::Client::new(endpoint, None)?;
            let cluster = client.cluster().await?;
            let id = cluster["node_id"]
                .as_u64()
                .ok_or_else(|| anyhow!("{endpoint}: /v1/cluster has no node_id"))?;
            nodes.push((id, client));
        }
        Ok(RaftqRest { nodes })
    }

    fn client(&self, node: usize) -> Result<&raftq_client::Client> {
        self.nodes
            .get(node)
            .map(|(_, c)| c)
            .ok_or_else(|| anyhow!("no node {node}"))
    }
}

/// The first per-entry error of a batch or ack answer.
fn entry_error(answer: &Value) -> Option<String> {
    answer["results"]
        .as_array()?
        .iter()
        .find_map(|r| r.get("error").map(Value::to_string))
}

impl Driver for RaftqRest {
    type Session = RestSession;
    type Receipt = String;

    fn notes(&self) -> SystemNotes {
        notes()
    }

    fn supports_fair_queues(&self) -> bool {
        true
    }

    async fn create_queue(&self, spec: &QueueSpec) -> Result<()> {
        let mut attributes = json!({ "lease_seconds": lease_seconds(spec) });
        if let Some(dlq) = &spec.dead_letter {
            attributes["redrive_policy"] =
                json!({ "dead_letter_target": dlq, "max_receive_count": 1 });
        }
        self.client(0)?
            .create_queue(&queue_name(spec), &attributes)
            .await?;
        Ok(())
    }

    async fn delete_queue(&self, spec: &QueueSpec) -> Result<()> {
        self.client(0)?.delete_queue(&queue_name(spec)).await?;
        Ok(())
    }

    async fn leader(&self, _spec: &QueueSpec) -> Result<Option<usize>> {
        let ids: Vec<u64> = self.nodes.iter().map(|(id, _)| *id).collect();
        leader_index(&ids, || async {
            let cluster = self.client(0)?.cluster().await?;
            Ok(cluster["leader"].as_u64())
        })
        .await
    }

    async fn session(&self, spec: &QueueSpec, node: usize) -> Result<RestSession> {
        Ok(RestSession {
            client: self.client(node)?.clone(),
            queue: queue_name(spec),
            lease_seconds: lease_seconds(spec),
        })
    }

    async fn send(&self, session: &mut RestSession, messages: Vec<Outgoing>) -> Result<()> {
        let fields = |m: Outgoing| {
            let mut v = json!({ "body": m.body });
            if let Some(g) = m.group {
                v["message_group_id"] = json!(g);
            }
            if let Some(d) = m.dedup_id {
                v["message_deduplication_id"] = json!(d);
            }
            v
        };
        if messages.len() == 1 {
            let message = messages.into_iter().map(fields).next();
            let message = message.ok_or_else(|| anyhow!("nothing to send"))?;
            session.client.send(&session.queue, &message).await?;
            return Ok(());
        }
        let entries: Vec<Value> = messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let mut v = fields(m);
                v["id"] = json!(i.to_string());
                v
            })
            .collect();
        let answer = session
            .client
            .send_batch(&session.queue, &json!(entries))
            .await?;
        match entry_error(&answer) {
            Some(e) => bail!("batch entry: {e}"),
            None => Ok(()),
        }
    }

    async fn receive(
        &self,
        session: &mut RestSession,
        max: usize,
    ) -> Result<Vec<Received<String>>> {
        let options = json!({
            "max_messages": max,
            "lease_seconds": session.lease_seconds,
            "wait_seconds": RECEIVE_WAIT_SECONDS,
        });
        let answer = session.client.receive(&session.queue, &options).await?;
        let messages = answer["messages"]
            .as_array()
            .ok_or_else(|| anyhow!("receive answered without messages"))?;
        messages
            .iter()
            .map(|m| {
                let body = m["body"].as_str().map(str::as_bytes);
                Ok(Received {
                    sent_nanos: body.and_then(read_stamp),
                    sender: body.and_then(read_sender),
                    redelivered: m["receive_count"].as_u64().unwrap_or(1) > 1,
                    receipt: m["receipt"]
                        .as_str()
                        .ok_or_else(|| anyhow!("a delivery without receipt"))?
                        .to_string(),
                })
            })
            .collect()
    }

    async fn ack(&self, session: &mut RestSession, receipts: Vec<String>) -> Result<()> {
        if receipts.is_empty() {
            return Ok(());
        }
        let answer = session.client.ack(&session.queue, &receipts).await?;
        match entry_error(&answer) {
            Some(e) => bail!("ack: {e}"),
            None => Ok(()),
        }
    }

    /// Releases every lease (lease changed to 0 s), each by its own call, all at once.
    async fn abandon(&self, session: &mut RestSession, receipts: Vec<String>) -> Result<()> {
        let (client, queue) = (&session.client, &session.queue);
        try_join_all(
            receipts
                .iter()
                .map(|receipt| client.release(queue, receipt, None)),
        )
        .await?;
        Ok(())
    }

    async fn depth(&self, spec: &QueueSpec) -> Result<u64> {
        let stats = self.client(0)?.stats(&queue_name(spec)).await?;
        stats["visible"]
            .as_u64()
            .ok_or_else(|| anyhow!("stats without visible"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use raftq_node::{Node, NodeConfig};
    use tokio::net::TcpListener;

    use super::*;
    use crate::driver::{now_nanos, sender_body, stamp_body_at};
    use crate::workloads::receipts;

    /// A single-node raftq serving its API on loopback; stops with the returned sender.
    async fn serve(dir: &std::path::Path) -> (String, tokio::sync::oneshot::Sender<()>) {
        let raft = TcpListener::bind("127.0.0.1:0").await.expect("bind raft");
        let peers = BTreeMap::from([(1, raft.local_addr().expect("addr").to_string())]);
        let node = Node::start(NodeConfig::new(1, peers, dir.to_path_buf()), raft)
            .await
            .expect("start node");
        let api = TcpListener::bind("127.0.0.1:0").await.expect("bind api");
        let endpoint = format!("http://{}", api.local_addr().expect("addr"));
        let app = raftq_api::router(raftq_api::Api::new(
            Arc::new(node),
            "local",
            raftq_api::Keys::open(),
        ));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(api, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        (endpoint, stop)
    }

    /// Sends one message and a batch whose messages name their sender and tenant, receives them
    /// all and acks them, through `driver`.
    async fn round_trip<D: Driver>(driver: D) {
        let spec = QueueSpec::standard("round_trip".into());
        driver.create_queue(&spec).await.expect("create");
        assert_eq!(driver.leader(&spec).await.expect("leader"), Some(0));
        let mut session = driver.session(&spec, 0).await.expect("session");
        let single = Outgoing {
            body: stamp_body_at(now_nanos(), 64),
            group: None,
            dedup_id: None,
        };
        let tenants = (1..=10)
            .map(|sender| Outgoing {
                body: sender_body(now_nanos(), sender, 64),
                group: Some(format!("tenant{}", sender % 3)),
                dedup_id: None,
            })
            .collect();
        driver.send(&mut session, vec![single]).await.expect("send");
        driver.send(&mut session, tenants).await.expect("batch");
        assert_eq!(driver.depth(&spec).await.expect("depth"), 11);
        let mut acked = 0;
        let mut senders = Vec::new();
        while acked < 11 {
            let delivered = driver.receive(&mut session, 10).await.expect("receive");
            assert!(!delivered.is_empty(), "{} messages are waiting", 11 - acked);
            assert!(delivered
                .iter()
                .all(|d| d.sent_nanos.is_some() && !d.redelivered));
            senders.extend(delivered.iter().filter_map(|d| d.sender));
            acked += delivered.len();
            driver
                .ack(&mut session, receipts(delivered))
                .await
                .expect("ack");
        }
        senders.sort_unstable();
        assert_eq!(senders, (1..=10).collect::<Vec<u32>>());
        assert_eq!(acked, 11);
        assert!(driver
            .receive(&mut session, 10)
            .await
            .expect("receive")
            .is_empty());
        abandon_round_trip(&driver, &mut session).await;
        driver.delete_queue(&spec).await.expect("delete");
    }

    /// Sends a message, receives it and abandons it: the next receive has it again, redelivered,
    /// although its 30 s lease is far from over.
    async fn abandon_round_trip<D: Driver>(driver: &D, session: &mut D::Session) {
        let message = Outgoing {
            body: stamp_body_at(now_nanos(), 64),
            group: None,
            dedup_id: None,
        };
        driver.send(session, vec![message]).await.expect("send");
        let first = driver.receive(session, 10).await.expect("receive");
        assert_eq!(first.len(), 1);
        assert!(!first[0].redelivered);
        driver
            .abandon(session, receipts(first))
            .await
            .expect("abandon");
        let again = driver.receive(session, 10).await.expect("receive again");
        assert_eq!(
            again.len(),
            1,
            "the abandoned message is deliverable at once"
        );
        assert!(again[0].redelivered);
        driver.ack(session, receipts(again)).await.expect("ack");
    }

    /// A group as one node answers about it: with its replica's term when it holds one.
    fn answer(group: u32, leader: Option<u64>, term: Option<u64>) -> pb::ClusterGroup {
        pb::ClusterGroup {
            group,
            formed: true,
            leader,
            role: term.map(|_| "follower".into()),
            term,
            ..Default::default()
        }
    }

    #[test]
    fn a_groups_leader_is_the_word_of_its_member_of_the_highest_term() {
        let answers = [
            // Group 2: a hint of a node without a replica, then two members, one behind.
            answer(2, Some(1), None),
            answer(2, Some(2), Some(4)),
            answer(2, Some(3), Some(5)),
            answer(2, None, Some(6)),
            // Group 3: hints only, the first one known kept.
            answer(3, None, None),
            answer(3, Some(3), None),
            answer(3, Some(1), None),
            // Group 4: a member's word comes after a hint and replaces it.
            answer(4, Some(1), None),
            answer(4, Some(2), Some(1)),
            answer(4, Some(3), None),
        ];
        let views = group_views(&answers);
        let leaders: Vec<(u32, Option<u64>)> = views.iter().map(|(g, v)| (*g, v.leader)).collect();
        assert_eq!(leaders, [(2, Some(3)), (3, Some(3)), (4, Some(2))]);
    }

    #[test]
    fn a_queue_goes_to_its_groups_leader_else_to_the_clusters() {
        let views = group_views(&[answer(1, Some(1), Some(2)), answer(2, None, Some(3))]);
        assert_eq!(queue_leader(1, &views, Some(1)), Some(1));
        // Group 2 has no leader now, and group 9 is not known: the cluster's leader forwards.
        assert_eq!(queue_leader(2, &views, Some(1)), Some(1));
        assert_eq!(queue_leader(9, &views, Some(1)), Some(1));
        assert_eq!(queue_leader(2, &views, None), None);
    }

    #[test]
    fn groups_are_ready_once_every_one_is_formed_led_and_spread() {
        let led = |g| answer(g, Some(u64::from(g)), Some(1));
        let views = group_views(&[led(1), led(2), led(3)]);
        assert!(groups_ready(&views, 3, 3));
        assert!(groups_ready(&views, 1, 3));
        assert!(!groups_ready(&views, 4, 3), "group 4 not known yet");
        let unformed = pb::ClusterGroup {
            formed: false,
            ..led(2)
        };
        assert!(!groups_ready(
            &group_views(&[led(1), unformed, led(3)]),
            3,
            3
        ));
        assert!(!groups_ready(
            &group_views(&[led(1), answer(2, None, Some(1))]),
            2,
            3
        ));
        let on_node_1 = |g| answer(g, Some(1), Some(1));
        let views = group_views(&[on_node_1(1), on_node_1(2), led(3), led(4)]);
        assert!(groups_ready(&views, 4, 3), "node 1 leads ceil(4 / 3) = 2");
        let views = group_views(&[on_node_1(1), on_node_1(2), on_node_1(3), led(4)]);
        assert!(!groups_ready(&views, 4, 3), "node 1 leads 3 of 4 groups");
        assert!(groups_ready(&views, 4, 1), "one node leads them all");
    }

    #[tokio::test]
    async fn both_front_ends_carry_a_send_receive_ack_round_trip() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (endpoint, stop) = serve(dir.path()).await;
        let run = async {
            round_trip(
                RaftqGrpc::connect(std::slice::from_ref(&endpoint), None)
                    .await
                    .expect("gRPC"),
            )
            .await;
            round_trip(
                RaftqRest::connect(std::slice::from_ref(&endpoint))
                    .await
                    .expect("REST"),
            )
            .await;
        };
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("bounded");
        let _ = stop.send(());
    }
}
