//! JWT access tokens of the configured issuers.
//!
//! In order, each step before the next, so nothing is fetched or verified
//! for a token refused earlier:
//!
//! 1. The header's `alg` must be one of [`ALLOWED`]: asymmetric only.
//!    `none` would accept unsigned tokens; HS* would verify with a shared
//!    secret, and a verifier that takes the public key as that secret
//!    accepts tokens anyone can sign (key confusion). A `crit` header is
//!    refused (no extension is understood).
//! 2. The (unverified) `iss` picks the issuer; an issuer not configured
//!    makes the token "not ours" (it may go to introspection).
//! 3. The key: `kid` in the issuer's JWKS ([`super::jwks`]), of a type
//!    fitting `alg`.
//! 4. Signature, then `iss`, `aud` (one of the issuer's audiences), `exp`
//!    and `nbf` (with leeway), all required but `nbf`.
//!
//! A token that passed is remembered by its SHA-256 until its `exp` (plus
//! the leeway, as the check itself allows), so an agent sending the same
//! token on every call pays for one signature check, not one per call: an
//! RS256 verification cost more than the rest of a tools/call (the
//! benchmark in the README). Only verified tokens are remembered, and the
//! whole token is the key, so a changed byte is a miss. Steps 1 to 3 still
//! run for a remembered token: one whose key has left the issuer's JWKS is
//! refused like any other.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use catalog::access::{AuthMethod, Principal};
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::config::{ClaimNames, JwtIssuer};
use super::jwks::{self, KeyError, KeySource};

/// Signature algorithms accepted, by their `alg` names.
pub(crate) const ALLOWED: &[(&str, Algorithm)] = &[
    ("RS256", Algorithm::RS256),
    ("RS384", Algorithm::RS384),
    ("RS512", Algorithm::RS512),
    ("PS256", Algorithm::PS256),
    ("PS384", Algorithm::PS384),
    ("PS512", Algorithm::PS512),
    ("ES256", Algorithm::ES256),
    ("ES384", Algorithm::ES384),
    ("EdDSA", Algorithm::EdDSA),
];

/// One trusted issuer.
struct Issuer {
    issuer: String,
    audiences: Vec<String>,
    keys: KeySource,
}

/// Verifies JWTs of the configured issuers.
pub(crate) struct JwtVerifier {
    issuers: Vec<Issuer>,
    leeway: u64,
    verified: Verified,
}

/// Most tokens remembered as verified; past it, expired ones are dropped,
/// and if none has expired, all (a flood of distinct valid tokens costs
/// verifications again, never memory).
const MAX_VERIFIED: usize = 10_000;

/// Verified tokens by SHA-256: their claims and until when (Unix seconds)
/// they stay valid.
#[derive(Default)]
struct Verified(Mutex<HashMap<[u8; 32], Remembered>>);

/// A verified token's claims and its last valid second.
type Remembered = (Map<String, Value>, u64);

impl Verified {
    fn get(&self, key: &[u8; 32], now: u64) -> Option<Map<String, Value>> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(key)
            .filter(|(_, until)| now <= *until)
            .map(|(claims, _)| claims.clone())
    }

    fn put(&self, key: [u8; 32], claims: &Map<String, Value>, until: u64, now: u64) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_VERIFIED {
            map.retain(|_, (_, u)| now <= *u);
            if map.len() >= MAX_VERIFIED {
                map.clear();
            }
        }
        map.insert(key, (claims.clone(), until));
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The outcome of a token shaped like a JWT.
pub(crate) enum Verdict {
    Valid(Map<String, Value>),
    /// Its `iss` is no configured issuer (or it has none).
    NotOurs,
    Refused(Refusal),
}

/// Why a token was refused: for the debug log, never for the client
/// beyond [`Refusal::expired`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("alg {0:?} is not allowed")]
    Algorithm(String),
    #[error("the header has crit")]
    Critical,
    #[error("{0}")]
    Key(KeyError),
    #[error("invalid token: {0}")]
    Invalid(String),
    #[error("expired")]
    Expired,
}

impl Refusal {
    pub(crate) fn expired(&self) -> bool {
        matches!(self, Refusal::Expired)
    }

    /// The issuer's keys could not be had at all: not the token's fault.
    pub(crate) fn unavailable(&self) -> bool {
        matches!(self, Refusal::Key(KeyError::Unavailable(_)))
    }
}

