//! Receipts: the handle a receive returns for each lease. A receipt names the message by its
//! sequence number and the lease by the message's receive count at the time, which no later
//! lease of the same message repeats; so a stale receipt never matches a newer lease.

/// The receipt of the lease that made `receive_count` for the message at `seq`.
pub fn encode(seq: u64, receive_count: u32) -> String {
    format!("{seq:016x}{receive_count:08x}")
}

/// Reads a receipt; `None` when the text is not one.
pub fn decode(text: &str) -> Option<(u64, u32)> {
    if text.len() != 24 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let seq = u64::from_str_radix(&text[..16], 16).ok()?;
    let count = u32::from_str_radix(&text[16..], 16).ok()?;
    Some((seq, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_round_trip_and_reject_other_text() {
        let r = encode(42, 3);
        assert_eq!(decode(&r), Some((42, 3)));
        assert_eq!(decode("not-a-receipt"), None);
        assert_eq!(decode(&r[1..]), None);
        assert_eq!(decode(&r.replace('0', "g")), None);
    }
}
