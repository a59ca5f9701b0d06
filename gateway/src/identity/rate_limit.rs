//! Per-caller rate limits of one upstream (`rateLimit`): a token bucket
//! per caller key ([`CallContext::caller_key`]: the verified subject, else
//! the client IP), held by the upstream's runtime, so it lives as long as
//! the upstream's settings are unchanged (a reload that changes the limit
//! builds a new runtime, and with it new buckets).
//!
//! Each replica counts on its own: with N replicas behind a Service a
//! caller may make up to N times the rate. Limits across replicas belong
//! to the ingress, which can key on the `Mcp-Method` / `Mcp-Name` request
//! headers (the gateway leaves them alone).
//!
//! **Memory.** Keys are chosen by callers (any client IP, any subject an
//! identity provider vouches for), so the table is bounded twice: idle
//! keys (whose bucket is full again, so forgetting them changes nothing)
//! are pruned every [`PRUNE_INTERVAL`], and at most [`MAX_KEYS`] keys get
//! a bucket of their own. Beyond that, new keys share [`OVERFLOW_BUCKETS`]
//! overflow buckets, each key always the same one (by a hash keyed per
//! limiter, so a flood cannot aim at one newcomer's bucket), until pruning
//! makes room. Sharing rather than refusing: callers already known keep
//! their own buckets and are untouched by a flood of new keys, and new
//! callers still get through: a flood of F keys leaves a newcomer's bucket
//! shared with about F / [`OVERFLOW_BUCKETS`] others, where a single
//! overflow bucket drained by the flood refused every newcomer's first
//! call.

use std::hash::BuildHasher;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use catalog::access::RateLimit;
use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::{DashMapStateStore, ShrinkableKeyedStateStore};
use governor::state::StateStore;
use governor::{Quota, RateLimiter};

use crate::identity::inbound::CallContext;

/// Callers with a bucket of their own, per upstream: about 80 bytes each,
/// so under 1 MiB per rate-limited upstream.
pub(crate) const MAX_KEYS: usize = 10_000;

/// How often idle keys are forgotten.
pub(crate) const PRUNE_INTERVAL: Duration = Duration::from_secs(10);

/// Buckets the keys beyond [`MAX_KEYS`] are spread over: about 80 KiB
/// more at most.
pub(crate) const OVERFLOW_BUCKETS: u64 = 1024;

/// Who a bucket belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Caller(String),
    /// Neither a subject nor an address (not over a TCP socket).
    Unknown,
    /// New keys once [`MAX_KEYS`] are tracked, by their hash.
    Overflow(u64),
}

/// The rate limit of one upstream.
pub(crate) struct CallerLimiter {
    limit: RateLimit,
    burst: u32,
    limiter: RateLimiter<
        Key,
        CappedStore,
        DefaultClock,
        NoOpMiddleware<<DefaultClock as Clock>::Instant>,
    >,
    /// When idle keys were last pruned, in nanoseconds of the limiter's
    /// clock since `started`.
    last_prune: AtomicU64,
    started: <DefaultClock as Clock>::Instant,
}

impl std::fmt::Debug for CallerLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerLimiter")
            .field("limit", &self.limit)
            .field("keys", &self.limiter.len())
            .finish()
    }
}

/// A call over the limit: the message tells the caller when to retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "rate limit exceeded: this upstream allows each caller {rate} calls per second \
     (burst {burst}); retry in {retry_after_seconds} s"
)]
pub(crate) struct RateLimited {
    rate: String,
    burst: u32,
    /// Whole seconds, rounded up, at least 1.
    pub retry_after_seconds: u64,
}

impl CallerLimiter {
    /// A limiter for `limit`, which must pass [`RateLimit::check`].
    pub(crate) fn new(limit: &RateLimit) -> Option<CallerLimiter> {
        Self::with_capacity(limit, MAX_KEYS)
    }

    fn with_capacity(limit: &RateLimit, cap: usize) -> Option<CallerLimiter> {
        limit.check().ok()?;
        let burst = limit.effective_burst();
        let quota = Quota::with_period(Duration::from_secs_f64(1.0 / limit.requests_per_second))?
            .allow_burst(NonZeroU32::new(burst)?);
        let clock = DefaultClock::default();
        let started = clock.now();
        Some(CallerLimiter {
            limit: limit.clone(),
            burst,
            limiter: RateLimiter::new(
                quota,
                CappedStore {
                    map: DashMapStateStore::default(),
                    cap,
                    overflow: std::collections::hash_map::RandomState::new(),
                },
                clock,
            ),
            last_prune: AtomicU64::new(0),
            started,
        })
    }

    /// Takes one call from the caller's bucket, or says when it may retry.
    pub(crate) fn check(&self, ctx: &CallContext) -> Result<(), RateLimited> {
        self.prune_now_and_then();
        let key = ctx.caller_key().map_or(Key::Unknown, Key::Caller);
        self.limiter.check_key(&key).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.limiter.clock().now());
            RateLimited {
                rate: self.limit.requests_per_second.to_string(),
                burst: self.burst,
                retry_after_seconds: wait.as_secs_f64().ceil().max(1.0) as u64,
            }
        })
    }

    #[cfg(test)]
    /// Keys with a bucket of their own (overflow buckets included).
    pub(crate) fn keys(&self) -> usize {
        self.limiter.len()
    }

    /// Forgets idle keys, at most once per [`PRUNE_INTERVAL`]; the caller
    /// that wins the race does it, the others go on.
    fn prune_now_and_then(&self) {
        let now = self
            .limiter
            .clock()
            .now()
            .duration_since(self.started)
            .as_u64();
        let last = self.last_prune.load(Ordering::Relaxed);
        if now.saturating_sub(last) < PRUNE_INTERVAL.as_nanos() as u64 {
            return;
        }
        if self
            .last_prune
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
    }
}

