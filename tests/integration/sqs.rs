//! The SQS-compatible endpoint end to end: the real AWS SDK for Rust (`aws-sdk-sqs`, AWS JSON
//! 1.0) against a served node for every action the endpoint serves, FIFO order and
//! deduplication, redrive to a dead-letter queue, long polling, batch partial failures and the
//! MD5 digests; the Query protocol with forms built by hand; the limits, which apply to SQS
//! requests as to the others; and signatures by the access keys of a key file.
//!
//! The SDK (1.x) does not check MD5 digests itself, so these tests check them: body digests
//! against MD5 computed here, attribute digests against values computed independently (in
//! Python with `hashlib`, by the encoding AWS documents).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::operation::create_queue::{CreateQueueError, CreateQueueOutput};
use aws_sdk_sqs::operation::receive_message::ReceiveMessageOutput;
use aws_sdk_sqs::operation::send_message::SendMessageOutput;
use aws_sdk_sqs::operation::set_queue_attributes::{
    SetQueueAttributesError, SetQueueAttributesOutput,
};
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
    MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
    SendMessageBatchRequestEntry,
};
use aws_sdk_sqs::Client;
use md5::{Digest, Md5};
use raftq_api::Keys;
use tempfile::TempDir;

use crate::front::rfc3339_in;
use crate::process::start;
use crate::serving::{bounded, Serving};

/// The account number of the open mode's account `dev` (derived from its name).
const DEV: &str = "081515226031";

/// The account number of `acme` (derived from its name).
const ACME: &str = "469329139872";

/// An SDK client of the endpoint at `endpoint` with any credentials (open mode takes them all).
fn sdk(endpoint: &str) -> Client {
    sdk_as(endpoint, "AKIDEXAMPLE", "secret")
}

/// An SDK client of the endpoint at `endpoint` that signs with the access key `id` and its
/// `secret`, over plain HTTP (no TLS stack: loopback only), without retries: each call is one
/// request, so what a test sees is what the server answered.
fn sdk_as(endpoint: &str, id: &str, secret: &str) -> Client {
    let http = aws_smithy_http_client::Builder::new().build_http();
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("local"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new(id, secret, None, None, "test"))
        .retry_config(RetryConfig::disabled())
        .http_client(http)
        .build();
    Client::from_conf(config)
}

async fn serving() -> (Serving, Client) {
    let serving = Serving::start(Keys::open()).await;
    let client = sdk(&format!("http://{}", serving.addr));
    (serving, client)
}

/// Runs `test` against a node served in open mode, with an SDK client of it, bounded in time;
/// the node is shut down afterwards.
async fn with_node(test: impl AsyncFnOnce(&Serving, &Client)) {
    bounded(async {
        let (serving, client) = serving().await;
        test(&serving, &client).await;
        drop(client);
        serving.shutdown().await;
    })
    .await;
}

/// The SQS error code (`x-amzn-query-error`'s) of a failed call; without one, the error.
fn code<T, E, R>(result: Result<T, SdkError<E, R>>) -> String
where
    T: std::fmt::Debug,
    E: ProvideErrorMetadata + std::fmt::Debug,
    R: std::fmt::Debug,
{
    let (code, _) = said(result);
    code
}

/// The SQS error code of a refused call (without one, the error), with its message.
fn said<T, E, R>(result: Result<T, SdkError<E, R>>) -> (String, String)
where
    T: std::fmt::Debug,
    E: ProvideErrorMetadata + std::fmt::Debug,
    R: std::fmt::Debug,
{
    match result {
        Ok(answer) => panic!("expected an error, got {answer:?}"),
        Err(e) => (
            e.code()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{e:?}")),
            e.message().unwrap_or_default().to_string(),
        ),
    }
}

/// The HTTP status and SQS error code of a failed call.
fn refusal<T, E>(result: Result<T, SdkError<E, HttpResponse>>) -> (u16, String)
where
    T: std::fmt::Debug,
    E: ProvideErrorMetadata + std::fmt::Debug,
{
    let status = match &result {
        Err(e) => e.raw_response().map_or(0, |r| r.status().as_u16()),
        Ok(_) => 200,
    };
    (status, code(result))
}

