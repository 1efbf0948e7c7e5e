//! Names as SQS spells them: account numbers, queue URLs and ARNs.
//!
//! - Every account has a 12-digit account number: the one configured for it
//!   (`--account-numbers acme=123456789012`), else one derived from its name alone (the first
//!   eight bytes of the SHA-256 of the name, big-endian, modulo 10^12, zero-padded), so it
//!   stays the same across restarts, nodes and versions.
//! - A queue's URL is `<advertised base>/<account number>/<queue name>`. A request names its
//!   queue by URL, and the queue is found from the URL's path alone: the host may be whatever
//!   name the client reached the server by (a compose service name, a load balancer).
//! - A queue's ARN is `arn:aws:sqs:<region>:<account number>:<queue name>`; wherever a request
//!   takes a queue URL it also takes the queue's ARN, and the queue's bare name, as SQS does.
//!
//! A URL or ARN of another account or region names no queue of the caller's: the answer is
//! `QueueDoesNotExist`, as for a queue that is not there.

use std::collections::BTreeMap;

use crate::error::SqsError;

/// The account number of `account` when none is configured for it: raftq's own, which ARNs in
/// REST and gRPC requests are read by too.
pub fn derived_account_number(account: &str) -> String {
    raftq_engine::arn::account_number(account)
}

/// Whether `text` is an account number: exactly twelve ASCII digits.
pub fn is_account_number(text: &str) -> bool {
    text.len() == 12 && text.bytes().all(|b| b.is_ascii_digit())
}

/// Parses `ACCOUNT=NUMBER,ACCOUNT=NUMBER,...` (the `--account-numbers` flag).
pub fn parse_account_numbers(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut numbers = BTreeMap::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (account, number) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}` is not ACCOUNT=NUMBER"))?;
        let (account, number) = (account.trim(), number.trim());
        if account.is_empty() {
            return Err(format!("`{part}` names no account"));
        }
        if !is_account_number(number) {
            return Err(format!("`{number}` is not a 12-digit account number"));
        }
        if numbers.values().any(|n| n == number) {
            return Err(format!("account number {number} is given to two accounts"));
        }
        numbers.insert(account.to_string(), number.to_string());
    }
    Ok(numbers)
}

/// Checks an advertised base URL (the `--advertise-url` flag): `http(s)://host[:port]`, without
/// a path, since a queue is found from the path of its URL. Returns it without a trailing `/`.
pub fn parse_base_url(text: &str) -> Result<String, String> {
    let base = text.trim().trim_end_matches('/');
    let rest = ["http://", "https://"]
        .iter()
        .find_map(|scheme| base.strip_prefix(scheme))
        .ok_or_else(|| format!("`{text}` must start with http:// or https://"))?;
    if rest.is_empty() || rest.contains(['/', '?', '#', ' ']) {
        return Err(format!(
            "`{text}` must be http(s)://HOST[:PORT] without a path: queue URLs are <base>/<account number>/<queue name>"
        ));
    }
    Ok(base.to_string())
}

/// How this server names accounts and queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The advertised base of queue URLs, without a trailing `/`.
    base: String,
    region: String,
    /// Configured account numbers, by account.
    numbers: BTreeMap<String, String>,
}

/// A queue as a request names it: the account number and the queue's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuePath<'a> {
    pub account_number: &'a str,
    pub name: &'a str,
}

impl Names {
    /// Names under the advertised `base` URL (e.g. `http://sqs.internal:8080`), in `region`,
    /// with the configured account `numbers`.
    pub fn new(base: &str, region: &str, numbers: BTreeMap<String, String>) -> Names {
        Names {
            base: base.trim_end_matches('/').to_string(),
            region: region.to_string(),
            numbers,
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// The account number of `account`.
    pub fn account_number(&self, account: &str) -> String {
        self.numbers
            .get(account)
            .cloned()
            .unwrap_or_else(|| derived_account_number(account))
    }

    /// The URL of queue `name` of the account numbered `account_number`.
    pub fn queue_url(&self, account_number: &str, name: &str) -> String {
        format!("{}/{account_number}/{name}", self.base)
    }

    /// The ARN of queue `name` of the account numbered `account_number`.
    pub fn arn(&self, account_number: &str, name: &str) -> String {
        format!("arn:aws:sqs:{}:{account_number}:{name}", self.region)
    }

    /// The queue a queue URL, a path `/<account number>/<name>` or an ARN names; `None` when
    /// `text` is none of these.
    pub fn queue_path<'a>(&self, text: &'a str) -> Option<QueuePath<'a>> {
        if let Some(rest) = text.strip_prefix("arn:") {
            return self.arn_path(rest);
        }
        let path = match text.split_once("://") {
            Some((scheme, rest))
                if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") =>
            {
                &rest[rest.find('/')?..]
            }
            Some(_) => return None,
            None => text,
        };
        let path = path.split(['?', '#']).next().unwrap_or_default();
        let mut segments = path.strip_prefix('/')?.split('/');
        let (account_number, name) = (segments.next()?, segments.next()?);
        let trailing = segments.next();
        if !matches!(trailing, None | Some("")) || segments.next().is_some() {
            return None;
        }
        (is_account_number(account_number) && !name.is_empty()).then_some(QueuePath {
            account_number,
            name,
        })
    }

