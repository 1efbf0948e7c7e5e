//! NATS JetStream (async-nats): a work-queue stream on file storage with one or three replicas,
//! acknowledged publishes, and a durable pull consumer with explicit acks. The servers' sync
//! setting ([`SyncInterval`]) is theirs, set in their configuration; the driver is told it only
//! to say in its notes what an ack promises.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use async_nats::jetstream::consumer::{pull, AckPolicy, PullConsumer};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{Config, RetentionPolicy, StorageType};
use async_nats::jetstream::AckKind;
use async_nats::jetstream::{self, Context, Message};
use futures_util::future::try_join_all;
use futures_util::{FutureExt, StreamExt};

use crate::driver::{read_sender, read_stamp, Driver, Outgoing, QueueSpec, Received, SystemNotes};

/// How long a new cluster may take to accept its first stream.
const STARTUP: Duration = Duration::from_secs(30);
/// The durable consumer every session of a stream shares.
const CONSUMER: &str = "bench";
/// Messages a session's pull stream asks for at a time (the prefetch of the other drivers).
const PULL_BATCH: usize = 100;
/// How long a receive waits for the first message.
const RECEIVE_WAIT: Duration = Duration::from_secs(1);
/// FIFO streams: messages handed out and not yet acked (one receive's worth, as a raftq FIFO
/// group holds at most one receive's messages leased).
const FIFO_ACK_PENDING: i64 = 10;
/// Other streams: well above what the consumers can hold (100 each), so that the server's
/// default of 1,000 never throttles them.
const ACK_PENDING: i64 = 20_000;

pub struct JetStream {
    /// A context per server, in endpoint order.
    contexts: Vec<Context>,
    /// Server names `n1`, `n2`, ... in endpoint order (as `scripts/bench` names them).
    replicas: usize,
    sync: SyncInterval,
}

/// The servers' `jetstream { sync_interval }` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SyncInterval {
    /// Not set: nats-server's default, a sync of the store every 2 minutes.
    Default,
    /// `sync_interval: always`: every write to the store is synced as it is made.
    Always,
}

/// One task's context and, once it received, its pull stream.
pub struct JetStreamSession {
    js: Context,
    stream: String,
    subject: String,
    fifo: bool,
    messages: Option<pull::Stream>,
}

impl JetStream {
    pub async fn connect(
        endpoints: &[String],
        replicas: usize,
        sync: SyncInterval,
    ) -> Result<JetStream> {
        let mut contexts = Vec::new();
        for endpoint in endpoints {
            let client = async_nats::connect(endpoint)
                .await
                .with_context(|| format!("connecting to {endpoint}"))?;
            contexts.push(jetstream::new(client));
        }
        if contexts.is_empty() {
            bail!("no endpoint");
        }
        Ok(JetStream {
            contexts,
            replicas,
            sync,
        })
    }

    /// The stream's current info.
    async fn info(&self, spec: &QueueSpec) -> Result<async_nats::jetstream::stream::Info> {
        let mut stream = self
            .context(0)?
            .get_stream(&spec.name)
            .await
            .map_err(|e| anyhow!("stream {}: {e}", spec.name))?;
        Ok(stream
            .info()
            .await
            .map_err(|e| anyhow!("stream info: {e}"))?
            .clone())
    }

    fn context(&self, node: usize) -> Result<&Context> {
        self.contexts
            .get(node)
            .ok_or_else(|| anyhow!("no node {node}"))
    }
}

impl Driver for JetStream {
    type Session = JetStreamSession;
    type Receipt = Message;

    fn notes(&self) -> SystemNotes {
        let stored = if self.replicas > 1 {
            "a majority of the replicas"
        } else {
            "the server"
        };
        let durability = match self.sync {
            SyncInterval::Default => format!(
                "file storage, {} replica(s), work-queue retention, nats-server's default \
                 `sync_interval` (2 minutes): a publish ack comes after {stored} wrote the \
                 message to the OS's buffers, without an fsync; the store is synced every 2 \
                 minutes, so a power loss (of a majority) can lose acknowledged messages; \
                 consumer acks are not confirmed (no double ack)",
                self.replicas
            ),
            SyncInterval::Always => format!(
                "file storage, {} replica(s), work-queue retention, `sync_interval: always`: \
                 every write to the store is fsynced as it is made, so a publish ack comes after \
                 {stored} synced the message, as raftq's does; consumer acks are not confirmed \
                 (no double ack)",
                self.replicas
            ),
        };
        SystemNotes {
            durability,
            syncs_before_ack: self.sync == SyncInterval::Always,
            fifo: "subject per group (`<stream>.g<group>`) in one stream with a single pull \
                   consumer of at most 10 unacknowledged messages, so one consumer orders every \
                   message whatever the group count; Nats-Msg-Id carries the deduplication ID"
                .into(),
            redelivery: "nak (negative acknowledgement), one per message: redelivered at once"
                .into(),
            dead_letter: "n/a: JetStream has no dead-letter queue (only max-deliver advisories)"
                .into(),
        }
    }

    fn supports_dead_letter(&self) -> bool {
        false
    }

    fn consumers(&self, spec: &QueueSpec, wanted: usize) -> usize {
        if spec.fifo {
            1
        } else {
            wanted
        }
    }

