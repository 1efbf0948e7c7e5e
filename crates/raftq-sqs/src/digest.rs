//! The MD5 digests SQS returns with sends and receives, so that clients can check what the
//! server got: `MD5OfMessageBody` (of the body's UTF-8 bytes) and `MD5OfMessageAttributes`, in
//! the byte encoding AWS documents for message attributes: for each attribute, by name in
//! ascending order, the name, the data type and the value, each as a 4-byte big-endian length
//! followed by its bytes, with a transport byte before the value (1 for string values, 2 for
//! binary ones). The digest of no attributes is not sent at all.

use std::collections::BTreeMap;

use md5::{Digest, Md5};

use crate::message::{Typed, TypedValue};

/// Lowercase hex MD5 of a message body.
pub fn of_body(body: &str) -> String {
    hex(Md5::digest(body.as_bytes()).as_slice())
}

/// Lowercase hex MD5 of message attributes; `None` for none.
pub fn of_attributes(attributes: &BTreeMap<String, Typed>) -> Option<String> {
    if attributes.is_empty() {
        return None;
    }
    let mut md5 = Md5::new();
    for (name, typed) in attributes {
        put(&mut md5, name.as_bytes());
        put(&mut md5, typed.data_type.as_bytes());
        match &typed.value {
            TypedValue::Text(text) => {
                md5.update([1u8]);
                put(&mut md5, text.as_bytes());
            }
            TypedValue::Binary(bytes) => {
                md5.update([2u8]);
                put(&mut md5, bytes);
            }
        }
    }
    Some(hex(md5.finalize().as_slice()))
}

/// `bytes` with its length before it, as 4 bytes big-endian. An attribute part is far below
/// 4 GiB (a whole message is at most 1 MiB), so the length always fits.
fn put(md5: &mut Md5, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    md5.update(len.to_be_bytes());
    md5.update(bytes);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(data_type: &str, value: &str) -> Typed {
        Typed {
            data_type: data_type.into(),
            value: TypedValue::Text(value.into()),
        }
    }

    #[test]
    fn body_digests_are_md5_of_the_utf8_bytes() {
        assert_eq!(of_body("hello"), "5d41402abc4b2a76b9719d911017c592");
        assert_eq!(of_body("héllo ✓"), "21b1ae5bc147bb564254200a4731e337");
    }

    /// Expected digests computed independently of this code, by the algorithm AWS documents
    /// (the one botocore's and the Java SDK's checks implement), in Python with `hashlib`.
    #[test]
    fn attribute_digests_follow_the_documented_encoding() {
        let one = BTreeMap::from([("City".to_string(), text("String", "Any City"))]);
        assert_eq!(
            of_attributes(&one).as_deref(),
            Some("0c32cb5c844c01fbd5b6b434b52cf670")
        );
        let mixed = BTreeMap::from([
            ("zeta".to_string(), text("Number", "230.000000000000000001")),
            ("alpha".to_string(), text("String.custom", "ü")),
            (
                "blob".to_string(),
                Typed {
                    data_type: "Binary".into(),
                    value: TypedValue::Binary(vec![0, 1, 2, 255]),
                },
            ),
        ]);
        assert_eq!(
            of_attributes(&mixed).as_deref(),
            Some("644d62840f4cf2388095ac9690072411")
        );
        assert_eq!(of_attributes(&BTreeMap::new()), None);
    }
}
