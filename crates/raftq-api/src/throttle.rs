//! Limits against abuse, each off unless configured ([`Limits`]): the request rate per API key
//! and per connection, and the long polls under way at once per key and per connection. A
//! request over a limit is refused with `429 too_many_requests` and `Retry-After` before anything
//! is done for it.
//!
//! The rate is a token bucket per key or connection (GCRA, by the `governor` crate): `N`
//! requests a second, up to `N` in a burst. A key is the digest of an API key that
//! authenticated, so unknown keys (refused anyway) make no buckets; a connection is its remote
//! address and port. Buckets that are full again are dropped now and then, so a client that
//! comes and goes leaves nothing behind.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request};
use axum::http::header::AUTHORIZATION;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::error::ApiError;
use crate::keys::{KeyDigest, Keys};

/// What the server limits; every limit is off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Requests a second per API key (with a burst of as many).
    pub requests_per_key: Option<NonZeroU32>,
    /// Requests a second per connection (with a burst of as many).
    pub requests_per_connection: Option<NonZeroU32>,
    /// Long polls (receives that wait) under way at once per API key.
    pub long_polls_per_key: Option<NonZeroU32>,
    /// Long polls under way at once per connection.
    pub long_polls_per_connection: Option<NonZeroU32>,
}

/// Who a request comes from, as far as the limits tell callers apart: put in the request's
/// extensions by the front, read by the long poll.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caller {
    /// The digest of its API key, when the key authenticated.
    pub key: Option<KeyDigest>,
    /// The remote address of its connection.
    pub connection: Option<SocketAddr>,
}

/// After how many rate checks the buckets that are full again are dropped.
const SWEEP_EVERY: u64 = 4096;

/// The limits' state, shared by every connection.
pub(crate) struct Throttle {
    limits: Limits,
    per_key: Option<DefaultKeyedRateLimiter<KeyDigest>>,
    per_connection: Option<DefaultKeyedRateLimiter<SocketAddr>>,
    checks: AtomicU64,
    polls: Arc<Mutex<Polls>>,
}

/// Long polls under way, by key and by connection (entries at zero are removed).
#[derive(Default)]
struct Polls {
    by_key: HashMap<KeyDigest, u32>,
    by_connection: HashMap<SocketAddr, u32>,
}

/// A long poll's place under the limits, given back when dropped.
pub(crate) struct PollSlot {
    polls: Arc<Mutex<Polls>>,
    key: Option<KeyDigest>,
    connection: Option<SocketAddr>,
}

impl Drop for PollSlot {
    fn drop(&mut self) {
        let mut polls = self.polls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(key) = self.key {
            release(&mut polls.by_key, key);
        }
        if let Some(connection) = self.connection {
            release(&mut polls.by_connection, connection);
        }
    }
}

fn release<K: Hash + Eq>(counts: &mut HashMap<K, u32>, key: K) {
    if let Some(count) = counts.get_mut(&key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(&key);
        }
    }
}

fn too_many(what: &str, retry_after: Duration) -> ApiError {
    // Whole seconds, rounded up: a client that waits that long finds a token.
    let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    ApiError::too_many_requests(format!("{what}; retry after {} s", seconds.max(1)), seconds)
}

impl Throttle {
    pub(crate) fn new(limits: Limits) -> Throttle {
        Throttle {
            limits,
            per_key: limits
                .requests_per_key
                .map(|n| RateLimiter::keyed(Quota::per_second(n))),
            per_connection: limits
                .requests_per_connection
                .map(|n| RateLimiter::keyed(Quota::per_second(n))),
            checks: AtomicU64::new(0),
            polls: Arc::default(),
        }
    }

    /// Whether any request rate is limited.
    fn limits_rates(&self) -> bool {
        self.per_key.is_some() || self.per_connection.is_some()
    }

