//! The client subcommands: one per API operation, human output by default, JSON with `--json`.

use clap::{Args, Subcommand};
use raftq_client::{Client, ClientError, Options};
use serde_json::{json, Map, Value};

/// Where and as whom the client talks.
#[derive(Debug, Args)]
pub struct Connection {
    /// The node to talk to (any node: followers forward to the leader).
    #[arg(
        long,
        global = true,
        env = "RAFTQ_ENDPOINT",
        default_value = "http://127.0.0.1:8080"
    )]
    pub endpoint: String,
    /// API key, when the server runs with --keys.
    #[arg(long, global = true, env = "RAFTQ_KEY")]
    pub key: Option<String>,
    /// PEM file of the CA that signed an https endpoint's certificate (besides the public
    /// web's CAs).
    #[arg(long, global = true, env = "RAFTQ_CA_CERT")]
    pub ca_cert: Option<std::path::PathBuf>,
    /// PEM client certificate, for a server that asks for one (`--tls-client-ca`), with
    /// --client-key.
    #[arg(
        long,
        global = true,
        env = "RAFTQ_CLIENT_CERT",
        requires = "client_key"
    )]
    pub client_cert: Option<std::path::PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(
        long,
        global = true,
        env = "RAFTQ_CLIENT_KEY",
        requires = "client_cert"
    )]
    pub client_key: Option<std::path::PathBuf>,
    /// Print the API's JSON instead of the human summary.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Queue settings, for `queue create` and `queue patch`.
#[derive(Debug, Args, Default)]
pub struct QueueSettings {
    #[arg(long)]
    pub lease_seconds: Option<u64>,
    #[arg(long)]
    pub delay_seconds: Option<u64>,
    #[arg(long)]
    pub retention_seconds: Option<u64>,
    #[arg(long)]
    pub max_message_bytes: Option<u64>,
    #[arg(long)]
    pub content_based_deduplication: Option<bool>,
    /// Dead-letter target (name, UUID or CRN); needs --max-receive-count.
    #[arg(long, requires = "max_receive_count")]
    pub dead_letter_target: Option<String>,
    #[arg(long, requires = "dead_letter_target")]
    pub max_receive_count: Option<u64>,
    /// Who may use this queue as a dead-letter target: allow_all, deny_all, or source queues.
    #[arg(long, value_delimiter = ',')]
    pub allow_sources: Option<Vec<String>>,
    /// Wait before a message whose lease expired is visible again: INITIAL,MAX,MULTIPLIER
    /// (seconds, seconds, factor), e.g. 5,600,2.
    #[arg(long, value_parser = retry_backoff, value_name = "INITIAL,MAX,MULTIPLIER")]
    pub retry_backoff: Option<Value>,
    /// How long a receive that gives no --wait waits for a message (0-20 seconds).
    #[arg(long)]
    pub receive_wait_seconds: Option<u64>,
    /// Tag KEY=VALUE to set (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    pub tags: Vec<String>,
    /// Standard queues: the priority of a message sent without one (0-9).
    #[arg(long)]
    pub default_priority: Option<u64>,
    /// Standard queues: serve priority levels in these weights, the first for priority 0
    /// (later priorities take the last), e.g. 1,2,4; default strict order.
    #[arg(long, value_delimiter = ',', value_name = "W0,W1,...")]
    pub priority_weights: Option<Vec<u64>>,
}

/// Sets `key` of the JSON object `object` to `value`, when given: a setting left out takes the
/// server's default (or, in a patch, stays as it is).
fn put(object: &mut Value, key: &str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        object[key] = value.into();
    }
}

/// `NAME=VALUE` pairs as a JSON object of strings (a pair without `=` has an empty value).
fn pairs(list: &[String]) -> Map<String, Value> {
    list.iter()
        .map(|a| match a.split_once('=') {
            Some((k, v)) => (k.to_string(), Value::from(v)),
            None => (a.clone(), Value::from("")),
        })
        .collect()
}

