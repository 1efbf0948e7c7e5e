//! TLS configurations read from PEM files: the client listener's (a certificate chain and its
//! private key, TLS 1.2 and 1.3, ALPN offering HTTP/2 for gRPC and HTTP/1.1 on the same port)
//! and the peers' mutual TLS (`raftq_node::tls`). An error names the file it comes from.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use raftq_node::tls::{certificates, client_verifier, private_key, provider, PeerTls};
use rustls::ServerConfig;

/// Why a certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{}: {reason}", path.display())]
    File { path: PathBuf, reason: String },
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The content of `path`, checked by `check` (which says what is wrong with it).
fn read<T, E: ToString>(
    path: &Path,
    check: impl FnOnce(&[u8]) -> Result<T, E>,
) -> Result<(Vec<u8>, T), TlsError> {
    let file_error = |reason: String| TlsError::File {
        path: path.to_path_buf(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| file_error(e.to_string()))?;
    let checked = check(&pem).map_err(|e| file_error(e.to_string()))?;
    Ok((pem, checked))
}

/// The client listener's configuration from the certificate chain at `cert` and the key at
/// `key`; with `client_ca`, every client must also show a certificate of that CA (besides its
/// API key).
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let (_, chain) = read(cert, certificates)?;
    let (_, key) = read(key, private_key)?;
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let (_, verifier) = read(path, |pem| client_verifier(certificates(pem)?))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Mutual TLS with the peers from this node's certificate at `cert` (which names its node id),
/// its key at `key` and the cluster's CA certificates at `ca`.
pub fn peer_tls(cert: &Path, key: &Path, ca: &Path) -> Result<PeerTls, TlsError> {
    let (cert_pem, _) = read(cert, certificates)?;
    let (key_pem, _) = read(key, private_key)?;
    let (ca_pem, _) = read(ca, certificates)?;
    read(cert, |_| PeerTls::from_pem(&cert_pem, &key_pem, &ca_pem)).map(|(_, tls)| tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_wrong_file_is_named_in_the_error() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let missing = dir.path().join("missing.pem");
        let text = dir.path().join("text.pem");
        std::fs::write(&text, "not a certificate").expect("write");
        for (cert, key) in [(&missing, &text), (&text, &text)] {
            let e = server_config(cert, key, None)
                .expect_err("refused")
                .to_string();
            assert!(e.contains(&cert.display().to_string()), "{e}");
        }
        let issued = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        let cert = dir.path().join("cert.pem");
        std::fs::write(&cert, issued.cert.pem()).expect("write");
        let e = server_config(&cert, &text, None)
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("no private key") && e.contains("text.pem"),
            "{e}"
        );
        let key = dir.path().join("key.pem");
        std::fs::write(&key, issued.signing_key.serialize_pem()).expect("write");
        let config = server_config(&cert, &key, None).expect("a certificate and its key");
        assert_eq!(
            config.alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let e = peer_tls(&cert, &key, &cert)
            .expect_err("no node id")
            .to_string();
        assert!(
            e.contains("names no node id") && e.contains("cert.pem"),
            "{e}"
        );
    }
}