    /// Who `request` comes from, as far as the limits tell callers apart: its key is looked up
    /// only when a limit counts keys.
    pub(crate) fn caller(&self, keys: &Keys, request: &Request) -> Caller {
        let counts_keys =
            self.limits.requests_per_key.is_some() || self.limits.long_polls_per_key.is_some();
        let header = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
        Caller {
            key: counts_keys.then(|| keys.key_of(header)).flatten(),
            connection: request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|info| info.0),
        }
    }

    /// Takes one request of `caller` from its buckets, or refuses it.
    pub(crate) fn admit(&self, caller: &Caller) -> Result<(), ApiError> {
        if !self.limits_rates() {
            return Ok(());
        }
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        if let (Some(limiter), Some(key)) = (&self.per_key, &caller.key) {
            limiter.check_key(key).map_err(|wait| {
                too_many("this API key is over its request rate", wait_of(&wait))
            })?;
        }
        if let (Some(limiter), Some(connection)) = (&self.per_connection, &caller.connection) {
            limiter.check_key(connection).map_err(|wait| {
                too_many("this connection is over its request rate", wait_of(&wait))
            })?;
        }
        Ok(())
    }

    /// Drops the buckets that are full again.
    fn sweep(&self) {
        if let Some(limiter) = &self.per_key {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        if let Some(limiter) = &self.per_connection {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// A place for one more long poll of `caller`, or a refusal when its key or connection
    /// already has as many as allowed.
    pub(crate) fn long_poll(&self, caller: &Caller) -> Result<PollSlot, ApiError> {
        let mut polls = self.polls.lock().unwrap_or_else(PoisonError::into_inner);
        let key = caller
            .key
            .filter(|_| self.limits.long_polls_per_key.is_some());
        let connection = caller
            .connection
            .filter(|_| self.limits.long_polls_per_connection.is_some());
        let full = |count: Option<&u32>, limit: Option<NonZeroU32>| {
            limit.is_some_and(|limit| count.copied().unwrap_or(0) >= limit.get())
        };
        if key.is_some_and(|k| full(polls.by_key.get(&k), self.limits.long_polls_per_key)) {
            return Err(too_many(
                "this API key has as many long polls under way as allowed",
                Duration::from_secs(1),
            ));
        }
        if connection.is_some_and(|c| {
            full(
                polls.by_connection.get(&c),
                self.limits.long_polls_per_connection,
            )
        }) {
            return Err(too_many(
                "this connection has as many long polls under way as allowed",
                Duration::from_secs(1),
            ));
        }
        if let Some(key) = key {
            *polls.by_key.entry(key).or_default() += 1;
        }
        if let Some(connection) = connection {
            *polls.by_connection.entry(connection).or_default() += 1;
        }
        Ok(PollSlot {
            polls: Arc::clone(&self.polls),
            key,
            connection,
        })
    }
}

fn wait_of(not_until: &governor::NotUntil<<DefaultClock as Clock>::Instant>) -> Duration {
    not_until.wait_time_from(DefaultClock::default().now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(key: u8, port: u16) -> Caller {
        Caller {
            key: Some([key; 32]),
            connection: Some(SocketAddr::from(([127, 0, 0, 1], port))),
        }
    }

    fn limit(n: u32) -> Option<NonZeroU32> {
        NonZeroU32::new(n)
    }

    #[test]
    fn no_limits_admit_everything() {
        let throttle = Throttle::new(Limits::default());
        assert!(!throttle.limits_rates());
        for _ in 0..10_000 {
            throttle.admit(&caller(1, 1)).expect("no limit");
        }
        let slots: Vec<_> = (0..1000)
            .map(|_| throttle.long_poll(&caller(1, 1)).expect("no limit"))
            .collect();
        assert_eq!(slots.len(), 1000);
    }

    #[test]
    fn a_key_over_its_rate_is_refused_with_a_retry_time_and_others_go_on() {
        let throttle = Throttle::new(Limits {
            requests_per_key: limit(5),
            ..Limits::default()
        });
        for _ in 0..5 {
            throttle.admit(&caller(1, 1)).expect("within the burst");
        }
        let refused = throttle.admit(&caller(1, 2)).expect_err("over the rate");
        assert_eq!(refused.status.as_u16(), 429);
        assert_eq!(refused.code, "too_many_requests");
        assert_eq!(refused.retry_after, Some(1));
        assert!(refused.message.contains("API key"), "{}", refused.message);
        throttle.admit(&caller(2, 1)).expect("another key");
        throttle
            .admit(&Caller::default())
            .expect("no key, no limit");
    }

    #[test]
    fn a_connection_over_its_rate_is_refused() {
        let throttle = Throttle::new(Limits {
            requests_per_connection: limit(2),
            ..Limits::default()
        });
        throttle.admit(&caller(1, 7)).expect("first");
        throttle.admit(&caller(2, 7)).expect("second");
        let refused = throttle.admit(&caller(3, 7)).expect_err("third");
        assert!(
            refused.message.contains("connection"),
            "{}",
            refused.message
        );
        throttle.admit(&caller(1, 8)).expect("another connection");
    }

    #[test]
    fn long_polls_are_counted_while_under_way() {
        let throttle = Throttle::new(Limits {
            long_polls_per_key: limit(2),
            long_polls_per_connection: limit(1),
            ..Limits::default()
        });
        let first = throttle.long_poll(&caller(1, 1)).expect("first");
        let refused = throttle
            .long_poll(&caller(2, 1))
            .err()
            .expect("one per connection");
        assert!(
            refused.message.contains("connection"),
            "{}",
            refused.message
        );
        let second = throttle.long_poll(&caller(1, 2)).expect("second of key 1");
        let refused = throttle
            .long_poll(&caller(1, 3))
            .err()
            .expect("two per key");
        assert!(refused.message.contains("API key"), "{}", refused.message);
        drop(first);
        let third = throttle
            .long_poll(&caller(1, 1))
            .expect("a place was given back");
        drop((second, third));
        let polls = throttle.polls.lock().expect("lock");
        assert!(polls.by_key.is_empty() && polls.by_connection.is_empty());
    }
}