/// governor's DashMap store, refusing a bucket of its own to new keys
/// beyond `cap` (see the module docs). Concurrent first calls may overshoot
/// `cap` by the number of threads at most.
struct CappedStore {
    map: DashMapStateStore<Key>,
    cap: usize,
    /// Picks a new key's overflow bucket; seeded per limiter.
    overflow: std::collections::hash_map::RandomState,
}

impl StateStore for CappedStore {
    type Key = Key;

    fn measure_and_replace<T, F, E>(&self, key: &Key, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        if self.map.len() >= self.cap && !self.map.contains_key(key) {
            let bucket = Key::Overflow(self.overflow.hash_one(key) % OVERFLOW_BUCKETS);
            return self.map.measure_and_replace(&bucket, f);
        }
        self.map.measure_and_replace(key, f)
    }
}

impl ShrinkableKeyedStateStore<Key> for CappedStore {
    fn retain_recent(&self, drop_below: Nanos) {
        self.map.retain_recent(drop_below)
    }

    fn shrink_to_fit(&self) {
        ShrinkableKeyedStateStore::shrink_to_fit(&self.map)
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    fn from_ip(last: u8) -> CallContext {
        CallContext {
            caller: None,
            client_ip: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))),
        }
    }

    /// One call per 1000 s: nothing refills while a test runs.
    fn slow(burst: u32) -> RateLimit {
        RateLimit {
            requests_per_second: 0.001,
            burst: Some(burst),
        }
    }

    #[test]
    fn a_caller_gets_its_burst_then_a_retry_hint() {
        let l = CallerLimiter::new(&slow(2)).unwrap();
        assert!(l.check(&from_ip(1)).is_ok());
        assert!(l.check(&from_ip(1)).is_ok());
        let e = l.check(&from_ip(1)).unwrap_err();
        assert!((990..=1000).contains(&e.retry_after_seconds), "{e}");
        assert!(e.to_string().contains("retry in"), "{e}");
        // Another caller has a bucket of its own.
        assert!(l.check(&from_ip(2)).is_ok());
    }

    fn from_v6(n: u32) -> CallContext {
        CallContext {
            caller: None,
            client_ip: Some(IpAddr::V6(std::net::Ipv6Addr::from(u128::from(n)))),
        }
    }

    #[test]
    fn beyond_the_key_cap_a_caller_keeps_one_overflow_bucket() {
        let l = CallerLimiter::with_capacity(&slow(1), 2).unwrap();
        assert!(l.check(&from_ip(1)).is_ok());
        assert!(l.check(&from_ip(2)).is_ok());
        // The table is full: 3 gets an overflow bucket, always the same.
        assert!(l.check(&from_ip(3)).is_ok());
        assert!(l.check(&from_ip(3)).is_err());
        assert_eq!(l.keys(), 3);
        // Known callers keep their own buckets (spent here).
        assert!(l.check(&from_ip(1)).is_err());
        assert_eq!(l.keys(), 3);
    }

    /// The flood: the table full of distinct callers, each having
    /// spent its burst, then newcomers. With one shared overflow bucket
    /// the flood drained it and every newcomer was refused its first
    /// call; spread over the overflow buckets, a newcomer shares its
    /// bucket with about flood / OVERFLOW_BUCKETS spent callers.
    #[test]
    fn a_flood_past_the_key_cap_does_not_starve_newcomers() {
        let l = CallerLimiter::with_capacity(&slow(1), 100).unwrap();
        for n in 0..200 {
            let _ = l.check(&from_v6(n));
        }
        let admitted = (1_000..1_200)
            .filter(|&n| l.check(&from_v6(n)).is_ok())
            .count();
        // The 100 overflowing flood keys spend at most 100 of the 1024
        // buckets and earlier newcomers at most 199 more: a newcomer is
        // refused with probability under 0.3, about 0.2 on average, so
        // about 160 of 200 get in; fewer than 120 is over 7 standard
        // deviations off. One shared bucket admitted none.
        assert!(admitted >= 120, "only {admitted} of 200 newcomers admitted");
        assert!(
            l.keys() <= 100 + OVERFLOW_BUCKETS as usize + 1,
            "{}",
            l.keys()
        );
    }

    #[test]
    fn the_default_burst_is_the_rate_rounded_up() {
        let l = CallerLimiter::new(&RateLimit {
            requests_per_second: 0.5,
            burst: None,
        })
        .unwrap();
        assert_eq!(l.burst, 1);
        let r = RateLimit {
            requests_per_second: 2.5,
            burst: None,
        };
        assert_eq!(r.effective_burst(), 3);
    }

    #[test]
    fn bad_limits_name_their_field() {
        for (rps, burst, field) in [
            (0.0, None, "requestsPerSecond"),
            (-1.0, None, "requestsPerSecond"),
            (f64::NAN, None, "requestsPerSecond"),
            (f64::INFINITY, None, "requestsPerSecond"),
            (1.0, Some(0), "burst"),
        ] {
            let e = RateLimit {
                requests_per_second: rps,
                burst,
            }
            .check()
            .unwrap_err();
            assert_eq!(e.field, field, "{rps} {burst:?}");
        }
    }
}
