//! RabbitMQ quorum queues over AMQP 0-9-1 (lapin): durable queues declared with
//! `x-queue-type=quorum`, persistent messages, publisher confirms, manual acks.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use futures_util::future::try_join_all;
use futures_util::{FutureExt, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, Consumer};

use crate::driver::{read_sender, read_stamp, Driver, Outgoing, QueueSpec, Received, SystemNotes};

/// Unacknowledged deliveries a consumer may hold (RabbitMQ's usual advice is 100–300).
const PREFETCH: u16 = 100;
/// How long a receive waits for the first delivery.
const RECEIVE_WAIT: Duration = Duration::from_secs(1);
/// AMQP delivery mode of a persistent message.
const PERSISTENT: u8 = 2;

pub struct RabbitMq {
    /// One connection per node, in endpoint order.
    connections: Vec<Connection>,
    /// Declares, deletes and counts, through the first node.
    admin: Channel,
}

/// One task's channel (in confirm mode) and, once it received, its consumer.
pub struct RabbitSession {
    channel: Channel,
    queue: ShortString,
    /// Whether an abandoned delivery goes back to the queue (no dead-letter exchange) or is
    /// rejected into the dead-letter queue.
    requeue: bool,
    consumer: Option<Consumer>,
}

impl RabbitMq {
    pub async fn connect(endpoints: &[String]) -> Result<RabbitMq> {
        let mut connections = Vec::new();
        for endpoint in endpoints {
            let connection = Connection::connect(endpoint, ConnectionProperties::default())
                .await
                .with_context(|| format!("connecting to {endpoint}"))?;
            connections.push(connection);
        }
        let first = connections.first().ok_or_else(|| anyhow!("no endpoint"))?;
        let admin = first.create_channel().await?;
        Ok(RabbitMq { connections, admin })
    }
}

fn text(value: &str) -> AMQPValue {
    AMQPValue::LongString(value.into())
}

impl Driver for RabbitMq {
    type Session = RabbitSession;
    type Receipt = u64;

    fn notes(&self) -> SystemNotes {
        SystemNotes {
            durability: "quorum queue (Raft, a member on every node), persistent messages; \
                         a publisher confirm comes after a majority wrote the entry to its \
                         fsynced Raft log (WAL); RabbitMQ's basic.ack is not confirmed to the \
                         client"
                .into(),
            syncs_before_ack: true,
            fifo: "no message groups: a quorum queue with single-active-consumer, so one \
                   consumer takes every message in order whatever the group count (the group \
                   travels as a header); prefetch 100"
                .into(),
            redelivery: "basic.nack with requeue (there is no lease to expire; RabbitMQ's \
                         consumer timeout is per channel and closes it)"
                .into(),
            dead_letter: "basic.nack without requeue into a dead-letter queue through the \
                          default exchange, at-least-once dead-lettering (x-overflow \
                          reject-publish, as it requires)"
                .into(),
        }
    }

