//! API keys: the key table and the principal a key names. A request names its account with `Authorization: Bearer <key>`; the key table maps
//! keys to accounts and roles. The table comes from a TOML file with one `[[keys]]` table per key:
//!
//! ```toml
//! [[keys]]
//! account = "acme"
//! key = "s3cret"            # or: key_sha256 = "<64 hex digits of SHA-256(key)>"
//! role = "admin"            # or "account", the default
//! ```
//!
//! An `admin` key may also change the cluster's membership; an `account` key gets `403
//! permission_denied` there. Only SHA-256 digests of the keys are kept in memory. Without a key
//! file the server runs in open mode ([`Keys::open`]): every request is made by an admin of the
//! account [`OPEN_ACCOUNT`] and the `Authorization` header is ignored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// The account of every request in open mode.
pub const OPEN_ACCOUNT: &str = "dev";

/// Longest account name.
const ACCOUNT_MAX: usize = 64;

type Digest32 = [u8; 32];

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
pub(crate) struct Principal {
    pub account: String,
    pub role: Role,
}

/// The key table, or open mode.
#[derive(Debug, Clone)]
pub struct Keys {
    /// `None`: open mode.
    table: Option<Arc<HashMap<Digest32, Principal>>>,
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
    #[serde(default)]
    role: Role,
}

/// Reads the key table from a TOML file.
pub fn load_keys(path: impl AsRef<Path>) -> Result<Keys, KeysError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| KeysError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Keys::from_toml(&text)
}

fn digest(key: &str) -> Digest32 {
    Sha256::digest(key.as_bytes()).into()
}

impl Keys {
    /// Open mode: no keys, every request is account [`OPEN_ACCOUNT`].
    pub fn open() -> Keys {
        Keys { table: None }
    }

    /// A key table from the text of a key file.
    pub fn from_toml(text: &str) -> Result<Keys, KeysError> {
        let file: KeyFile = toml::from_str(text)?;
        if file.keys.is_empty() {
            return Err(KeysError::Empty);
        }
        let mut table = HashMap::with_capacity(file.keys.len());
        for (index, entry) in file.keys.into_iter().enumerate() {
            let invalid = |reason: &str| KeysError::Invalid {
                index,
                reason: reason.to_string(),
            };
            if !valid_account(&entry.account) {
                return Err(invalid(
                    "account must be 1-64 characters of A-Z a-z 0-9 _ - .",
                ));
            }
            let hash = match (entry.key, entry.key_sha256) {
                (Some(key), None) if !key.is_empty() => digest(&key),
                (Some(_), None) => return Err(invalid("key must not be empty")),
                (None, Some(hex_digest)) => parse_digest(&hex_digest)
                    .ok_or_else(|| invalid("key_sha256 must be 64 hex digits"))?,
                _ => return Err(invalid("give exactly one of key and key_sha256")),
            };
            let principal = Principal {
                account: entry.account,
                role: entry.role,
            };
            match table.insert(hash, principal.clone()) {
                Some(other) if other != principal => {
                    return Err(invalid(
                        "the same key is given to two accounts, or with two roles",
                    ))
                }
                _ => {}
            }
        }
        Ok(Keys {
            table: Some(Arc::new(table)),
        })
    }

    /// Whether this is open mode.
    pub fn is_open(&self) -> bool {
        self.table.is_none()
    }

    /// How many keys the table holds (0 in open mode).
    pub fn key_count(&self) -> usize {
        self.table.as_ref().map_or(0, |t| t.len())
    }

    /// Who a request with this `Authorization` header value is made by.
    pub(crate) fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Principal, ApiError> {
        let Some(table) = &self.table else {
            return Ok(Principal {
                account: OPEN_ACCOUNT.to_string(),
                role: Role::Admin,
            });
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
        table
            .get(&digest(key))
            .cloned()
            .ok_or_else(|| ApiError::unauthenticated("unknown API key"))
    }
}

fn valid_account(account: &str) -> bool {
    !account.is_empty()
        && account.len() <= ACCOUNT_MAX
        && account
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn parse_digest(text: &str) -> Option<Digest32> {
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
            "not toml",
        ];
        for text in bad {
            assert!(Keys::from_toml(text).is_err(), "{text:?}");
        }
    }
}
