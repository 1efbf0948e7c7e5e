//! The binary encoding every raftq record uses (postcard), written into a buffer of exactly the
//! encoded size: a log entry or a peer request carries hundreds of message bodies, and a buffer
//! grown by doubling would copy them again at every step.

use serde::Serialize;

/// `value` postcard-encoded, in a `Vec` allocated once at the encoded size.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    let size = postcard::experimental::serialized_size(value)?;
    postcard::to_extend(value, Vec::with_capacity(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_postcard_does_into_an_exact_buffer() {
        let value = (7u64, "body".repeat(300), vec![1u32, 2, 3]);
        let encoded = to_vec(&value).unwrap();
        assert_eq!(encoded, postcard::to_allocvec(&value).unwrap());
        assert_eq!(encoded.capacity(), encoded.len());
    }
}
