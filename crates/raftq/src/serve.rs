//! `raftq serve`: one node. With no cluster flags it is the embedded single-node default of
//! SPEC.md §4; with `--node-id`, `--raft-listen` and `--peers` it is a cluster member that forms
//! the cluster with its peers on first start and rejoins it on restart; with `--join` instead of
//! `--peers` it waits to be added to a running cluster.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use raftq_node::{Node, NodeConfig};
use tokio::net::TcpListener;

use crate::listener::ClientTls;

/// Flags of `raftq serve`; each is also an environment variable `RAFTQ_<FLAG>`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address for the REST and gRPC API.
    #[arg(long, env = "RAFTQ_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Where the node keeps its data.
    #[arg(long, env = "RAFTQ_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// The region this cluster serves (part of every CRN).
    #[arg(long, env = "RAFTQ_REGION", default_value = "local")]
    pub region: String,
    /// TOML file of API keys; without it one account `dev` is served without keys. Reloaded on
    /// SIGHUP and when its content changes (a file that does not parse keeps the keys in force).
    #[arg(long, env = "RAFTQ_KEYS")]
    pub keys: Option<PathBuf>,
    /// PEM certificate chain of the client listener: REST and gRPC are then served over TLS
    /// only (with --tls-key). Reloaded on SIGHUP and when the file changes.
    #[arg(long, env = "RAFTQ_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "RAFTQ_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM certificates of a CA: every client must then show a certificate of it (besides its
    /// API key). Reloaded with --tls-cert.
    #[arg(long, env = "RAFTQ_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// PEM certificate of this node for its peers, from the cluster's CA, naming the node id as
    /// the URI `spiffe://raftq/node/<id>` and the host of its peer address (with --peer-key and
    /// --peer-ca): peer traffic is then mutual TLS, from members only.
    #[arg(long, env = "RAFTQ_PEER_CERT", requires_all = ["peer_key", "peer_ca"])]
    pub peer_cert: Option<PathBuf>,
    /// PEM private key of --peer-cert.
    #[arg(long, env = "RAFTQ_PEER_KEY", requires = "peer_cert")]
    pub peer_key: Option<PathBuf>,
    /// PEM certificates of the CA that issues the peers' certificates.
    #[arg(long, env = "RAFTQ_PEER_CA", requires = "peer_cert")]
    pub peer_ca: Option<PathBuf>,
    /// Serve peer traffic in plaintext, unauthenticated, on a --raft-listen address that is not
    /// loopback: anyone who reaches it can vote, append or forward requests for any account.
    #[arg(long, env = "RAFTQ_INSECURE_PEERS", conflicts_with = "peer_cert")]
    pub insecure_peers: bool,
    /// Requests a second one API key may make (a burst of as many); over it, `429` with
    /// `Retry-After`. Off unless set.
    #[arg(long, env = "RAFTQ_RATE_LIMIT_PER_KEY")]
    pub rate_limit_per_key: Option<NonZeroU32>,
    /// Requests a second one connection may make (a burst of as many). Off unless set.
    #[arg(long, env = "RAFTQ_RATE_LIMIT_PER_CONNECTION")]
    pub rate_limit_per_connection: Option<NonZeroU32>,
    /// Long polls (receives with a wait) one API key may have under way at once. Off unless set.
    #[arg(long, env = "RAFTQ_MAX_LONG_POLLS_PER_KEY")]
    pub max_long_polls_per_key: Option<NonZeroU32>,
    /// Long polls one connection may have under way at once. Off unless set.
    #[arg(long, env = "RAFTQ_MAX_LONG_POLLS_PER_CONNECTION")]
    pub max_long_polls_per_connection: Option<NonZeroU32>,
    /// The base of the queue URLs the SQS-compatible endpoint hands out,
    /// `http(s)://HOST[:PORT]` as clients reach this node (e.g. a compose service name); queue
    /// URLs are `<base>/<account number>/<queue name>`. Default: the listen address.
    #[arg(long, env = "RAFTQ_ADVERTISE_URL", value_parser = raftq_sqs::names::parse_base_url)]
    pub advertise_url: Option<String>,
    /// The 12-digit SQS account numbers of accounts, `ACCOUNT=NUMBER,...`; an account not
    /// named here gets a number derived from its name.
    #[arg(long, env = "RAFTQ_ACCOUNT_NUMBERS", value_parser = raftq_sqs::names::parse_account_numbers)]
    pub account_numbers: Option<BTreeMap<String, String>>,
    /// This node's id in the cluster.
    #[arg(long, env = "RAFTQ_NODE_ID")]
    pub node_id: Option<u64>,
    /// Address for peer (Raft) traffic.
    #[arg(long, env = "RAFTQ_RAFT_LISTEN")]
    pub raft_listen: Option<SocketAddr>,
    /// Every member's Raft address, this node included: `1=HOST:PORT,2=HOST:PORT,...`. Forms a
    /// new cluster on the first start; a restarted node goes by the membership in its data.
    #[arg(long, env = "RAFTQ_PEERS", value_parser = parse_peers, conflicts_with = "join")]
    pub peers: Option<BTreeMap<u64, String>>,
    /// A member's peer address: start a node that waits to be added to that running cluster
    /// (`raftq cluster add`) and never forms one.
    #[arg(long, env = "RAFTQ_JOIN")]
    pub join: Option<String>,
    /// How many Raft groups a new cluster lays its queues over (1 to 128): group 1, every
    /// node a member, and data groups of three replicas each, their leaders spread over the
    /// nodes. Read by the node that leads group 1 once the cluster formed; 1 keeps the cluster
    /// one group. Membership changes and backups act on every group (docs/operations.md,
    /// "Raft groups").
    #[arg(long, env = "RAFTQ_GROUPS", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(NodeConfig::MAX_GROUPS)))]
    pub groups: u32,
    /// Milliseconds between the leader's heartbeats, also how long a follower has to answer an
    /// append. A follower stands for election 12 to 14 heartbeats after the last one it heard.
    #[arg(long, env = "RAFTQ_HEARTBEAT_MS", default_value_t = NodeConfig::DEFAULT_HEARTBEAT_MS,
          value_parser = clap::value_parser!(u64).range(10..=10_000))]
    pub heartbeat_ms: u64,
    /// How far this node's clock may differ from the median of the voters' clocks before it no
    /// longer stands for election (a leader hands over), and how far ahead of the cluster's time
    /// a leader may stamp an entry.
    #[arg(long, env = "RAFTQ_MAX_CLOCK_SKEW_MS", default_value_t = NodeConfig::DEFAULT_MAX_CLOCK_SKEW_MS,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub max_clock_skew_ms: u64,
    /// Free bytes the data directory's file system must keep: below them the leader refuses
    /// sends and other writes that add data with `storage_full` (acks, deletes and purges still
    /// work, so space can be freed); 0 turns the guard off. Whatever it is, every write is
    /// refused once the Raft log has no room for a new segment (docs/operations.md, "Full disk").
    #[arg(long, env = "RAFTQ_MIN_FREE_BYTES", default_value_t = NodeConfig::DEFAULT_MIN_FREE_BYTES,
          value_name = "BYTES")]
    pub min_free_bytes: u64,
    /// Series for each queue in `GET /metrics` (labelled `account` and `queue`); with `false`,
    /// each queue figure is one series over every queue, so that the number of series does not
    /// grow with the queues.
    #[arg(long, env = "RAFTQ_METRICS_PER_QUEUE", default_value_t = true,
          action = clap::ArgAction::Set, value_name = "BOOL")]
    pub metrics_per_queue: bool,
}

