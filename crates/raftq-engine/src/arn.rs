//! Amazon resource names of queues, `arn:aws:sqs:<region>:<account number>:<name>`, accepted
//! wherever a queue is named (as a name, UUID or CRN is) so that SQS clients can name queues as
//! they do on AWS. An account's number is a stable 12-digit number derived from its name by
//! [`account_number`], the one function every front (REST, gRPC, SQS) uses.

use sha2::{Digest, Sha256};

/// The 12-digit account number of `account`: the first 8 bytes of the SHA-256 of its name, as
/// a big-endian number, modulo 10^12, with leading zeros. The same name always gives the same
/// number, on every node and in every build.
pub fn account_number(account: &str) -> String {
    let digest = Sha256::digest(account.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    format!("{:012}", u64::from_be_bytes(first) % 1_000_000_000_000)
}

/// `arn:aws:sqs:<region>:<account number>:<name>` of queue `name` of `account`.
pub fn arn(region: &str, account: &str, name: &str) -> String {
    format!("arn:aws:sqs:{region}:{}:{name}", account_number(account))
}

/// The parts of a well-formed queue ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedArn<'a> {
    pub region: &'a str,
    pub account_number: &'a str,
    pub name: &'a str,
}

impl ParsedArn<'_> {
    /// Whether the ARN names a queue of `account`.
    pub fn is_of(&self, account: &str) -> bool {
        self.account_number == account_number(account)
    }
}

/// Parses a queue ARN; `None` when the text is not one (any text starting with `arn:` that is
/// not a well-formed SQS ARN is refused as such by the callers).
pub fn parse_arn(text: &str) -> Option<ParsedArn<'_>> {
    let rest = text.strip_prefix("arn:aws:sqs:")?;
    let mut parts = rest.split(':');
    let region = parts.next()?;
    let account_number = parts.next()?;
    let name = parts.next()?;
    let well_formed = parts.next().is_none()
        && !region.is_empty()
        && !name.is_empty()
        && account_number.len() == 12
        && account_number.bytes().all(|b| b.is_ascii_digit());
    well_formed.then_some(ParsedArn {
        region,
        account_number,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_numbers_are_twelve_stable_digits() {
        let dev = account_number("dev");
        assert_eq!(dev.len(), 12);
        assert!(dev.bytes().all(|b| b.is_ascii_digit()));
        assert_eq!(dev, account_number("dev"));
        assert_ne!(dev, account_number("acme"));
        // Fixed forever: the SQS front and stored ARNs in clients rely on it.
        assert_eq!(dev, "081515226031");
    }

    #[test]
    fn arns_round_trip_and_malformed_ones_are_not_arns() {
        let text = arn("local", "dev", "orders.fifo");
        assert_eq!(text, "arn:aws:sqs:local:081515226031:orders.fifo");
        let parsed = parse_arn(&text).expect("an ARN");
        assert_eq!(parsed.region, "local");
        assert_eq!(parsed.name, "orders.fifo");
        assert!(parsed.is_of("dev"));
        assert!(!parsed.is_of("acme"));
        for bad in [
            "arn:aws:sqs:local:08151522603:q",
            "arn:aws:sqs:local:0815152260318:q",
            "arn:aws:sqs:local:08151522603x:q",
            "arn:aws:sqs::081515226031:q",
            "arn:aws:sqs:local:081515226031:",
            "arn:aws:sqs:local:081515226031:q:extra",
            "arn:aws:sns:local:081515226031:q",
            "orders",
        ] {
            assert_eq!(parse_arn(bad), None, "{bad}");
        }
    }
}
