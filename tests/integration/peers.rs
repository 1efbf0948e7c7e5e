//! Peer traffic with mutual TLS, with `raftq serve` as processes: two nodes form a cluster and
//! forward to each other over it, while a caller without a certificate, with another CA's or
//! with plaintext cannot vote, append, install a snapshot or forward a request; a node of the CA
//! that is not a member cannot vote or forward, and no node can append, install a snapshot or
//! ask for a vote in another's name. A node with no TLS between peers serves them on loopback
//! only.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use raftq_node::tls::{client_config, node_uri};
use raftq_node::{call_peer, CallError, PeerMethod, PEER_PROTOCOL};
use tempfile::TempDir;
use uuid::Uuid;

use crate::certs::{Authority, Issued};
use crate::process::{free_addr, ok, start, Server, BIN};

/// The flags of a node with mutual TLS from `issued` and the CA at `ca`.
fn peer_flags<'a>(issued: &'a Issued, ca: &'a Path) -> [&'a str; 6] {
    [
        "--peer-cert",
        issued.cert.to_str().expect("utf-8 path"),
        "--peer-key",
        issued.key.to_str().expect("utf-8 path"),
        "--peer-ca",
        ca.to_str().expect("utf-8 path"),
    ]
}

/// Dials as `identity` (none: no client certificate), trusting `ca`.
fn dialing(ca: &str, identity: Option<&Issued>) -> Arc<rustls::ClientConfig> {
    let pems = identity.map(|issued| {
        (
            std::fs::read(&issued.cert).expect("certificate"),
            std::fs::read(&issued.key).expect("key"),
        )
    });
    let identity = pems.as_ref().map(|(cert, key)| (&cert[..], &key[..]));
    client_config(ca.as_bytes(), identity).expect("a TLS configuration")
}

/// The status a call of `method` to `addr` in the name of node `sender` failed with.
fn refusal(
    addr: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
    cluster: Option<Uuid>,
    method: PeerMethod,
    sender: u64,
) -> tonic::Status {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let protocol = Some(PEER_PROTOCOL);
    match runtime.block_on(call_peer(addr, tls, cluster, protocol, method, sender)) {
        Err(CallError::Transport(status)) => status,
        other => panic!("{method:?} to {addr}: expected a refusal, got {other:?}"),
    }
}

/// Asserts `status` is a `PERMISSION_DENIED` that says `reason`.
fn assert_denied(status: &tonic::Status, reason: &str) {
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains(reason), "{status:?}");
}

/// Two nodes with mutual TLS, forming one cluster on loopback.
struct TwoNodes {
    first: Server,
    second: Server,
    raft1: String,
    ca: Authority,
    second_cert: Issued,
    _dirs: [TempDir; 3],
}

fn two_nodes() -> TwoNodes {
    let dirs = [0; 3].map(|_| TempDir::new().expect("temp dir"));
    let ca = Authority::new("raftq cluster CA");
    let ca_file = ca.write(dirs[2].path(), "ca");
    let certs = [1, 2].map(|id| ca.issue(dirs[2].path(), &format!("node-{id}"), &[node_uri(id)]));
    let (raft1, raft2) = (free_addr(), free_addr());
    let peers = format!("1={raft1},2={raft2}");
    let node = |i: usize, raft: &str| {
        let id = (i + 1).to_string();
        let mut flags = vec!["--node-id", &id, "--raft-listen", raft, "--peers", &peers];
        flags.extend(peer_flags(&certs[i], &ca_file));
        start(&dirs[i].path().join("data"), &flags, None)
    };
    // Both start before either waits: the cluster forms only once both answer.
    let spawned = std::thread::scope(|s| {
        let second = s.spawn(|| node(1, &raft2));
        (node(0, &raft1), second.join().expect("node 2 starts"))
    });
    let [_, second_cert] = certs;
    TwoNodes {
        first: spawned.0,
        second: spawned.1,
        raft1,
        ca,
        second_cert,
        _dirs: dirs,
    }
}

