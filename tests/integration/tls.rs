//! TLS on the client listener, with `raftq serve` as a process: REST and gRPC over TLS on one
//! port, clients that do not trust the server's CA or do not speak TLS refused, and a renewed
//! certificate served to new connections while the open ones go on.

use std::time::{Duration, Instant};

use raftq_api::grpc::pb;
use raftq_api::grpc::pb::queues_client::QueuesClient;
use tempfile::TempDir;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

use crate::certs::{Authority, Issued};
use crate::process::{cli_at, ok, start_as, Server};

/// A node serving TLS with a certificate from a fresh CA, in `dir`.
fn serve_tls(dir: &TempDir) -> (Server, Authority) {
    serve_tls_as(dir, &[], &[])
}

/// [`serve_tls`] with more flags, and more flags for the CLI.
fn serve_tls_as(dir: &TempDir, flags: &[&str], cli_flags: &[&str]) -> (Server, Authority) {
    let ca = Authority::new("raftq test CA");
    let ca_file = ca.write(dir.path(), "ca");
    let issued = ca.issue(dir.path(), "server", &[]);
    let mut all = vec![
        "--tls-cert",
        issued.cert.to_str().expect("utf-8 path"),
        "--tls-key",
        issued.key.to_str().expect("utf-8 path"),
    ];
    all.extend_from_slice(flags);
    let server = start_as(&dir.path().join("data"), &all, Some(&ca_file), cli_flags);
    (server, ca)
}

/// The CLI flags that show `issued` as the client's certificate.
fn client_flags(issued: &Issued) -> [&str; 4] {
    [
        "--client-cert",
        issued.cert.to_str().expect("utf-8 path"),
        "--client-key",
        issued.key.to_str().expect("utf-8 path"),
    ]
}

#[test]
fn a_listener_asking_for_client_certificates_serves_the_clients_of_its_ca_only() {
    let dir = TempDir::new().expect("temp dir");
    let clients = Authority::new("client CA");
    let client_ca = clients.write(dir.path(), "client-ca");
    let member = clients.issue(dir.path(), "client", &[]);
    let (server, ca) = serve_tls_as(
        &dir,
        &["--tls-client-ca", client_ca.to_str().expect("utf-8 path")],
        &client_flags(&member),
    );
    ok(&server, &["queue", "create", "guarded"]);
    let ca_file = ca.write(dir.path(), "server-ca");
    let stranger = Authority::new("another CA").issue(dir.path(), "stranger", &[]);
    for flags in [vec![], client_flags(&stranger).to_vec()] {
        let mut args = flags.clone();
        args.extend(["queue", "list"]);
        let error = cli_at(&server.endpoint, Some(&ca_file), &args).expect_err("refused");
        assert!(!error.is_empty(), "{flags:?}");
    }
    let mut args = client_flags(&member).to_vec();
    args.extend(["queue", "list"]);
    let listed = cli_at(&server.endpoint, Some(&ca_file), &args).expect("a client of the CA");
    assert_eq!(listed["queues"][0]["name"], "guarded");
}

/// A reqwest client that trusts only `ca` (PEM).
fn trusting(ca: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).expect("PEM"))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

#[test]
fn rest_and_grpc_are_served_over_tls_on_one_port() {
    let dir = TempDir::new().expect("temp dir");
    let (server, ca) = serve_tls(&dir);
    assert!(server.endpoint.starts_with("https://"));
    ok(&server, &["queue", "create", "secure"]);
    ok(&server, &["send", "secure", "over tls"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let listed = runtime.block_on(async {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&ca.pem))
            .domain_name("localhost");
        let channel = Endpoint::from_shared(server.endpoint.clone())
            .expect("endpoint")
            .tls_config(tls)
            .expect("TLS")
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .expect("gRPC connects over TLS (ALPN h2)");
        QueuesClient::new(channel)
            .list_queues(pb::ListQueuesRequest::default())
            .await
            .expect("list over gRPC")
            .into_inner()
    });
    let names: Vec<&str> = listed.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["secure"]);
    let stats = ok(&server, &["stats", "secure"]);
    assert_eq!(stats["visible"], 1);
}

#[test]
fn clients_that_do_not_trust_the_ca_or_speak_plaintext_are_refused() {
    let dir = TempDir::new().expect("temp dir");
    let (server, _) = serve_tls(&dir);
    let stranger = Authority::new("another CA").write(dir.path(), "stranger");
    let plaintext = server.endpoint.replace("https://", "http://");
    let attempts = [
        (plaintext.as_str(), None, "cannot reach the server"),
        (server.endpoint.as_str(), None, "certificate"),
        (
            server.endpoint.as_str(),
            Some(stranger.as_path()),
            "certificate",
        ),
    ];
    for (endpoint, ca, expected) in attempts {
        let asked = Instant::now();
        let error = cli_at(endpoint, ca, &["queue", "list"]).expect_err("refused");
        assert!(error.contains(expected), "{endpoint} {ca:?}: {error}");
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "{:?}",
            asked.elapsed()
        );
    }
    // The server goes on serving the clients that trust it.
    ok(&server, &["queue", "list"]);
}

#[test]
fn a_renewed_certificate_is_served_without_dropping_open_connections() {
    let dir = TempDir::new().expect("temp dir");
    let (server, old_ca) = serve_tls(&dir);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let health = format!("{}/healthz", server.endpoint);
    let before = trusting(&old_ca.pem);
    runtime.block_on(async {
        let answer = before.get(&health).send().await.expect("healthz");
        assert!(answer.status().is_success());
        // The certificate is replaced by one of another CA, as a renewal with a new CA would.
        let new_ca = Authority::new("renewed CA");
        let renewed = new_ca.issue(dir.path(), "renewed", &[]);
        std::fs::rename(&renewed.key, dir.path().join("server.key")).expect("swap the key");
        std::fs::rename(&renewed.cert, dir.path().join("server.pem")).expect("swap the cert");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let fresh = trusting(&new_ca.pem);
            if fresh.get(&health).send().await.is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the renewed certificate is not served"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // A new connection that trusts only the old CA is refused...
        let refused = trusting(&old_ca.pem).get(&health).send().await;
        assert!(refused.is_err(), "{refused:?}");
        // ...while the connection opened before the renewal still answers.
        let answer = before
            .get(&health)
            .send()
            .await
            .expect("the open connection");
        assert!(answer.status().is_success());
    });
}