fn md5_hex(text: &str) -> String {
    Md5::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn string(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .expect("attribute")
}

/// The answer to a create of the queue `name` with `attributes`.
async fn try_create(
    client: &Client,
    name: &str,
    attributes: &[(QueueAttributeName, &str)],
) -> Result<CreateQueueOutput, SdkError<CreateQueueError, HttpResponse>> {
    let mut request = client.create_queue().queue_name(name);
    for (name, value) in attributes {
        request = request.attributes(name.clone(), *value);
    }
    request.send().await
}

/// Creates the queue `name` with `attributes`; its URL.
async fn create(client: &Client, name: &str, attributes: &[(QueueAttributeName, &str)]) -> String {
    let created = try_create(client, name, attributes).await;
    created.expect("create queue").queue_url.expect("queue url")
}

/// The attributes `names` of the queue at `url`.
async fn queue_attributes(
    client: &Client,
    url: &str,
    names: &[QueueAttributeName],
) -> HashMap<QueueAttributeName, String> {
    let request = client.get_queue_attributes().queue_url(url);
    let answer = request.set_attribute_names(Some(names.to_vec()));
    let attributes = answer.send().await.expect("queue attributes").attributes;
    attributes.expect("attributes")
}

/// The answer to setting `attributes` of the queue at `url`.
async fn set_attributes(
    client: &Client,
    url: &str,
    attributes: &[(QueueAttributeName, &str)],
) -> Result<SetQueueAttributesOutput, SdkError<SetQueueAttributesError, HttpResponse>> {
    let attributes = attributes
        .iter()
        .map(|(name, value)| (name.clone(), value.to_string()));
    let request = client.set_queue_attributes().queue_url(url);
    request
        .set_attributes(Some(attributes.collect()))
        .send()
        .await
}

/// Sends `body` to the queue at `url`.
async fn send(client: &Client, url: &str, body: &str) -> SendMessageOutput {
    let request = client.send_message().queue_url(url).message_body(body);
    request.send().await.expect("send")
}

/// Receives from the queue at `url` with the defaults (one message at most).
async fn receive(client: &Client, url: &str) -> ReceiveMessageOutput {
    let request = client.receive_message().queue_url(url);
    request.send().await.expect("receive")
}

/// Deletes the message of `receipt` from the queue at `url`.
async fn delete(client: &Client, url: &str, receipt: &str) {
    let request = client.delete_message().queue_url(url);
    request
        .receipt_handle(receipt)
        .send()
        .await
        .expect("delete");
}

/// Receives up to 10 messages from the queue at `url`.
async fn receive_ten(client: &Client, url: &str) -> ReceiveMessageOutput {
    let request = client.receive_message().queue_url(url);
    let request = request.max_number_of_messages(10);
    request.send().await.expect("receive")
}

/// Changes the visibility timeout of the message of `receipt` to `seconds` (0: releases it).
async fn change_visibility(client: &Client, url: &str, receipt: &str, seconds: i32) {
    let request = client.change_message_visibility().queue_url(url);
    let request = request.receipt_handle(receipt).visibility_timeout(seconds);
    request.send().await.expect("change visibility");
}

#[tokio::test]
async fn sqs_sdk_manages_queues() {
    use QueueAttributeName::{DelaySeconds, MaximumMessageSize, VisibilityTimeout};
    with_node(async |serving, client| {
        let base = format!("http://{}", serving.addr);
        let url = create(client, "jobs", &[(VisibilityTimeout, "60")]).await;
        assert_eq!(url, format!("{base}/{DEV}/jobs"));
        // The same attributes again: the same queue. Another value: QueueAlreadyExists.
        let again = create(client, "jobs", &[(VisibilityTimeout, "60")]).await;
        assert_eq!(again, url);
        let other = try_create(client, "jobs", &[(VisibilityTimeout, "61")]).await;
        assert_eq!(code(other), "QueueAlreadyExists");
        for name in ["jobs-2", "jobs-3", "other"] {
            create(client, name, &[]).await;
        }
        let found = client
            .get_queue_url()
            .queue_name("jobs")
            .send()
            .await
            .unwrap();
        assert_eq!(found.queue_url.as_deref(), Some(url.as_str()));
        let missing = client.get_queue_url().queue_name("nope").send().await;
        assert_eq!(code(missing), "AWS.SimpleQueueService.NonExistentQueue");

        // Pages of two by prefix, then the rest.
        let first = client
            .list_queues()
            .queue_name_prefix("jobs")
            .max_results(2)
            .send()
            .await
            .unwrap();
        assert_eq!(first.queue_urls().len(), 2);
        let token = first.next_token.clone().expect("a next page");
        let second = client
            .list_queues()
            .queue_name_prefix("jobs")
            .max_results(2)
            .next_token(token)
            .send()
            .await
            .unwrap();
        assert_eq!(second.queue_urls(), [format!("{base}/{DEV}/jobs-3")]);
        assert_eq!(second.next_token, None);
        assert_eq!(
            client
                .list_queues()
                .send()
                .await
                .unwrap()
                .queue_urls()
                .len(),
            4
        );

        // Attributes: all of them, some of them, set, refused.
        let attrs = queue_attributes(client, &url, &[QueueAttributeName::All]).await;
        assert_eq!(attrs[&VisibilityTimeout], "60");
        assert_eq!(
            attrs[&QueueAttributeName::QueueArn],
            format!("arn:aws:sqs:local:{DEV}:jobs")
        );
        assert_eq!(attrs[&QueueAttributeName::ApproximateNumberOfMessages], "0");
        assert!(
            attrs[&QueueAttributeName::CreatedTimestamp]
                .parse::<u64>()
                .unwrap()
                > 1_700_000_000
        );
        let set = [(DelaySeconds, "2"), (MaximumMessageSize, "1048576")];
        set_attributes(client, &url, &set).await.unwrap();
        let attrs = queue_attributes(client, &url, &[DelaySeconds, MaximumMessageSize]).await;
        assert_eq!(attrs.len(), 2);
        assert_eq!(attrs[&DelaySeconds], "2");
        assert_eq!(attrs[&MaximumMessageSize], "1048576");
        let out_of_range = set_attributes(client, &url, &[(VisibilityTimeout, "43201")]).await;
        assert_eq!(code(out_of_range), "InvalidAttributeValue");
        let policy = set_attributes(client, &url, &[(QueueAttributeName::Policy, "[1]")]).await;
        assert_eq!(
            code(policy),
            "InvalidAttributeValue",
            "a policy is a JSON object"
        );
        let scope = [
            (QueueAttributeName::FifoQueue, "true"),
            (QueueAttributeName::DeduplicationScope, "group"),
        ];
        let scope = try_create(client, "scoped.fifo", &scope).await;
        assert_eq!(code(scope), "InvalidAttributeValue");

        // Tags: set, listed, removed.
        let tags = async || {
            let listed = client.list_queue_tags().queue_url(&url).send().await;
            listed.expect("tags listed").tags
        };
        assert!(tags().await.is_none());
        client
            .tag_queue()
            .queue_url(&url)
            .tags("team", "core")
            .tags("tier", "gold")
            .send()
            .await
            .unwrap();
        client
            .untag_queue()
            .queue_url(&url)
            .tag_keys("tier")
            .send()
            .await
            .unwrap();
        let tags = tags().await.expect("tags");
        assert_eq!(tags.len(), 1);
        assert_eq!(tags["team"], "core");

        // A queue is found by the path of its URL, whatever the host; also by its ARN.
        let found_at =
            async |url: String| client.get_queue_attributes().queue_url(url).send().await;
        let by_host = found_at(format!("http://raftq-2.example:9999/{DEV}/jobs")).await;
        assert!(by_host.is_ok(), "{by_host:?}");
        let foreign = found_at(format!("{base}/123456789012/jobs")).await;
        assert_eq!(code(foreign), "AWS.SimpleQueueService.NonExistentQueue");

        client.delete_queue().queue_url(&url).send().await.unwrap();
        let gone = client.get_queue_url().queue_name("jobs").send().await;
        assert_eq!(code(gone), "AWS.SimpleQueueService.NonExistentQueue");
    })
    .await;
}

#[tokio::test]
async fn sqs_sdk_sends_receives_and_deletes_with_digests() {
    with_node(async |_serving, client| {
        let url = create(client, "mail", &[]).await;
        let body = "héllo ✓ <xml> & \"quotes\"";
        let sent = client
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .message_attributes("color", string("red"))
            .message_attributes("order.id", string("42"))
            .message_attributes("order.note", string("héllo ✓"))
            .send()
            .await
            .unwrap();
        assert_eq!(sent.md5_of_message_body(), Some(md5_hex(body).as_str()));
        assert_eq!(
            sent.md5_of_message_attributes(),
            Some("c4b30a86b843f16cfe2a009a53cabba4")
        );
        let message_id = sent.message_id.clone().unwrap();

        let received = client
            .receive_message()
            .queue_url(&url)
            .message_attribute_names("order.*")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .visibility_timeout(30)
            .send()
            .await
            .unwrap();
        let [message] = received.messages() else {
            panic!("one message: {received:?}")
        };
        assert_eq!(message.message_id.as_deref(), Some(message_id.as_str()));
        assert_eq!(message.body(), Some(body));
        assert_eq!(message.md5_of_body(), Some(md5_hex(body).as_str()));
        // The digest of the attributes returned: those the prefix selects.
        assert_eq!(
            message.md5_of_message_attributes(),
            Some("b4c8c937e6f81289fc9226039fc80da6")
        );
        let attributes = message.message_attributes().unwrap();
        assert_eq!(attributes.len(), 2);
        assert_eq!(attributes["order.note"].string_value(), Some("héllo ✓"));
        let system = message.attributes().unwrap();
        assert_eq!(
            system[&MessageSystemAttributeName::ApproximateReceiveCount],
            "1"
        );
        assert_eq!(system[&MessageSystemAttributeName::SenderId], DEV);
        assert!(system.contains_key(&MessageSystemAttributeName::SentTimestamp));
        assert!(system.contains_key(&MessageSystemAttributeName::ApproximateFirstReceiveTimestamp));
        let receipt = message.receipt_handle().unwrap().to_string();

        // A visibility timeout of 0 releases the message at once.
        change_visibility(client, &url, &receipt, 0).await;
        // SQS: a visibility change under an ended lease of a standard queue succeeds and
        // changes nothing; the message stays visible.
        change_visibility(client, &url, &receipt, 10).await;
        let again = receive(client, &url).await;
        let [message] = again.messages() else {
            panic!("the released message: {again:?}")
        };
        assert!(
            message.attributes.is_none(),
            "no system attributes asked for"
        );
        assert!(
            message.md5_of_message_attributes.is_none(),
            "no attributes asked for"
        );
        let receipt_2 = message.receipt_handle().unwrap().to_string();
        // SQS: a delete with an older receipt handle succeeds, but the message might not be
        // deleted; raftq leaves it under its newer lease.
        delete(client, &url, &receipt).await;
        let garbage = client
            .delete_message()
            .queue_url(&url)
            .receipt_handle("nope");
        assert_eq!(code(garbage.send().await), "ReceiptHandleIsInvalid");
        delete(client, &url, &receipt_2).await;
        let empty = receive(client, &url).await;
        assert!(empty.messages.is_none(), "{empty:?}");

        // Bad input changes nothing: a body SQS cannot carry, too many messages asked for.
        let send_control = client
            .send_message()
            .queue_url(&url)
            .message_body("a\u{1}b");
        assert_eq!(code(send_control.send().await), "InvalidMessageContents");
        let receive_eleven = client.receive_message().queue_url(&url);
        let receive_eleven = receive_eleven.max_number_of_messages(11).send().await;
        assert_eq!(code(receive_eleven), "InvalidParameterValue");

        // Typed attributes round-trip exactly, with their digest.
        let number = MessageAttributeValue::builder()
            .data_type("Number.int")
            .string_value("42")
            .build()
            .unwrap();
        let binary = MessageAttributeValue::builder()
            .data_type("Binary")
            .binary_value(Blob::new(vec![0, 1, 2, 255]))
            .build()
            .unwrap();
        let typed = client
            .send_message()
            .queue_url(&url)
            .message_body("typed")
            .message_attributes("color", string("red"))
            .message_attributes("count", number)
            .message_attributes("blob", binary)
            .send()
            .await
            .unwrap();
        let digest = Some("f7fc96976c30d6b38ea3bcbdaf83295e");
        assert_eq!(typed.md5_of_message_attributes(), digest);
        let received = client
            .receive_message()
            .queue_url(&url)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        let [message] = received.messages() else {
            panic!("the typed message: {received:?}")
        };
        assert_eq!(message.md5_of_message_attributes(), digest);
        let attributes = message.message_attributes().unwrap();
        assert_eq!(attributes["count"].data_type(), "Number.int");
        assert_eq!(attributes["count"].string_value(), Some("42"));
        let blob = attributes["blob"]
            .binary_value()
            .map(|b| b.as_ref().to_vec());
        assert_eq!(blob, Some(vec![0, 1, 2, 255]));
        delete(client, &url, message.receipt_handle().unwrap()).await;

        // Purge, counted by the queue's attributes.
        for i in 0..3 {
            send(client, &url, &format!("m{i}")).await;
        }
        let count = async || {
            let name = QueueAttributeName::ApproximateNumberOfMessages;
            queue_attributes(client, &url, std::slice::from_ref(&name)).await[&name].clone()
        };
        assert_eq!(count().await, "3");
        client.purge_queue().queue_url(&url).send().await.unwrap();
        assert_eq!(count().await, "0");
    })
    .await;
}

/// Where a client can tell, the endpoint answers as SQS does: its default message size, its
/// error codes and HTTP statuses, a bare queue name as `QueueUrl`, and its answers to receipt
/// handles of messages already deleted (a retried delete succeeds) or of ended leases.
#[tokio::test]
async fn sqs_sdk_answers_as_sqs_does() {
    use QueueAttributeName::{FifoQueue, KmsMasterKeyId, MaximumMessageSize};
    with_node(async |_serving, client| {
        let url = create(client, "plain", &[]).await;
        let fifo = create(client, "ordered.fifo", &[(FifoQueue, "true")]).await;
        let size = queue_attributes(client, &url, &[MaximumMessageSize]).await;
        assert_eq!(
            size[&MaximumMessageSize], "1048576",
            "SQS's default for a queue it creates"
        );
        client
            .send_message()
            .queue_url("plain")
            .message_body("by name")
            .send()
            .await
            .expect("a bare queue name as QueueUrl");

        let refusals = [
            (
                "a MaximumMessageSize under SQS's 1024",
                refusal(
                    client
                        .create_queue()
                        .queue_name("small")
                        .attributes(MaximumMessageSize, "1023")
                        .send()
                        .await,
                ),
                (400, "InvalidAttributeValue"),
            ),
            (
                "FifoQueue on a name without .fifo",
                refusal(
                    client
                        .create_queue()
                        .queue_name("unordered")
                        .attributes(FifoQueue, "true")
                        .send()
                        .await,
                ),
                (400, "InvalidParameterValue"),
            ),
            (
                "a KMS key",
                refusal(
                    client
                        .create_queue()
                        .queue_name("secret")
                        .attributes(KmsMasterKeyId, "alias/aws/sqs")
                        .send()
                        .await,
                ),
                (400, "InvalidAttributeName"),
            ),
            (
                "a queue that does not exist",
                refusal(client.get_queue_url().queue_name("nope").send().await),
                (400, "AWS.SimpleQueueService.NonExistentQueue"),
            ),
            (
                "a FIFO send without a group",
                refusal(
                    client
                        .send_message()
                        .queue_url(&fifo)
                        .message_body("x")
                        .message_deduplication_id("d")
                        .send()
                        .await,
                ),
                (400, "MissingParameter"),
            ),
            (
                "a URL without an account number",
                refusal(
                    client
                        .send_message()
                        .queue_url("http://elsewhere/plain")
                        .message_body("x")
                        .send()
                        .await,
                ),
                (404, "InvalidAddress"),
            ),
        ];
        for (what, answer, (status, code)) in refusals {
            assert_eq!(answer, (status, code.to_string()), "{what}");
        }

        // A delete repeated with the same receipt handle succeeds, alone and in a batch; a
        // visibility change of the deleted message is refused.
        let received = receive(client, &url).await;
        let receipt = received.messages()[0].receipt_handle().unwrap();
        // A delete, and its retry.
        for _ in 0..2 {
            delete(client, &url, receipt).await;
        }
        let batch = client
            .delete_message_batch()
            .queue_url(&url)
            .entries(
                DeleteMessageBatchRequestEntry::builder()
                    .id("again")
                    .receipt_handle(receipt)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(batch.successful().len(), 1, "{batch:?}");
        let changed = client
            .change_message_visibility()
            .queue_url(&url)
            .receipt_handle(receipt)
            .visibility_timeout(5)
            .send()
            .await;
        assert_eq!(refusal(changed), (400, "InvalidParameterValue".to_string()));

        // On a FIFO queue, a delete under a lease that expired is refused: the receipt handle
        // has expired. A per-message DelaySeconds is taken (SQS refuses it on FIFO queues).
        client
            .send_message()
            .queue_url(&fifo)
            .message_body("first")
            .message_group_id("g")
            .message_deduplication_id("1")
            .send()
            .await
            .unwrap();
        client
            .send_message()
            .queue_url(&fifo)
            .message_body("later")
            .message_group_id("h")
            .message_deduplication_id("2")
            .delay_seconds(60)
            .send()
            .await
            .expect("a delayed FIFO message");
        let received = client
            .receive_message()
            .queue_url(&fifo)
            .max_number_of_messages(10)
            .visibility_timeout(1)
            .send()
            .await
            .unwrap();
        let bodies: Vec<&str> = received
            .messages()
            .iter()
            .filter_map(|m| m.body())
            .collect();
        assert_eq!(bodies, ["first"], "the delayed message waits");
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let late = client
            .delete_message()
            .queue_url(&fifo)
            .receipt_handle(received.messages()[0].receipt_handle().unwrap())
            .send()
            .await;
        let late = match late {
            Err(e) => e.into_service_error(),
            Ok(answer) => panic!("an expired receipt handle deleted: {answer:?}"),
        };
        assert_eq!(late.code(), Some("InvalidParameterValue"));
        assert!(
            late.message()
                .is_some_and(|m| m.contains("The receipt handle has expired")),
            "{late:?}"
        );
    })
    .await;
}

/// An X-Ray trace header, and the MD5 of it as a message system attribute, computed
/// independently (Python's `hashlib`, by the encoding AWS documents for attributes).
const TRACE_HEADER: &str =
    "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
const TRACE_HEADER_MD5: &str = "5ae4d5d7636402d80f4eb6d213245a88";

/// SQS's attributes of high-throughput FIFO queues (deduplication per message group, with the
/// rules between the two), of access policies (kept, returned, removed) and of tracing (an
/// `AWSTraceHeader` carried with its message), as SQS documents them.
#[tokio::test]
async fn sqs_sdk_keeps_policies_trace_headers_and_deduplicates_per_message_group() {
    use aws_sdk_sqs::types::{MessageSystemAttributeNameForSends, MessageSystemAttributeValue};
    use QueueAttributeName::{DeduplicationScope, FifoQueue, FifoThroughputLimit, Policy};
    with_node(async |_serving, client| {
        // A policy is any JSON object, kept and returned as given; "" removes it.
        let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"sqs:SendMessage","Resource":"*"}]}"#;
        let url = create(client, "guarded", &[(Policy, policy)]).await;
        let policy_of = async || {
            let got = queue_attributes(client, &url, &[QueueAttributeName::All]).await;
            got.get(&Policy).cloned()
        };
        assert_eq!(policy_of().await.as_deref(), Some(policy));
        set_attributes(client, &url, &[(Policy, "")]).await.unwrap();
        assert_eq!(policy_of().await, None);
        let too_large = format!(r#"{{"Statement":"{}"}}"#, "x".repeat(8192));
        let refused = set_attributes(client, &url, &[(Policy, &too_large)]).await;
        assert_eq!(refusal(refused), (400, "InvalidAttributeValue".to_string()));

        // High-throughput FIFO: one deduplication ID once in each message group.
        let fast = create(
            client,
            "fast.fifo",
            &[
                (FifoQueue, "true"),
                (DeduplicationScope, "messageGroup"),
                (FifoThroughputLimit, "perMessageGroupId"),
            ],
        )
        .await;
        let shown = queue_attributes(client, &fast, &[QueueAttributeName::All]).await;
        assert_eq!(shown[&DeduplicationScope], "messageGroup");
        assert_eq!(shown[&FifoThroughputLimit], "perMessageGroupId");
        let mut ids = Vec::new();
        for group in ["a", "b", "a"] {
            let sent = client
                .send_message()
                .queue_url(&fast)
                .message_body(group)
                .message_group_id(group)
                .message_deduplication_id("same")
                .send()
                .await
                .unwrap();
            ids.push(sent.message_id.unwrap());
        }
        assert_ne!(ids[0], ids[1], "the same ID in two groups is two messages");
        assert_eq!(ids[2], ids[0], "and a duplicate within its group");
        let received = receive_ten(client, &fast).await;
        assert_eq!(received.messages().len(), 2);

        // SQS's rules: the per-group limit needs per-group deduplication; both are FIFO's.
        let alone = client
            .create_queue()
            .queue_name("slow.fifo")
            .attributes(FifoQueue, "true")
            .attributes(FifoThroughputLimit, "perMessageGroupId")
            .send()
            .await;
        assert_eq!(refusal(alone), (400, "InvalidAttributeValue".to_string()));
        let back = set_attributes(client, &fast, &[(DeduplicationScope, "queue")]).await;
        assert_eq!(refusal(back), (400, "InvalidAttributeValue".to_string()));
        for attribute in [DeduplicationScope, FifoThroughputLimit] {
            let value = if attribute == DeduplicationScope { "queue" } else { "perQueue" };
            let standard = client
                .create_queue()
                .queue_name("plain")
                .attributes(attribute.clone(), value)
                .send()
                .await;
            let text = format!(
                "You can specify the {} only when FifoQueue is set to true.",
                attribute.as_str()
            );
            assert_eq!(said(standard), ("InvalidAttributeName".to_string(), text));
        }

        // AWSTraceHeader: kept with the message, returned when asked for.
        let header = MessageSystemAttributeValue::builder()
            .data_type("String")
            .string_value(TRACE_HEADER)
            .build()
            .unwrap();
        let sent = client
            .send_message()
            .queue_url(&url)
            .message_body("traced")
            .message_system_attributes(MessageSystemAttributeNameForSends::AwsTraceHeader, header)
            .send()
            .await
            .unwrap();
        assert_eq!(
            sent.md5_of_message_system_attributes(),
            Some(TRACE_HEADER_MD5)
        );
        for (asked, shown) in [
            (MessageSystemAttributeName::AwsTraceHeader, true),
            (MessageSystemAttributeName::All, true),
            (MessageSystemAttributeName::SentTimestamp, false),
        ] {
            let received = client
                .receive_message()
                .queue_url(&url)
                .message_system_attribute_names(asked.clone())
                .visibility_timeout(0)
                .send()
                .await
                .unwrap();
            let message = &received.messages()[0];
            let got = message
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::AwsTraceHeader));
            assert_eq!(got.map(String::as_str), shown.then_some(TRACE_HEADER), "{asked:?}");
        }
        let binary = MessageSystemAttributeValue::builder()
            .data_type("Binary")
            .binary_value(Blob::new(vec![1]))
            .build()
            .unwrap();
        let refused = client
            .send_message()
            .queue_url(&url)
            .message_body("x")
            .message_system_attributes(MessageSystemAttributeNameForSends::AwsTraceHeader, binary)
            .send()
            .await;
        assert_eq!(refusal(refused), (400, "InvalidParameterValue".to_string()));
    })
    .await;
}

