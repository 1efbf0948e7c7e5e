//! API keys: the key table and the principal a key names. A REST or gRPC request names its
//! account with `Authorization: Bearer <key>`. An access key pair is for a front end that checks
//! request signatures itself (the SQS-compatible endpoint): [`Keys::access_key`] gives it the
//! secret to check a signature with and the principal the pair names. The key table maps keys to
//! accounts and roles. It comes from a TOML file with one `[[keys]]` table per credential:
//!
//! ```toml
//! [[keys]]
//! account = "acme"
//! key = "s3cret"            # or: key_sha256 = "<64 hex digits of SHA-256(key)>"
//! role = "admin"            # or "account", the default
//! not_after = 2027-06-30T00:00:00Z   # optional: the key stops working at this instant
//!
//! [[keys]]
//! account = "acme"
//! access_key_id = "AKIAACME0001"     # an access key pair instead of a bearer key
//! secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
//! ```
//!
//! Each entry holds exactly one credential: `key`, `key_sha256`, or `access_key_id` with
//! `secret_access_key`; an account with both kinds has an entry for each, so each can be rotated
//! and expire on its own. An `admin` key may also change the cluster's membership; an `account`
//! key gets `403 permission_denied` there. Only SHA-256 digests of bearer keys are kept in
//! memory, but secret access keys are kept as they are: verifying an HMAC needs the secret. Without
//! a key file the server runs in open mode ([`Keys::open`]): every request is made by an admin of
//! the account [`OPEN_ACCOUNT`], whatever its `Authorization` header says.
//!
//! The table is live: [`Keys::reload`] swaps in the file's new content for the next request, and
//! a file that does not parse leaves the table as it was.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::SystemTime;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::error::ApiError;

/// The account of every request in open mode.
pub const OPEN_ACCOUNT: &str = "dev";

/// Longest account name.
const ACCOUNT_MAX: usize = 64;

/// Longest access key id.
const ACCESS_KEY_ID_MAX: usize = 128;

/// Longest secret access key.
const SECRET_MAX: usize = 256;

/// The SHA-256 of an API key: what the table keeps, and what limits count a key by.
pub type KeyDigest = [u8; 32];

/// What a key may do besides using its account's queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Its account's queues only.
    #[default]
    Account,
    /// Also cluster operations.
    Admin,
}

/// Who a request is made by: an account, and the role of its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub account: String,
    pub role: Role,
}

/// What one key grants, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    principal: Principal,
    not_after: Option<OffsetDateTime>,
}

impl Grant {
    /// The principal, unless the key expired at or before `now`; then when it expired.
    fn principal_at(&self, now: OffsetDateTime) -> Result<&Principal, String> {
        match self.not_after {
            Some(end) if now >= end => {
                Err(end.format(&Rfc3339).unwrap_or_else(|_| end.to_string()))
            }
            _ => Ok(&self.principal),
        }
    }
}

/// A secret access key; its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// An access key pair of the table as it stands at one moment: who it names, and the secret its
/// signatures are checked with. Its `Debug` shows nothing of the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessGrant {
    pub principal: Principal,
    secret: Secret,
}

impl AccessGrant {
    /// The secret access key.
    pub fn secret(&self) -> &str {
        &self.secret.0
    }
}

/// Why [`Keys::access_key`] gives no access key pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessKeyError {
    /// The table has no such access key id (and in open mode there is no table).
    Unknown,
    /// The pair's `not_after` has passed: when it did, in RFC 3339.
    Expired { at: String },
}

/// What an access key pair grants, with the secret that verifies its signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AccessKey {
    secret: Secret,
    grant: Grant,
}

/// The credentials of a key file, by what a request shows of them.
#[derive(Debug, Default)]
struct Table {
    /// Bearer keys, by their SHA-256.
    bearer: HashMap<KeyDigest, Grant>,
    /// Access key pairs, by access key id.
    access: HashMap<String, AccessKey>,
}

impl Table {
    fn len(&self) -> usize {
        self.bearer.len() + self.access.len()
    }
}

/// The key table, or open mode. Clones share one table, which [`Keys::reload`] replaces.
#[derive(Debug, Clone)]
pub struct Keys {
    /// `None`: open mode.
    table: Option<Arc<RwLock<Arc<Table>>>>,
}

