//! RFC 7662 token introspection, for bearer tokens that are neither JWTs
//! of a configured issuer nor API keys.
//!
//! The token is POSTed as a form with `client_secret_basic` client
//! authentication (RFC 6749 §2.3.1: id and secret form-encoded, then
//! Basic). The client secret is read from its reference on each call to
//! the endpoint, so a rotated Secret is used without a restart; if it
//! cannot be read, the last value read is used.
//!
//! Answers are cached under the SHA-256 of the token (the token itself is
//! not kept) until the token's `exp`, at most `cacheTtlSeconds`: a revoked
//! token stays accepted for up to that long. Inactive answers are cached
//! too (for at most [`NEGATIVE_TTL`]), so a client retrying a dead token
//! does not reach the IdP on each request. The cache holds at most
//! [`MAX_ENTRIES`]; when full, expired entries go first, then arbitrary
//! ones.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use catalog::access::Principal;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::config::{ClaimNames, IntrospectionConfig};
use super::fetch::{self, FetchError};
use crate::config::{Resolve, SecretRef};

/// Cached answers, at most.
pub const MAX_ENTRIES: usize = 10_000;
/// Longest reuse of an `active: false` answer.
pub const NEGATIVE_TTL: Duration = Duration::from_secs(30);

#[derive(Clone)]
enum Answer {
    Active(Principal),
    Inactive,
}

struct Entry {
    answer: Answer,
    until: Instant,
}

/// The outcome of one introspection.
pub enum Verdict {
    Active(Principal),
    Inactive,
    /// The endpoint failed: not the token's fault.
    Unavailable(FetchError),
}

pub struct Introspector {
    url: reqwest::Url,
    client_id: String,
    secret: SecretRef,
    last_secret: Mutex<Option<String>>,
    ttl: Duration,
    client: reqwest::Client,
    cache: Mutex<HashMap<[u8; 32], Entry>>,
}

impl Introspector {
    /// Checks that the secret can be read now (a start-up error).
    pub fn new(
        cfg: &IntrospectionConfig,
        client: reqwest::Client,
    ) -> Result<Self, super::config::InvalidField> {
        let url =
            super::config::http_url(&cfg.url).map_err(|message| super::config::InvalidField {
                field: "inbound.introspection.url".into(),
                message,
            })?;
        let secret = cfg
            .client_secret
            .resolve("inbound.introspection.clientSecret")
            .map_err(|e| super::config::InvalidField {
                field: e.field,
                message: e.message,
            })?;
        Ok(Introspector {
            url,
            client_id: cfg.client_id.clone(),
            secret: cfg.client_secret.clone(),
            last_secret: Mutex::new(Some(secret)),
            ttl: Duration::from_secs(cfg.cache_ttl_seconds),
            client,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Whether `token` is active, and whose.
    pub async fn check(&self, token: &str, names: &ClaimNames) -> Verdict {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = self.cached(&key) {
            return match hit {
                Answer::Active(p) => Verdict::Active(p),
                Answer::Inactive => Verdict::Inactive,
            };
        }
        let claims = match self.ask(token).await {
            Ok(c) => c,
            Err(e) => return Verdict::Unavailable(e),
        };
        let now = Instant::now();
        let active = claims.get("active") == Some(&Value::Bool(true));
        let exp = claims.get("exp").and_then(Value::as_u64);
        let left = exp.map(|e| Duration::from_secs(e.saturating_sub(unix_now())));
        let (answer, until) = match (active, left) {
            (true, Some(l)) if l.is_zero() => (Answer::Inactive, now + NEGATIVE_TTL.min(self.ttl)),
            (true, l) => match principal(claims, names) {
                Some(p) => (
                    Answer::Active(p),
                    now + l.map_or(self.ttl, |l| l.min(self.ttl)),
                ),
                None => (Answer::Inactive, now + NEGATIVE_TTL.min(self.ttl)),
            },
            (false, _) => (Answer::Inactive, now + NEGATIVE_TTL.min(self.ttl)),
        };
        self.store(key, answer.clone(), until);
        match answer {
            Answer::Active(p) => Verdict::Active(p),
            Answer::Inactive => Verdict::Inactive,
        }
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Answer> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(key)
            .filter(|e| e.until > Instant::now())
            .map(|e| e.answer.clone())
    }

    fn store(&self, key: [u8; 32], answer: Answer, until: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX_ENTRIES && !cache.contains_key(&key) {
            let now = Instant::now();
            cache.retain(|_, e| e.until > now);
            while cache.len() >= MAX_ENTRIES {
                let Some(k) = cache.keys().next().copied() else {
                    break;
                };
                cache.remove(&k);
            }
        }
        cache.insert(key, Entry { answer, until });
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

/// An active answer's principal: the subject claim, else `username`, else
/// `client_id` (a client acting for itself).
fn principal(mut claims: Map<String, Value>, names: &ClaimNames) -> Option<Principal> {
    let has_subject = |c: &Map<String, Value>| {
        c.get(&names.subject)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    if !has_subject(&claims) {
        let fallback = ["username", "client_id"].into_iter().find_map(|k| {
            claims
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })?;
        claims.insert(names.subject.clone(), Value::String(fallback));
    }
    super::jwt::principal(claims, names)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}