/// Refusals whose message SQS is known to give (from the real service) carry that message,
/// word for word, with SQS's code.
#[tokio::test]
async fn sqs_sdk_refuses_in_sqs_words() {
    use QueueAttributeName::{ContentBasedDeduplication, FifoQueue, MaximumMessageSize};
    with_node(async |_serving, client| {
        let plain = create(client, "plain", &[]).await;
        let fifo = create(client, "ordered.fifo", &[(FifoQueue, "true")]).await;
        let small = create(client, "small", &[(MaximumMessageSize, "1024")]).await;
        create(client, "dlq", &[]).await;
        let dlq_arn = format!("arn:aws:sqs:local:{DEV}:dlq");
        let invalid = "InvalidParameterValue";
        let cases = [
            (
                said(client.get_queue_url().queue_name("nope").send().await),
                ("AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist."),
            ),
            (
                said(client.receive_message().queue_url(&plain).max_number_of_messages(11).send().await),
                (invalid, "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided."),
            ),
            (
                said(client.receive_message().queue_url(&plain).wait_time_seconds(21).send().await),
                (invalid, "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided."),
            ),
            (
                said(client.send_message().queue_url(&plain).message_body("").send().await),
                ("MissingParameter", "The request must contain the parameter MessageBody."),
            ),
            (
                said(client.send_message().queue_url(&fifo).message_body("x").message_group_id("group 123").message_deduplication_id("d").send().await),
                (invalid, "Value group 123 for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length."),
            ),
            (
                said(client.send_message().queue_url(&plain).message_body("x").message_attributes("ErrorDetails", string("")).send().await),
                (invalid, "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'."),
            ),
            (
                said(client.send_message().queue_url(&small).message_body("x".repeat(1025)).send().await),
                (invalid, "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."),
            ),
            (
                said(set_attributes(client, &plain, &[(FifoQueue, "true")]).await),
                ("InvalidAttributeName", "Unknown Attribute FifoQueue."),
            ),
            (
                said(set_attributes(client, &fifo, &[(FifoQueue, "false")]).await),
                ("InvalidAttributeValue", "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."),
            ),
            (
                said(client.create_queue().queue_name("other").attributes(FifoQueue, "false").send().await),
                ("InvalidAttributeName", "Unknown Attribute FifoQueue."),
            ),
            (
                said(client.create_queue().queue_name("other").attributes(ContentBasedDeduplication, "true").send().await),
                ("InvalidAttributeName", "Unknown Attribute ContentBasedDeduplication."),
            ),
            (
                said(client.send_message_batch().queue_url(&fifo).entries(SendMessageBatchRequestEntry::builder().id("a").message_body("x").message_deduplication_id("d").build().unwrap()).send().await),
                (invalid, "The request must contain the parameter MessageGroupId."),
            ),
            (
                said(client.start_message_move_task().source_arn(&dlq_arn).send().await),
                (invalid, "Source queue must be configured as a Dead Letter Queue."),
            ),
            (
                said(client.start_message_move_task().source_arn(&dlq_arn).destination_arn(format!("arn:aws:sqs:local:{DEV}:nowhere")).send().await),
                ("ResourceNotFoundException", "The resource that you specified for the DestinationArn parameter doesn't exist."),
            ),
            (
                said(client.cancel_message_move_task().task_handle("garbage").send().await),
                (invalid, "Value for parameter TaskHandle is invalid."),
            ),
            (
                said(client.cancel_message_move_task().task_handle(uuid::Uuid::new_v4().to_string()).send().await),
                ("ResourceNotFoundException", "Task does not exist."),
            ),
        ];
        for (got, (code, message)) in cases {
            assert_eq!(got, (code.to_string(), message.to_string()));
        }
        set_attributes(client, &fifo, &[(FifoQueue, "true")])
            .await
            .expect("a FIFO queue stays one");
        let batch = client
            .send_message_batch()
            .queue_url(&small)
            .entries(SendMessageBatchRequestEntry::builder().id("big").message_body("x".repeat(1025)).build().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(
            batch.failed()[0].message(),
            Some("One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes.")
        );
    })
    .await;
}

#[tokio::test]
async fn sqs_sdk_batches_report_partial_failures() {
    with_node(async |_serving, client| {
        let url = create(client, "batch", &[]).await;
        let entry = |id: &str, body: &str| {
            SendMessageBatchRequestEntry::builder()
                .id(id)
                .message_body(body)
                .build()
                .unwrap()
        };
        let dedup_on_standard = SendMessageBatchRequestEntry::builder()
            .id("dedup")
            .message_body("x")
            .message_deduplication_id("d")
            .build()
            .unwrap();
        let sent = client
            .send_message_batch()
            .queue_url(&url)
            .entries(entry("ok-1", "one"))
            .entries(entry("control", "a\u{0}b"))
            .entries(dedup_on_standard)
            .entries(entry("ok-2", "two"))
            .send()
            .await
            .unwrap();
        let ok: Vec<&str> = sent.successful().iter().map(|s| s.id()).collect();
        assert_eq!(ok, ["ok-1", "ok-2"]);
        assert_eq!(sent.successful()[0].md5_of_message_body(), md5_hex("one"));
        let mut failed: Vec<(&str, &str, bool)> = sent
            .failed()
            .iter()
            .map(|f| (f.id(), f.code(), f.sender_fault()))
            .collect();
        failed.sort();
        assert_eq!(
            failed,
            [
                ("control", "InvalidMessageContents", true),
                ("dedup", "InvalidParameterValue", true)
            ]
        );
        // Batches refused whole: their entries, and the code of each.
        let eleven = (0..11).map(|i| entry(&format!("e{i}"), "x")).collect();
        let refused = [
            (
                vec![entry("a", "1"), entry("a", "2")],
                "BatchEntryIdsNotDistinct",
            ),
            (vec![], "EmptyBatchRequest"),
            (vec![entry("a b", "1")], "InvalidBatchEntryId"),
            (eleven, "TooManyEntriesInBatchRequest"),
        ];
        for (entries, refusal) in refused {
            let batch = client.send_message_batch().queue_url(&url);
            let answer = batch.set_entries(Some(entries)).send().await;
            assert_eq!(code(answer), format!("AWS.SimpleQueueService.{refusal}"));
        }

        let received = receive_ten(client, &url).await;
        let receipts: Vec<String> = received
            .messages()
            .iter()
            .map(|m| m.receipt_handle().unwrap().to_string())
            .collect();
        assert_eq!(
            receipts.len(),
            2,
            "the two sent, not the refused: {received:?}"
        );
        let change = |id: &str, receipt: &str| {
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id(id)
                .receipt_handle(receipt)
                .visibility_timeout(60)
                .build()
                .unwrap()
        };
        let changed = client
            .change_message_visibility_batch()
            .queue_url(&url)
            .entries(change("real", &receipts[0]))
            .entries(change("fake", "000000000000000000000000"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            changed
                .successful()
                .iter()
                .map(|s| s.id())
                .collect::<Vec<_>>(),
            ["real"]
        );
        let failure = &changed.failed()[0];
        assert_eq!(
            (failure.id(), failure.code()),
            ("fake", "InvalidParameterValue")
        );
        let delete = |id: &str, receipt: &str| {
            DeleteMessageBatchRequestEntry::builder()
                .id(id)
                .receipt_handle(receipt)
                .build()
                .unwrap()
        };
        let deleted = client
            .delete_message_batch()
            .queue_url(&url)
            .entries(delete("first", &receipts[0]))
            .entries(delete("garbage", "not-a-receipt"))
            .entries(delete("second", &receipts[1]))
            .send()
            .await
            .unwrap();
        let ok: Vec<&str> = deleted.successful().iter().map(|s| s.id()).collect();
        assert_eq!(ok, ["first", "second"]);
        let failure = &deleted.failed()[0];
        assert_eq!(
            (failure.id(), failure.code()),
            ("garbage", "ReceiptHandleIsInvalid")
        );
    })
    .await;
}

#[tokio::test]
async fn sqs_sdk_keeps_fifo_order_and_deduplicates() {
    with_node(async |_serving, client| {
        let url = create(
            client,
            "orders.fifo",
            &[
                (QueueAttributeName::FifoQueue, "true"),
                (QueueAttributeName::ContentBasedDeduplication, "true"),
            ],
        )
        .await;
        let send = |body: &str, group: &str| {
            client
                .send_message()
                .queue_url(&url)
                .message_body(body)
                .message_group_id(group)
                .send()
        };
        let mut ids = Vec::new();
        let mut sequence = Vec::new();
        for (body, group) in [
            ("a1", "a"),
            ("b1", "b"),
            ("a2", "a"),
            ("b2", "b"),
            ("a3", "a"),
        ] {
            let sent = send(body, group).await.unwrap();
            ids.push(sent.message_id.unwrap());
            sequence.push(sent.sequence_number.unwrap().parse::<u64>().unwrap());
        }
        assert!(sequence.windows(2).all(|w| w[0] < w[1]), "{sequence:?}");
        // The same body within five minutes: a duplicate, answered with the first message's ID.
        let duplicate = send("a1", "a").await.unwrap();
        assert_eq!(duplicate.message_id.as_deref(), Some(ids[0].as_str()));
        let explicit = client
            .send_message()
            .queue_url(&url)
            .message_body("c1")
            .message_group_id("c")
            .message_deduplication_id("once")
            .send()
            .await
            .unwrap();
        let again = client
            .send_message()
            .queue_url(&url)
            .message_body("c1 changed")
            .message_group_id("c")
            .message_deduplication_id("once")
            .send()
            .await
            .unwrap();
        assert_eq!(again.message_id, explicit.message_id);
        let no_group = client
            .send_message()
            .queue_url(&url)
            .message_body("x")
            .send()
            .await;
        assert_eq!(code(no_group), "MissingParameter");

        // Every message once, each group in order.
        let mut bodies: Vec<String> = Vec::new();
        let mut receipts = Vec::new();
        loop {
            let received = client
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send()
                .await
                .unwrap();
            if received.messages().is_empty() {
                break;
            }
            for m in received.messages() {
                let attrs = m.attributes().unwrap();
                assert!(attrs.contains_key(&MessageSystemAttributeName::SequenceNumber));
                assert!(attrs.contains_key(&MessageSystemAttributeName::MessageDeduplicationId));
                bodies.push(m.body().unwrap().to_string());
                receipts.push(m.receipt_handle().unwrap().to_string());
            }
            for receipt in receipts.drain(..) {
                delete(client, &url, &receipt).await;
            }
        }
        let group = |g: char| -> Vec<&str> {
            bodies
                .iter()
                .map(String::as_str)
                .filter(|b| b.starts_with(g))
                .collect()
        };
        assert_eq!(group('a'), ["a1", "a2", "a3"]);
        assert_eq!(group('b'), ["b1", "b2"]);
        assert_eq!(group('c'), ["c1"]);
        assert_eq!(bodies.len(), 6);
        // A retried receive with the same attempt ID gets the same messages and receipts.
        send("d1", "d").await.unwrap();
        let attempt = || {
            client
                .receive_message()
                .queue_url(&url)
                .receive_request_attempt_id("retry-1")
                .send()
        };
        let first = attempt().await.unwrap();
        let again = attempt().await.unwrap();
        assert_eq!(first.messages().len(), 1);
        assert_eq!(first.messages()[0].body(), Some("d1"));
        assert_eq!(
            first.messages()[0].receipt_handle(),
            again.messages()[0].receipt_handle()
        );
    })
    .await;
}

/// A dead-letter queue `dead` and a queue `work` that moves a message to it after
/// `max_receive_count` receives: the URL and ARN of `dead`, and the URL of `work`.
async fn redriven(client: &Client, max_receive_count: u32) -> (String, String, String) {
    let dlq = create(client, "dead", &[]).await;
    let dlq_arn = format!("arn:aws:sqs:local:{DEV}:dead");
    let policy =
        format!(r#"{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"{max_receive_count}"}}"#);
    let redrive = [(QueueAttributeName::RedrivePolicy, policy.as_str())];
    let source = create(client, "work", &redrive).await;
    (dlq, dlq_arn, source)
}

#[tokio::test]
async fn sqs_sdk_redrives_to_a_dead_letter_queue() {
    with_node(async |_serving, client| {
        let (dlq, dlq_arn, source) = redriven(client, 2).await;
        let redrive = QueueAttributeName::RedrivePolicy;
        let attrs = queue_attributes(client, &source, std::slice::from_ref(&redrive)).await;
        let shown: serde_json::Value = serde_json::from_str(&attrs[&redrive]).unwrap();
        assert_eq!(
            shown,
            serde_json::json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
        );
        let sources = client.list_dead_letter_source_queues().queue_url(&dlq);
        let sources = sources.send().await.unwrap();
        assert_eq!(sources.queue_urls(), std::slice::from_ref(&source));

        let sent = send(client, &source, "poison").await;
        // Received twice and released each time: the second release moves it.
        for _ in 0..2 {
            let received = receive(client, &source).await;
            let [message] = received.messages() else {
                panic!("the message: {received:?}")
            };
            change_visibility(client, &source, message.receipt_handle().unwrap(), 0).await;
        }
        assert!(receive(client, &source).await.messages().is_empty());
        let dead = client
            .receive_message()
            .queue_url(&dlq)
            .message_system_attribute_names(MessageSystemAttributeName::DeadLetterQueueSourceArn)
            .send()
            .await
            .unwrap();
        let [message] = dead.messages() else {
            panic!("the dead letter: {dead:?}")
        };
        assert_eq!(message.message_id, sent.message_id);
        assert_eq!(
            message.attributes().unwrap()[&MessageSystemAttributeName::DeadLetterQueueSourceArn],
            format!("arn:aws:sqs:local:{DEV}:work")
        );
        // The dead-letter queue cannot go while a source names it; detached, it can.
        let in_use = client.delete_queue().queue_url(&dlq).send().await;
        assert_eq!(code(in_use), "AWS.SimpleQueueService.UnsupportedOperation");
        set_attributes(client, &source, &[(QueueAttributeName::RedrivePolicy, "")])
            .await
            .unwrap();
        client.delete_queue().queue_url(&dlq).send().await.unwrap();
    })
    .await;
}

/// Sends `bodies` to the queue at `url`, then receives each message and releases it at once:
/// under a redrive policy with `maxReceiveCount` 1, they all go to its dead-letter queue.
async fn dead_letter(client: &Client, url: &str, bodies: &[&str]) {
    for body in bodies {
        send(client, url, body).await;
    }
    let received = receive_ten(client, url).await;
    assert_eq!(received.messages().len(), bodies.len(), "{received:?}");
    for message in received.messages() {
        change_visibility(client, url, message.receipt_handle().unwrap(), 0).await;
    }
}

/// The bodies of the messages of the queue at `url`, received (and left leased), sorted.
async fn bodies(client: &Client, url: &str) -> Vec<String> {
    let received = receive_ten(client, url).await;
    let mut bodies: Vec<String> = received
        .messages()
        .iter()
        .filter_map(|m| m.body().map(str::to_string))
        .collect();
    bodies.sort();
    bodies
}

#[tokio::test]
async fn sqs_sdk_moves_dead_letters_back() {
    with_node(async |_serving, client| {
        let (_, dlq_arn, source) = redriven(client, 1).await;
        dead_letter(client, &source, &["a", "b", "c"]).await;
        // The dead-letter queue's move tasks, as ListMessageMoveTasks lists them by default.
        let tasks = async || {
            let listed = client.list_message_move_tasks().source_arn(&dlq_arn);
            listed.send().await.expect("move tasks")
        };
        let listed = tasks().await;
        assert!(listed.results().is_empty(), "{listed:?}");

        // Bad requests change nothing.
        create(client, "ordered.fifo", &[]).await;
        let nowhere = format!("arn:aws:sqs:local:{DEV}:nowhere");
        let other_type = format!("arn:aws:sqs:local:{DEV}:ordered.fifo");
        let unknown = uuid::Uuid::new_v4().to_string();
        let start = || client.start_message_move_task().source_arn(&dlq_arn);
        #[rustfmt::skip]
        let refusals = [
            ("too fast", code(start().max_number_of_messages_per_second(501).send().await), "InvalidParameterValue"),
            ("a missing source", code(client.start_message_move_task().source_arn(&nowhere).send().await), "ResourceNotFoundException"),
            ("too many listed", code(client.list_message_move_tasks().source_arn(&dlq_arn).max_results(11).send().await), "InvalidParameterValue"),
            ("a destination of another type", code(start().destination_arn(&other_type).send().await), "InvalidParameterValue"),
            ("an unknown task", code(client.cancel_message_move_task().task_handle(&unknown).send().await), "ResourceNotFoundException"),
        ];
        for (what, got, expected) in refusals {
            assert_eq!(got, expected, "{what}");
        }

        // Each dead letter goes back to its source.
        let handle = client
            .start_message_move_task()
            .source_arn(&dlq_arn)
            .send()
            .await
            .unwrap()
            .task_handle
            .expect("a task handle");
        let deadline = Instant::now() + Duration::from_secs(10);
        let task = loop {
            let listed = tasks().await;
            let [task] = listed.results() else {
                panic!("one task: {listed:?}")
            };
            if task.status() != Some("RUNNING") || Instant::now() > deadline {
                break task.clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(task.status(), Some("COMPLETED"), "{task:?}");
        assert_eq!(
            task.task_handle(),
            None,
            "only a running task shows its handle"
        );
        assert_eq!(task.source_arn(), Some(dlq_arn.as_str()));
        assert_eq!(task.destination_arn(), None);
        assert_eq!(task.approximate_number_of_messages_moved(), 3);
        assert_eq!(task.approximate_number_of_messages_to_move(), Some(3));
        assert_eq!(task.max_number_of_messages_per_second(), Some(500));
        assert!(task.started_timestamp() > 0);
        assert_eq!(bodies(client, &source).await, ["a", "b", "c"]);
        let ended = client
            .cancel_message_move_task()
            .task_handle(&handle)
            .send()
            .await;
        assert_eq!(code(ended), "AWS.SimpleQueueService.UnsupportedOperation");

        // A slow task, cancelled at once, moved at most what it was asked to.
        let redo = create(client, "redo", &[]).await;
        dead_letter(client, &source, &["d", "e", "f"]).await;
        let handle = client
            .start_message_move_task()
            .source_arn(&dlq_arn)
            .destination_arn(format!("arn:aws:sqs:local:{DEV}:redo"))
            .max_number_of_messages_per_second(1)
            .send()
            .await
            .unwrap()
            .task_handle
            .expect("a task handle");
        let second = client
            .start_message_move_task()
            .source_arn(&dlq_arn)
            .send()
            .await;
        let second = second.expect_err("a second running task").into_service_error();
        assert_eq!(
            (second.code(), second.message()),
            (
                Some("InvalidParameterValue"),
                Some("There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
            )
        );
        let cancel = client.cancel_message_move_task().task_handle(&handle);
        let cancelled = cancel.send().await.unwrap();
        assert!(cancelled.approximate_number_of_messages_moved() < 3);
        let listed = client
            .list_message_move_tasks()
            .source_arn(&dlq_arn)
            .max_results(10)
            .send()
            .await
            .unwrap();
        let statuses: Vec<_> = listed.results().iter().map(|t| t.status()).collect();
        assert_eq!(statuses, [Some("CANCELLED"), Some("COMPLETED")]);
        assert_eq!(
            listed.results()[0].destination_arn(),
            Some(format!("arn:aws:sqs:local:{DEV}:redo").as_str())
        );
        let moved = usize::try_from(cancelled.approximate_number_of_messages_moved()).unwrap();
        assert_eq!(bodies(client, &redo).await.len(), moved);
    })
    .await;
}

#[tokio::test]
async fn sqs_sdk_long_polls() {
    with_node(async |_serving, client| {
        let url = create(client, "poll", &[]).await;
        let started = Instant::now();
        let empty = client
            .receive_message()
            .queue_url(&url)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        assert!(empty.messages().is_empty());
        assert!(
            started.elapsed() >= Duration::from_millis(950),
            "{:?}",
            started.elapsed()
        );

        let waiting = {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let started = Instant::now();
                let received = client
                    .receive_message()
                    .queue_url(url)
                    .wait_time_seconds(10)
                    .send()
                    .await;
                (received, started.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        send(client, &url, "wake").await;
        let (received, waited) = waiting.await.unwrap();
        let received = received.unwrap();
        assert_eq!(received.messages()[0].body(), Some("wake"));
        assert!(
            waited < Duration::from_secs(5),
            "answered when the message came: {waited:?}"
        );
        let too_long = client
            .receive_message()
            .queue_url(&url)
            .wait_time_seconds(21)
            .send()
            .await;
        assert_eq!(code(too_long), "InvalidParameterValue");
    })
    .await;
}

/// A Query protocol request: a form posted to `path`.
async fn query(serving: &Serving, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("http://{}{path}", serving.addr))
        .form(fields)
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    assert_eq!(response.headers()["content-type"], "text/xml");
    assert!(response.headers().contains_key("x-amzn-requestid"));
    (status, response.text().await.expect("a body"))
}

#[tokio::test]
async fn sqs_query_protocol_speaks_xml() {
    bounded(async {
        let serving = Serving::start(Keys::open()).await;
        let (status, xml) = query(
            &serving,
            "/",
            &[
                ("Action", "CreateQueue"),
                ("Version", "2012-11-05"),
                ("QueueName", "legacy"),
                ("Attribute.1.Name", "VisibilityTimeout"),
                ("Attribute.1.Value", "45"),
            ],
        )
        .await;
        let url = format!("http://{}/{DEV}/legacy", serving.addr);
        assert_eq!(status, 200, "{xml}");
        assert!(xml.starts_with(r#"<CreateQueueResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><CreateQueueResult>"#), "{xml}");
        assert!(xml.contains(&format!("<QueueUrl>{url}</QueueUrl>")), "{xml}");
        assert!(xml.contains("<ResponseMetadata><RequestId>"), "{xml}");

        let (status, xml) = query(
            &serving,
            "/",
            &[
                ("Action", "SendMessage"),
                ("QueueUrl", &url),
                ("MessageBody", "hello"),
                ("MessageAttribute.1.Name", "color"),
                ("MessageAttribute.1.Value.DataType", "String"),
                ("MessageAttribute.1.Value.StringValue", "red"),
            ],
        )
        .await;
        assert_eq!(status, 200, "{xml}");
        assert!(xml.contains("<MD5OfMessageBody>5d41402abc4b2a76b9719d911017c592</MD5OfMessageBody>"), "{xml}");
        assert!(xml.contains("<MD5OfMessageAttributes>20ca9041878c8c65d5a4bf6eaf446c21</MD5OfMessageAttributes>"), "{xml}");

        // Posted to the queue's URL path, without QueueUrl.
        let (status, xml) = query(
            &serving,
            &format!("/{DEV}/legacy"),
            &[
                ("Action", "ReceiveMessage"),
                ("AttributeName.1", "ApproximateReceiveCount"),
                ("MessageAttributeName.1", "All"),
            ],
        )
        .await;
        assert_eq!(status, 200, "{xml}");
        for part in [
            "<ReceiveMessageResult><Message><MessageId>",
            "<Body>hello</Body>",
            "<Attribute><Name>ApproximateReceiveCount</Name><Value>1</Value></Attribute>",
            "<MD5OfMessageAttributes>20ca9041878c8c65d5a4bf6eaf446c21</MD5OfMessageAttributes>",
            "<MessageAttribute><Name>color</Name><Value><StringValue>red</StringValue><DataType>String</DataType></Value></MessageAttribute>",
        ] {
            assert!(xml.contains(part), "{part} in {xml}");
        }
        let receipt = xml
            .split_once("<ReceiptHandle>")
            .and_then(|(_, rest)| rest.split_once("</ReceiptHandle>"))
            .map(|(receipt, _)| receipt.to_string())
            .expect("a receipt handle");
        let (status, xml) = query(
            &serving,
            "/",
            &[
                ("Action", "DeleteMessageBatch"),
                ("QueueUrl", &url),
                ("DeleteMessageBatchRequestEntry.1.Id", "one"),
                ("DeleteMessageBatchRequestEntry.1.ReceiptHandle", &receipt),
                ("DeleteMessageBatchRequestEntry.2.Id", "two"),
                ("DeleteMessageBatchRequestEntry.2.ReceiptHandle", "bogus"),
            ],
        )
        .await;
        assert_eq!(status, 200, "{xml}");
        assert!(xml.contains("<DeleteMessageBatchResultEntry><Id>one</Id></DeleteMessageBatchResultEntry>"), "{xml}");
        assert!(xml.contains("<BatchResultErrorEntry><Id>two</Id><SenderFault>true</SenderFault><Code>ReceiptHandleIsInvalid</Code>"), "{xml}");

        let (status, xml) = query(
            &serving,
            "/",
            &[("Action", "GetQueueAttributes"), ("QueueUrl", &url), ("AttributeName.1", "VisibilityTimeout")],
        )
        .await;
        assert_eq!(status, 200);
        assert!(xml.contains("<GetQueueAttributesResult><Attribute><Name>VisibilityTimeout</Name><Value>45</Value></Attribute></GetQueueAttributesResult>"), "{xml}");

        // Errors, in SQS's ErrorResponse.
        let missing = format!("http://{}/{DEV}/missing", serving.addr);
        let (status, xml) = query(&serving, "/", &[("Action", "PurgeQueue"), ("QueueUrl", &missing)]).await;
        assert_eq!(status, 400);
        assert!(xml.contains("<Error><Type>Sender</Type><Code>AWS.SimpleQueueService.NonExistentQueue</Code>"), "{xml}");
        let (status, xml) = query(&serving, "/", &[("Action", "Frobnicate")]).await;
        assert_eq!(status, 400);
        assert!(xml.contains("<Code>InvalidAction</Code>"), "{xml}");
        let (status, xml) = query(&serving, "/", &[("Action", "ReceiveMessage"), ("QueueUrl", &url), ("MaxNumberOfMessages", "lots")]).await;
        assert_eq!(status, 400);
        assert!(xml.contains("<Code>InvalidParameterValue</Code>") && xml.contains("MaxNumberOfMessages"), "{xml}");
        let (status, xml) = query(&serving, "/", &[("Action", "ListQueues"), ("Action", "ListQueues")]).await;
        assert_eq!(status, 400);
        assert!(xml.contains("<Code>MalformedQueryString</Code>"), "{xml}");
        let (status, xml) = query(&serving, "/", &[("QueueName", "x")]).await;
        assert_eq!(status, 400);
        assert!(xml.contains("<Code>MissingParameter</Code>"), "{xml}");
        // The REST API still answers form posts to its own paths as REST.
        let rest = reqwest::Client::new()
            .post(format!("http://{}/v1/queues", serving.addr))
            .form(&[("name", "x")])
            .send()
            .await
            .unwrap();
        assert_eq!(rest.status(), 400);
        assert!(rest.text().await.unwrap().contains("\"error\""));
        serving.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn sqs_json_errors_carry_the_query_error_header_and_are_counted() {
    bounded(async {
        let serving = Serving::start(Keys::open()).await;
        let client = reqwest::Client::new();
        let call = |target: &str, body: &str| {
            client
                .post(format!("http://{}/", serving.addr))
                .header("x-amz-target", format!("AmazonSQS.{target}"))
                .header("content-type", "application/x-amz-json-1.0")
                .body(body.to_string())
                .send()
        };
        let missing = call("GetQueueUrl", r#"{"QueueName":"nope"}"#)
            .await
            .unwrap();
        assert_eq!(missing.status(), 400);
        assert_eq!(
            missing.headers()["x-amzn-query-error"],
            "AWS.SimpleQueueService.NonExistentQueue;Sender"
        );
        assert_eq!(
            missing.headers()["content-type"],
            "application/x-amz-json-1.0"
        );
        let body: serde_json::Value = missing.json().await.unwrap();
        assert_eq!(body["__type"], "com.amazonaws.sqs#QueueDoesNotExist");
        assert!(body["message"].as_str().unwrap().contains("does not exist"));

        let unknown = call("Frobnicate", "{}").await.unwrap();
        assert_eq!(unknown.status(), 400);
        assert_eq!(
            unknown.headers()["x-amzn-query-error"],
            "InvalidAction;Sender"
        );
        let malformed = call("ListQueues", "{not json").await.unwrap();
        assert_eq!(malformed.status(), 400);
        let body: serde_json::Value = malformed.json().await.unwrap();
        assert_eq!(
            body["__type"],
            "com.amazon.coral.service#SerializationException"
        );
        let wrong_type = call("ListQueues", r#"{"MaxResults":"ten"}"#).await.unwrap();
        assert_eq!(
            wrong_type.headers()["x-amzn-query-error"],
            "SerializationException;Sender"
        );
        let listed = call("ListQueues", "").await.unwrap();
        assert_eq!(listed.status(), 200);
        assert_eq!(
            listed.json::<serde_json::Value>().await.unwrap(),
            serde_json::json!({})
        );

        let metrics = client
            .get(format!("http://{}/metrics", serving.addr))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let counted = metrics.lines().any(|l| {
            l.contains(r#"route="AmazonSQS.GetQueueUrl""#) && l.contains(r#"status="400""#)
        });
        assert!(counted, "{metrics}");
        serving.shutdown().await;
    })
    .await;
}

#[test]
fn sqs_requests_pass_the_limits_and_signatures() {
    let dir = TempDir::new().expect("temp dir");
    let server = start(
        &dir.path().join("data"),
        &["--rate-limit-per-connection", "1"],
        None,
    );
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .http1_only()
            .build()
            .unwrap();
        let list = || {
            client
                .post(format!("{}/", server.endpoint))
                .header("x-amz-target", "AmazonSQS.ListQueues")
                .header("content-type", "application/x-amz-json-1.0")
                .body("{}")
                .send()
        };
        let mut refused = None;
        for _ in 0..5 {
            let response = list().await.unwrap();
            if response.status() != 200 {
                refused = Some(response);
                break;
            }
        }
        let refused = refused.expect("a request over the rate is refused");
        assert_eq!(refused.status(), 403);
        assert_eq!(
            refused.headers()["x-amzn-query-error"],
            "RequestThrottled;Sender"
        );
        assert!(refused.headers().contains_key("retry-after"));
    });
    drop(server);

    // With a key file, requests are signed with an access key pair, which names the account.
    let dir = TempDir::new().expect("temp dir");
    let keys = dir.path().join("keys.toml");
    let file = "[[keys]]\naccount = \"acme\"\naccess_key_id = \"AKIDACME\"\nsecret_access_key = \"acme-secret\"\n";
    std::fs::write(&keys, file).unwrap();
    let server = start(
        &dir.path().join("data"),
        &[
            "--keys",
            keys.to_str().unwrap(),
            "--rate-limit-per-key",
            "3",
        ],
        None,
    );
    runtime.block_on(async {
        let acme = sdk_as(&server.endpoint, "AKIDACME", "acme-secret");
        let url = create(&acme, "signed", &[]).await;
        assert_eq!(url, format!("{}/{ACME}/signed", server.endpoint));
        let wrong = sdk_as(&server.endpoint, "AKIDACME", "not-the-secret");
        assert_eq!(
            code(wrong.list_queues().send().await),
            "SignatureDoesNotMatch"
        );
        let unknown = sdk_as(&server.endpoint, "AKIDNOBODY", "acme-secret");
        assert_eq!(
            code(unknown.list_queues().send().await),
            "InvalidClientTokenId"
        );
        let unsigned = reqwest::Client::new()
            .post(format!("{}/", server.endpoint))
            .header("x-amz-target", "AmazonSQS.ListQueues")
            .header("content-type", "application/x-amz-json-1.0")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(unsigned.status(), 403);
        assert_eq!(
            unsigned.headers()["x-amzn-query-error"],
            "MissingAuthenticationToken;Sender"
        );
        // The per-key limit counts an access key's signed requests, and only those whose
        // signature holds: ten forged ones use up nothing of acme's three a second.
        for _ in 0..10 {
            assert_eq!(
                code(wrong.list_queues().send().await),
                "SignatureDoesNotMatch"
            );
        }
        acme.list_queues().send().await.expect("acme's own request");
        let mut throttled = None;
        for _ in 0..20 {
            if let Err(e) = acme.list_queues().send().await {
                throttled = Some(e);
                break;
            }
        }
        let throttled = throttled.expect("acme's requests over its rate are refused");
        assert_eq!(throttled.code(), Some("RequestThrottled"), "{throttled:?}");
    });
}

fn number(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("Number")
        .string_value(value)
        .build()
        .expect("attribute")
}

/// The MD5 of text attributes (`String` and `Number`), by the encoding AWS documents: sorted by
/// name, each name, data type and value behind a 4-byte big-endian length, with the transport
/// byte 1 before the value.
fn attributes_md5(attributes: &[(&str, &str, &str)]) -> String {
    let mut sorted = attributes.to_vec();
    sorted.sort();
    let mut bytes = Vec::new();
    let put = |bytes: &mut Vec<u8>, part: &str| {
        bytes.extend_from_slice(&(part.len() as u32).to_be_bytes());
        bytes.extend_from_slice(part.as_bytes());
    };
    for (name, data_type, value) in sorted {
        put(&mut bytes, name);
        put(&mut bytes, data_type);
        bytes.push(1);
        put(&mut bytes, value);
    }
    Md5::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// raftq's priorities and schedules through unchanged SDK code: the message attributes
/// `raftq.Priority` and `raftq.DeliverAt` set them, are digested with the others, and are not
/// kept as attributes; bad ones are refused in SQS's words.
#[tokio::test]
async fn sqs_sdk_sets_priorities_and_schedules_by_message_attributes() {
    use QueueAttributeName::{ApproximateNumberOfMessagesDelayed, FifoQueue};
    with_node(async |_serving, client| {
        let url = create(client, "prio", &[]).await;
        let fifo = create(client, "prio.fifo", &[(FifoQueue, "true")]).await;
        let send = |body: &str, name: &str, value: MessageAttributeValue| {
            client
                .send_message()
                .queue_url(&url)
                .message_body(body)
                .message_attributes(name, value)
                .message_attributes("kind", string("job"))
        };
        let low = send("low", "raftq.Priority", number("0"))
            .send()
            .await
            .expect("send");
        assert_eq!(
            low.md5_of_message_attributes.as_deref(),
            Some(
                attributes_md5(&[("kind", "String", "job"), ("raftq.Priority", "Number", "0")])
                    .as_str()
            ),
            "the digest covers every attribute sent"
        );
        send("high", "raftq.Priority", number("9"))
            .send()
            .await
            .expect("send");
        let refused_at = code(
            send("later", "raftq.DeliverAt", string("in an hour"))
                .send()
                .await,
        );
        assert_eq!(refused_at, "InvalidParameterValue", "not RFC 3339");
        send("later", "raftq.DeliverAt", string(&rfc3339_in(3600)))
            .send()
            .await
            .expect("a scheduled send");

        let got = client
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default();
        let bodies: Vec<&str> = got.iter().filter_map(|m| m.body.as_deref()).collect();
        assert_eq!(
            bodies,
            ["high", "low"],
            "higher first; the scheduled one waits"
        );
        for m in &got {
            let names: Vec<&String> = m
                .message_attributes
                .iter()
                .flatten()
                .map(|(k, _)| k)
                .collect();
            assert_eq!(
                names,
                ["kind"],
                "raftq's settings are not kept as attributes"
            );
        }
        let delayed = client
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .expect("attributes")
            .attributes
            .unwrap_or_default();
        assert_eq!(
            delayed
                .get(&ApproximateNumberOfMessagesDelayed)
                .map(String::as_str),
            Some("1")
        );

        let invalid = "InvalidParameterValue".to_string();
        let refusals = [
            code(send("x", "raftq.Priority", number("10")).send().await),
            code(send("x", "raftq.Priority", string("9")).send().await),
            code(send("x", "raftq.Priority", number("1.5")).send().await),
            code(send("x", "raftq.DeliverAt", number("1")).send().await),
            code(
                client
                    .send_message()
                    .queue_url(&fifo)
                    .message_body("x")
                    .message_group_id("g")
                    .message_deduplication_id("d")
                    .message_attributes("raftq.Priority", number("1"))
                    .send()
                    .await,
            ),
        ];
        assert_eq!(
            refusals,
            [
                invalid.clone(),
                invalid.clone(),
                invalid.clone(),
                invalid.clone(),
                invalid
            ]
        );
    })
    .await;
}
