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

/// Nodes 1 to N with mutual TLS from one CA, forming one cluster on loopback.
struct Nodes {
    servers: Vec<Server>,
    rafts: Vec<String>,
    ca: Authority,
    certs: Vec<Issued>,
    _dirs: Vec<TempDir>,
}

/// A cluster of `size` nodes with mutual TLS, each started with `flags` too.
fn mutual_tls_cluster(size: u64, flags: &[&str]) -> Nodes {
    let dirs: Vec<TempDir> = (0..=size)
        .map(|_| TempDir::new().expect("temp dir"))
        .collect();
    let shared = dirs[dirs.len() - 1].path();
    let ca = Authority::new("raftq cluster CA");
    let ca_file = ca.write(shared, "ca");
    let certs: Vec<Issued> = (1..=size)
        .map(|id| ca.issue(shared, &format!("node-{id}"), &[node_uri(id)]))
        .collect();
    let rafts: Vec<String> = (1..=size).map(|_| free_addr()).collect();
    let peers: Vec<String> = (rafts.iter().enumerate())
        .map(|(i, raft)| format!("{}={raft}", i + 1))
        .collect();
    let peers = peers.join(",");
    let node = |i: usize| {
        let id = (i + 1).to_string();
        let mut args = vec![
            "--node-id",
            &id,
            "--raft-listen",
            &rafts[i],
            "--peers",
            &peers,
        ];
        args.extend(peer_flags(&certs[i], &ca_file));
        args.extend(flags);
        start(&dirs[i].path().join("data"), &args, None)
    };
    // Every node starts before any waits: the cluster forms only once all of them answer.
    let servers = std::thread::scope(|s| {
        let started: Vec<_> = (0..rafts.len()).map(|i| s.spawn(move || node(i))).collect();
        let started = started.into_iter();
        started
            .map(|n| n.join().expect("the node starts"))
            .collect()
    });
    Nodes {
        servers,
        rafts,
        ca,
        certs,
        _dirs: dirs,
    }
}

#[test]
fn peers_over_mutual_tls_hear_only_from_members_of_their_ca() {
    let cluster = mutual_tls_cluster(2, &[]);
    let [first, second] = &cluster.servers[..] else {
        panic!("two nodes");
    };
    let second_cert = &cluster.certs[1];
    ok(first, &["queue", "create", "jobs"]);
    // A send to either node reaches the leader: one of them forwarded it over mutual TLS.
    ok(first, &["send", "jobs", "one"]);
    ok(second, &["send", "jobs", "two"]);
    assert_eq!(ok(first, &["stats", "jobs"])["visible"], 2);

    let status = ok(first, &["cluster", "status"]);
    let id = status["cluster_id"].as_str().expect("the cluster id");
    let cluster_id = Some(Uuid::parse_str(id).expect("a UUID"));

    let dir = TempDir::new().expect("temp dir");
    let outsider = cluster.ca.issue(dir.path(), "node-9", &[node_uri(9)]);
    let other_ca = Authority::new("another CA");
    let impostor = other_ca.issue(dir.path(), "impostor", &[node_uri(2)]);
    let addr = cluster.rafts[0].as_str();
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
        let status = refusal(addr, tls(Some(second_cert)), None, method, 2);
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
        (2, second_cert, PeerMethod::Append),
        (2, second_cert, PeerMethod::Snapshot),
        (2, second_cert, PeerMethod::Vote),
    ];
    for (caller, issued, method) in impersonations {
        let status = refusal(addr, tls(Some(issued)), cluster_id, method, 1);
        let reason = format!("certificate names node {caller}, the message node 1");
        assert_denied(&status, &reason);
    }
    // Both kinds of refusal are in the node's log.
    first.wait_for_log("peer connection refused: TLS handshake failed");
    first.wait_for_log("peer call refused");
    assert_eq!(ok(second, &["stats", "jobs"])["visible"], 2);
}

/// In a cluster of several Raft groups, a node forwards a request on a queue of a group it
/// takes no part in to that group's members, which hear it over mutual TLS though the node is
/// no member of the group (it is one of the cluster).
#[test]
fn peers_over_mutual_tls_forward_to_the_groups_they_take_no_part_in() {
    let cluster = mutual_tls_cluster(4, &["--groups", "3"]);
    let first = &cluster.servers[0];
    // Groups 2 (nodes 1 to 3) and 3 (nodes 2 to 4) formed: each takes a queue.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let groups = ok(first, &["cluster", "groups"]);
        let groups = groups["groups"].as_array().cloned().unwrap_or_default();
        let formed = groups.iter().filter(|g| g["formed"] == true).count();
        if formed == 3 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "groups: {groups:?}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let queues = ["one", "two", "three"];
    for queue in queues {
        ok(first, &["queue", "create", queue]);
    }
    let placed: Vec<u64> = (queues.iter())
        .map(|q| {
            ok(first, &["queue", "get", q])["group"]
                .as_u64()
                .expect("a group")
        })
        .collect();
    assert_eq!(placed, [1, 2, 3], "one queue per group");
    for server in &cluster.servers {
        for queue in queues {
            ok(server, &["send", queue, "hello"]);
        }
    }
    for queue in queues {
        assert_eq!(ok(&cluster.servers[3], &["stats", queue])["visible"], 4);
    }
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
