//! RFC 7662 token introspection, for bearer tokens that are neither JWTs
//! of a configured issuer nor API keys.
//!
//! The token is POSTed as a form with `client_secret_basic` client
//! authentication (RFC 6749 §2.3.1: id and secret form-encoded, then
//! Basic). The client secret is read from its reference on each call to
//! the endpoint, so a rotated Secret is used without a restart; if it
//! cannot be read, the last value read is used.
//!
//! An answer admits a caller when it is `active`, not past its `exp`, its
//! `aud` (a string or a list) names one of `audiences` (default: the
//! gateway's `resource`; an answer without `aud` passes unless
//! `requireAudience`), its `iss`, when it has one and `issuer` is set, is
//! that issuer, and it names a subject.
//!
//! Every introspection is a request sent with the gateway's client
//! credentials, so what a client can make the gateway ask is bounded:
//!
//! - tokens that cannot be valid (longer than `maxTokenBytes`, or not an
//!   RFC 6750 `b64token`) are refused without asking;
//! - concurrent requests for one token share one introspection;
//! - at most `maxConcurrentRequests` introspections are in flight and at
//!   most `maxRequestsPerSecond` start per second (the same as a burst);
//!   a token not cached past either is answered 503 with `Retry-After`
//!   (counted as `toolgate_auth_denials_total{reason="throttled"}`), and
//!   cached tokens are not held up.
//!
//! Answers are cached under the SHA-256 of the token (the token itself is
//! not kept): active ones until the token's `exp`, at most
//! `cacheTtlSeconds` (a revoked token stays accepted for up to that long);
//! refused ones for at most [`NEGATIVE_TTL`], so a client retrying a dead
//! token does not reach the IdP on each request. Each kind is held apart,
//! at most `cacheMaxEntries` of each (expired entries go first, then
//! arbitrary ones of the same kind): a flood of unknown tokens never
//! pushes out the callers already admitted.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use catalog::access::{AuthMethod, Principal};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::{OnceCell, Semaphore};

use super::config::{ClaimNames, IntrospectionConfig};
use super::fetch::{self, FetchError};
use crate::secret::Resolve;
use catalog::runtime::SecretRef;

/// Longest reuse of a refused answer.
pub(crate) const NEGATIVE_TTL: Duration = Duration::from_secs(30);
/// `Retry-After` when every introspection slot is busy.
const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

type TokenHash = [u8; 32];

/// The outcome of one introspection.
pub(crate) enum Verdict {
    Active(Principal),
    /// Not admitted; why, for the debug log.
    Refused(&'static str),
    /// The endpoint failed: not the token's fault.
    Unavailable(String),
    /// Over `maxConcurrentRequests` or `maxRequestsPerSecond`: the
    /// endpoint was not asked. Retry after this long.
    Throttled(Duration),
}

#[derive(Clone)]
enum Answer {
    Active(Principal),
    Refused(&'static str),
}

/// What the one introspection of a token ended with, for every request
/// that waited for it.
#[derive(Clone)]
enum Outcome {
    Answer(Answer),
    Unavailable(String),
    Throttled(Duration),
}

impl From<Outcome> for Verdict {
    fn from(o: Outcome) -> Self {
        match o {
            Outcome::Answer(a) => a.into(),
            Outcome::Unavailable(e) => Verdict::Unavailable(e),
            Outcome::Throttled(d) => Verdict::Throttled(d),
        }
    }
}

impl From<Answer> for Verdict {
    fn from(a: Answer) -> Self {
        match a {
            Answer::Active(p) => Verdict::Active(p),
            Answer::Refused(why) => Verdict::Refused(why),
        }
    }
}

/// One introspection in flight, shared by the requests for its token.
type Flight = Arc<OnceCell<Outcome>>;

pub(crate) struct Introspector {
    url: reqwest::Url,
    client_id: String,
    secret: SecretRef,
    last_secret: Mutex<Option<String>>,
    ttl: Duration,
    client: reqwest::Client,
    audiences: Vec<String>,
    require_audience: bool,
    issuer: Option<String>,
    max_token_bytes: usize,
    cache: Cache,
    flights: Mutex<HashMap<TokenHash, Flight>>,
    slots: Semaphore,
    rate: DefaultDirectRateLimiter,
}

impl Introspector {
    /// Checks that the secret can be read now (a start-up error).
    /// `resource` is the gateway's public URL, the audience answers must
    /// name when no `audiences` are configured.
    pub(crate) fn new(
        cfg: &IntrospectionConfig,
        resource: &str,
        client: reqwest::Client,
    ) -> Result<Self, super::config::InvalidField> {
        let invalid = |field: &str, message: String| super::config::InvalidField {
            field: format!("inbound.introspection.{field}"),
            message,
        };
        let url = super::config::http_url(&cfg.url).map_err(|m| invalid("url", m))?;
        let secret = cfg
            .client_secret
            .resolve("inbound.introspection.clientSecret")
            .map_err(|e| super::config::InvalidField {
                field: e.field,
                message: e.message,
            })?;
        let positive = |field: &str, n: u32| {
            NonZeroU32::new(n).ok_or_else(|| invalid(field, "must be at least 1".into()))
        };
        let per_second = positive("maxRequestsPerSecond", cfg.max_requests_per_second)?;
        let concurrent = positive("maxConcurrentRequests", cfg.max_concurrent_requests)?;
        let audiences = if cfg.audiences.is_empty() {
            vec![resource.to_string()]
        } else {
            cfg.audiences.clone()
        };
        Ok(Introspector {
            url,
            client_id: cfg.client_id.clone(),
            secret: cfg.client_secret.clone(),
            last_secret: Mutex::new(Some(secret)),
            ttl: Duration::from_secs(cfg.cache_ttl_seconds),
            client,
            audiences,
            require_audience: cfg.require_audience,
            issuer: cfg.issuer.clone(),
            max_token_bytes: cfg.max_token_bytes,
            cache: Cache::new(cfg.cache_max_entries),
            flights: Mutex::new(HashMap::new()),
            slots: Semaphore::new(concurrent.get() as usize),
            rate: RateLimiter::direct(Quota::per_second(per_second).allow_burst(per_second)),
        })
    }