    async fn create_queue(&self, spec: &QueueSpec) -> Result<()> {
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), text("quorum"));
        if spec.fifo {
            args.insert("x-single-active-consumer".into(), AMQPValue::Boolean(true));
        }
        if let Some(dlq) = &spec.dead_letter {
            args.insert("x-dead-letter-exchange".into(), text(""));
            args.insert("x-dead-letter-routing-key".into(), text(dlq));
            args.insert("x-dead-letter-strategy".into(), text("at-least-once"));
            args.insert("x-overflow".into(), text("reject-publish"));
        }
        self.admin
            .queue_declare(
                spec.name.as_str().into(),
                QueueDeclareOptions::durable(),
                args,
            )
            .await?;
        Ok(())
    }

    async fn delete_queue(&self, spec: &QueueSpec) -> Result<()> {
        self.admin
            .queue_delete(spec.name.as_str().into(), QueueDeleteOptions::default())
            .await?;
        Ok(())
    }

    /// A quorum queue's first leader is on the node the declaring client is connected to
    /// (`client-local`, the default leader locator): the first node.
    async fn leader(&self, _spec: &QueueSpec) -> Result<Option<usize>> {
        Ok(Some(0))
    }

    async fn session(&self, spec: &QueueSpec, node: usize) -> Result<RabbitSession> {
        let connection = self
            .connections
            .get(node)
            .ok_or_else(|| anyhow!("no node {node}"))?;
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(RabbitSession {
            channel,
            queue: spec.name.as_str().into(),
            requeue: spec.dead_letter.is_none(),
            consumer: None,
        })
    }

    async fn send(&self, session: &mut RabbitSession, messages: Vec<Outgoing>) -> Result<()> {
        let mut confirms = Vec::with_capacity(messages.len());
        for message in messages {
            let mut properties = BasicProperties::default().with_delivery_mode(PERSISTENT);
            if let Some(group) = &message.group {
                let mut headers = FieldTable::default();
                headers.insert("group".into(), text(group));
                properties = properties.with_headers(headers);
            }
            if let Some(id) = &message.dedup_id {
                properties = properties.with_message_id(id.as_str().into());
            }
            let confirm = session
                .channel
                .basic_publish(
                    "".into(),
                    session.queue.clone(),
                    BasicPublishOptions::default(),
                    message.body.as_bytes(),
                    properties,
                )
                .await?;
            confirms.push(confirm);
        }
        for confirmation in try_join_all(confirms).await? {
            if !confirmation.is_ack() {
                bail!("publish not confirmed (nack)");
            }
        }
        Ok(())
    }

    async fn receive(&self, session: &mut RabbitSession, max: usize) -> Result<Vec<Received<u64>>> {
        let consumer = match &mut session.consumer {
            Some(consumer) => consumer,
            None => {
                session
                    .channel
                    .basic_qos(PREFETCH, BasicQosOptions::default())
                    .await?;
                let consumer = session
                    .channel
                    .basic_consume(
                        session.queue.clone(),
                        "".into(),
                        BasicConsumeOptions::default(),
                        FieldTable::default(),
                    )
                    .await?;
                session.consumer.insert(consumer)
            }
        };
        let mut out = Vec::new();
        let Ok(first) = tokio::time::timeout(RECEIVE_WAIT, consumer.next()).await else {
            return Ok(out);
        };
        let mut next = first;
        while let Some(delivery) = next {
            let delivery = delivery?;
            out.push(Received {
                sent_nanos: read_stamp(&delivery.data),
                sender: read_sender(&delivery.data),
                redelivered: delivery.redelivered,
                receipt: delivery.delivery_tag,
            });
            if out.len() >= max {
                break;
            }
            next = consumer.next().now_or_never().flatten();
        }
        Ok(out)
    }

    async fn ack(&self, session: &mut RabbitSession, receipts: Vec<u64>) -> Result<()> {
        let channel = &session.channel;
        try_join_all(
            receipts
                .into_iter()
                .map(|tag| channel.basic_ack(tag, BasicAckOptions::default())),
        )
        .await?;
        Ok(())
    }

    async fn abandon(&self, session: &mut RabbitSession, receipts: Vec<u64>) -> Result<()> {
        let (channel, requeue) = (&session.channel, session.requeue);
        let options = BasicNackOptions {
            multiple: false,
            requeue,
        };
        try_join_all(
            receipts
                .into_iter()
                .map(|tag| channel.basic_nack(tag, options)),
        )
        .await?;
        Ok(())
    }

    async fn depth(&self, spec: &QueueSpec) -> Result<u64> {
        let queue = self
            .admin
            .queue_declare(
                spec.name.as_str().into(),
                QueueDeclareOptions::durable().passive(),
                FieldTable::default(),
            )
            .await?;
        Ok(u64::from(queue.message_count()))
    }
}