    async fn create_queue(&self, spec: &QueueSpec) -> Result<()> {
        if spec.dead_letter.is_some() {
            bail!("JetStream has no dead-letter queue");
        }
        let config = Config {
            name: spec.name.clone(),
            subjects: vec![format!("{}.>", spec.name)],
            retention: RetentionPolicy::WorkQueue,
            storage: StorageType::File,
            num_replicas: self.replicas,
            ..Default::default()
        };
        // A cluster that just started answers once it elected its meta leader.
        let deadline = Instant::now() + STARTUP;
        let stream = loop {
            match self.context(0)?.create_stream(config.clone()).await {
                Ok(stream) => break stream,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("creating stream {}: {e}; retrying", spec.name);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => bail!("creating stream {}: {e}", spec.name),
            }
        };
        stream
            .create_consumer(pull::Config {
                durable_name: Some(CONSUMER.into()),
                ack_policy: AckPolicy::Explicit,
                ack_wait: spec.lease,
                max_ack_pending: if spec.fifo {
                    FIFO_ACK_PENDING
                } else {
                    ACK_PENDING
                },
                ..Default::default()
            })
            .await
            .map_err(|e| anyhow!("creating consumer on {}: {e}", spec.name))?;
        Ok(())
    }

    async fn delete_queue(&self, spec: &QueueSpec) -> Result<()> {
        self.context(0)?
            .delete_stream(&spec.name)
            .await
            .map_err(|e| anyhow!("deleting stream {}: {e}", spec.name))?;
        Ok(())
    }

    /// The stream's leader, from the stream info, as a server name `n<k>`.
    async fn leader(&self, spec: &QueueSpec) -> Result<Option<usize>> {
        let info = self.info(spec).await?;
        let leader = info.cluster.as_ref().and_then(|c| c.leader.as_deref());
        Ok(leader
            .and_then(|name| name.strip_prefix('n'))
            .and_then(|k| k.parse::<usize>().ok())
            .and_then(|k| k.checked_sub(1)))
    }

    async fn session(&self, spec: &QueueSpec, node: usize) -> Result<JetStreamSession> {
        Ok(JetStreamSession {
            js: self.context(node)?.clone(),
            stream: spec.name.clone(),
            subject: spec.name.clone(),
            fifo: spec.fifo,
            messages: None,
        })
    }

    async fn send(&self, session: &mut JetStreamSession, messages: Vec<Outgoing>) -> Result<()> {
        let mut acks = Vec::with_capacity(messages.len());
        for message in messages {
            let subject = match (&message.group, session.fifo) {
                (Some(group), true) => format!("{}.{group}", session.subject),
                _ => format!("{}.m", session.subject),
            };
            let mut publish = PublishMessage::build().payload(message.body.into());
            if let Some(id) = &message.dedup_id {
                publish = publish.message_id(id);
            }
            let ack = session
                .js
                .send_publish(subject, publish)
                .await
                .map_err(|e| anyhow!("publish: {e}"))?;
            acks.push(
                ack.into_future()
                    .map(|r| r.map_err(|e| anyhow!("publish ack: {e}"))),
            );
        }
        try_join_all(acks).await?;
        Ok(())
    }

    async fn receive(
        &self,
        session: &mut JetStreamSession,
        max: usize,
    ) -> Result<Vec<Received<Message>>> {
        let messages = match &mut session.messages {
            Some(messages) => messages,
            None => {
                let consumer: PullConsumer = session
                    .js
                    .get_consumer_from_stream(CONSUMER, &session.stream)
                    .await
                    .map_err(|e| anyhow!("consumer of {}: {e}", session.stream))?;
                let batch = if session.fifo {
                    usize::try_from(FIFO_ACK_PENDING)?
                } else {
                    PULL_BATCH
                };
                let stream = consumer
                    .stream()
                    .max_messages_per_batch(batch)
                    .messages()
                    .await
                    .map_err(|e| anyhow!("pull stream: {e}"))?;
                session.messages.insert(stream)
            }
        };
        let mut out = Vec::new();
        // A pull stream that ended, failed or stayed silent for a whole wait is dropped, and the
        // next receive opens a new one: an ended stream would otherwise answer every later
        // receive at once with nothing, and the row would measure no messages and no errors.
        let first = match tokio::time::timeout(RECEIVE_WAIT, messages.next()).await {
            Ok(Some(Ok(message))) => message,
            Ok(Some(Err(e))) => {
                session.messages = None;
                bail!("pull: {e}");
            }
            Ok(None) | Err(_) => {
                session.messages = None;
                return Ok(out);
            }
        };
        let mut next = Some(Ok(first));
        while let Some(message) = next {
            let message = message.map_err(|e| anyhow!("pull: {e}"))?;
            let delivered = message
                .info()
                .map_err(|e| anyhow!("message info: {e}"))?
                .delivered;
            out.push(Received {
                sent_nanos: read_stamp(&message.payload),
                sender: read_sender(&message.payload),
                redelivered: delivered > 1,
                receipt: message,
            });
            if out.len() >= max {
                break;
            }
            next = messages.next().now_or_never().flatten();
        }
        Ok(out)
    }

    async fn ack(&self, _session: &mut JetStreamSession, receipts: Vec<Message>) -> Result<()> {
        try_join_all(receipts.iter().map(|m| m.ack()))
            .await
            .map_err(|e| anyhow!("ack: {e}"))?;
        Ok(())
    }

    /// Naks every message: JetStream redelivers it at once.
    async fn abandon(&self, _session: &mut JetStreamSession, receipts: Vec<Message>) -> Result<()> {
        try_join_all(receipts.iter().map(|m| m.ack_with(AckKind::Nak(None))))
            .await
            .map_err(|e| anyhow!("nak: {e}"))?;
        Ok(())
    }

    async fn depth(&self, spec: &QueueSpec) -> Result<u64> {
        Ok(self.info(spec).await?.state.messages)
    }
}
