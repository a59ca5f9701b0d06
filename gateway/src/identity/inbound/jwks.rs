//! The signing keys of one issuer: its JWKS, fetched on first use (from
//! `jwksUrl`, else from the `jwks_uri` of its OIDC discovery document),
//! cached, and fetched again
//!
//! - in the background once the cached set is `jwksRefreshSeconds` old
//!   (and then every `jwksRefreshSeconds`), while the cached keys keep
//!   serving: a key removed from the JWKS is refused at most
//!   `jwksRefreshSeconds` plus one fetch (10 s at most) after its removal,
//!   with or without traffic. While the JWKS cannot be fetched the keys
//!   last fetched keep serving (an IdP outage does not lock callers out);
//!   failed refreshes are retried every `min_refetch` (at least 1 s).
//! - when a token names a `kid` the cached set lacks (the issuer rotated
//!   its key), at most once per `min_refetch` per issuer: a stream of
//!   tokens with made-up `kid`s costs the issuer one request per interval,
//!   not one per token. After a failed fetch, requests wait out the same
//!   interval before causing another.
//!
//! At most one fetch per issuer is in flight, and every request that needs
//! its result waits for that one fetch (none starts its own), so a slow
//! endpoint costs each waiter one fetch time, not one per waiter ahead of
//! it. The fetch runs as a task of its own: a waiter that goes away does
//! not cancel it for the others. Intervals count from the end of a fetch,
//! so a fetch as long as the interval does not make the next one due at
//! once.
//!
//! A JWKS with more than [`MAX_KEYS`] usable keys is reported (a warning
//! naming the issuer, on every fetch of it); the keys past the 64th are
//! not used.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use tokio::sync::watch;

use super::fetch::{self, FetchError};

/// Keys kept from one JWKS; more are reported, and not used.
pub(crate) const MAX_KEYS: usize = 64;
/// Shortest wait before a failed background refresh is tried again.
const MIN_RETRY: Duration = Duration::from_secs(1);

/// One usable verification key.
pub(crate) struct Key {
    pub kid: Option<String>,
    /// The JWK's `alg`, when it pins one.
    pub alg: Option<Algorithm>,
    pub decoding: DecodingKey,
    family: Family,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Rsa,
    Ec,
    Ed,
}

impl Key {
    /// Whether this key may verify a token signed with `alg` (the key
    /// type fits the algorithm, and the JWK's own `alg`, if any, is it).
    pub(crate) fn fits(&self, alg: Algorithm) -> bool {
        let family = match alg {
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512 => Family::Rsa,
            Algorithm::ES256 | Algorithm::ES384 => Family::Ec,
            Algorithm::EdDSA => Family::Ed,
            // HS* and whatever a later version adds: never.
            _ => return false,
        };
        family == self.family && self.alg.is_none_or(|a| a == alg)
    }
}

/// Why no key was found.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The (fresh, or just refetched) set has no such key.
    #[error("no key with kid {kid:?} fitting {alg:?} (refetched: {refetched})")]
    Unknown {
        kid: Option<String>,
        alg: Algorithm,
        refetched: bool,
    },
    /// No key set could be fetched at all.
    #[error("no keys: {0}")]
    Unavailable(String),
}

/// What caused a fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// No keys yet.
    Cold,
    /// The keys reached the refresh age.
    Refresh,
    /// A token named a `kid` the keys lack.
    UnknownKid,
}

/// One issuer's keys and fetch bookkeeping, under one (never awaited)
/// lock.
#[derive(Default)]
struct State {
    keys: Arc<Vec<Key>>,
    /// End of the last successful fetch.
    fetched_at: Option<Instant>,
    /// From discovery, once found.
    jwks_uri: Option<reqwest::Url>,
    /// End of the last fetch, and its error if it failed.
    ended_at: Option<Instant>,
    failure: Option<String>,
    /// End of the last fetch caused by an unknown `kid`.
    refetched_at: Option<Instant>,
    /// The fetch in flight: `true` once it ended.
    flight: Option<watch::Receiver<bool>>,
    /// Whether the background refresher runs.
    refreshing: bool,
}

struct Inner {
    issuer: String,
    configured: Option<reqwest::Url>,
    min_refetch: Duration,
    refresh: Duration,
    client: reqwest::Client,
    state: Mutex<State>,
}

/// The keys of one issuer.
pub(crate) struct KeySource {
    inner: Arc<Inner>,
}