/// Reads `--retry-backoff INITIAL,MAX,MULTIPLIER` into the API's object; the server checks
/// the ranges.
fn retry_backoff(text: &str) -> Result<Value, String> {
    let usage = "expected INITIAL,MAX,MULTIPLIER, e.g. 5,600,2";
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let [initial, max, multiplier] = parts.as_slice() else {
        return Err(usage.into());
    };
    let whole = |part: &str, name: &str| {
        part.parse::<i64>()
            .map_err(|_| format!("{name} must be a whole number of seconds ({usage})"))
    };
    let multiplier: f64 = multiplier
        .parse()
        .map_err(|_| format!("MULTIPLIER must be a number ({usage})"))?;
    Ok(json!({
        "initial_seconds": whole(initial, "INITIAL")?,
        "max_seconds": whole(max, "MAX")?,
        "multiplier": multiplier,
    }))
}

impl QueueSettings {
    fn to_json(&self) -> Value {
        let mut m = json!({});
        put(&mut m, "lease_seconds", self.lease_seconds);
        put(&mut m, "delay_seconds", self.delay_seconds);
        put(&mut m, "retention_seconds", self.retention_seconds);
        put(&mut m, "max_message_bytes", self.max_message_bytes);
        put(
            &mut m,
            "content_based_deduplication",
            self.content_based_deduplication,
        );
        let redrive = self
            .dead_letter_target
            .as_ref()
            .map(|t| json!({"dead_letter_target": t, "max_receive_count": self.max_receive_count}));
        put(&mut m, "redrive_policy", redrive);
        let allow = self.allow_sources.as_ref().map(|s| match s.as_slice() {
            [one] if one == "allow_all" || one == "deny_all" => json!({"permission": one}),
            queues => json!({"permission": "by_queue", "source_queues": queues}),
        });
        put(&mut m, "redrive_allow_policy", allow);
        put(&mut m, "retry_backoff", self.retry_backoff.clone());
        put(&mut m, "receive_wait_seconds", self.receive_wait_seconds);
        let tags = (!self.tags.is_empty()).then(|| Value::Object(pairs(&self.tags)));
        put(&mut m, "tags", tags);
        put(&mut m, "default_priority", self.default_priority);
        put(&mut m, "priority_weights", self.priority_weights.clone());
        m
    }
}

