//! The digest of a node's applied state, which two nodes that applied the same entries share
//! and which a backup carries.

use sha2::{Digest, Sha256};

/// The digest of a node's state rows: SHA-256 over each key and value, each preceded by its
/// length (`u64`, big-endian), in key order.
#[derive(Default)]
pub(crate) struct StateDigest(Sha256);

impl StateDigest {
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        for part in [key, value] {
            self.0.update((part.len() as u64).to_be_bytes());
            self.0.update(part);
        }
    }

    pub(crate) fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}