    /// Whether `token` is active, and whose.
    pub(crate) async fn check(&self, token: &str, names: &ClaimNames) -> Verdict {
        if !self.possible(token) {
            return Verdict::Refused("not a possible token (length or characters)");
        }
        let key: TokenHash = Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = self.cache.get(&key) {
            return hit.into();
        }
        let flight = {
            let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
            flights.entry(key).or_default().clone()
        };
        let _leave = Leave {
            flights: &self.flights,
            key,
            flight: flight.clone(),
        };
        // NB: if the request running the introspection goes away, the
        // next waiter runs it (`OnceCell`), so no one waits for nothing.
        flight
            .get_or_init(|| self.introspect(token, key, names))
            .await
            .clone()
            .into()
    }

    /// Asks the endpoint, within the limits, and caches its answer.
    async fn introspect(&self, token: &str, key: TokenHash, names: &ClaimNames) -> Outcome {
        let Ok(_slot) = self.slots.try_acquire() else {
            return Outcome::Throttled(BUSY_RETRY_AFTER);
        };
        if let Err(not_until) = self.rate.check() {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            return Outcome::Throttled(wait);
        }
        let claims = match self.ask(token).await {
            Ok(c) => c,
            Err(e) => return Outcome::Unavailable(e.to_string()),
        };
        let (answer, until) = self.judge(claims, names);
        if !self.ttl.is_zero() {
            self.cache.put(key, answer.clone(), until);
        }
        Outcome::Answer(answer)
    }

    /// RFC 6750 §2.1 `b64token`, no longer than `maxTokenBytes`: anything
    /// else cannot be a token the endpoint issued.
    fn possible(&self, token: &str) -> bool {
        let body = token.trim_end_matches('=');
        token.len() <= self.max_token_bytes
            && !body.is_empty()
            && body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
    }

    /// The answer to cache for `claims`, and until when.
    fn judge(&self, claims: Map<String, Value>, names: &ClaimNames) -> (Answer, Instant) {
        let now = Instant::now();
        let refused = |why| (Answer::Refused(why), now + NEGATIVE_TTL.min(self.ttl));
        if claims.get("active") != Some(&Value::Bool(true)) {
            return refused("inactive");
        }
        let left = claims
            .get("exp")
            .and_then(Value::as_u64)
            .map(|e| Duration::from_secs(e.saturating_sub(unix_now())));
        if left.is_some_and(|l| l.is_zero()) {
            return refused("expired");
        }
        if let Err(why) = self.audience(&claims) {
            return refused(why);
        }
        match (&self.issuer, claims.get("iss")) {
            (Some(_), None | Some(Value::Null)) | (None, _) => {}
            (Some(want), Some(Value::String(iss))) if iss == want => {}
            (Some(_), Some(_)) => return refused("iss is not the configured issuer"),
        }
        let fallback = self.issuer.as_deref().unwrap_or(self.url.as_str());
        match principal(claims, names, fallback) {
            Some(p) => (
                Answer::Active(p),
                now + left.map_or(self.ttl, |l| l.min(self.ttl)),
            ),
            None => refused("no subject"),
        }
    }

    /// Whether the answer's `aud` names one of the audiences.
    fn audience(&self, claims: &Map<String, Value>) -> Result<(), &'static str> {
        let ours = |a: &Value| {
            a.as_str()
                .is_some_and(|a| self.audiences.iter().any(|o| o == a))
        };
        match claims.get("aud") {
            None | Some(Value::Null) if self.require_audience => Err("no aud"),
            None | Some(Value::Null) => Ok(()),
            Some(a @ Value::String(_)) if ours(a) => Ok(()),
            Some(Value::Array(list)) if list.iter().any(ours) => Ok(()),
            Some(_) => Err("aud names none of the audiences"),
        }
    }