/// Why a key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("cannot read the key file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the key file is not valid TOML: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("keys[{index}]: {reason}")]
    Invalid { index: usize, reason: String },
    #[error("the key file holds no [[keys]]")]
    Empty,
    #[error("the server runs without a key file (open mode): there is no table to reload")]
    OpenMode,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    #[serde(default)]
    keys: Vec<KeyEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    account: String,
    key: Option<String>,
    key_sha256: Option<String>,
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    #[serde(default)]
    role: Role,
    not_after: Option<toml::value::Datetime>,
}

/// Reads the key table from a TOML file.
pub fn load_keys(path: impl AsRef<Path>) -> Result<Keys, KeysError> {
    Keys::from_toml(&read_key_file(path.as_ref())?)
}

fn read_key_file(path: &Path) -> Result<String, KeysError> {
    std::fs::read_to_string(path).map_err(|source| KeysError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn digest(key: &str) -> KeyDigest {
    Sha256::digest(key.as_bytes()).into()
}

impl Keys {
    /// Open mode: no keys, every request is account [`OPEN_ACCOUNT`].
    pub fn open() -> Keys {
        Keys { table: None }
    }

    /// A key table from the text of a key file.
    pub fn from_toml(text: &str) -> Result<Keys, KeysError> {
        Ok(Keys {
            table: Some(Arc::new(RwLock::new(Arc::new(parse_table(text)?)))),
        })
    }

    /// Replaces the table with the one in the key file at `path`, for every clone; returns how
    /// many keys it holds. A file that cannot be read or parsed changes nothing.
    pub fn reload(&self, path: impl AsRef<Path>) -> Result<usize, KeysError> {
        let shared = self.table.as_ref().ok_or(KeysError::OpenMode)?;
        let table = parse_table(&read_key_file(path.as_ref())?)?;
        let count = table.len();
        *shared.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
        Ok(count)
    }

    fn current(&self) -> Option<Arc<Table>> {
        let shared = self.table.as_ref()?;
        Some(Arc::clone(
            &shared.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }

    /// Whether this is open mode.
    pub fn is_open(&self) -> bool {
        self.table.is_none()
    }

    /// How many keys the table holds (0 in open mode).
    pub fn key_count(&self) -> usize {
        self.current().map_or(0, |t| t.len())
    }

    /// The digest of the key in this `Authorization` header value when it authenticates now;
    /// `None` in open mode.
    pub(crate) fn key_of(&self, authorization: Option<&[u8]>) -> Option<KeyDigest> {
        self.current()?;
        self.authenticate(authorization).ok()?;
        let header = std::str::from_utf8(authorization?).ok()?;
        bearer_token(header).map(digest)
    }

    /// Who a request with this `Authorization` header value is made by, now.
    pub(crate) fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Principal, ApiError> {
        self.authenticate_at(authorization, SystemTime::now().into())
    }

    /// Who a request with this `Authorization` header value is made by, at `now`.
    fn authenticate_at(
        &self,
        authorization: Option<&[u8]>,
        now: OffsetDateTime,
    ) -> Result<Principal, ApiError> {
        let Some(table) = self.current() else {
            return Ok(open_principal());
        };
        let header = authorization.ok_or_else(|| {
            ApiError::unauthenticated("missing Authorization header: send Bearer <api key>")
        })?;
        let key = std::str::from_utf8(header)
            .ok()
            .and_then(bearer_token)
            .ok_or_else(|| {
                ApiError::unauthenticated("the Authorization header must be Bearer <api key>")
            })?;
        let grant = table
            .bearer
            .get(&digest(key))
            .ok_or_else(|| ApiError::unauthenticated("unknown API key"))?;
        grant
            .principal_at(now)
            .cloned()
            .map_err(|end| ApiError::unauthenticated(format!("the API key expired at {end}")))
    }

    /// Who every request is made by in open mode, whatever its credentials; `None` with a key
    /// table.
    pub fn open_principal(&self) -> Option<Principal> {
        self.is_open().then(open_principal)
    }

    /// The access key pair `access_key_id` at `now`, for a front end that checks a request's
    /// signature with its secret: a request is made by its principal only once the signature
    /// holds.
    pub fn access_key(
        &self,
        access_key_id: &str,
        now: SystemTime,
    ) -> Result<AccessGrant, AccessKeyError> {
        let table = self.current().ok_or(AccessKeyError::Unknown)?;
        let access = table
            .access
            .get(access_key_id)
            .ok_or(AccessKeyError::Unknown)?;
        let principal = access
            .grant
            .principal_at(now.into())
            .map_err(|at| AccessKeyError::Expired { at })?;
        Ok(AccessGrant {
            principal: principal.clone(),
            secret: access.secret.clone(),
        })
    }
}

fn open_principal() -> Principal {
    Principal {
        account: OPEN_ACCOUNT.to_string(),
        role: Role::Admin,
    }
}

/// The table of a key file's text.
fn parse_table(text: &str) -> Result<Table, KeysError> {
    let file: KeyFile = toml::from_str(text)?;
    if file.keys.is_empty() {
        return Err(KeysError::Empty);
    }
    let mut table = Table::default();
    for (index, entry) in file.keys.into_iter().enumerate() {
        let invalid = |reason: String| KeysError::Invalid { index, reason };
        let (credential, grant) = parse_entry(entry).map_err(invalid)?;
        match credential {
            Credential::Bearer(hash) => match table.bearer.insert(hash, grant.clone()) {
                Some(other) if other.principal != grant.principal => {
                    return Err(invalid(
                        "the same key is given to two accounts, or with two roles".to_string(),
                    ))
                }
                _ => {}
            },
            Credential::Access { id, secret } => {
                if table.access.contains_key(&id) {
                    return Err(invalid(format!("access_key_id {id} is given twice")));
                }
                table.access.insert(id, AccessKey { secret, grant });
            }
        }
    }
    Ok(table)
}

/// The one credential of a key file entry.
enum Credential {
    /// A bearer key, by its SHA-256.
    Bearer(KeyDigest),
    /// An access key pair.
    Access { id: String, secret: Secret },
}

/// An entry's credential and what it grants, or why the entry is refused.
fn parse_entry(entry: KeyEntry) -> Result<(Credential, Grant), String> {
    if !valid_account(&entry.account) {
        return Err("account must be 1-64 characters of A-Z a-z 0-9 _ - .".to_string());
    }
    let credential = parse_credential(&entry)?;
    let not_after = entry
        .not_after
        .map(|at| OffsetDateTime::parse(&at.to_string(), &Rfc3339))
        .transpose()
        .map_err(|_| {
            "not_after must be a date and time with an offset, e.g. 2027-06-30T00:00:00Z"
                .to_string()
        })?;
    let principal = Principal {
        account: entry.account,
        role: entry.role,
    };
    Ok((
        credential,
        Grant {
            principal,
            not_after,
        },
    ))
}

/// Exactly one of `key`, `key_sha256`, or `access_key_id` with `secret_access_key`.
fn parse_credential(entry: &KeyEntry) -> Result<Credential, String> {
    let fields = (
        entry.key.as_deref(),
        entry.key_sha256.as_deref(),
        entry.access_key_id.as_deref(),
        entry.secret_access_key.as_deref(),
    );
    match fields {
        (Some(""), None, None, None) => Err("key must not be empty".to_string()),
        (Some(key), None, None, None) => Ok(Credential::Bearer(digest(key))),
        (None, Some(hex_digest), None, None) => parse_digest(hex_digest)
            .map(Credential::Bearer)
            .ok_or_else(|| "key_sha256 must be 64 hex digits".to_string()),
        (None, None, Some(id), Some(secret)) => {
            if !valid_access_key_id(id) {
                return Err(format!(
                    "access_key_id must be 1-{ACCESS_KEY_ID_MAX} characters of A-Z a-z 0-9 _"
                ));
            }
            if !valid_secret(secret) {
                return Err(format!(
                    "secret_access_key must be 1-{SECRET_MAX} printable ASCII characters \
                     without spaces"
                ));
            }
            Ok(Credential::Access {
                id: id.to_string(),
                secret: Secret(secret.to_string()),
            })
        }
        (None, None, Some(_), None) => Err("access_key_id needs secret_access_key".to_string()),
        (None, None, None, Some(_)) => Err("secret_access_key needs access_key_id".to_string()),
        _ => Err(
            "give exactly one credential: key, key_sha256, or access_key_id with \
                  secret_access_key"
                .to_string(),
        ),
    }
}

fn valid_account(account: &str) -> bool {
    !account.is_empty()
        && account.len() <= ACCOUNT_MAX
        && account
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn valid_access_key_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= ACCESS_KEY_ID_MAX
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn valid_secret(secret: &str) -> bool {
    !secret.is_empty() && secret.len() <= SECRET_MAX && secret.bytes().all(|b| b.is_ascii_graphic())
}

fn parse_digest(text: &str) -> Option<KeyDigest> {
    let bytes = hex::decode(text.trim()).ok()?;
    bytes.try_into().ok()
}

/// The token of `Bearer <token>` (the scheme is case-insensitive).
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl Principal {
    pub(crate) fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// Refuses a cluster operation to a key without the admin role.
    pub(crate) fn require_admin(&self) -> Result<(), ApiError> {
        match self.role {
            Role::Admin => Ok(()),
            Role::Account => Err(ApiError::permission_denied(
                "cluster operations need a key with role = \"admin\"",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
        [[keys]]
        account = "acme"
        key = "alpha"

        [[keys]]
        account = "globex"
        key_sha256 = "8b8b5f3b9e7e4b9c5b3bfbd2b8c8c1c1e1f5b4d2f5b3c3a1e1b2c3d4e5f60718"
    "#;

    #[test]
    fn keys_map_to_accounts() {
        let keys = Keys::from_toml(FILE).unwrap();
        assert!(!keys.is_open());
        assert_eq!(keys.key_count(), 2);
        let acme = Principal {
            account: "acme".into(),
            role: Role::Account,
        };
        assert_eq!(keys.authenticate(Some(b"Bearer alpha")).unwrap(), acme);
        assert_eq!(keys.authenticate(Some(b"bearer  alpha ")).unwrap(), acme);
        for bad in [
            None,
            Some(&b"Bearer beta"[..]),
            Some(b"alpha"),
            Some(b"Basic alpha"),
        ] {
            let e = keys.authenticate(bad).unwrap_err();
            assert_eq!(e.code, "unauthenticated");
        }
    }

    #[test]
    fn a_key_is_counted_by_its_digest_only_when_it_authenticates() {
        let keys = Keys::from_toml(FILE).unwrap();
        assert_eq!(keys.key_of(Some(b"Bearer alpha")), Some(digest("alpha")));
        assert_eq!(keys.key_of(Some(b"Bearer beta")), None);
        assert_eq!(keys.key_of(None), None);
        assert_eq!(Keys::open().key_of(Some(b"Bearer alpha")), None);
    }

    #[test]
    fn hashed_keys_match_the_sha256_of_the_key() {
        let text = format!(
            "[[keys]]\naccount = \"a\"\nkey_sha256 = \"{}\"\n",
            hex::encode(digest("k"))
        );
        let keys = Keys::from_toml(&text).unwrap();
        assert_eq!(keys.authenticate(Some(b"Bearer k")).unwrap().account, "a");
    }

    #[test]
    fn open_mode_is_an_admin_of_account_dev() {
        let keys = Keys::open();
        assert!(keys.is_open());
        let principal = keys.authenticate(None).unwrap();
        assert_eq!(principal.account, OPEN_ACCOUNT);
        assert_eq!(principal.role, Role::Admin);
    }

    #[test]
    fn only_admin_keys_may_do_cluster_operations() {
        let text = "[[keys]]\naccount = \"ops\"\nkey = \"root\"\nrole = \"admin\"\n\
                    [[keys]]\naccount = \"acme\"\nkey = \"user\"\nrole = \"account\"\n\
                    [[keys]]\naccount = \"globex\"\nkey = \"plain\"\n";
        let keys = Keys::from_toml(text).unwrap();
        let root = keys.authenticate(Some(b"Bearer root")).unwrap();
        assert_eq!(root.role, Role::Admin);
        assert!(root.require_admin().is_ok());
        for key in [&b"Bearer user"[..], b"Bearer plain"] {
            let principal = keys.authenticate(Some(key)).unwrap();
            assert_eq!(principal.role, Role::Account);
            let e = principal.require_admin().unwrap_err();
            assert_eq!((e.status.as_u16(), e.code), (403, "permission_denied"));
        }
    }

    #[test]
    fn a_key_stops_working_at_its_not_after() {
        let text = "[[keys]]\naccount = \"a\"\nkey = \"k\"\nnot_after = 2027-06-30T12:00:00Z\n";
        let keys = Keys::from_toml(text).unwrap();
        let end = OffsetDateTime::parse("2027-06-30T12:00:00Z", &Rfc3339).unwrap();
        let before = end - time::Duration::seconds(1);
        let principal = keys.authenticate_at(Some(b"Bearer k"), before).unwrap();
        assert_eq!(principal.account, "a");
        let e = keys.authenticate_at(Some(b"Bearer k"), end).unwrap_err();
        assert_eq!(e.code, "unauthenticated");
        assert!(
            e.message.contains("expired at 2027-06-30T12:00:00Z"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_reload_swaps_the_table_for_every_clone_and_a_bad_file_changes_nothing() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("keys.toml");
        std::fs::write(&path, "[[keys]]\naccount = \"a\"\nkey = \"old\"\n").unwrap();
        let keys = load_keys(&path).unwrap();
        let shared = keys.clone();
        std::fs::write(&path, "[[keys]]\naccount = \"a\"\nkey = \"new\"\n").unwrap();
        assert_eq!(keys.reload(&path).unwrap(), 1);
        assert!(shared.authenticate(Some(b"Bearer new")).is_ok());
        let e = shared.authenticate(Some(b"Bearer old")).unwrap_err();
        assert_eq!(e.code, "unauthenticated");
        std::fs::write(&path, "[[keys]]\naccount = \"a\"\n").unwrap();
        assert!(matches!(keys.reload(&path), Err(KeysError::Invalid { .. })));
        assert!(shared.authenticate(Some(b"Bearer new")).is_ok());
        assert!(matches!(
            Keys::open().reload(&path),
            Err(KeysError::OpenMode)
        ));
    }

    #[test]
    fn bad_key_files_are_refused() {
        let bad = [
            "",
            "[[keys]]\naccount = \"a\"\n",
            "[[keys]]\naccount = \"a\"\nkey = \"k\"\nkey_sha256 = \"00\"\n",
            "[[keys]]\naccount = \"a\"\nkey_sha256 = \"xyz\"\n",
            "[[keys]]\naccount = \"a:b\"\nkey = \"k\"\n",
            "[[keys]]\naccount = \"a\"\nkey = \"k\"\n[[keys]]\naccount = \"b\"\nkey = \"k\"\n",
            "[[keys]]\naccount = \"a\"\nkey = \"k\"\nrole = \"root\"\n",
            "[[keys]]\naccount = \"a\"\nkey = \"k\"\nscope = \"all\"\n",
            "[[keys]]\naccount = \"a\"\nkey = \"k\"\nnot_after = 2027-06-30\n",
            "[[keys]]\naccount = \"a\"\nkey = \"k\"\nnot_after = \"soon\"\n",
            "not toml",
        ];
        for text in bad {
            assert!(Keys::from_toml(text).is_err(), "{text:?}");
        }
    }

    const PAIR: &str = "access_key_id = \"AKIA1\"\nsecret_access_key = \"s3cret/KEY+1\"\n";

    #[test]
    fn access_key_pairs_are_kept_apart_from_bearer_keys() {
        let text = format!(
            "[[keys]]\naccount = \"acme\"\nkey = \"alpha\"\n[[keys]]\naccount = \"acme\"\n{PAIR}"
        );
        let keys = Keys::from_toml(&text).unwrap();
        assert_eq!(keys.key_count(), 2);
        let table = keys.current().unwrap();
        let access = &table.access["AKIA1"];
        assert_eq!(access.secret, Secret("s3cret/KEY+1".into()));
        assert_eq!(access.grant.principal.account, "acme");
        assert_eq!(access.grant.principal.role, Role::Account);
        let e = keys.authenticate(Some(b"Bearer AKIA1")).unwrap_err();
        assert_eq!(e.code, "unauthenticated");
        let e = keys.authenticate(Some(b"Bearer s3cret/KEY+1")).unwrap_err();
        assert_eq!(e.code, "unauthenticated");
        assert!(keys.authenticate(Some(b"Bearer alpha")).is_ok());
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let keys = Keys::from_toml(&format!("[[keys]]\naccount = \"acme\"\n{PAIR}")).unwrap();
        let shown = format!("{keys:?}");
        assert!(shown.contains("AKIA1"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn bad_access_key_entries_are_refused_naming_the_field() {
        let cases = [
            (
                "access_key_id = \"AKIA1\"\n".to_string(),
                "keys[0]: access_key_id needs secret_access_key",
            ),
            (
                "secret_access_key = \"s\"\n".to_string(),
                "keys[0]: secret_access_key needs access_key_id",
            ),
            (
                format!("key = \"k\"\n{PAIR}"),
                "keys[0]: give exactly one credential: key, key_sha256, or access_key_id with \
                 secret_access_key",
            ),
            (
                "access_key_id = \"AKIA/1\"\nsecret_access_key = \"s\"\n".to_string(),
                "keys[0]: access_key_id must be 1-128 characters of A-Z a-z 0-9 _",
            ),
            (
                format!(
                    "access_key_id = \"{}\"\nsecret_access_key = \"s\"\n",
                    "A".repeat(129)
                ),
                "keys[0]: access_key_id must be 1-128 characters of A-Z a-z 0-9 _",
            ),
            (
                "access_key_id = \"AKIA1\"\nsecret_access_key = \"\"\n".to_string(),
                "keys[0]: secret_access_key must be 1-256 printable ASCII characters without \
                 spaces",
            ),
            (
                "access_key_id = \"AKIA1\"\nsecret_access_key = \"two words\"\n".to_string(),
                "keys[0]: secret_access_key must be 1-256 printable ASCII characters without \
                 spaces",
            ),
            (
                format!("{PAIR}[[keys]]\naccount = \"b\"\n{PAIR}"),
                "keys[1]: access_key_id AKIA1 is given twice",
            ),
        ];
        for (entry, message) in cases {
            let text = format!("[[keys]]\naccount = \"a\"\n{entry}");
            let e = Keys::from_toml(&text).unwrap_err();
            assert!(matches!(e, KeysError::Invalid { .. }), "{text}: {e:?}");
            assert_eq!(e.to_string(), message, "{text}");
        }
    }

    #[test]
    fn an_access_key_gives_its_principal_and_secret_until_its_not_after() {
        let text = format!(
            "[[keys]]\naccount = \"acme\"\nkey = \"alpha\"\n\
             [[keys]]\naccount = \"acme\"\nrole = \"admin\"\n{PAIR}\
             [[keys]]\naccount = \"old\"\naccess_key_id = \"AKIAOLD\"\nsecret_access_key = \"s\"\n\
             not_after = 2027-06-30T12:00:00Z\n"
        );
        let keys = Keys::from_toml(&text).unwrap();
        assert_eq!(keys.open_principal(), None);
        let end = OffsetDateTime::parse("2027-06-30T12:00:00Z", &Rfc3339).unwrap();
        let before = (end - time::Duration::seconds(1)).into();
        let access = keys.access_key("AKIA1", end.into()).unwrap();
        assert_eq!(access.secret(), "s3cret/KEY+1");
        let acme = Principal {
            account: "acme".into(),
            role: Role::Admin,
        };
        assert_eq!(access.principal, acme);
        assert!(!format!("{access:?}").contains("s3cret"));
        assert_eq!(
            keys.access_key("AKIAOLD", before)
                .unwrap()
                .principal
                .account,
            "old"
        );
        assert_eq!(
            keys.access_key("AKIAOLD", end.into()),
            Err(AccessKeyError::Expired {
                at: "2027-06-30T12:00:00Z".into()
            })
        );
        for unknown in ["AKIA2", "alpha", "s3cret/KEY+1"] {
            assert_eq!(
                keys.access_key(unknown, end.into()),
                Err(AccessKeyError::Unknown),
                "{unknown}"
            );
        }
    }

    #[test]
    fn open_mode_has_no_access_keys_and_one_principal_for_all() {
        let keys = Keys::open();
        assert_eq!(keys.open_principal(), Some(open_principal()));
        assert_eq!(
            keys.access_key("AKIA1", SystemTime::now()),
            Err(AccessKeyError::Unknown)
        );
    }

    #[test]
    fn a_reload_swaps_access_keys_and_a_bad_file_changes_nothing() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("keys.toml");
        let pair = |id: &str| {
            format!(
                "[[keys]]\naccount = \"a\"\naccess_key_id = \"{id}\"\nsecret_access_key = \"s\"\n"
            )
        };
        std::fs::write(&path, pair("OLD")).unwrap();
        let keys = load_keys(&path).unwrap();
        let shared = keys.clone();
        std::fs::write(&path, pair("NEW")).unwrap();
        assert_eq!(keys.reload(&path).unwrap(), 1);
        let table = shared.current().unwrap();
        assert!(table.access.contains_key("NEW"));
        assert!(!table.access.contains_key("OLD"));
        std::fs::write(&path, "[[keys]]\naccount = \"a\"\naccess_key_id = \"X\"\n").unwrap();
        assert!(matches!(keys.reload(&path), Err(KeysError::Invalid { .. })));
        assert!(shared.current().unwrap().access.contains_key("NEW"));
    }
}
