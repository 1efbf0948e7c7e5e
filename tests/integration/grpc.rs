//! The gRPC API end to end: a real single-node cluster and `raftq_api::router` on loopback (set
//! up by `common`, as for the REST tests), and the tonic client generated from the same
//! `proto/raftq.proto`. Covers the main flows, the error statuses with their metadata, API keys
//! in metadata, long polling, and REST and gRPC sharing one port. Every test is bounded in time
//! and stops its server and node.

use std::time::Duration;

use crate::serving::{absent_peer, bounded, two_accounts, Serving};
use prost::Message as _;
use raftq_api::grpc::pb;
use raftq_api::grpc::pb::queues_client::QueuesClient;
use raftq_api::{Keys, CODE_METADATA, ERROR_METADATA, FIELD_METADATA};
use tokio::time::{sleep, Instant};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

/// Adds `authorization: Bearer <key>` to every call, when it has a key.
#[derive(Clone)]
struct Bearer(Option<MetadataValue<Ascii>>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

type Client = QueuesClient<InterceptedService<Channel, Bearer>>;

/// The served node with a gRPC channel to it.
struct Grpc {
    serving: Serving,
    channel: Channel,
}

impl Grpc {
    async fn start(keys: Keys) -> Grpc {
        Grpc::over(Serving::start(keys).await).await
    }

    async fn over(serving: Serving) -> Grpc {
        let channel = Endpoint::from_shared(format!("http://{}", serving.addr))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        Grpc { serving, channel }
    }

    /// A client that sends `key`, if any.
    fn client_with(&self, key: Option<&str>) -> Client {
        let bearer = key.map(|k| format!("Bearer {k}").parse().expect("metadata"));
        QueuesClient::with_interceptor(self.channel.clone(), Bearer(bearer))
    }

    /// A client without a key (open mode).
    fn client(&self) -> Client {
        self.client_with(None)
    }

    async fn shutdown(self) {
        drop(self.channel);
        self.serving.shutdown().await;
    }
}

fn new_queue(name: &str) -> pb::CreateQueueRequest {
    pb::CreateQueueRequest {
        name: name.into(),
        ..Default::default()
    }
}

fn message(queue: &str, body: &str) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        queue: queue.into(),
        body: body.into(),
        ..Default::default()
    }
}

fn receive(queue: &str, max_messages: i64) -> pb::ReceiveMessagesRequest {
    pb::ReceiveMessagesRequest {
        queue: queue.into(),
        max_messages: Some(max_messages),
        ..Default::default()
    }
}

fn named(queue: &str) -> pb::GetQueueRequest {
    pb::GetQueueRequest {
        queue: queue.into(),
    }
}

fn is_rfc3339_utc(text: &str) -> bool {
    text.len() == 24 && text.ends_with('Z') && text.as_bytes()[10] == b'T' && text.starts_with("20")
}

/// Checks a failed call: its gRPC code, and the spec's code, field and message in its metadata.
fn assert_status<T: std::fmt::Debug>(
    result: Result<tonic::Response<T>, Status>,
    code: Code,
    spec_code: &str,
    field: Option<&str>,
) -> pb::Error {
    let status = result.expect_err("the call should fail");
    assert_eq!(status.code(), code, "{status:?}");
    let meta = status.metadata();
    let text = |key: &str| {
        meta.get(key)
            .map(|v| v.to_str().expect("ascii").to_string())
    };
    assert_eq!(
        text(CODE_METADATA).as_deref(),
        Some(spec_code),
        "{status:?}"
    );
    assert_eq!(text(FIELD_METADATA).as_deref(), field, "{status:?}");
    assert!(!status.message().is_empty());
    let bin = meta
        .get_bin(ERROR_METADATA)
        .expect("error metadata")
        .to_bytes()
        .expect("bytes");
    let error = pb::Error::decode(bin).expect("an encoded Error");
    assert_eq!(error.code, spec_code);
    assert_eq!(error.field.as_deref(), field);
    assert_eq!(error.message, status.message());
    error
}