impl KeySource {
    /// `refresh`: the age at which keys are fetched again in the
    /// background; `min_refetch`: the shortest interval between fetches
    /// caused by unknown `kid`s or after a failure.
    pub(crate) fn new(
        issuer: String,
        jwks_url: Option<reqwest::Url>,
        min_refetch: Duration,
        refresh: Duration,
        client: reqwest::Client,
    ) -> Self {
        KeySource {
            inner: Arc::new(Inner {
                issuer,
                configured: jwks_url,
                min_refetch,
                refresh: refresh.max(MIN_RETRY),
                client,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The keys to verify a token with header `kid` and `alg`: returns at
    /// once when the cached keys have it, else waits for the issuer's one
    /// fetch in flight (starting it when it is due).
    pub(crate) async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Arc<Vec<Key>>, KeyError> {
        let inner = &self.inner;
        let mut waited = false;
        loop {
            let flight = {
                let mut s = inner.lock();
                let now = Instant::now();
                if find(&s.keys, kid, alg).is_some() {
                    // The refresher normally got there first; this covers
                    // a refresher that has not woken yet.
                    let stale = s
                        .fetched_at
                        .is_some_and(|t| now.duration_since(t) >= inner.refresh);
                    if stale && s.flight.is_none() && inner.retry_allowed(&s, now) {
                        let _ = inner.start(&mut s, Cause::Refresh);
                    }
                    return Ok(s.keys.clone());
                }
                if waited {
                    return Err(inner.miss(&s, kid, alg, true));
                }
                match &s.flight {
                    Some(f) => f.clone(),
                    None => {
                        let cause = if s.fetched_at.is_none() {
                            Cause::Cold
                        } else {
                            Cause::UnknownKid
                        };
                        let due = inner.retry_allowed(&s, now)
                            && (cause == Cause::Cold
                                || s.refetched_at
                                    .is_none_or(|t| now.duration_since(t) >= inner.min_refetch));
                        if !due {
                            return Err(inner.miss(&s, kid, alg, false));
                        }
                        inner.start(&mut s, cause)
                    }
                }
            };
            inner.wait(flight).await;
            waited = true;
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the last fetch, if it failed, ended at least `min_refetch`
    /// ago.
    fn retry_allowed(&self, s: &State, now: Instant) -> bool {
        s.failure.is_none()
            || s.ended_at
                .is_none_or(|t| now.duration_since(t) >= self.min_refetch)
    }

    fn miss(&self, s: &State, kid: Option<&str>, alg: Algorithm, refetched: bool) -> KeyError {
        match &s.failure {
            Some(f) if s.keys.is_empty() => KeyError::Unavailable(f.clone()),
            _ => KeyError::Unknown {
                kid: kid.map(str::to_string),
                alg,
                refetched,
            },
        }
    }

    /// Starts the one fetch (the caller checked none is in flight).
    fn start(self: &Arc<Self>, s: &mut State, cause: Cause) -> watch::Receiver<bool> {
        let (tx, rx) = watch::channel(false);
        s.flight = Some(rx.clone());
        let inner = self.clone();
        let known_uri = s.jwks_uri.clone();
        tokio::spawn(async move {
            let result = inner.fetch_keys(known_uri).await;
            let spawn_refresher = {
                let mut s = inner.lock();
                let now = Instant::now();
                s.ended_at = Some(now);
                if cause == Cause::UnknownKid {
                    s.refetched_at = Some(now);
                }
                match result {
                    Ok((keys, uri)) => {
                        tracing::debug!(issuer = %inner.issuer, keys = keys.len(), ?cause, "JWKS fetched");
                        s.keys = Arc::new(keys);
                        s.fetched_at = Some(now);
                        s.failure = None;
                        s.jwks_uri = Some(uri);
                    }
                    Err(e) => {
                        tracing::warn!(issuer = %inner.issuer, error = %e, "cannot fetch the issuer's JWKS; keeping the keys it had");
                        s.failure = Some(e.to_string());
                    }
                }
                s.flight = None;
                let spawn = !s.refreshing && s.fetched_at.is_some();
                s.refreshing |= spawn;
                spawn
            };
            if spawn_refresher {
                tokio::spawn(refresher(Arc::downgrade(&inner)));
            }
            let _ = tx.send(true);
        });
        rx
    }

    /// Until `flight` ended (or its task died).
    async fn wait(&self, mut flight: watch::Receiver<bool>) {
        if flight.wait_for(|done| *done).await.is_err() {
            // The task ended without saying so (it panicked): forget its
            // flight so the next request can start another.
            let mut s = self.lock();
            if s.flight.as_ref().is_some_and(|f| f.same_channel(&flight)) {
                s.flight = None;
            }
        }
    }

    /// When the refresher should fetch next.
    fn next_refresh(&self, s: &State) -> Instant {
        let now = Instant::now();
        match (&s.failure, s.ended_at, s.fetched_at) {
            (Some(_), Some(end), _) => end + self.min_refetch.max(MIN_RETRY).min(self.refresh),
            (_, _, Some(t)) => t + self.refresh,
            _ => now + self.refresh,
        }
    }

    /// The key set, and the URL it came from.
    async fn fetch_keys(
        &self,
        known_uri: Option<reqwest::Url>,
    ) -> Result<(Vec<Key>, reqwest::Url), FetchError> {
        let url = match (&self.configured, known_uri) {
            (Some(u), _) => u.clone(),
            (None, Some(u)) => u,
            (None, None) => self.discover().await?,
        };
        let set: JwksDocument = fetch::get_json(&self.client, &url).await?;
        let mut keys: Vec<Key> = set.keys.iter().filter_map(usable).collect();
        if keys.len() > MAX_KEYS {
            // NB: silently dropping keys would refuse the tokens of the
            // dropped ones with nothing to say why.
            tracing::warn!(
                issuer = %self.issuer,
                keys = keys.len(),
                used = MAX_KEYS,
                "the issuer's JWKS has more than {MAX_KEYS} usable keys; the keys past the {MAX_KEYS}th are not used, and tokens signed with them are refused"
            );
            keys.truncate(MAX_KEYS);
        }
        Ok((keys, url))
    }

    /// `jwks_uri` of the issuer's OIDC discovery document, whose `issuer`
    /// must be the configured one (OpenID Connect Discovery §4.3).
    async fn discover(&self) -> Result<reqwest::Url, FetchError> {
        let at = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let at = reqwest::Url::parse(&at).map_err(|e| FetchError::Request(e.to_string()))?;
        let doc: Discovery = fetch::get_json(&self.client, &at).await?;
        if doc.issuer != self.issuer {
            return Err(FetchError::Json(format!(
                "discovery document names issuer {:?}",
                doc.issuer
            )));
        }
        super::config::http_url(&doc.jwks_uri)
            .map_err(|m| FetchError::Json(format!("jwks_uri: {m}")))
    }
}

/// Refreshes the keys when they are due, for as long as their
/// [`KeySource`] lives (it holds no reference between fetches).
async fn refresher(source: Weak<Inner>) {
    loop {
        let (due, flight) = {
            let Some(inner) = source.upgrade() else {
                return;
            };
            let s = inner.lock();
            (inner.next_refresh(&s), s.flight.clone())
        };
        if let Some(f) = flight {
            if let Some(inner) = source.upgrade() {
                inner.wait(f).await;
            }
            continue;
        }
        tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
        let Some(inner) = source.upgrade() else {
            return;
        };
        let flight = {
            let mut s = inner.lock();
            (s.flight.is_none() && Instant::now() >= inner.next_refresh(&s))
                .then(|| inner.start(&mut s, Cause::Refresh))
        };
        if let Some(f) = flight {
            inner.wait(f).await;
        }
    }
}

/// The key for `kid` fitting `alg`; without a `kid`, the only key that
/// fits (several: none, rather than trying each).
pub(crate) fn find<'a>(keys: &'a [Key], kid: Option<&str>, alg: Algorithm) -> Option<&'a Key> {
    match kid {
        Some(kid) => keys
            .iter()
            .find(|k| k.kid.as_deref() == Some(kid) && k.fits(alg)),
        None => {
            let mut fitting = keys.iter().filter(|k| k.fits(alg));
            let one = fitting.next()?;
            fitting.next().is_none().then_some(one)
        }
    }
}

#[derive(Deserialize)]
struct JwksDocument {
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

/// A signature key of a supported type; encryption keys, symmetric keys
/// and keys that do not parse are skipped (one bad key must not take the
/// others down).
fn usable(v: &serde_json::Value) -> Option<Key> {
    let jwk: Jwk = serde_json::from_value(v.clone()).ok()?;
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    let family = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Family::Rsa,
        AlgorithmParameters::EllipticCurve(_) => Family::Ec,
        AlgorithmParameters::OctetKeyPair(_) => Family::Ed,
        // NB: a symmetric key in a JWKS would make HS* tokens verifiable
        // by anyone who read the (public) JWKS.
        AlgorithmParameters::OctetKey(_) | AlgorithmParameters::Other(_) => return None,
        #[allow(unreachable_patterns)]
        _ => return None,
    };
    let alg = match jwk.common.key_algorithm {
        None => None,
        Some(a) => Some(a.to_string().parse::<Algorithm>().ok()?),
    };
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        decoding: DecodingKey::from_jwk(&jwk).ok()?,
        family,
    })
}
