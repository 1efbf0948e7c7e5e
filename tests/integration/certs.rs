//! Certificates for the TLS tests, made with rcgen: a CA, and certificates it signs for
//! `localhost` and `127.0.0.1`, written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// A certificate authority that signs the certificates of one test.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    /// The CA's certificate, in PEM.
    pub pem: String,
}

/// A certificate and its private key, as PEM files.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Authority {
    pub fn new(name: &str) -> Authority {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("CA certificate");
        Authority {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Writes the CA's certificate to `dir/NAME.pem`.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(format!("{name}.pem"));
        std::fs::write(&path, &self.pem).expect("write the CA certificate");
        path
    }

    /// A certificate for `localhost` and `127.0.0.1`, and the URIs in `uris`, written to
    /// `dir/NAME.pem` and `dir/NAME.key`.
    pub fn issue(&self, dir: &Path, name: &str, uris: &[String]) -> Issued {
        let key = KeyPair::generate().expect("key");
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .expect("parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        for uri in uris {
            let uri = uri.clone().try_into().expect("an IA5 URI");
            params.subject_alt_names.push(SanType::URI(uri));
        }
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        let issued = Issued {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&issued.cert, cert.pem()).expect("write the certificate");
        std::fs::write(&issued.key, key.serialize_pem()).expect("write the key");
        issued
    }
}