#[derive(Debug, Subcommand)]
pub enum QueueCmd {
    /// Create a queue (FIFO when the name ends in .fifo).
    Create {
        name: String,
        #[command(flatten)]
        settings: QueueSettings,
    },
    /// List queues.
    List {
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Show a queue.
    Get { queue: String },
    /// Change a queue's settings.
    Patch {
        queue: String,
        #[command(flatten)]
        patch: PatchArgs,
    },
    /// Delete a queue.
    Delete { queue: String },
}

/// What `queue patch` changes: the settings given, and the ones it removes.
#[derive(Debug, Args, Default)]
pub struct PatchArgs {
    #[command(flatten)]
    settings: QueueSettings,
    /// Remove the redrive policy.
    #[arg(long, conflicts_with = "dead_letter_target")]
    detach_dead_letter: bool,
    /// Remove the retry backoff: an expired lease makes the message visible at once.
    #[arg(long, conflicts_with = "retry_backoff")]
    no_retry_backoff: bool,
    /// Remove the priority weights: serve priority levels in strict order.
    #[arg(long, conflicts_with = "priority_weights")]
    strict_priorities: bool,
    /// Tag KEY to remove (repeatable).
    #[arg(long = "untag", value_name = "KEY")]
    untag: Vec<String>,
}

impl PatchArgs {
    /// The request body of a patch: the settings given, and a null for each one removed.
    fn to_json(&self) -> Value {
        let mut patch = self.settings.to_json();
        for key in &self.untag {
            patch["tags"][key] = Value::Null;
        }
        if self.detach_dead_letter {
            patch["redrive_policy"] = Value::Null;
        }
        if self.no_retry_backoff {
            patch["retry_backoff"] = Value::Null;
        }
        if self.strict_priorities {
            patch["priority_weights"] = Value::Null;
        }
        patch
    }
}

/// Messages scheduled by a `--deliver-at` still ahead.
#[derive(Debug, Subcommand)]
pub enum ScheduledCmd {
    /// List them, in queue order.
    List {
        queue: String,
        #[arg(long)]
        limit: Option<u64>,
        /// Show those after this sequence number (the next_after of the previous page).
        #[arg(long)]
        after: Option<u64>,
    },
    /// Cancel one by its message ID before its time: it is removed and never delivered.
    Cancel { queue: String, message_id: String },
}

#[derive(Debug, Subcommand)]
pub enum DlqCmd {
    /// Queues whose redrive policy targets this queue.
    Sources { queue: String },
    /// Start moving a (dead-letter) queue's messages, paced, back to their dead-letter sources
    /// or to --destination.
    Move {
        queue: String,
        #[command(flatten)]
        task: MoveTaskArgs,
    },
    /// The queue's last move tasks, the newest first.
    Tasks { queue: String },
    /// Cancel a running move task.
    Cancel { queue: String, task: String },
}

/// The settings of a move task, for `dlq move`.
#[derive(Debug, Args, Default)]
pub struct MoveTaskArgs {
    /// Where the messages go (name, UUID or CRN of a queue of the same type); default: each
    /// message back to its own dead-letter source.
    #[arg(long)]
    pub destination: Option<String>,
    /// The most messages moved per second, 1-500 (default 500).
    #[arg(long)]
    pub rate: Option<u64>,
    /// Only the message with this ID (repeatable, at most 100).
    #[arg(long = "message-id")]
    pub message_ids: Vec<String>,
    /// Only messages moved to the queue at or after this RFC 3339 time.
    #[arg(long)]
    pub moved_since: Option<String>,
    /// Only messages moved to the queue before this RFC 3339 time.
    #[arg(long)]
    pub moved_before: Option<String>,
    /// Only count the messages that would move.
    #[arg(long)]
    pub dry_run: bool,
}

impl MoveTaskArgs {
    /// The request body of a start: only the settings given.
    pub fn to_json(&self) -> Value {
        let mut task = json!({});
        put(&mut task, "destination", self.destination.as_deref());
        put(&mut task, "max_messages_per_second", self.rate);
        let mut filter = json!({});
        if !self.message_ids.is_empty() {
            filter["message_ids"] = self.message_ids.clone().into();
        }
        put(&mut filter, "moved_since", self.moved_since.as_deref());
        put(&mut filter, "moved_before", self.moved_before.as_deref());
        if filter.as_object().is_some_and(|f| !f.is_empty()) {
            task["filter"] = filter;
        }
        if self.dry_run {
            task["dry_run"] = true.into();
        }
        task
    }
}

#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Leader, members and Raft progress.
    Status,
    /// The Raft groups, one line each: number, leader, members, queues, and the answering
    /// node's role and indexes in it (`-` where it holds no replica).
    Groups,
    /// Every account that holds queues, with how many (admin keys).
    Accounts,
    /// Add a node (started with `raftq serve --join`): a learner until it caught up, then a voter.
    Add {
        #[arg(long)]
        id: u64,
        /// The new node's peer address, HOST:PORT.
        #[arg(long)]
        raft_addr: String,
    },
    /// Remove a node; a leader that is removed hands over first.
    Remove {
        #[arg(long)]
        id: u64,
    },
    /// Move every Raft group leader off a node (a cluster of several groups): before a restart,
    /// nothing then waits for an election. It leads nothing until `undrain`.
    Drain {
        #[arg(long)]
        id: u64,
    },
    /// End a node's drain: it takes its share of the groups' leaders again.
    Undrain {
        #[arg(long)]
        id: u64,
    },
    /// Replace a member whose data was lost: remove it, then add the node started again in its
    /// place, and wait until it caught up.
    Replace {
        #[arg(long)]
        id: u64,
        /// The new node's peer address (default: the member's current one).
        #[arg(long)]
        raft_addr: Option<String>,
    },
}

/// A message, for `send`.
#[derive(Debug, Args)]
pub struct MessageArgs {
    body: String,
    #[arg(long)]
    group: Option<String>,
    #[arg(long)]
    dedup: Option<String>,
    #[arg(long, conflicts_with = "deliver_at")]
    delay: Option<u64>,
    /// Standard queues: 0-9, higher first; default: the queue's default priority.
    #[arg(long)]
    priority: Option<u64>,
    /// Schedule the message: invisible until this RFC 3339 time (e.g. 2030-01-01T09:00:00Z).
    #[arg(long, value_name = "TIME")]
    deliver_at: Option<String>,
    /// Attribute NAME=VALUE (repeatable); base64 for a Binary type.
    #[arg(long = "attr")]
    attributes: Vec<String>,
    /// The data type of an attribute that is not a plain String, NAME=TYPE (repeatable):
    /// Number, Binary, or either (or String) with a label, e.g. Number.float.
    #[arg(long = "attr-type", value_name = "NAME=TYPE")]
    attribute_types: Vec<String>,
}

