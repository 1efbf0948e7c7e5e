//! TLS of the gRPC driver's connections: the nodes' certificates must be of a given CA and name
//! the node, by default the endpoint's host. A node reached by an address its certificate does
//! not name (a container's address on its Docker network, where the certificate names the
//! container's host name) is checked against a name given for it instead: the chain, the
//! validity and the handshake's signatures are checked as always, only the name differs.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// A client configuration speaking HTTP/2 that trusts the CA certificates of `ca_pem`; with
/// `name`, a node's certificate must name `name` whatever address the connection went to.
pub fn client_config(ca_pem: &[u8], name: Option<&str>) -> Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(cert.context("reading the CA certificates")?)
            .context("adding a CA certificate")?;
    }
    if roots.is_empty() {
        bail!("the CA file holds no certificate");
    }
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let mut config = match name {
        None => builder.with_root_certificates(roots).with_no_client_auth(),
        Some(name) => {
            let verifier = Named::new(Arc::new(roots), provider, name)?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The usual verification of a server's certificate, for one fixed name.
#[derive(Debug)]
struct Named {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl Named {
    fn new(
        roots: Arc<RootCertStore>,
        provider: Arc<rustls::crypto::CryptoProvider>,
        name: &str,
    ) -> Result<Named> {
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider).build()?;
        let name =
            ServerName::try_from(name.to_string()).map_err(|e| anyhow!("TLS name {name}: {e}"))?;
        Ok(Named { inner, name })
    }
}

impl ServerCertVerifier for Named {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _connected_to: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

    /// A CA (its PEM) and a certificate it issued for `host`.
    fn ca_and_leaf(host: &str) -> (String, CertificateDer<'static>) {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().expect("key");
        let ca = params.self_signed(&ca_key).expect("CA");
        let issuer = Issuer::new(params, ca_key);
        let leaf_key = KeyPair::generate().expect("key");
        let leaf = CertificateParams::new(vec![host.to_string()])
            .expect("params")
            .signed_by(&leaf_key, &issuer)
            .expect("leaf");
        (ca.pem(), leaf.der().clone())
    }

    #[test]
    fn a_named_node_is_checked_for_its_name_not_the_address_connected_to() {
        let (ca, leaf) = ca_and_leaf("node1");
        let roots = |pem: &str| {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                roots.add(cert.expect("pem")).expect("root");
            }
            Arc::new(roots)
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let address = ServerName::try_from("172.18.0.3").expect("address");
        let verify = |name: &str, ca: &str| {
            Named::new(roots(ca), Arc::clone(&provider), name)
                .expect("verifier")
                .verify_server_cert(&leaf, &[], &address, &[], UnixTime::now())
        };
        assert!(verify("node1", &ca).is_ok());
        assert!(verify("node2", &ca).is_err(), "another node's name");
        let (other_ca, _) = ca_and_leaf("node1");
        assert!(verify("node1", &other_ca).is_err(), "another CA");
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        assert!(client_config(b"not a certificate", None).is_err());
        let (ca, _) = ca_and_leaf("node1");
        let config = client_config(ca.as_bytes(), Some("node1")).expect("config");
        assert_eq!(config.alpn_protocols, [b"h2".to_vec()]);
    }
}