#[derive(Deserialize)]
struct RawHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<Value>,
}

#[derive(Deserialize)]
struct RawIssuer {
    #[serde(default)]
    iss: Option<String>,
}

/// Whether `token` has the shape of a JWS compact serialization: three
/// base64url parts, the first a JSON object with `alg`.
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    header(token).is_some()
}

fn header(token: &str) -> Option<RawHeader> {
    let mut parts = token.split('.');
    let (h, _p, _s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(h)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn unverified_issuer(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice::<RawIssuer>(&bytes).ok()?.iss
}

impl JwtVerifier {
    pub(crate) fn new(
        issuers: &[JwtIssuer],
        leeway: u64,
        min_refetch: Duration,
        refresh: Duration,
        client: reqwest::Client,
    ) -> Result<Self, super::config::InvalidField> {
        let mut out = Vec::new();
        for (i, j) in issuers.iter().enumerate() {
            let jwks_url = match &j.jwks_url {
                Some(u) => Some(super::config::http_url(u).map_err(|message| {
                    super::config::InvalidField {
                        field: format!("inbound.jwt[{i}].jwksUrl"),
                        message,
                    }
                })?),
                None => None,
            };
            out.push(Issuer {
                issuer: j.issuer.clone(),
                audiences: j.audiences.clone(),
                keys: KeySource::new(
                    j.issuer.clone(),
                    jwks_url,
                    min_refetch,
                    refresh,
                    client.clone(),
                ),
            });
        }
        Ok(JwtVerifier {
            issuers: out,
            leeway,
            verified: Verified::default(),
        })
    }

    pub(crate) fn issuers(&self) -> impl Iterator<Item = &str> {
        self.issuers.iter().map(|i| i.issuer.as_str())
    }

    /// Verifies a token shaped like a JWT (see the module docs).
    pub(crate) async fn verify(&self, token: &str) -> Verdict {
        let Some(h) = header(token) else {
            return Verdict::NotOurs;
        };
        let Some(issuer) =
            unverified_issuer(token).and_then(|iss| self.issuers.iter().find(|i| i.issuer == iss))
        else {
            return Verdict::NotOurs;
        };
        let Some(&(_, alg)) = ALLOWED.iter().find(|(name, _)| *name == h.alg) else {
            return Verdict::Refused(Refusal::Algorithm(h.alg));
        };
        if h.crit.is_some() {
            return Verdict::Refused(Refusal::Critical);
        }
        let keys = match issuer.keys.key(h.kid.as_deref(), alg).await {
            Ok(k) => k,
            Err(e) => return Verdict::Refused(Refusal::Key(e)),
        };
        let Some(key) = jwks::find(&keys, h.kid.as_deref(), alg) else {
            return Verdict::Refused(Refusal::Invalid("key vanished".into()));
        };
        // After the key lookup, so a token whose key left the JWKS is
        // refused even though it verified before.
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(claims) = self.verified.get(&digest, unix_now()) {
            return Verdict::Valid(claims);
        }
        let mut v = Validation::new(alg);
        v.leeway = self.leeway;
        v.validate_nbf = true;
        v.set_issuer(&[&issuer.issuer]);
        v.set_audience(&issuer.audiences);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        match jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &v) {
            Ok(data) => {
                // `exp` is required, so present and checked by now.
                if let Some(exp) = data.claims.get("exp").and_then(Value::as_u64) {
                    let until = exp.saturating_add(self.leeway);
                    self.verified.put(digest, &data.claims, until, unix_now());
                }
                Verdict::Valid(data.claims)
            }
            Err(e) => Verdict::Refused(match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => Refusal::Expired,
                // NB: serde's messages may quote claim values; the kind
                // is enough to debug with.
                jsonwebtoken::errors::ErrorKind::Json(_) => {
                    Refusal::Invalid("claims of the wrong type".into())
                }
                k => Refusal::Invalid(format!("{k:?}")),
            }),
        }
    }
}

/// The principal a verified JWT's claims name; `None` without a subject.
/// Its issuer is `iss`, which verification checked against the issuer
/// configured for the token's key.
pub(crate) fn principal(claims: Map<String, Value>, names: &ClaimNames) -> Option<Principal> {
    let issuer = claims
        .get("iss")
        .and_then(Value::as_str)
        .map(str::to_string);
    principal_of(claims, names, AuthMethod::Jwt, issuer, None)
}