#[test]
fn peers_over_mutual_tls_hear_only_from_members_of_their_ca() {
    let cluster = two_nodes();
    ok(&cluster.first, &["queue", "create", "jobs"]);
    // A send to either node reaches the leader: one of them forwarded it over mutual TLS.
    ok(&cluster.first, &["send", "jobs", "one"]);
    ok(&cluster.second, &["send", "jobs", "two"]);
    assert_eq!(ok(&cluster.first, &["stats", "jobs"])["visible"], 2);

    let status = ok(&cluster.first, &["cluster", "status"]);
    let id = status["cluster_id"].as_str().expect("the cluster id");
    let cluster_id = Some(Uuid::parse_str(id).expect("a UUID"));

    let dir = TempDir::new().expect("temp dir");
    let outsider = cluster.ca.issue(dir.path(), "node-9", &[node_uri(9)]);
    let other_ca = Authority::new("another CA");
    let impostor = other_ca.issue(dir.path(), "impostor", &[node_uri(2)]);
    let addr = cluster.raft1.as_str();
    let tls = |identity: Option<&Issued>| Some(dialing(&cluster.ca.pem, identity));
    let all = [
        PeerMethod::Vote,
        PeerMethod::Append,
        PeerMethod::Snapshot,
        PeerMethod::Forward,
    ];
    for method in all {
        // The handshake refuses a caller without a certificate, with another CA's (even one
        // that names a member), or without TLS: no call reaches the service.
        for (who, dial) in [
            ("no certificate", tls(None)),
            ("another CA", tls(Some(&impostor))),
            ("plaintext", None),
        ] {
            let status = refusal(addr, dial, cluster_id, method, 2);
            assert!(
                !matches!(
                    status.code(),
                    tonic::Code::PermissionDenied
                        | tonic::Code::FailedPrecondition
                        | tonic::Code::InvalidArgument
                        | tonic::Code::Ok
                ),
                "{method:?} with {who} reached the service: {status:?}"
            );
        }
        // A member's certificate passes the screen; then the missing cluster id refuses it.
        let status = refusal(addr, tls(Some(&cluster.second_cert)), None, method, 2);
        assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    }
    // A node of the CA that is not a member neither votes nor forwards...
    for method in [PeerMethod::Vote, PeerMethod::Forward] {
        let status = refusal(addr, tls(Some(&outsider)), cluster_id, method, 9);
        assert_denied(&status, "node 9 is not a member");
    }
    // ...and no node, a member included, appends, installs a snapshot or asks for a vote in
    // another node's name.
    let impersonations = [
        (9, &outsider, PeerMethod::Append),
        (9, &outsider, PeerMethod::Snapshot),
        (2, &cluster.second_cert, PeerMethod::Append),
        (2, &cluster.second_cert, PeerMethod::Snapshot),
        (2, &cluster.second_cert, PeerMethod::Vote),
    ];
    for (caller, issued, method) in impersonations {
        let status = refusal(addr, tls(Some(issued)), cluster_id, method, 1);
        let reason = format!("certificate names node {caller}, the message node 1");
        assert_denied(&status, &reason);
    }
    // Both kinds of refusal are in the node's log.
    cluster
        .first
        .wait_for_log("peer connection refused: TLS handshake failed");
    cluster.first.wait_for_log("peer call refused");
    assert_eq!(ok(&cluster.second, &["stats", "jobs"])["visible"], 2);
}

/// The log of a `raftq serve` that must refuse to start, and that it did.
fn refused_start(flags: &[&str]) -> String {
    let dir = TempDir::new().expect("temp dir");
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path())
        .args(flags)
        .env("RAFTQ_LOG", "info")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .expect("run raftq serve");
    assert!(!out.status.success(), "raftq serve {flags:?} started");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn peers_without_tls_are_served_on_loopback_only_unless_asked() {
    let raft = free_addr().replace("127.0.0.1", "0.0.0.0");
    let peers = format!("1={}", raft.replace("0.0.0.0", "127.0.0.1"));
    let cluster = ["--node-id", "1", "--raft-listen", &raft, "--peers", &peers];
    let log = refused_start(&cluster);
    assert!(
        log.contains("is not a loopback address") && log.contains("--insecure-peers"),
        "{log}"
    );
    let dir = TempDir::new().expect("temp dir");
    let mut flags = cluster.to_vec();
    flags.push("--insecure-peers");
    let server = start(&dir.path().join("data"), &flags, None);
    ok(&server, &["queue", "create", "open"]);
}

#[test]
fn a_peer_certificate_for_another_node_id_is_refused_at_start() {
    let dir = TempDir::new().expect("temp dir");
    let ca = Authority::new("raftq cluster CA");
    let ca_file = ca.write(dir.path(), "ca");
    let issued = ca.issue(dir.path(), "node-2", &[node_uri(2)]);
    let raft = free_addr();
    let peers = format!("1={raft}");
    let mut flags = vec!["--node-id", "1", "--raft-listen", &raft, "--peers", &peers];
    flags.extend(peer_flags(&issued, &ca_file));
    let log = refused_start(&flags);
    assert!(
        log.contains("the peer certificate names node 2, not this node (1)"),
        "{log}"
    );
}