impl MessageArgs {
    /// The request body of a send: the body, and only the settings given.
    fn to_json(&self) -> Value {
        let mut m = json!({ "body": self.body });
        if !self.attributes.is_empty() {
            m["attributes"] = Value::Object(pairs(&self.attributes));
        }
        if !self.attribute_types.is_empty() {
            m["attribute_types"] = Value::Object(pairs(&self.attribute_types));
        }
        put(&mut m, "message_group_id", self.group.as_deref());
        put(&mut m, "message_deduplication_id", self.dedup.as_deref());
        put(&mut m, "delay_seconds", self.delay);
        put(&mut m, "priority", self.priority);
        put(&mut m, "deliver_at", self.deliver_at.as_deref());
        m
    }
}

/// How many messages to receive, and how, for `receive`.
#[derive(Debug, Args)]
pub struct ReceiveArgs {
    #[arg(long, default_value_t = 1)]
    max: u64,
    #[arg(long)]
    lease: Option<u64>,
    /// Seconds to wait for a message (0-20); default: the queue's receive_wait_seconds.
    #[arg(long)]
    wait: Option<u64>,
    /// FIFO queues: a retry with the same ID within 5 minutes gets the same answer.
    #[arg(long)]
    attempt_id: Option<String>,
}

impl ReceiveArgs {
    /// The request body of a receive: the most messages, and only the settings given.
    fn to_json(&self) -> Value {
        let mut o = json!({ "max_messages": self.max });
        put(&mut o, "lease_seconds", self.lease);
        put(&mut o, "wait_seconds", self.wait);
        put(&mut o, "receive_attempt_id", self.attempt_id.as_deref());
        o
    }
}

#[derive(Debug, Subcommand)]
pub enum ClientCmd {
    #[command(subcommand)]
    Queue(QueueCmd),
    /// Send a message.
    Send {
        queue: String,
        #[command(flatten)]
        message: MessageArgs,
    },
    /// Receive (and lease) messages.
    Receive {
        queue: String,
        #[command(flatten)]
        receive: ReceiveArgs,
    },
    /// Give a leased message back without an ack, visible again at once or after --delay.
    Release {
        queue: String,
        receipt: String,
        /// Seconds the message stays invisible first (0-900).
        #[arg(long)]
        delay: Option<u64>,
    },
    /// Acknowledge (delete) received messages.
    Ack {
        queue: String,
        #[arg(required = true)]
        receipts: Vec<String>,
    },
    /// Look at messages without leasing them.
    Peek {
        queue: String,
        #[arg(long)]
        limit: Option<u64>,
        #[arg(long)]
        after: Option<u64>,
    },
    /// Queue counters.
    Stats { queue: String },
    #[command(subcommand)]
    Scheduled(ScheduledCmd),
    #[command(subcommand)]
    Dlq(DlqCmd),
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// Exit 0 when the node answers its health check (for container health checks).
    Health,
}

/// How much longer than the leader's longest membership change the CLI waits for its answer
/// (the forward to the leader, and the answer's way back).
const CHANGE_MARGIN: std::time::Duration = std::time::Duration::from_secs(10);

/// How long `cmd` may wait for its answer. A membership change answers once it committed, after
/// the new node caught up: longer than any other request may take.
fn timeout_of(cmd: &ClientCmd) -> std::time::Duration {
    match cmd {
        ClientCmd::Cluster(
            ClusterCmd::Add { .. } | ClusterCmd::Remove { .. } | ClusterCmd::Replace { .. },
        ) => raftq_node::LONGEST_CHANGE + CHANGE_MARGIN,
        _ => Options::default().timeout,
    }
}

/// Runs a client subcommand and prints its result.
pub async fn run(conn: &Connection, cmd: ClientCmd) -> Result<(), ClientError> {
    let client = Client::connect(&conn.endpoint, options(conn, timeout_of(&cmd))?)?;
    let value = call(&client, cmd).await?;
    print(&value, conn.json);
    Ok(())
}

