//! Mutual TLS between peers.
//!
//! Every node holds a certificate of the cluster's CA that names its node id as a URI subject
//! alternative name ([`node_uri`]: `spiffe://raftq/node/<id>`) and its peer address's host (a
//! DNS name or an IP address). The peer listener accepts a connection only when the other side
//! shows a certificate of that CA (a handshake without one, or with another CA's, is refused and
//! logged); the peer service then admits a call only from a member of the current membership,
//! by the id its certificate names (`service`). Calling out, a node checks the peer's
//! certificate against the same CA and the host of the peer's address, and shows its own.
//!
//! ring is the one crypto provider, named here, so that nothing depends on a process-wide
//! default.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use raftq_store::NodeId;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

/// What a node's certificate names it by, before its id.
const NODE_URI_PREFIX: &str = "spiffe://raftq/node/";

/// How long a peer has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Handshakes under way at once, at most: a flood of connections that never finish theirs
/// holds this many tasks, not one per connection.
const HANDSHAKES: usize = 256;

/// The URI subject alternative name of node `id`'s certificate.
pub fn node_uri(id: NodeId) -> String {
    format!("{NODE_URI_PREFIX}{id}")
}

/// Why PEM text or a certificate could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("not PEM certificates: {0}")]
    Certificates(String),
    #[error("holds no PEM certificate")]
    NoCertificate,
    #[error("no private key: {0}")]
    PrivateKey(String),
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("the CA certificates cannot verify peers: {0}")]
    Authority(#[from] rustls::server::VerifierBuilderError),
    #[error(
        "the certificate names no node id (a URI subject alternative name {NODE_URI_PREFIX}<id>)"
    )]
    NoNodeId,
}

/// The certificates of PEM text, in order (the leaf first): at least one.
pub fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Certificates(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    Ok(chain)
}

/// The private key of PEM text (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| TlsError::PrivateKey(e.to_string()))
}

/// The crypto provider of every TLS configuration of raftq.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A store of `authorities`, the certificates trusted.
fn roots(authorities: Vec<CertificateDer<'static>>) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for authority in authorities {
        roots.add(authority)?;
    }
    Ok(roots)
}

/// A verifier that asks every client for a certificate of one of `authorities`.
pub fn client_verifier(
    authorities: Vec<CertificateDer<'static>>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let roots = Arc::new(roots(authorities)?);
    Ok(WebPkiClientVerifier::builder_with_provider(roots, provider()).build()?)
}