    /// `aws:sqs:<region>:<account number>:<name>` (after `arn:`); an ARN of another region is
    /// well-formed but names no queue here, which the caller finds by the account number.
    fn arn_path<'a>(&self, rest: &'a str) -> Option<QueuePath<'a>> {
        let mut parts = rest.splitn(5, ':');
        let (partition, service, region) = (parts.next()?, parts.next()?, parts.next()?);
        let (account_number, name) = (parts.next()?, parts.next()?);
        if partition.is_empty() || service != "sqs" || !is_account_number(account_number) {
            return None;
        }
        if region != self.region {
            // A number no account has: the queue is not found, as SQS answers for a queue of
            // another region.
            return Some(QueuePath {
                account_number: "",
                name,
            });
        }
        (!name.is_empty()).then_some(QueuePath {
            account_number,
            name,
        })
    }

    /// The name of the caller's queue that `text` (URL, path, ARN, or the bare name, which
    /// SQS takes too) names, for the account numbered `caller_number`.
    pub fn own_queue<'a>(&self, text: &'a str, caller_number: &str) -> Result<&'a str, SqsError> {
        let path = match self.queue_path(text) {
            Some(path) => path,
            None if is_bare_name(text) => return Ok(text),
            None => return Err(SqsError::invalid_address(text)),
        };
        if path.account_number != caller_number {
            return Err(SqsError::queue_does_not_exist());
        }
        Ok(path.name)
    }
}

/// Whether `text` can only be a queue's name: no URL, path or ARN (those have `/` or `:`).
/// Whether it is a valid name is raftq's to say, when it looks the queue up.
fn is_bare_name(text: &str) -> bool {
    !text.is_empty() && !text.contains(['/', ':'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names::new("http://localhost:8080/", "local", BTreeMap::new())
    }

    #[test]
    fn derived_account_numbers_are_stable_and_twelve_digits() {
        let dev = derived_account_number("dev");
        assert!(is_account_number(&dev), "{dev}");
        assert_eq!(dev, derived_account_number("dev"));
        assert_ne!(dev, derived_account_number("acme"));
        // Pinned: a change would move every queue URL and ARN clients hold.
        assert_eq!(derived_account_number("dev"), DEV_NUMBER);
    }

    /// `derived_account_number("dev")`, computed once and pinned.
    const DEV_NUMBER: &str = "081515226031";

    #[test]
    fn configured_account_numbers_win() {
        let numbers = parse_account_numbers("dev=000000000000, acme=123456789012").unwrap();
        let names = Names::new("http://h:1", "local", numbers);
        assert_eq!(names.account_number("dev"), "000000000000");
        assert_eq!(names.account_number("acme"), "123456789012");
        assert_eq!(
            names.account_number("globex"),
            derived_account_number("globex")
        );
        for bad in [
            "dev",
            "dev=12",
            "=123456789012",
            "a=123456789012,b=123456789012",
        ] {
            assert!(parse_account_numbers(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn advertised_bases_are_scheme_and_host_only() {
        assert_eq!(
            parse_base_url("http://sqs:8080/").unwrap(),
            "http://sqs:8080"
        );
        assert_eq!(
            parse_base_url("https://[::1]:443").unwrap(),
            "https://[::1]:443"
        );
        for bad in [
            "sqs:8080",
            "ftp://h",
            "http://",
            "http://h/prefix",
            "http://h?x=1",
        ] {
            assert!(parse_base_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls_and_arns_are_built_from_the_base_and_region() {
        let names = names();
        assert_eq!(
            names.queue_url("123456789012", "jobs"),
            "http://localhost:8080/123456789012/jobs"
        );
        assert_eq!(
            names.arn("123456789012", "jobs.fifo"),
            "arn:aws:sqs:local:123456789012:jobs.fifo"
        );
    }

    #[test]
    fn a_queue_is_found_from_the_path_whatever_the_host() {
        let names = names();
        let jobs = Some(QueuePath {
            account_number: "123456789012",
            name: "jobs",
        });
        for text in [
            "http://localhost:8080/123456789012/jobs",
            "https://raftq-2.internal/123456789012/jobs",
            "http://sqs.us-east-1.amazonaws.com/123456789012/jobs/",
            "/123456789012/jobs",
            "arn:aws:sqs:local:123456789012:jobs",
        ] {
            assert_eq!(names.queue_path(text), jobs, "{text}");
        }
        for text in [
            "jobs",
            "http://localhost:8080/jobs",
            "http://localhost:8080/12345/jobs",
            "http://localhost:8080/123456789012/jobs/x",
            "ftp://h/123456789012/jobs",
            "arn:aws:sns:local:123456789012:jobs",
            "arn:aws:sqs:local:1234:jobs",
        ] {
            assert_eq!(names.queue_path(text), None, "{text}");
        }
    }

    #[test]
    fn another_account_or_region_names_no_queue_of_the_caller() {
        let names = names();
        let url = "http://h/123456789012/jobs";
        assert_eq!(names.own_queue(url, "123456789012").unwrap(), "jobs");
        let other = names.own_queue(url, "999999999999").unwrap_err();
        assert_eq!(other.code(), "AWS.SimpleQueueService.NonExistentQueue");
        let region = names.own_queue("arn:aws:sqs:eu-west-1:123456789012:jobs", "123456789012");
        assert_eq!(
            region.unwrap_err().code(),
            "AWS.SimpleQueueService.NonExistentQueue"
        );
        assert_eq!(names.own_queue("jobs", "123456789012").unwrap(), "jobs");
        for garbage in ["", "ftp://h/123456789012/jobs", "http://h/jobs", "a:b"] {
            let e = names.own_queue(garbage, "123456789012").unwrap_err();
            assert_eq!(e.code(), "InvalidAddress", "{garbage}");
        }
    }
}