/// The client's options: the key, the CA and the client identity read from their PEM files,
/// and how long a request may wait for its answer.
pub(crate) fn options(
    conn: &Connection,
    timeout: std::time::Duration,
) -> Result<Options, ClientError> {
    let read = |path: &std::path::Path, error: fn(String) -> ClientError| {
        std::fs::read(path).map_err(|e| error(format!("cannot read {}: {e}", path.display())))
    };
    let ca_cert = match &conn.ca_cert {
        Some(path) => Some(read(path, ClientError::CaCert)?),
        None => None,
    };
    let identity = match (&conn.client_cert, &conn.client_key) {
        (Some(cert), Some(key)) => {
            let mut pem = read(cert, ClientError::Identity)?;
            pem.push(b'\n');
            pem.extend(read(key, ClientError::Identity)?);
            Some(pem)
        }
        _ => None,
    };
    Ok(Options {
        key: conn.key.clone(),
        ca_cert,
        identity,
        timeout,
    })
}

/// Makes the API call of a subcommand and answers the API's JSON.
async fn call(client: &Client, cmd: ClientCmd) -> Result<Value, ClientError> {
    match cmd {
        ClientCmd::Queue(q) => queue(client, q).await,
        ClientCmd::Send { queue, message } => client.send(&queue, &message.to_json()).await,
        ClientCmd::Receive { queue, receive } => client.receive(&queue, &receive.to_json()).await,
        ClientCmd::Release {
            queue,
            receipt,
            delay,
        } => client.release(&queue, &receipt, delay).await,
        ClientCmd::Ack { queue, receipts } => client.ack(&queue, &receipts).await,
        ClientCmd::Peek {
            queue,
            limit,
            after,
        } => client.peek(&queue, limit, after).await,
        ClientCmd::Stats { queue } => client.stats(&queue).await,
        ClientCmd::Scheduled(ScheduledCmd::List {
            queue,
            limit,
            after,
        }) => client.scheduled(&queue, limit, after).await,
        ClientCmd::Scheduled(ScheduledCmd::Cancel { queue, message_id }) => {
            client.cancel_scheduled(&queue, &message_id).await
        }
        ClientCmd::Dlq(d) => dlq(client, d).await,
        ClientCmd::Cluster(c) => cluster(client, c).await,
        ClientCmd::Health => client.health().await,
    }
}

/// Makes the API call of a `queue` subcommand.
async fn queue(client: &Client, cmd: QueueCmd) -> Result<Value, ClientError> {
    match cmd {
        QueueCmd::Create { name, settings } => {
            client.create_queue(&name, &settings.to_json()).await
        }
        QueueCmd::List { prefix } => client.list_queues(Some(&prefix)).await,
        QueueCmd::Get { queue } => client.get_queue(&queue).await,
        QueueCmd::Patch { queue, patch } => client.patch_queue(&queue, &patch.to_json()).await,
        QueueCmd::Delete { queue } => client.delete_queue(&queue).await,
    }
}

/// Makes the API call of a `dlq` subcommand.
async fn dlq(client: &Client, cmd: DlqCmd) -> Result<Value, ClientError> {
    match cmd {
        DlqCmd::Sources { queue } => client.dead_letter_sources(&queue).await,
        DlqCmd::Move { queue, task } => client.start_move_task(&queue, &task.to_json()).await,
        DlqCmd::Tasks { queue } => client.move_tasks(&queue).await,
        DlqCmd::Cancel { queue, task } => client.cancel_move_task(&queue, &task).await,
    }
}

/// Makes the API call of a `cluster` subcommand.
async fn cluster(client: &Client, cmd: ClusterCmd) -> Result<Value, ClientError> {
    match cmd {
        ClusterCmd::Status => client.cluster().await,
        ClusterCmd::Groups => {
            let cluster = client.cluster().await?;
            Ok(json!({"groups": cluster["groups"]}))
        }
        ClusterCmd::Accounts => client.accounts().await,
        ClusterCmd::Add { id, raft_addr } => client.add_node(id, &raft_addr).await,
        ClusterCmd::Remove { id } => client.remove_node(id).await,
        ClusterCmd::Drain { id } => client.drain_node(id, true).await,
        ClusterCmd::Undrain { id } => client.drain_node(id, false).await,
        ClusterCmd::Replace { id, raft_addr } => replace(client, id, raft_addr).await,
    }
}

