//! What only the gRPC API has, end to end on a real single-node cluster on loopback (set up by
//! `serving`) with the tonic client generated from `proto/raftq.proto`: send streams (in order,
//! past a refusal, with API keys and accounts), a queue field that protobuf lets be empty, a
//! patch that both sets and removes a tag, REST and gRPC sharing one port, and backups streamed. The operations both fronts share, with gRPC's status codes
//! and error metadata, are tested through both in `api`. Every test is bounded in time and
//! stops its server and node.

use std::collections::BTreeSet;

use crate::front::{refused, Client, Grpc};
use crate::serving::two_accounts;
use raftq_api::grpc::pb;
use raftq_api::Keys;
use tonic::Status;

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
    Grpc::test(Keys::open(), async |s| {
        let mut c = s.client();
        c.create_queue(new_queue("stream")).await.expect("create");
        let mut requests: Vec<_> = (0..300)
            .map(|i| message("stream", &format!("m{i}")))
            .collect();
        requests[10].body.clear();
        requests[20].queue = "missing".into();
        let outcomes = stream_sends(&mut c, requests).await.expect("stream");
        assert_eq!(outcomes.len(), 300);
        let mut ids = BTreeSet::new();
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
        let mut bodies = BTreeSet::new();
        while bodies.len() < 298 {
            let got = c
                .receive_messages(pb::ReceiveMessagesRequest {
                    queue: "stream".into(),
                    max_messages: Some(10),
                    ..Default::default()
                })
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
}

/// A send stream authenticates like a call, and its sends find only the queues of its account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_streams_need_a_key_and_see_only_their_account() {
    use pb::send_message_stream_result::Outcome;
    Grpc::test(two_accounts(), async |s| {
        let mut wrong = s.with_key(Some("nope")).client();
        let streamed = stream_sends(&mut wrong, vec![message("x", "y")]).await;
        refused(streamed, "unauthenticated", None);

        let mut acme = s.with_key(Some("acme-key")).client();
        let mine = acme
            .create_queue(new_queue("shared"))
            .await
            .expect("create")
            .into_inner();
        let mut globex = s.with_key(Some("globex-key")).client();
        for reference in [&mine.name, &mine.id, &mine.crn] {
            let streamed = stream_sends(&mut globex, vec![message(reference, "x")]).await;
            assert!(
                matches!(streamed.as_deref(), Ok([Outcome::Error(e)]) if e.code == "queue_not_found"),
                "{streamed:?}"
            );
        }
    })
    .await;
}

/// A protobuf request may leave its queue empty, where a REST path cannot: that is
/// `invalid_argument` naming `queue`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_queue_is_invalid_naming_the_field() {
    Grpc::test(Keys::open(), async |s| {
        let got = s
            .client()
            .get_queue(pb::GetQueueRequest {
                queue: String::new(),
            })
            .await;
        refused(got, "invalid_argument", Some("queue"));
    })
    .await;
}

/// A patch names tags to set and tags to remove in two fields, where JSON has one object: a
/// key in both is `invalid_argument` naming it in `remove_tags`, and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_both_set_and_removed_is_refused_naming_it() {
    Grpc::test(Keys::open(), async |s| {
        let mut c = s.client();
        let mut create = new_queue("tagged");
        create.tags.insert("team".into(), "pay".into());
        c.create_queue(create).await.expect("create");
        let patch = pb::PatchQueueRequest {
            queue: "tagged".into(),
            set_tags: [("team".to_string(), "billing".to_string())].into(),
            remove_tags: vec!["env".into(), "team".into()],
            ..Default::default()
        };
        refused(
            c.patch_queue(patch).await,
            "invalid_argument",
            Some("remove_tags[1]"),
        );
        let got = c
            .get_queue(pb::GetQueueRequest {
                queue: "tagged".into(),
            })
            .await
            .expect("get")
            .into_inner();
        assert_eq!(got.tags, [("team".to_string(), "pay".to_string())].into());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_and_grpc_share_the_port() {
    Grpc::test(Keys::open(), async |s| {
        let mut c = s.client();
        c.create_queue(new_queue("both")).await.expect("create");
        let http = reqwest::Client::new();
        let base = format!("http://{}", s.serving().addr);
        let rest_get = async |path: &str| {
            http.get(format!("{base}{path}"))
                .send()
                .await
                .expect("rest")
        };
        assert_eq!(rest_get("/v1/queues/both").await.status(), 200);
        let rest = rest_get("/v1/nothing").await;
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
        let missing = c
            .get_queue(pb::GetQueueRequest {
                queue: "missing".into(),
            })
            .await;
        refused(missing, "queue_not_found", None);
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
}

/// A backup streams over gRPC as the bytes of one backup file, for admin keys only; on a quiet
/// node its state digest is the node's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_streams_its_file_for_admin_keys_only() {
    Grpc::test(two_accounts(), async |s| {
        let mut acme = s.with_key(Some("acme-key")).client();
        acme.create_queue(new_queue("kept")).await.expect("create");
        acme.send_message(message("kept", "body"))
            .await
            .expect("send");
        let refused = acme.backup(pb::BackupRequest {}).await;
        assert_eq!(
            refused.expect_err("not admin").code(),
            tonic::Code::PermissionDenied
        );

        let mut admin = s.with_key(Some("admin-key")).client();
        let mut chunks = admin
            .backup(pb::BackupRequest {})
            .await
            .expect("backup")
            .into_inner();
        let mut file = Vec::new();
        while let Some(chunk) = chunks.message().await.expect("chunk") {
            file.extend(chunk.data);
        }
        let backup = raftq_store::backup::read(file.as_slice()).expect("a whole backup");
        let (applied, digest) = s.serving().node.digest().expect("digest");
        let [group] = backup.groups.as_slice() else {
            panic!("one group: {:?}", backup.groups);
        };
        assert_eq!(group.applied_index, applied);
        assert_eq!(group.state_digest, digest);
        assert!(
            group.rows.len() >= 3,
            "the queue, its message and its payload"
        );
    })
    .await;
}