/// Why `raftq serve` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot listen: {0}")]
    Listen(#[from] std::io::Error),
    #[error(transparent)]
    Start(#[from] raftq_node::StartError),
    #[error(transparent)]
    Keys(#[from] raftq_api::KeysError),
    #[error(transparent)]
    Halted(#[from] raftq_node::Halted),
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
}

fn parse_peers(text: &str) -> Result<BTreeMap<u64, String>, String> {
    let mut peers = BTreeMap::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}` is not ID=HOST:PORT"))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| format!("`{id}` is not a node id"))?;
        let addr = addr.trim();
        if addr.rsplit_once(':').is_none() {
            return Err(format!("`{addr}` is not HOST:PORT"));
        }
        peers.insert(id, addr.to_string());
    }
    if peers.is_empty() {
        return Err("at least one peer is required".into());
    }
    Ok(peers)
}

/// Runs the node until a signal stops it (a leader hands over first) or its Raft core halts.
pub async fn run(args: ServeArgs) -> Result<(), ServeError> {
    let (id, peers, raft_listener) = bind_raft(&args).await?;
    let keys = keys(args.keys.as_deref())?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(ClientTls::load(
            cert.clone(),
            key.clone(),
            args.tls_client_ca.clone(),
        )?),
        _ => None,
    };
    let peer_tls = match (&args.peer_cert, &args.peer_key, &args.peer_ca) {
        (Some(cert), Some(key), Some(ca)) => Some(crate::tls::peer_tls(cert, key, ca)?),
        _ => None,
    };
    let raft_addr = raft_listener.local_addr()?;
    check_peer_security(peer_tls.is_some(), raft_addr, args.insecure_peers)?;
    let mut config = NodeConfig::new(id, peers, args.data_dir.clone());
    config.region = args.region.clone();
    config.join = args.join.clone();
    config.heartbeat_ms = args.heartbeat_ms;
    config.groups = args.groups;
    config.max_clock_skew_ms = args.max_clock_skew_ms;
    config.min_free_bytes = args.min_free_bytes;
    config.peer_tls = peer_tls;
    let node = Arc::new(Node::start(config, raft_listener).await?);
    let api = raftq_api::Api::new(Arc::clone(&node), args.region.clone(), keys)
        .with_limits(limits(&args))
        .with_metrics(raftq_api::MetricsOptions {
            per_queue: args.metrics_per_queue,
            data_dir: Some(args.data_dir.clone()),
        });
    let listener = TcpListener::bind(args.listen).await?;
    // The bound address, not the flag's: `--listen 127.0.0.1:0` takes a free port and says which.
    let listen = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let advertised = args
        .advertise_url
        .unwrap_or_else(|| format!("{scheme}://{listen}"));
    tracing::info!(%listen, scheme, node = id, data_dir = %args.data_dir.display(), sqs = %advertised, "raftq serving");
    let numbers = args.account_numbers.unwrap_or_default();
    let front = raftq_api::router(api)
        .serving(|ops| raftq_sqs::Sqs::new(ops, &advertised, numbers))
        .with_pages(raftq_console::router());
    let stop = hand_over_on_signal(Arc::clone(&node));
    let serving = crate::listener::serve(listener.into_std()?, front, tls, stop);
    // A node whose Raft core stopped under it exits at once (non-zero), so that a supervisor
    // restarts it and clients go to the nodes that still work.
    tokio::select! {
        served = serving => served?,
        halted = node.halted() => return Err(halted.into()),
    }
    if let Ok(node) = Arc::try_unwrap(node) {
        node.shutdown().await;
    }
    Ok(())
}

/// This node's id, the members it forms a cluster with (none when it joins one), and its bound
/// peer listener. Without cluster flags: node 1 alone, its peer listener on a free loopback port.
async fn bind_raft(
    args: &ServeArgs,
) -> Result<(u64, BTreeMap<u64, String>, TcpListener), ServeError> {
    let bound = match (args.node_id, args.raft_listen, &args.peers, &args.join) {
        (None, None, None, None) => {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?.to_string();
            (1, BTreeMap::from([(1, addr)]), listener)
        }
        (Some(id), Some(raft), Some(peers), None) => {
            (id, peers.clone(), TcpListener::bind(raft).await?)
        }
        (Some(id), Some(raft), None, Some(_)) => {
            (id, BTreeMap::new(), TcpListener::bind(raft).await?)
        }
        _ => {
            return Err(ServeError::Usage(
                "--node-id and --raft-listen go with either --peers or --join".into(),
            ))
        }
    };
    Ok(bound)
}

/// The API keys of the `--keys` file, reloaded on `SIGHUP` and when it changes; without one,
/// the single account `dev` without authentication.
fn keys(path: Option<&std::path::Path>) -> Result<raftq_api::Keys, ServeError> {
    let Some(path) = path else {
        tracing::warn!("no --keys file: serving the single account `dev` without authentication");
        return Ok(raftq_api::Keys::open());
    };
    let keys = raftq_api::load_keys(path)?;
    let (live, path) = (keys.clone(), path.to_path_buf());
    crate::watch::spawn(vec![path.clone()], move || match live.reload(&path) {
        Ok(count) => {
            tracing::info!(keys = count, path = %path.display(), "key file reloaded")
        }
        Err(e) => {
            tracing::error!(error = %e, path = %path.display(), "key file not reloaded: the keys loaded before stay in force")
        }
    });
    Ok(keys)
}

/// Says how peer traffic is protected, and refuses plaintext peer traffic off loopback unless
/// `--insecure-peers` asks for it.
fn check_peer_security(
    mutual_tls: bool,
    raft_addr: SocketAddr,
    insecure_peers: bool,
) -> Result<(), ServeError> {
    match (mutual_tls, raft_addr.ip().is_loopback(), insecure_peers) {
        (true, _, _) => tracing::info!(raft_listen = %raft_addr, "peer traffic over mutual TLS"),
        (false, true, _) => tracing::warn!(
            raft_listen = %raft_addr,
            "peer traffic in plaintext, unauthenticated, on loopback only"
        ),
        (false, false, true) => tracing::warn!(
            raft_listen = %raft_addr,
            "--insecure-peers: peer traffic in plaintext, unauthenticated: anyone who reaches \
             this address can vote, append entries and forward requests for any account"
        ),
        (false, false, false) => {
            return Err(ServeError::Usage(format!(
                "--raft-listen {raft_addr} is not a loopback address: give --peer-cert, \
                 --peer-key and --peer-ca for mutual TLS between peers, or --insecure-peers"
            )))
        }
    }
    Ok(())
}

/// The request and long-poll limits of the flags.
fn limits(args: &ServeArgs) -> raftq_api::Limits {
    raftq_api::Limits {
        requests_per_key: args.rate_limit_per_key,
        requests_per_connection: args.rate_limit_per_connection,
        long_polls_per_key: args.max_long_polls_per_key,
        long_polls_per_connection: args.max_long_polls_per_connection,
    }
}

/// Waits for a stop signal; then a leader, which stops on purpose, hands over first, while it
/// still forwards.
async fn hand_over_on_signal(node: Arc<Node>) {
    shutdown_signal().await;
    match node.hand_over().await {
        Ok(Some(successor)) => tracing::info!(successor, "handed leadership over"),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "could not hand leadership over"),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_ids_and_addresses() {
        let peers = parse_peers("1=node1:7000,2=node2:7000, 3=10.0.0.3:7000").unwrap();
        assert_eq!(peers.len(), 3);
        assert_eq!(peers[&2], "node2:7000");
        assert!(parse_peers("1:node1").is_err());
        assert!(parse_peers("x=node1:7000").is_err());
        assert!(parse_peers("1=node1").is_err());
        assert!(parse_peers("").is_err());
    }

    /// `raftq serve FLAGS...` parsed by the binary's own command line.
    fn serve(flags: &[&str]) -> Result<ServeArgs, clap::Error> {
        use clap::Parser;
        let words = ["raftq", "serve"].iter().chain(flags);
        match crate::Cli::try_parse_from(words)?.command {
            crate::Cmd::Serve(args) => Ok(*args),
            other => panic!("`raftq serve` parsed as {other:?}"),
        }
    }

    #[test]
    fn the_groups_default_to_one_and_are_bounded() {
        assert_eq!(serve(&[]).unwrap().groups, 1);
        assert_eq!(serve(&["--groups", "9"]).unwrap().groups, 9);
        assert!(serve(&["--groups", "0"]).is_err());
        assert!(serve(&["--groups", "129"]).is_err());
    }

    #[test]
    fn the_heartbeat_defaults_to_the_nodes_and_is_bounded() {
        let args = serve(&[]).unwrap();
        assert_eq!(args.heartbeat_ms, NodeConfig::DEFAULT_HEARTBEAT_MS);
        let args = serve(&["--heartbeat-ms", "200"]).unwrap();
        assert_eq!(args.heartbeat_ms, 200);
        let error = serve(&["--heartbeat-ms", "5"]).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("--heartbeat-ms") && text.contains("10..=10000"),
            "{text}"
        );
    }

    #[test]
    fn min_free_bytes_defaults_to_the_nodes_and_takes_a_byte_count() {
        let args = serve(&[]).unwrap();
        assert_eq!(args.min_free_bytes, NodeConfig::DEFAULT_MIN_FREE_BYTES);
        assert_eq!(serve(&["--min-free-bytes", "0"]).unwrap().min_free_bytes, 0);
        let error = serve(&["--min-free-bytes", "1G"]).unwrap_err();
        assert!(error.to_string().contains("--min-free-bytes"), "{error}");
    }

    #[test]
    fn per_queue_metrics_are_on_unless_turned_off() {
        assert!(serve(&[]).unwrap().metrics_per_queue);
        assert!(
            !serve(&["--metrics-per-queue=false"])
                .unwrap()
                .metrics_per_queue
        );
        assert!(
            serve(&["--metrics-per-queue", "true"])
                .unwrap()
                .metrics_per_queue
        );
        assert!(serve(&["--metrics-per-queue=maybe"]).is_err());
    }

    #[test]
    fn sqs_names_are_configured_by_flags() {
        let args = serve(&[]).unwrap();
        assert_eq!((args.advertise_url, args.account_numbers), (None, None));
        let args = serve(&[
            "--advertise-url",
            "http://raftq-1:8080/",
            "--account-numbers",
            "dev=000000000001",
        ])
        .unwrap();
        assert_eq!(args.advertise_url.as_deref(), Some("http://raftq-1:8080"));
        let numbers = args.account_numbers.unwrap();
        assert_eq!(numbers["dev"], "000000000001");
        let error = serve(&["--advertise-url", "raftq-1:8080"]).unwrap_err();
        assert!(error.to_string().contains("--advertise-url"), "{error}");
        assert!(serve(&["--account-numbers", "dev=1"]).is_err());
    }
}