/// Removes member `id` (when it still is one) and adds it again at `raft_addr`, or at its
/// current address.
async fn replace(
    client: &Client,
    id: u64,
    raft_addr: Option<String>,
) -> Result<Value, ClientError> {
    let cluster = client.cluster().await?;
    let current = cluster["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["id"].as_u64() == Some(id))
        .and_then(|n| n["raft_addr"].as_str())
        .map(str::to_string);
    let Some(addr) = raft_addr.or(current.clone()) else {
        return Err(ClientError::Usage(format!(
            "node {id} is not a member: give its --raft-addr"
        )));
    };
    if current.is_some() {
        client.remove_node(id).await?;
    }
    client.add_node(id, &addr).await
}

/// Prints an answer: lists of queues or messages one line each, anything else as indented JSON.
pub(crate) fn print(value: &Value, as_json: bool) {
    if as_json {
        println!("{value}");
        return;
    }
    if let Some(queues) = value["queues"].as_array() {
        for q in queues {
            println!(
                "{}\t{}\t{}",
                str_of(&q["name"]),
                str_of(&q["type"]),
                str_of(&q["id"])
            );
        }
        return;
    }
    if let Some(tasks) = value["tasks"].as_array() {
        for t in tasks {
            println!(
                "{}\t{}\tmoved {} of {}\tskipped {}\t{}",
                str_of(&t["task_handle"]),
                str_of(&t["status"]),
                str_of(&t["moved"]),
                str_of(&t["to_move"]),
                str_of(&t["skipped"]),
                str_of(&t["failure_reason"]),
            );
        }
        return;
    }
    // The cluster's status holds its groups too, and prints whole.
    if let (Some(groups), None) = (value["groups"].as_array(), value.get("nodes")) {
        groups.iter().for_each(print_group);
        return;
    }
    if let Some(messages) = value["messages"].as_array() {
        for m in messages {
            let handle = m
                .get("receipt")
                .or_else(|| m.get("state"))
                .unwrap_or(&Value::Null);
            println!(
                "{}\t{}\t{}",
                str_of(&m["message_id"]),
                str_of(handle),
                str_of(&m["body"])
            );
        }
        return;
    }
    match value {
        Value::Null => {}
        other => println!(
            "{}",
            serde_json::to_string_pretty(other).unwrap_or_default()
        ),
    }
}

/// One Raft group of `raftq cluster groups`, on one line.
fn print_group(g: &Value) {
    let members = g["members"].as_array().into_iter().flatten();
    let members: Vec<String> = members.map(str_of).collect();
    println!(
        "group {}\tleader {}\tmembers {}\tqueues {}\t{}\tcommitted {}\tapplied {}",
        str_of(&g["group"]),
        str_of(&g["leader"]),
        members.join(","),
        str_of(&g["queues"]),
        str_of(&g["role"]),
        str_of(&g["commit_index"]),
        str_of(&g["applied_index"]),
    );
}

fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_task_sends_only_the_settings_given() {
        assert_eq!(MoveTaskArgs::default().to_json(), json!({}));
        let args = MoveTaskArgs {
            destination: Some("orders".into()),
            rate: Some(20),
            message_ids: vec!["a".into()],
            moved_since: Some("2024-05-01T00:00:00Z".into()),
            moved_before: None,
            dry_run: true,
        };
        assert_eq!(
            args.to_json(),
            json!({
                "destination": "orders",
                "max_messages_per_second": 20,
                "filter": {"message_ids": ["a"], "moved_since": "2024-05-01T00:00:00Z"},
                "dry_run": true,
            })
        );
    }

    /// `raftq LINE` (words split at spaces) parsed by the binary's own command line.
    fn parse(line: &str) -> Result<crate::Cli, clap::Error> {
        use clap::Parser;
        crate::Cli::try_parse_from(["raftq"].into_iter().chain(line.split_whitespace()))
    }

    /// `raftq LINE` as a client subcommand.
    fn client(line: &str) -> ClientCmd {
        match parse(line).expect("parses").command {
            crate::Cmd::Client(cmd) => *cmd,
            other => panic!("`{line}` parsed as {other:?}"),
        }
    }

    /// The request body `raftq LINE` sends, for a send, a receive or a queue patch.
    fn body(line: &str) -> Value {
        match client(line) {
            ClientCmd::Send { message, .. } => message.to_json(),
            ClientCmd::Receive { receive, .. } => receive.to_json(),
            ClientCmd::Queue(QueueCmd::Patch { patch, .. }) => patch.to_json(),
            other => panic!("`{line}` parsed as {other:?}"),
        }
    }

    #[test]
    fn request_bodies_hold_only_the_settings_given_and_a_null_for_each_one_removed() {
        let cases = [
            ("send q hello", json!({"body": "hello"})),
            (
                "send q.fifo hi --group g --dedup d --delay 5 --attr n=1 --attr-type n=Number",
                json!({
                    "body": "hi",
                    "message_group_id": "g",
                    "message_deduplication_id": "d",
                    "delay_seconds": 5,
                    "attributes": {"n": "1"},
                    "attribute_types": {"n": "Number"},
                }),
            ),
            ("receive q", json!({"max_messages": 1})),
            (
                "receive q --max 10 --lease 30 --wait 2 --attempt-id a",
                json!({
                    "max_messages": 10,
                    "lease_seconds": 30,
                    "wait_seconds": 2,
                    "receive_attempt_id": "a",
                }),
            ),
            (
                "queue patch q --lease-seconds 9 --tag a=1 --untag b --detach-dead-letter \
                 --no-retry-backoff",
                json!({
                    "lease_seconds": 9,
                    "tags": {"a": "1", "b": null},
                    "redrive_policy": null,
                    "retry_backoff": null,
                }),
            ),
            (
                "send q urgent --priority 7 --deliver-at 2030-01-01T09:00:00Z",
                json!({
                    "body": "urgent",
                    "priority": 7,
                    "deliver_at": "2030-01-01T09:00:00Z",
                }),
            ),
            (
                "queue patch q --default-priority 3 --priority-weights 1,2,4",
                json!({"default_priority": 3, "priority_weights": [1, 2, 4]}),
            ),
            (
                "queue patch q --strict-priorities",
                json!({"priority_weights": null}),
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(body(line), expected, "{line}");
        }
    }

    #[test]
    fn the_queue_comes_before_the_body_and_a_detached_target_is_no_target() {
        let ClientCmd::Send { queue, message } = client("send q hello") else {
            panic!("not a send");
        };
        assert_eq!((queue.as_str(), message.body.as_str()), ("q", "hello"));
        let line = "queue patch q --detach-dead-letter --dead-letter-target d \
                    --max-receive-count 3";
        assert!(parse(line).is_err(), "{line}");
        let line = "send q x --delay 5 --deliver-at 2030-01-01T09:00:00Z";
        assert!(parse(line).is_err(), "{line}");
    }

    #[test]
    fn scheduled_messages_are_listed_and_cancelled_by_queue_and_message_id() {
        let ClientCmd::Scheduled(ScheduledCmd::Cancel { queue, message_id }) =
            client("scheduled cancel q 00000000-0000-0000-0000-000000000007")
        else {
            panic!("not a cancel");
        };
        assert_eq!(
            (queue.as_str(), message_id.as_str()),
            ("q", "00000000-0000-0000-0000-000000000007")
        );
        assert!(matches!(
            client("scheduled list q --limit 5 --after 9"),
            ClientCmd::Scheduled(ScheduledCmd::List {
                limit: Some(5),
                after: Some(9),
                ..
            })
        ));
    }

    #[test]
    fn a_membership_change_is_waited_for_as_long_as_the_leader_may_take() {
        let replace = ClientCmd::Cluster(ClusterCmd::Replace {
            id: 2,
            raft_addr: None,
        });
        assert!(timeout_of(&replace) > raftq_node::LONGEST_CHANGE);
        let status = ClientCmd::Cluster(ClusterCmd::Status);
        assert_eq!(timeout_of(&status), Options::default().timeout);
        assert!(timeout_of(&status) < raftq_node::LONGEST_CHANGE);
    }
}
