//! `raftq certs`: a development CA and node certificates for a cluster with TLS on its client
//! listeners and mutual TLS between its peers, and client certificates for listeners that ask
//! clients for one (`--tls-client-ca`). Each node certificate names its node id
//! (`raftq_node::tls::node_uri`) and the hosts it is reached by, and serves both as the client
//! listener's certificate and as the node's peer certificate. Files that exist are kept, so a
//! second run adds certificates under the same CA. Production clusters bring their own CA.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// Flags of `raftq certs`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Where the files go: `ca.pem` and `ca-key.pem`, `node-<ID>.pem` and `node-<ID>-key.pem`.
    #[arg(long, default_value = "./certs")]
    pub dir: PathBuf,
    /// A node certificate: `ID=HOST[,HOST...]`, the DNS names or IP addresses its peers and
    /// clients reach it by (`localhost` and `127.0.0.1` are always added). Repeat for each node.
    #[arg(long = "node", value_parser = parse_node)]
    pub nodes: Vec<NodeSpec>,
    /// A client certificate named NAME (`client-NAME.pem`, `client-NAME-key.pem`; letters,
    /// digits, `_`, `-` and `.`). Repeat for each client.
    #[arg(long = "client", value_parser = parse_client)]
    pub clients: Vec<String>,
}

/// One node certificate to make.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub id: u64,
    pub hosts: Vec<String>,
}

/// Why the certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Authority { path: PathBuf, source: rcgen::Error },
    #[error("{name}: {source}")]
    Certificate { name: String, source: rcgen::Error },
}

fn parse_client(name: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.starts_with('.') || !name.chars().all(allowed) {
        return Err(format!(
            "`{name}` must be letters, digits, `_`, `-` and `.`, not starting with `.`"
        ));
    }
    Ok(name.to_string())
}

fn parse_node(text: &str) -> Result<NodeSpec, String> {
    let (id, hosts) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not ID=HOST[,HOST...]"))?;
    let id = id
        .trim()
        .parse()
        .map_err(|_| format!("`{id}` is not a node id"))?;
    let hosts: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(String::from)
        .collect();
    if hosts.is_empty() {
        return Err(format!("node {id}: at least one host is required"));
    }
    Ok(NodeSpec { id, hosts })
}

/// Makes what is missing in `args.dir` and says which files it wrote.
pub fn run(args: &CertsArgs) -> Result<(), CertsError> {
    std::fs::create_dir_all(&args.dir).map_err(|source| CertsError::File {
        path: args.dir.clone(),
        source,
    })?;
    let (ca_path, ca_key_path) = (args.dir.join("ca.pem"), args.dir.join("ca-key.pem"));
    if !ca_path.exists() {
        let (cert, key) = authority().map_err(|source| CertsError::Authority {
            path: ca_path.clone(),
            source,
        })?;
        write(&ca_key_path, &key, true)?;
        write(&ca_path, &cert, false)?;
    }
    let authority_error = |source| CertsError::Authority {
        path: ca_path.clone(),
        source,
    };
    let ca_key = KeyPair::from_pem(&read(&ca_key_path)?).map_err(authority_error)?;
    let issuer = Issuer::from_ca_cert_pem(&read(&ca_path)?, ca_key).map_err(authority_error)?;
    let nodes = args
        .nodes
        .iter()
        .map(|node| (format!("node-{}", node.id), node_params(node)));
    let clients = args
        .clients
        .iter()
        .map(|name| (format!("client-{name}"), client_params(name)));
    for (name, params) in nodes.chain(clients) {
        let path = args.dir.join(format!("{name}.pem"));
        if path.exists() {
            continue;
        }
        let certificate_error = |source| CertsError::Certificate {
            name: name.clone(),
            source,
        };
        let key = KeyPair::generate().map_err(certificate_error)?;
        let cert = params
            .and_then(|params| params.signed_by(&key, &issuer))
            .map_err(certificate_error)?;
        write(
            &args.dir.join(format!("{name}-key.pem")),
            &key.serialize_pem(),
            true,
        )?;
        write(&path, &cert.pem(), false)?;
    }
    Ok(())
}

/// A new CA: its certificate and key, PEM.
fn authority() -> Result<(String, String), rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "raftq development CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate()?;
    Ok((params.self_signed(&key)?.pem(), key.serialize_pem()))
}

/// What a certificate for `node` holds: for servers and clients both.
fn node_params(node: &NodeSpec) -> Result<CertificateParams, rcgen::Error> {
    let mut hosts = node.hosts.clone();
    for local in ["localhost", "127.0.0.1"] {
        if !hosts.iter().any(|h| h == local) {
            hosts.push(local.into());
        }
    }
    let mut params = CertificateParams::new(hosts)?;
    params
        .subject_alt_names
        .push(SanType::URI(raftq_node::tls::node_uri(node.id).try_into()?));
    params
        .distinguished_name
        .push(DnType::CommonName, format!("raftq node {}", node.id));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    Ok(params)
}

/// What a certificate for the client `name` holds: for clients only.
fn client_params(name: &str) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    Ok(params)
}

fn read(path: &Path) -> Result<String, CertsError> {
    std::fs::read_to_string(path).map_err(|source| CertsError::File {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a new file (a private key readable by its owner only) and names it on stdout.
fn write(path: &Path, content: &str, private: bool) -> Result<(), CertsError> {
    let file_error = |source| CertsError::File {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(file_error)?;
    file.write_all(content.as_bytes()).map_err(file_error)?;
    println!("{}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_certificates_are_issued_once_under_one_authority() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let args = |nodes: &[&str]| CertsArgs {
            dir: dir.path().to_path_buf(),
            nodes: nodes.iter().map(|n| parse_node(n).expect("node")).collect(),
            clients: vec!["ops".into()],
        };
        run(&args(&["1=node1", "2=node2,10.0.0.2"])).expect("first run");
        assert!(dir.path().join("client-ops.pem").exists());
        assert!(dir.path().join("client-ops-key.pem").exists());
        let first = read(&dir.path().join("node-1.pem")).expect("node 1");
        run(&args(&["1=node1", "3=node3"])).expect("second run");
        assert_eq!(read(&dir.path().join("node-1.pem")).expect("node 1"), first);
        for id in 1..=3 {
            let pem = |name: String| std::fs::read(dir.path().join(name)).expect("file");
            let tls = raftq_node::tls::PeerTls::from_pem(
                &pem(format!("node-{id}.pem")),
                &pem(format!("node-{id}-key.pem")),
                &pem("ca.pem".into()),
            )
            .expect("a node certificate of the CA");
            assert_eq!(tls.node_id, id);
        }
        assert!(parse_node("1").is_err());
        assert!(parse_node("x=node1").is_err());
        assert!(parse_node("1=").is_err());
        assert!(parse_client("../x").is_err() && parse_client(".x").is_err());
        assert!(parse_client("ops-1.a_b").is_ok());
    }
}