    fn secret(&self) -> Option<String> {
        let mut last = self.last_secret.lock().unwrap_or_else(|e| e.into_inner());
        match self.secret.resolve("inbound.introspection.clientSecret") {
            Ok(s) => {
                *last = Some(s.clone());
                Some(s)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the introspection client secret; using the last one read");
                last.clone()
            }
        }
    }

    async fn ask(&self, token: &str) -> Result<Map<String, Value>, FetchError> {
        let secret = self
            .secret()
            .ok_or_else(|| FetchError::Request("no client secret".into()))?;
        let form = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            form(&self.client_id),
            form(&secret)
        ));
        let resp = self
            .client
            .post(self.url.clone())
            .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
            .header(http::header::ACCEPT, "application/json")
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .send()
            .await
            .map_err(|e| FetchError::Request(e.without_url().to_string()))?;
        let bytes = fetch::body(resp, fetch::MAX_INTROSPECTION_BYTES).await?;
        serde_json::from_slice(&bytes).map_err(|e| FetchError::Json(e.to_string()))
    }
}

/// Takes a token's flight out of the map once it ended, or once no request
/// waits for it any more.
struct Leave<'a> {
    flights: &'a Mutex<HashMap<TokenHash, Flight>>,
    key: TokenHash,
    flight: Flight,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
        let ours = flights
            .get(&self.key)
            .is_some_and(|f| Arc::ptr_eq(f, &self.flight));
        // Clones are made under this lock: 2 is the map's and ours.
        if ours && (self.flight.initialized() || Arc::strong_count(&self.flight) == 2) {
            flights.remove(&self.key);
        }
    }
}

/// Cached answers, active and refused apart, each kind bounded.
struct Cache {
    max: usize,
    maps: Mutex<Maps>,
}

#[derive(Default)]
struct Maps {
    active: HashMap<TokenHash, (Principal, Instant)>,
    refused: HashMap<TokenHash, (&'static str, Instant)>,
}

impl Cache {
    fn new(max: usize) -> Self {
        Cache {
            max: max.max(1),
            maps: Mutex::default(),
        }
    }

    fn get(&self, key: &TokenHash) -> Option<Answer> {
        let maps = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if let Some((p, until)) = maps.active.get(key) {
            if *until > now {
                return Some(Answer::Active(p.clone()));
            }
        }
        maps.refused
            .get(key)
            .filter(|(_, until)| *until > now)
            .map(|(why, _)| Answer::Refused(why))
    }

    fn put(&self, key: TokenHash, answer: Answer, until: Instant) {
        let mut maps = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        let Maps { active, refused } = &mut *maps;
        match answer {
            Answer::Active(p) => {
                refused.remove(&key);
                bounded_insert(active, key, (p, until), self.max, |v| v.1);
            }
            Answer::Refused(why) => {
                active.remove(&key);
                bounded_insert(refused, key, (why, until), self.max, |v| v.1);
            }
        }
    }
}

/// Inserts into a map of at most `max` entries: when full, expired ones
/// go first, then arbitrary ones.
fn bounded_insert<V>(
    map: &mut HashMap<TokenHash, V>,
    key: TokenHash,
    value: V,
    max: usize,
    until: impl Fn(&V) -> Instant,
) {
    if map.len() >= max && !map.contains_key(&key) {
        let now = Instant::now();
        map.retain(|_, v| until(v) > now);
        while map.len() >= max {
            let Some(k) = map.keys().next().copied() else {
                break;
            };
            map.remove(&k);
        }
    }
    map.insert(key, value);
}

/// An active answer's principal: the subject claim, else `username`, else
/// `client_id` (a client acting for itself), recorded as the subject's
/// claim so a user and a client of one name stay two identities. Its
/// issuer is the answer's `iss`, else `default_issuer` (the configured
/// `issuer`, else the introspection URL): only they vouched for the token.
fn principal(
    mut claims: Map<String, Value>,
    names: &ClaimNames,
    default_issuer: &str,
) -> Option<Principal> {
    let has_subject = |c: &Map<String, Value>| {
        c.get(&names.subject)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    let mut subject_claim = None;
    if !has_subject(&claims) {
        let (claim, fallback) = ["username", "client_id"].into_iter().find_map(|k| {
            claims
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|v| (k, v.to_string()))
        })?;
        claims.insert(names.subject.clone(), Value::String(fallback));
        subject_claim = Some(claim.to_string());
    }
    let issuer = claims
        .get("iss")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(default_issuer)
        .to_string();
    super::jwt::principal_of(
        claims,
        names,
        AuthMethod::Introspection,
        Some(issuer),
        subject_claim,
    )
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}
