//! The signing keys of one issuer: its JWKS, fetched on first use (from
//! `jwksUrl`, else from the `jwks_uri` of its OIDC discovery document),
//! cached, and fetched again
//!
//! - when the cached set is older than [`MAX_AGE`], and
//! - when a token names a `kid` the cached set lacks (the issuer rotated
//!   its key), at most once per `min_refetch` per issuer: a stream of
//!   tokens with made-up `kid`s costs the issuer one request per interval,
//!   not one per token. Failed fetches are held to the same interval.
//!
//! One fetch at a time per issuer: concurrent requests wait for it and
//! then look again, so a burst of tokens signed with a new key makes one
//! fetch.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

use super::fetch::{self, FetchError};

/// A cached key set is fetched again once this old, on next use.
pub const MAX_AGE: Duration = Duration::from_secs(3600);
/// Keys kept from one JWKS; the rest are ignored.
const MAX_KEYS: usize = 64;

/// One usable verification key.
pub struct Key {
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
    pub fn fits(&self, alg: Algorithm) -> bool {
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

#[derive(Default)]
struct Cached {
    keys: Arc<Vec<Key>>,
    fetched_at: Option<Instant>,
}

/// What the fetch lock guards.
#[derive(Default)]
struct FetchState {
    /// From discovery, once found.
    jwks_uri: Option<reqwest::Url>,
    last_attempt: Option<Instant>,
    last_failed: bool,
    last_refetch: Option<Instant>,
}

/// The keys of one issuer.
pub struct KeySource {
    issuer: String,
    configured: Option<reqwest::Url>,
    min_refetch: Duration,
    client: reqwest::Client,
    cached: RwLock<Cached>,
    fetch: tokio::sync::Mutex<FetchState>,
}

impl KeySource {
    pub fn new(
        issuer: String,
        jwks_url: Option<reqwest::Url>,
        min_refetch: Duration,
        client: reqwest::Client,
    ) -> Self {
        KeySource {
            issuer,
            configured: jwks_url,
            min_refetch,
            client,
            cached: RwLock::new(Cached::default()),
            fetch: tokio::sync::Mutex::new(FetchState::default()),
        }
    }

    /// The key to verify a token with header `kid` and `alg`.
    pub async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<Arc<Vec<Key>>, KeyError>
where {
        let find = |keys: &Arc<Vec<Key>>| find(keys, kid, alg).is_some();
        let (keys, fresh) = self.snapshot();
        if fresh && find(&keys) {
            return Ok(keys);
        }
        let mut state = self.fetch.lock().await;
        // Another request may have fetched while this one waited.
        let (keys, fresh) = self.snapshot();
        if fresh && find(&keys) {
            return Ok(keys);
        }
        let now = Instant::now();
        let may_retry =
            |at: Option<Instant>| at.is_none_or(|t| now.duration_since(t) >= self.min_refetch);
        let never = state.last_attempt.is_none();
        let (fetch, refetch) = if never || (!fresh && !state.last_failed) {
            (true, false)
        } else if !fresh || state.last_failed {
            // Stale or failing: retry, but no more often than the interval.
            (may_retry(state.last_attempt), false)
        } else {
            // Fresh, and the kid is not in it: the issuer may have rotated.
            let go = may_retry(state.last_refetch);
            (go, go)
        };
        if !fetch {
            let failed = state
                .last_failed
                .then(|| "the last fetch failed".to_string());
            return self.found_or(keys, kid, alg, false, failed);
        }
        state.last_attempt = Some(now);
        if refetch {
            state.last_refetch = Some(now);
        }
        match self.fetch_keys(&mut state).await {
            Ok(new) => {
                state.last_failed = false;
                tracing::debug!(issuer = %self.issuer, keys = new.len(), refetch, "JWKS fetched");
                let new = Arc::new(new);
                *self.cached.write().unwrap_or_else(|e| e.into_inner()) = Cached {
                    keys: new.clone(),
                    fetched_at: Some(now),
                };
                self.found_or(new, kid, alg, refetch, None)
            }
            Err(e) => {
                state.last_failed = true;
                tracing::warn!(issuer = %self.issuer, error = %e, "cannot fetch the issuer's JWKS; keeping the keys it had");
                self.found_or(keys, kid, alg, false, Some(e.to_string()))
            }
        }
    }

    fn found_or(
        &self,
        keys: Arc<Vec<Key>>,
        kid: Option<&str>,
        alg: Algorithm,
        refetched: bool,
        failure: Option<String>,
    ) -> Result<Arc<Vec<Key>>, KeyError> {
        if find(&keys, kid, alg).is_some() {
            return Ok(keys);
        }
        match failure {
            Some(f) if keys.is_empty() => Err(KeyError::Unavailable(f)),
            _ => Err(KeyError::Unknown {
                kid: kid.map(str::to_string),
                alg,
                refetched,
            }),
        }
    }

    fn snapshot(&self) -> (Arc<Vec<Key>>, bool) {
        let c = self.cached.read().unwrap_or_else(|e| e.into_inner());
        let fresh = c.fetched_at.is_some_and(|t| t.elapsed() < MAX_AGE);
        (c.keys.clone(), fresh)
    }

    async fn fetch_keys(&self, state: &mut FetchState) -> Result<Vec<Key>, FetchError> {
        let url = match (&self.configured, &state.jwks_uri) {
            (Some(u), _) | (None, Some(u)) => u.clone(),
            (None, None) => {
                let u = self.discover().await?;
                state.jwks_uri = Some(u.clone());
                u
            }
        };
        let set: JwksDocument = fetch::get_json(&self.client, &url).await?;
        Ok(set.keys.iter().filter_map(usable).take(MAX_KEYS).collect())
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

/// The key for `kid` fitting `alg`; without a `kid`, the only key that
/// fits (several: none, rather than trying each).
pub fn find<'a>(keys: &'a [Key], kid: Option<&str>, alg: Algorithm) -> Option<&'a Key> {
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