fn assert_invalid<T: std::fmt::Debug>(result: Result<tonic::Response<T>, Status>, field: &str) {
    assert_status(
        result,
        Code::InvalidArgument,
        "invalid_argument",
        Some(field),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_created_read_listed_patched_and_deleted() {
    let s = Grpc::start(Keys::open()).await;
    bounded(async {
        let mut c = s.client();
        let q = c
            .create_queue(new_queue("orders"))
            .await
            .expect("create")
            .into_inner();
        assert_eq!((q.name.as_str(), q.r#type.as_str()), ("orders", "standard"));
        assert!(is_rfc3339_utc(&q.created_at), "{q:?}");
        assert_eq!(q.lease_seconds, 30);
        assert_eq!(q.retention_seconds, 4 * 24 * 3600);
        assert_eq!(q.max_message_bytes, 256 * 1024);
        assert!(!q.content_based_deduplication);
        assert_eq!(q.redrive_policy, None);
        let allow = q.redrive_allow_policy.as_ref().expect("allow policy");
        assert_eq!(allow.permission, "allow_all");
        assert!(allow.source_queues.is_empty());
        assert_eq!(
            q.crn,
            format!("crn:v1:raftq:public:queues:local:a/dev:{}::", q.id)
        );

        let fifo = c
            .create_queue(pb::CreateQueueRequest {
                r#type: Some("fifo".into()),
                content_based_deduplication: Some(true),
                lease_seconds: Some(5),
                ..new_queue("orders.fifo")
            })
            .await
            .expect("create fifo")
            .into_inner();
        assert_eq!(fifo.r#type, "fifo");
        assert!(fifo.content_based_deduplication);
        assert_eq!(fifo.lease_seconds, 5);
        c.create_queue(new_queue("other")).await.expect("create");

        assert_status(
            c.create_queue(new_queue("orders")).await,
            Code::AlreadyExists,
            "queue_exists",
            None,
        );
        for reference in [&q.name, &q.id, &q.crn] {
            let got = c
                .get_queue(named(reference))
                .await
                .expect("get")
                .into_inner();
            assert_eq!(got.id, q.id);
        }
        let all = c
            .list_queues(pb::ListQueuesRequest::default())
            .await
            .expect("list")
            .into_inner();
        assert_eq!(all.queues.len(), 3);
        let some = c
            .list_queues(pb::ListQueuesRequest {
                prefix: "ord".into(),
            })
            .await
            .expect("list")
            .into_inner();
        let names: Vec<&str> = some.queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["orders", "orders.fifo"]);

        let patched = c
            .patch_queue(pb::PatchQueueRequest {
                queue: "orders".into(),
                lease_seconds: Some(60),
                delay_seconds: Some(2),
                ..Default::default()
            })
            .await
            .expect("patch")
            .into_inner();
        assert_eq!((patched.lease_seconds, patched.delay_seconds), (60, 2));
        assert_eq!(patched.retention_seconds, q.retention_seconds);

        c.delete_queue(pb::DeleteQueueRequest {
            queue: q.crn.clone(),
        })
        .await
        .expect("delete");
        assert_status(
            c.get_queue(named("orders")).await,
            Code::NotFound,
            "queue_not_found",
            None,
        );
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_policies_bind_list_block_deletion_move_and_detach() {
    let s = Grpc::start(Keys::open()).await;
    bounded(async {
        let mut c = s.client();
        let dlq = c
            .create_queue(new_queue("dlq"))
            .await
            .expect("dlq")
            .into_inner();
        c.create_queue(new_queue("dlq.fifo"))
            .await
            .expect("dlq.fifo");
        let policy = |target: &str, max: i64| pb::RedrivePolicyInput {
            dead_letter_target: Some(target.into()),
            max_receive_count: Some(max),
        };
        let wrong_type = c
            .create_queue(pb::CreateQueueRequest {
                redrive_policy: Some(policy("dlq.fifo", 1)),
                ..new_queue("a")
            })
            .await;
        let error = assert_status(
            wrong_type,
            Code::InvalidArgument,
            "invalid_argument",
            Some("redrive_policy.dead_letter_target"),
        );
        assert!(error.message.contains("same type"), "{error:?}");

        let src = c
            .create_queue(pb::CreateQueueRequest {
                redrive_policy: Some(policy(&dlq.crn, 1)),
                ..new_queue("src")
            })
            .await
            .expect("src")
            .into_inner();
        let bound = src.redrive_policy.as_ref().expect("policy");
        assert_eq!(bound.max_receive_count, 1);
        let target = bound.dead_letter_target.as_ref().expect("target");
        assert_eq!(
            (target.id.as_str(), target.name.as_str()),
            (dlq.id.as_str(), "dlq")
        );
        let picky = c
            .create_queue(pb::CreateQueueRequest {
                redrive_allow_policy: Some(pb::RedriveAllowPolicyInput {
                    permission: Some("by_queue".into()),
                    source_queues: vec!["src".into()],
                }),
                ..new_queue("picky")
            })
            .await
            .expect("picky")
            .into_inner();
        let allow = picky.redrive_allow_policy.expect("allow policy");
        assert_eq!(allow.permission, "by_queue");
        assert_eq!(allow.source_queues[0].name, "src");

        let sources = c
            .list_dead_letter_sources(pb::ListDeadLetterSourcesRequest {
                queue: "dlq".into(),
            })
            .await
            .expect("sources")
            .into_inner();
        assert_eq!(
            sources.queues,
            [pb::QueueRef {
                id: src.id.clone(),
                name: "src".into(),
                crn: src.crn.clone()
            }]
        );
        let in_use = c
            .delete_queue(pb::DeleteQueueRequest {
                queue: "dlq".into(),
            })
            .await;
        let error = assert_status(in_use, Code::FailedPrecondition, "queue_in_use", None);
        assert_eq!(error.sources.len(), 1);
        assert_eq!(error.sources[0].name, "src");

        // Releasing the last allowed lease moves the message.
        let sent = c
            .send_message(pb::SendMessageRequest {
                attributes: [("k".to_string(), "v".to_string())].into(),
                ..message("src", "poison")
            })
            .await
            .expect("send")
            .into_inner();
        let got = c
            .receive_messages(receive("src", 1))
            .await
            .expect("receive")
            .into_inner();
        let receipt = got.messages[0].receipt.clone().expect("receipt");
        c.change_lease(pb::ChangeLeaseRequest {
            queue: "src".into(),
            receipt,
            lease_seconds: Some(0),
        })
        .await
        .expect("release");
        let peeked = c
            .peek_messages(pb::PeekMessagesRequest {
                queue: "dlq".into(),
                ..Default::default()
            })
            .await
            .expect("peek")
            .into_inner();
        let moved = &peeked.messages[0];
        assert_eq!(moved.message_id, sent.message_id);
        assert_eq!(moved.attributes.get("k").map(String::as_str), Some("v"));
        assert_eq!(moved.receive_count, 0);
        assert_eq!(moved.state, Some(pb::MessageState::Visible as i32));
        assert_eq!(
            moved.dead_letter_source.as_ref().map(|r| r.name.as_str()),
            Some("src")
        );
        assert!(
            moved.moved_at.as_deref().is_some_and(is_rfc3339_utc),
            "{moved:?}"
        );

        // A patch without the policy keeps it; clear_redrive_policy detaches it.
        let kept = c
            .patch_queue(pb::PatchQueueRequest {
                queue: "src".into(),
                lease_seconds: Some(9),
                ..Default::default()
            })
            .await
            .expect("patch")
            .into_inner();
        assert!(kept.redrive_policy.is_some());
        let detached = c
            .patch_queue(pb::PatchQueueRequest {
                queue: "src".into(),
                redrive: Some(pb::patch_queue_request::Redrive::ClearRedrivePolicy(true)),
                ..Default::default()
            })
            .await
            .expect("detach")
            .into_inner();
        assert_eq!(detached.redrive_policy, None);
        assert_eq!(detached.lease_seconds, 9);
        let none = c
            .list_dead_letter_sources(pb::ListDeadLetterSourcesRequest {
                queue: "dlq".into(),
            })
            .await
            .expect("sources")
            .into_inner();
        assert!(none.queues.is_empty());
        c.delete_queue(pb::DeleteQueueRequest {
            queue: "dlq".into(),
        })
        .await
        .expect("delete");
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_sent_received_leased_peeked_and_acknowledged() {
    let s = Grpc::start(Keys::open()).await;
    bounded(async {
        let mut c = s.client();
        c.create_queue(new_queue("work")).await.expect("create");
        let sent = c
            .send_message(pb::SendMessageRequest {
                attributes: [("kind".to_string(), "greeting".to_string())].into(),
                message_group_id: Some("g".into()),
                ..message("work", "hello")
            })
            .await
            .expect("send")
            .into_inner();
        assert!(!sent.duplicate);
        assert_eq!(sent.sequence_number, None);

        let got = c
            .receive_messages(pb::ReceiveMessagesRequest {
                lease_seconds: Some(120),
                ..receive("work", 10)
            })
            .await
            .expect("receive")
            .into_inner();
        assert_eq!(got.messages.len(), 1);
        let m = &got.messages[0];
        assert_eq!(m.message_id, sent.message_id);
        assert_eq!(m.body, "hello");
        assert_eq!(
            m.attributes.get("kind").map(String::as_str),
            Some("greeting")
        );
        assert_eq!(m.receive_count, 1);
        assert_eq!(m.message_group_id.as_deref(), Some("g"));
        assert!(is_rfc3339_utc(&m.sent_at));
        assert!(m.first_received_at.as_deref().is_some_and(is_rfc3339_utc));
        assert!(m.lease_expires_at.as_deref().is_some_and(is_rfc3339_utc));
        assert_eq!(
            (
                m.sequence_number,
                &m.message_deduplication_id,
                &m.dead_letter_source,
                &m.moved_at,
                m.state
            ),
            (None, &None, &None, &None, None)
        );
        let receipt = m.receipt.clone().expect("receipt");

        let peeked = c
            .peek_messages(pb::PeekMessagesRequest {
                queue: "work".into(),
                ..Default::default()
            })
            .await
            .expect("peek")
            .into_inner();
        let p = &peeked.messages[0];
        assert_eq!(p.state, Some(pb::MessageState::Leased as i32));
        assert_eq!((p.receipt.as_deref(), p.receive_count), (None, 1));
        let stats = c
            .get_queue_stats(pb::GetQueueStatsRequest {
                queue: "work".into(),
            })
            .await
            .expect("stats")
            .into_inner();
        assert_eq!((stats.leased, stats.visible), (1, 0));

        let lease = c
            .change_lease(pb::ChangeLeaseRequest {
                queue: "work".into(),
                receipt: receipt.clone(),
                lease_seconds: Some(600),
            })
            .await
            .expect("change lease")
            .into_inner();
        assert_eq!(lease.receipt, receipt);
        assert!(is_rfc3339_utc(&lease.lease_expires_at));

        let ack = |receipts: Vec<String>| pb::AckRequest {
            queue: "work".into(),
            receipts,
        };
        let acked = c
            .ack(ack(vec![receipt.clone(), "bogus".into()]))
            .await
            .expect("ack")
            .into_inner();
        use pb::ack_result::Outcome;
        assert_eq!(acked.results[0].receipt, receipt);
        assert_eq!(acked.results[0].outcome, Some(Outcome::Ok(true)));
        let Some(Outcome::Error(error)) = &acked.results[1].outcome else {
            panic!("{acked:?}");
        };
        assert_eq!(error.code, "invalid_argument");
        assert_eq!(error.field.as_deref(), Some("receipts[1]"));
        let twice = c
            .ack(ack(vec![receipt.clone()]))
            .await
            .expect("ack")
            .into_inner();
        let Some(Outcome::Error(error)) = &twice.results[0].outcome else {
            panic!("{twice:?}");
        };
        assert_eq!(error.code, "lease_expired");
        let late = c
            .change_lease(pb::ChangeLeaseRequest {
                queue: "work".into(),
                receipt,
                lease_seconds: Some(5),
            })
            .await;
        assert_status(late, Code::FailedPrecondition, "lease_expired", None);
        let stats = c
            .get_queue_stats(pb::GetQueueStatsRequest {
                queue: "work".into(),
            })
            .await
            .expect("stats")
            .into_inner();
        assert_eq!(stats, pb::QueueStats::default());
        let empty = c
            .receive_messages(receive("work", 1))
            .await
            .expect("receive");
        assert!(empty.into_inner().messages.is_empty());
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_sends_deduplicate_and_batches_answer_each_entry() {
    let s = Grpc::start(Keys::open()).await;
    bounded(async {
        let mut c = s.client();
        c.create_queue(new_queue("jobs.fifo"))
            .await
            .expect("create");
        assert_invalid(
            c.send_message(message("jobs.fifo", "a")).await,
            "message_group_id",
        );
        let fifo = |body: &str, dedup: &str| pb::SendMessageRequest {
            message_group_id: Some("g".into()),
            message_deduplication_id: Some(dedup.into()),
            ..message("jobs.fifo", body)
        };
        let first = c
            .send_message(fifo("a", "d1"))
            .await
            .expect("send")
            .into_inner();
        let seq = first.sequence_number.expect("sequence_number");
        let dup = c
            .send_message(fifo("other", "d1"))
            .await
            .expect("send")
            .into_inner();
        assert!(dup.duplicate);
        assert_eq!(
            (dup.message_id.as_str(), dup.sequence_number),
            (first.message_id.as_str(), Some(seq))
        );
        let second = c
            .send_message(fifo("b", "d2"))
            .await
            .expect("send")
            .into_inner();
        assert!(second.sequence_number.expect("seq") > seq);
        let got = c
            .receive_messages(receive("jobs.fifo", 10))
            .await
            .expect("receive")
            .into_inner();
        let bodies: Vec<&str> = got.messages.iter().map(|m| m.body.as_str()).collect();
        assert_eq!(bodies, ["a", "b"]);
        assert_eq!(
            got.messages[0].message_deduplication_id.as_deref(),
            Some("d1")
        );
        assert_eq!(got.messages[0].sequence_number, Some(seq));

        c.create_queue(new_queue("bulk")).await.expect("create");
        let entry = |id: &str, body: &str| pb::SendMessageBatchEntry {
            id: id.into(),
            body: body.into(),
            ..Default::default()
        };
        let batch = |entries| pb::SendMessageBatchRequest {
            queue: "bulk".into(),
            entries,
        };
        let r = c
            .send_message_batch(batch(vec![
                entry("one", "1"),
                entry("two", ""),
                pb::SendMessageBatchEntry {
                    delay_seconds: Some(5),
                    ..entry("three", "3")
                },
                pb::SendMessageBatchEntry {
                    message_deduplication_id: Some("d".into()),
                    ..entry("four", "4")
                },
            ]))
            .await
            .expect("batch")
            .into_inner();
        use pb::send_message_batch_result::Outcome;
        let ids: Vec<&str> = r.results.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["one", "two", "three", "four"]);
        assert!(matches!(&r.results[0].outcome, Some(Outcome::Sent(s)) if !s.duplicate));
        assert!(matches!(&r.results[2].outcome, Some(Outcome::Sent(_))));
        for (i, field) in [(1, "body"), (3, "message_deduplication_id")] {
            let Some(Outcome::Error(error)) = &r.results[i].outcome else {
                panic!("{r:?}");
            };
            assert_eq!(
                (error.code.as_str(), error.field.as_deref()),
                ("invalid_argument", Some(field))
            );
        }
        let stats = c
            .get_queue_stats(pb::GetQueueStatsRequest {
                queue: "bulk".into(),
            })
            .await
            .expect("stats")
            .into_inner();
        assert_eq!((stats.visible, stats.delayed), (1, 1));

        // Whole-request refusals.
        assert_invalid(
            c.send_message_batch(batch(vec![entry("x", "1"), entry("x", "2")]))
                .await,
            "entries[1].id",
        );
        assert_invalid(
            c.send_message_batch(batch(vec![entry("a b", "1")])).await,
            "entries[0].id",
        );
        assert_invalid(c.send_message_batch(batch(vec![])).await, "entries");
        let eleven = (0..11).map(|i| entry(&format!("e{i}"), "x")).collect();
        assert_invalid(c.send_message_batch(batch(eleven)).await, "entries");

        // Ten of the largest messages fit in one call (over tonic's default 4 MiB limit).
        c.create_queue(pb::CreateQueueRequest {
            max_message_bytes: Some(1024 * 1024),
            ..new_queue("big")
        })
        .await
        .expect("create");
        let largest = "x".repeat(1024 * 1024);
        let r = c
            .send_message_batch(pb::SendMessageBatchRequest {
                queue: "big".into(),
                entries: (0..10).map(|i| entry(&format!("e{i}"), &largest)).collect(),
            })
            .await
            .expect("batch of the largest messages")
            .into_inner();
        assert!(
            r.results
                .iter()
                .all(|e| matches!(e.outcome, Some(Outcome::Sent(_)))),
            "{r:?}"
        );
    })
    .await;
    s.shutdown().await;
}

/// Sends a stream of `requests` on `client` and collects its results.
async fn stream_sends(
    client: &mut Client,
    requests: Vec<pb::SendMessageRequest>,
) -> Result<Vec<pb::send_message_stream_result::Outcome>, Status> {
    let mut results = client
        .send_message_stream(futures_util::stream::iter(requests))
        .await?
        .into_inner();
    let mut outcomes = Vec::new();
    while let Some(result) = results.message().await? {
        outcomes.push(result.outcome.expect("an outcome"));
    }
    Ok(outcomes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_stream_answers_each_send_in_order_and_goes_on_after_a_refusal() {
    use pb::send_message_stream_result::Outcome;
    let s = Grpc::start(Keys::open()).await;
    bounded(async {
        let mut c = s.client();
        c.create_queue(new_queue("stream")).await.expect("create");
        let mut requests: Vec<_> = (0..300)
            .map(|i| message("stream", &format!("m{i}")))
            .collect();
        requests[10].body.clear();
        requests[20].queue = "missing".into();
        let outcomes = stream_sends(&mut c, requests).await.expect("stream");
        assert_eq!(outcomes.len(), 300);
        let mut ids = std::collections::BTreeSet::new();
        for (i, outcome) in outcomes.iter().enumerate() {
            match (i, outcome) {
                (10, Outcome::Error(e)) => {
                    assert_eq!(
                        (e.code.as_str(), e.field.as_deref()),
                        ("invalid_argument", Some("body"))
                    );
                }
                (20, Outcome::Error(e)) => assert_eq!(e.code, "queue_not_found"),
                (10 | 20, other) => panic!("send {i}: {other:?}"),
                (_, Outcome::Sent(sent)) => assert!(ids.insert(sent.message_id.clone())),
                (_, Outcome::Error(e)) => panic!("send {i}: {e:?}"),
            }
        }
        let mut bodies = std::collections::BTreeSet::new();
        while bodies.len() < 298 {
            let got = c
                .receive_messages(receive("stream", 10))
                .await
                .expect("receive")
                .into_inner();
            assert!(!got.messages.is_empty(), "only {} came back", bodies.len());
            for m in got.messages {
                assert!(ids.contains(&m.message_id));
                assert!(bodies.insert(m.body));
            }
        }
        assert!(!bodies.contains("m10") && !bodies.contains("m20"));
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_statuses_with_the_spec_code_and_field() {
    let s = Grpc::start(Keys::open()).await;
    bounded(async {
        let mut c = s.client();
        c.create_queue(new_queue("v")).await.expect("create");
        c.create_queue(pb::CreateQueueRequest {
            max_message_bytes: Some(10),
            ..new_queue("small")
        })
        .await
        .expect("create");

        // invalid_argument, naming the field as REST does.
        assert_invalid(c.create_queue(new_queue("bad name")).await, "name");
        assert_invalid(c.create_queue(new_queue("")).await, "name");
        let bad_create = [
            (
                pb::CreateQueueRequest {
                    r#type: Some("fifo".into()),
                    ..new_queue("q")
                },
                "type",
            ),
            (
                pb::CreateQueueRequest {
                    lease_seconds: Some(-1),
                    ..new_queue("q")
                },
                "lease_seconds",
            ),
            (
                pb::CreateQueueRequest {
                    lease_seconds: Some(43_201),
                    ..new_queue("q")
                },
                "lease_seconds",
            ),
            (
                pb::CreateQueueRequest {
                    retention_seconds: Some(59),
                    ..new_queue("q")
                },
                "retention_seconds",
            ),
            (
                pb::CreateQueueRequest {
                    content_based_deduplication: Some(true),
                    ..new_queue("q")
                },
                "content_based_deduplication",
            ),
            (
                pb::CreateQueueRequest {
                    redrive_policy: Some(pb::RedrivePolicyInput {
                        dead_letter_target: Some("v".into()),
                        max_receive_count: None,
                    }),
                    ..new_queue("q")
                },
                "redrive_policy.max_receive_count",
            ),
            (
                pb::CreateQueueRequest {
                    redrive_allow_policy: Some(pb::RedriveAllowPolicyInput::default()),
                    ..new_queue("q")
                },
                "redrive_allow_policy.permission",
            ),
        ];
        for (request, field) in bad_create {
            assert_invalid(c.create_queue(request).await, field);
        }
        assert_invalid(c.get_queue(named("")).await, "queue");
        assert_invalid(c.send_message(message("v", "")).await, "body");
        assert_invalid(
            c.send_message(pb::SendMessageRequest {
                delay_seconds: Some(901),
                ..message("v", "x")
            })
            .await,
            "delay_seconds",
        );
        assert_invalid(
            c.send_message(pb::SendMessageRequest {
                message_deduplication_id: Some("d".into()),
                ..message("v", "x")
            })
            .await,
            "message_deduplication_id",
        );
        for (request, field) in [
            (receive("v", 0), "max_messages"),
            (receive("v", 11), "max_messages"),
            (
                pb::ReceiveMessagesRequest {
                    wait_seconds: Some(21),
                    ..receive("v", 1)
                },
                "wait_seconds",
            ),
            (
                pb::ReceiveMessagesRequest {
                    lease_seconds: Some(-1),
                    ..receive("v", 1)
                },
                "lease_seconds",
            ),
        ] {
            assert_invalid(c.receive_messages(request).await, field);
        }
        assert_invalid(
            c.ack(pb::AckRequest {
                queue: "v".into(),
                receipts: vec![],
            })
            .await,
            "receipts",
        );
        let change = |receipt: &str, lease_seconds| pb::ChangeLeaseRequest {
            queue: "v".into(),
            receipt: receipt.into(),
            lease_seconds,
        };
        assert_invalid(c.change_lease(change("x", None)).await, "lease_seconds");
        assert_invalid(c.change_lease(change("bogus", Some(5))).await, "receipt");
        assert_invalid(
            c.peek_messages(pb::PeekMessagesRequest {
                queue: "v".into(),
                limit: Some(0),
                after: None,
            })
            .await,
            "limit",
        );

        // message_too_large is RESOURCE_EXHAUSTED, about the body.
        c.send_message(message("small", "0123456789"))
            .await
            .expect("fits");
        assert_status(
            c.send_message(message("small", "0123456789a")).await,
            Code::ResourceExhausted,
            "message_too_large",
            Some("body"),
        );

        // Every operation on a missing queue is NOT_FOUND.
        let not_found = |result: Result<(), Status>| {
            assert_status(
                result.map(tonic::Response::new),
                Code::NotFound,
                "queue_not_found",
                None,
            );
        };
        let q = || "nope".to_string();
        not_found(c.get_queue(named("nope")).await.map(drop));
        not_found(
            c.patch_queue(pb::PatchQueueRequest {
                queue: q(),
                ..Default::default()
            })
            .await
            .map(drop),
        );
        not_found(
            c.delete_queue(pb::DeleteQueueRequest { queue: q() })
                .await
                .map(drop),
        );
        not_found(
            c.list_dead_letter_sources(pb::ListDeadLetterSourcesRequest { queue: q() })
                .await
                .map(drop),
        );
        not_found(c.send_message(message("nope", "x")).await.map(drop));
        not_found(
            c.send_message_batch(pb::SendMessageBatchRequest {
                queue: q(),
                entries: vec![pb::SendMessageBatchEntry {
                    id: "a".into(),
                    body: String::new(),
                    ..Default::default()
                }],
            })
            .await
            .map(drop),
        );
        not_found(
            c.receive_messages(pb::ReceiveMessagesRequest {
                wait_seconds: Some(1),
                ..receive("nope", 1)
            })
            .await
            .map(drop),
        );
        not_found(
            c.ack(pb::AckRequest {
                queue: q(),
                receipts: vec!["r".into()],
            })
            .await
            .map(drop),
        );
        not_found(
            c.peek_messages(pb::PeekMessagesRequest {
                queue: q(),
                ..Default::default()
            })
            .await
            .map(drop),
        );
        not_found(
            c.purge_queue(pb::PurgeQueueRequest { queue: q() })
                .await
                .map(drop),
        );
        not_found(
            c.get_queue_stats(pb::GetQueueStatsRequest { queue: q() })
                .await
                .map(drop),
        );

        // Nothing above changed anything.
        let all = c
            .list_queues(pb::ListQueuesRequest::default())
            .await
            .expect("list")
            .into_inner();
        assert_eq!(all.queues.len(), 2);
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_in_metadata_separate_accounts() {
    let s = Grpc::start(two_accounts()).await;
    bounded(async {
        let unauthenticated = |result: Result<(), Status>| {
            assert_status(
                result.map(tonic::Response::new),
                Code::Unauthenticated,
                "unauthenticated",
                None,
            );
        };
        let mut anonymous = s.client_with(None);
        unauthenticated(
            anonymous
                .list_queues(pb::ListQueuesRequest::default())
                .await
                .map(drop),
        );
        unauthenticated(
            anonymous
                .get_cluster(pb::GetClusterRequest {})
                .await
                .map(drop),
        );
        let mut wrong = s.client_with(Some("nope"));
        unauthenticated(wrong.create_queue(new_queue("x")).await.map(drop));
        unauthenticated(stream_sends(&mut wrong, vec![message("x", "y")]).await.map(drop));

        let mut acme = s.client_with(Some("acme-key"));
        let mut globex = s.client_with(Some("globex-key"));
        let mine = acme
            .create_queue(new_queue("shared"))
            .await
            .expect("create")
            .into_inner();
        assert!(mine.crn.contains(":a/acme:"), "{}", mine.crn);
        for reference in [&mine.name, &mine.id, &mine.crn] {
            assert_status(
                globex.get_queue(named(reference)).await,
                Code::NotFound,
                "queue_not_found",
                None,
            );
            assert_status(
                globex.send_message(message(reference, "x")).await,
                Code::NotFound,
                "queue_not_found",
                None,
            );
            let streamed = stream_sends(&mut globex, vec![message(reference, "x")]).await;
            assert!(
                matches!(streamed.as_deref(), Ok([pb::send_message_stream_result::Outcome::Error(e)]) if e.code == "queue_not_found"),
                "{streamed:?}"
            );
        }
        let theirs = globex
            .create_queue(new_queue("shared"))
            .await
            .expect("create")
            .into_inner();
        assert_ne!(theirs.id, mine.id);
        assert!(theirs.crn.contains(":a/globex:"));
        let listed = globex
            .list_queues(pb::ListQueuesRequest::default())
            .await
            .expect("list")
            .into_inner();
        assert_eq!(listed.queues.len(), 1);
        assert_eq!(listed.queues[0].id, theirs.id);
        let cluster = acme
            .get_cluster(pb::GetClusterRequest {})
            .await
            .expect("cluster");
        assert_eq!(cluster.into_inner().leader, Some(1));
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_wake_on_a_send_and_end_at_their_deadline() {
    let s = Grpc::start(Keys::open()).await;
    bounded(async {
        let mut c = s.client();
        c.create_queue(new_queue("lp")).await.expect("create");

        // Nothing arrives: the poll ends at its deadline, and waiting adds no log entries
        // beyond the two receives around it.
        let log_before = s.serving.node.raft().metrics().borrow().last_log_index;
        let started = Instant::now();
        let poll = pb::ReceiveMessagesRequest {
            wait_seconds: Some(1),
            ..receive("lp", 1)
        };
        let got = c
            .receive_messages(poll)
            .await
            .expect("receive")
            .into_inner();
        let waited = started.elapsed();
        assert!(got.messages.is_empty());
        assert!(waited >= Duration::from_millis(950), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        let log_after = s.serving.node.raft().metrics().borrow().last_log_index;
        let entries = log_after.unwrap_or(0) - log_before.unwrap_or(0);
        assert!(entries <= 3, "{entries} entries while one poll waited");

        // A send wakes a waiting poll.
        let mut sender = c.clone();
        let started = Instant::now();
        let poll = c.receive_messages(pb::ReceiveMessagesRequest {
            wait_seconds: Some(10),
            ..receive("lp", 1)
        });
        let send = async {
            sleep(Duration::from_millis(300)).await;
            sender.send_message(message("lp", "wake")).await
        };
        let (got, sent) = tokio::join!(poll, send);
        let waited = started.elapsed();
        let got = got.expect("receive").into_inner();
        let sent = sent.expect("send").into_inner();
        assert_eq!(got.messages.len(), 1);
        assert_eq!(got.messages[0].message_id, sent.message_id);
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_pages_purge_empties_and_cluster_reports_the_node() {
    let s = Grpc::start(Keys::open()).await;
    bounded(async {
        let mut c = s.client();
        c.create_queue(pb::CreateQueueRequest {
            content_based_deduplication: Some(true),
            ..new_queue("p.fifo")
        })
        .await
        .expect("create");
        for body in ["1", "2", "3"] {
            c.send_message(pb::SendMessageRequest {
                message_group_id: Some("g".into()),
                ..message("p.fifo", body)
            })
            .await
            .expect("send");
        }
        let peek = |limit: Option<i64>, after: Option<u64>| pb::PeekMessagesRequest {
            queue: "p.fifo".into(),
            limit,
            after,
        };
        let page = c
            .peek_messages(peek(Some(2), None))
            .await
            .expect("peek")
            .into_inner();
        assert_eq!(page.messages.len(), 2);
        assert_eq!(
            page.messages[0].state,
            Some(pb::MessageState::Visible as i32)
        );
        assert_eq!(page.messages[0].first_received_at, None);
        let next = page.next_after.expect("next_after");
        assert_eq!(page.messages[1].sequence_number, Some(next));
        let rest = c
            .peek_messages(peek(None, Some(next)))
            .await
            .expect("peek")
            .into_inner();
        let bodies: Vec<&str> = rest.messages.iter().map(|m| m.body.as_str()).collect();
        assert_eq!(bodies, ["3"]);

        let stats = c
            .get_queue_stats(pb::GetQueueStatsRequest {
                queue: "p.fifo".into(),
            })
            .await
            .expect("stats")
            .into_inner();
        assert_eq!(stats.visible, 3);
        c.purge_queue(pb::PurgeQueueRequest {
            queue: "p.fifo".into(),
        })
        .await
        .expect("purge");
        let empty = c
            .peek_messages(peek(None, None))
            .await
            .expect("peek")
            .into_inner();
        assert_eq!(empty, pb::PeekMessagesResponse::default());

        let cluster = c
            .get_cluster(pb::GetClusterRequest {})
            .await
            .expect("cluster")
            .into_inner();
        assert_eq!((cluster.leader, cluster.node_id), (Some(1), 1));
        assert_eq!(cluster.region, "local");
        assert_eq!(cluster.nodes.len(), 1);
        assert_eq!(
            (cluster.nodes[0].id, cluster.nodes[0].role.as_str()),
            (1, "leader")
        );
        assert!(cluster.nodes[0].raft_addr.starts_with("127.0.0.1:"));
        assert!(
            cluster.term >= 1 && cluster.commit_index >= 2,
            "{cluster:?}"
        );
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_and_grpc_share_the_port() {
    let s = Grpc::start(Keys::open()).await;
    bounded(async {
        let mut c = s.client();
        c.create_queue(new_queue("both")).await.expect("create");
        let http = reqwest::Client::new();
        let base = format!("http://{}", s.serving.addr);
        let rest = http
            .get(format!("{base}/v1/queues/both"))
            .send()
            .await
            .expect("rest");
        assert_eq!(rest.status(), 200);
        let rest = http
            .get(format!("{base}/v1/nothing"))
            .send()
            .await
            .expect("rest");
        assert_eq!(rest.status(), 404);
        assert_eq!(
            rest.headers().get("content-type").map(|v| v.as_bytes()),
            Some(&b"application/json"[..])
        );

        // A gRPC call that no service takes gets a gRPC status, not REST's JSON 404 or 405.
        for path in [
            "/raftq.v1.Nothing/Call",
            "/raftq.v1.Queues/Nothing",
            "/v1/cluster",
            "/v1/nothing",
        ] {
            let r = http
                .post(format!("{base}{path}"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(vec![0u8; 5])
                .send()
                .await
                .expect("grpc over http/1.1");
            assert_eq!(r.status(), 200, "{path}");
            assert_eq!(
                r.headers().get("grpc-status").map(|v| v.as_bytes()),
                Some(&b"12"[..]),
                "{path}: {:?}",
                r.headers()
            );
        }

        // gRPC calls are counted like REST requests; rpcs that do not exist are not labels.
        let missing = c.get_queue(named("missing")).await;
        assert_status(missing, Code::NotFound, "queue_not_found", None);
        let metrics = http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        for line in [
            r#"raftq_requests_total{protocol="grpc",method="POST",route="/raftq.v1.Queues/CreateQueue",status="0"} 1"#,
            r#"raftq_requests_total{protocol="grpc",method="POST",route="/raftq.v1.Queues/GetQueue",status="5"} 1"#,
            r#"raftq_requests_total{protocol="grpc",method="POST",route="unmatched",status="12"} 4"#,
            r#"raftq_requests_total{protocol="http",method="GET",route="/v1/queues/{q}",status="200"} 1"#,
        ] {
            assert!(metrics.contains(line), "{line}: {metrics}");
        }
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_quorum_is_unavailable() {
    // Node 2 never starts: node 1 alone cannot elect a leader.
    let absent_addr = absent_peer().await;
    let s = Grpc::over(Serving::start_with(Keys::open(), &[(2, absent_addr)], false).await).await;
    bounded(async {
        let mut c = s.client();
        let started = Instant::now();
        assert_status(
            c.create_queue(new_queue("q")).await,
            Code::Unavailable,
            "unavailable",
            None,
        );
        assert!(started.elapsed() < Duration::from_secs(20));
        let cluster = c
            .get_cluster(pb::GetClusterRequest {})
            .await
            .expect("cluster")
            .into_inner();
        assert_eq!(cluster.leader, None);
        // A new cluster forms once every listed node has started: none has a membership yet.
        assert!(cluster.nodes.is_empty());
    })
    .await;
    s.shutdown().await;
}

/// The same membership operations over gRPC: admin keys only, refusals with the REST codes; the
/// cluster's details and the accounts for admin keys only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admin_keys_change_membership_or_list_accounts_over_grpc() {
    let s = Grpc::start(two_accounts()).await;
    bounded(async {
        let add = || pb::AddNodeRequest {
            id: 9,
            raft_addr: "nohost".into(),
        };
        let mut account = s.client_with(Some("acme-key"));
        assert_status(
            account.add_node(add()).await,
            Code::PermissionDenied,
            "permission_denied",
            None,
        );
        assert_status(
            account.remove_node(pb::RemoveNodeRequest { id: 1 }).await,
            Code::PermissionDenied,
            "permission_denied",
            None,
        );
        let mut admin = s.client_with(Some("admin-key"));
        assert_status(
            admin.add_node(add()).await,
            Code::InvalidArgument,
            "invalid_argument",
            Some("raft_addr"),
        );
        assert_status(
            admin.remove_node(pb::RemoveNodeRequest { id: 1 }).await,
            Code::FailedPrecondition,
            "membership_conflict",
            None,
        );
        let cluster = admin
            .get_cluster(pb::GetClusterRequest {})
            .await
            .expect("cluster")
            .into_inner();
        assert_eq!(cluster.nodes.len(), 1);
        assert!(cluster.cluster_id.is_some() && cluster.clock_skewed == Some(false));
        let seen = account
            .get_cluster(pb::GetClusterRequest {})
            .await
            .expect("cluster")
            .into_inner();
        assert_eq!(seen.nodes.len(), 1);
        assert_eq!((seen.cluster_id, seen.clock_skewed), (None, None));
        assert_status(
            account.list_accounts(pb::ListAccountsRequest {}).await,
            Code::PermissionDenied,
            "permission_denied",
            None,
        );
        account
            .create_queue(new_queue("mine"))
            .await
            .expect("create");
        let listed = admin
            .list_accounts(pb::ListAccountsRequest {})
            .await
            .expect("accounts")
            .into_inner();
        let accounts: Vec<(String, u64)> = listed
            .accounts
            .into_iter()
            .map(|a| (a.account, a.queues))
            .collect();
        assert_eq!(accounts, [("acme".to_string(), 1)]);
    })
    .await;
    s.shutdown().await;
}