/// What a call to a peer goes out with, from PEM text: the CA certificates its certificate must
/// be of, and the certificate chain and private key this side shows (`None`: none, which peers
/// refuse). It speaks HTTP/2 (ALPN `h2`).
pub fn client_config(
    ca: &[u8],
    identity: Option<(&[u8], &[u8])>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(certificates(ca)?)?);
    let mut config = match identity {
        Some((cert, key)) => {
            builder.with_client_auth_cert(certificates(cert)?, private_key(key)?)?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The node id a certificate names, if it names one.
pub fn node_id_of(cert: &CertificateDer<'_>) -> Option<NodeId> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let names = parsed.subject_alternative_name().ok()??;
    names
        .value
        .general_names
        .iter()
        .find_map(|name| match name {
            x509_parser::extensions::GeneralName::URI(uri) => {
                uri.strip_prefix(NODE_URI_PREFIX)?.parse().ok()
            }
            _ => None,
        })
}

/// A node's side of mutual TLS with its peers: what it accepts and what it calls out with.
#[derive(Debug, Clone)]
pub struct PeerTls {
    /// The node id this node's certificate names.
    pub node_id: NodeId,
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl PeerTls {
    /// From PEM text: this node's certificate chain, its private key and the cluster's CA
    /// certificates. The certificate must name a node id.
    pub fn from_pem(cert: &[u8], key: &[u8], ca: &[u8]) -> Result<PeerTls, TlsError> {
        let chain = certificates(cert)?;
        let node_id = node_id_of(&chain[0]).ok_or(TlsError::NoNodeId)?;
        let verifier = client_verifier(certificates(ca)?)?;
        let mut server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, private_key(key)?)?;
        server.alpn_protocols = vec![b"h2".to_vec()];
        let client = client_config(ca, Some((cert, key)))?;
        Ok(PeerTls {
            node_id,
            server: Arc::new(server),
            client,
        })
    }

    /// What calls to peers go out with.
    pub(crate) fn client(&self) -> Arc<ClientConfig> {
        Arc::clone(&self.client)
    }

    /// The connections of `listener` that completed a TLS handshake with a certificate of the
    /// cluster's CA; refused handshakes are logged with their remote address. Accepting ends
    /// when the stream is dropped.
    pub(crate) fn accept(
        &self,
        listener: TcpListener,
    ) -> ReceiverStream<io::Result<TlsStream<TcpStream>>> {
        let acceptor = TlsAcceptor::from(Arc::clone(&self.server));
        let (ready, stream) = tokio::sync::mpsc::channel(64);
        let handshakes = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let Ok(place) = Arc::clone(&handshakes).acquire_owned().await else {
                    return;
                };
                let (tcp, remote) = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok(accepted) => accepted,
                        Err(e) => {
                            tracing::warn!(error = %e, "peer listener cannot accept");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                    () = ready.closed() => return,
                };
                // No Nagle delays on small replies (gRPC writes headers, message and trailers
                // apart).
                let _ = tcp.set_nodelay(true);
                let (acceptor, ready) = (acceptor.clone(), ready.clone());
                tokio::spawn(async move {
                    let _place = place;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = ready.send(Ok(tls)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(%remote, error = %e, "peer connection refused: TLS handshake failed");
                        }
                        Err(_) => {
                            tracing::warn!(%remote, "peer connection refused: TLS handshake timed out");
                        }
                    }
                });
            }
        });
        ReceiverStream::new(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issued(names: Vec<rcgen::SanType>) -> (String, String) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.subject_alt_names = names;
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("certificate");
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn the_node_id_is_read_from_the_uri_name() {
        let (cert, _) = issued(vec![
            rcgen::SanType::DnsName("node7".try_into().expect("name")),
            rcgen::SanType::URI(node_uri(7).try_into().expect("uri")),
        ]);
        let chain = certificates(cert.as_bytes()).expect("pem");
        assert_eq!(node_id_of(&chain[0]), Some(7));
        let (other, _) = issued(vec![rcgen::SanType::URI(
            "spiffe://elsewhere/node/7".try_into().expect("uri"),
        )]);
        assert_eq!(
            node_id_of(&certificates(other.as_bytes()).expect("pem")[0]),
            None
        );
    }

    #[test]
    fn a_certificate_without_a_node_id_or_key_is_refused() {
        let (cert, key) = issued(vec![rcgen::SanType::DnsName(
            "node1".try_into().expect("name"),
        )]);
        let e = PeerTls::from_pem(cert.as_bytes(), key.as_bytes(), cert.as_bytes())
            .expect_err("no node id");
        assert!(matches!(e, TlsError::NoNodeId), "{e}");
        let (cert, key) = issued(vec![rcgen::SanType::URI(
            node_uri(1).try_into().expect("uri"),
        )]);
        let e = PeerTls::from_pem(cert.as_bytes(), b"no key", cert.as_bytes()).expect_err("no key");
        assert!(matches!(e, TlsError::PrivateKey(_)), "{e}");
        assert!(matches!(
            certificates(b"text").expect_err("no certificate"),
            TlsError::NoCertificate
        ));
        let tls = PeerTls::from_pem(cert.as_bytes(), key.as_bytes(), cert.as_bytes())
            .expect("a node certificate");
        assert_eq!(tls.node_id, 1);
    }
}