/// The principal of verified claims (a JWT's, or an introspection
/// answer's), `issuer` having vouched for them.
pub(crate) fn principal_of(
    mut claims: Map<String, Value>,
    names: &ClaimNames,
    method: AuthMethod,
    issuer: Option<String>,
    subject_claim: Option<String>,
) -> Option<Principal> {
    let subject = match claims.get(&names.subject)? {
        Value::String(s) if !s.is_empty() => s.clone(),
        _ => return None,
    };
    let scopes = claims
        .get(&names.scopes)
        .or_else(|| claims.get("scp"))
        .map(scope_list)
        .unwrap_or_default();
    // Access rules' CEL reads `claims.groups`, whatever the issuer calls it.
    if names.groups != "groups" && !claims.contains_key("groups") {
        if let Some(g) = claims.get(&names.groups).cloned() {
            claims.insert("groups".into(), g);
        }
    }
    Some(Principal {
        method,
        issuer,
        subject,
        subject_claim,
        scopes,
        claims,
    })
}

/// A space-separated string (`scope`, RFC 8693 §4.2) or a list of strings
/// (`scp` as some issuers send it).
fn scope_list(v: &Value) -> BTreeSet<String> {
    match v {
        Value::String(s) => s.split_whitespace().map(str::to_string).collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => BTreeSet::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn verified_tokens_are_remembered_until_they_expire_and_no_longer() {
        let v = Verified::default();
        let claims: Map<String, Value> = serde_json::from_str(r#"{"sub": "alice"}"#).unwrap();
        v.put([1; 32], &claims, 100, 50);
        assert_eq!(v.get(&[1; 32], 100), Some(claims.clone()));
        assert_eq!(v.get(&[1; 32], 101), None, "past exp + leeway");
        assert_eq!(v.get(&[2; 32], 50), None, "another token");
        // Full: expired entries go first, then everything.
        for i in 0..MAX_VERIFIED as u32 {
            let mut k = [0; 32];
            k[..4].copy_from_slice(&i.to_be_bytes());
            v.put(k, &claims, if i % 2 == 0 { 10 } else { 1000 }, 5);
        }
        v.put([3; 32], &claims, 1000, 20);
        let len = v.0.lock().unwrap().len();
        assert!(len <= MAX_VERIFIED / 2 + 2, "{len}");
        assert!(v.get(&[3; 32], 20).is_some());
    }

    #[test]
    fn scopes_come_from_scope_or_scp_as_string_or_list() {
        let names = ClaimNames::default();
        let p = |c: Value| principal(c.as_object().unwrap().clone(), &names);
        let s = |p: Option<Principal>| p.unwrap().scopes.into_iter().collect::<Vec<_>>();
        assert_eq!(s(p(json!({"sub": "a", "scope": "x y"}))), ["x", "y"]);
        assert_eq!(s(p(json!({"sub": "a", "scp": ["x", "z"]}))), ["x", "z"]);
        assert_eq!(s(p(json!({"sub": "a", "scp": "q"}))), ["q"]);
        assert!(
            p(json!({"scope": "x"})).is_none(),
            "no subject, no principal"
        );
        assert!(p(json!({"sub": ""})).is_none());
    }

    #[test]
    fn renamed_claims_are_read_and_groups_exposed_as_groups() {
        let names = ClaimNames {
            subject: "preferred_username".into(),
            scopes: "roles".into(),
            groups: "teams".into(),
        };
        let p = principal(
            json!({"sub": "id-1", "preferred_username": "ann", "roles": ["r"], "teams": ["sre"]})
                .as_object()
                .unwrap()
                .clone(),
            &names,
        )
        .unwrap();
        assert_eq!(p.subject, "ann");
        assert!(p.scopes.contains("r"));
        assert_eq!(p.claims["groups"], json!(["sre"]));
    }

    #[test]
    fn only_three_part_tokens_with_a_json_header_look_like_jwts() {
        let h = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256"}"#);
        assert!(looks_like_jwt(&format!("{h}.e30.sig")));
        assert!(looks_like_jwt(&format!("{h}.e30.")));
        assert!(!looks_like_jwt("opaque-token"));
        assert!(!looks_like_jwt(&format!("{h}.e30")));
        assert!(!looks_like_jwt(&format!("{h}.e30.a.b")));
        assert!(!looks_like_jwt("bm90anNvbg.e30.sig"));
    }
}
