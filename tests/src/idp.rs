//! A test identity provider on loopback: OIDC discovery, JWKS, token
//! minting, RFC 8693 token exchange and RFC 7662 introspection, with a log
//! of what each endpoint was asked, so tests can assert how often the
//! gateway came and with what.
//!
//! ```no_run
//! # async fn demo() {
//! use toolgate_tests::idp::{Alg, Idp};
//! let idp = Idp::start().await;
//! let token = idp.token().subject("alice").aud("toolgate").scope("pets.read").mint();
//! let expired = idp.token().aud("toolgate").expired().mint();
//! let kid = idp.rotate_key(); // the old RSA key leaves the JWKS
//! let opaque = idp.opaque().subject("bob").scope("pets.read").issue();
//! idp.revoke(&opaque);
//! let none = idp.attack_alg_none(&idp.token().aud("toolgate"));
//! assert_eq!(idp.jwks_fetches(), 0);
//! # let _ = (token, expired, kid, none, Alg::Es256);
//! # }
//! ```
//!
//! Endpoints: `/.well-known/openid-configuration`, `/jwks`, `/token`
//! (token exchange only, client auth `client_secret_basic`) and
//! `/introspect` (client auth `client_secret_basic`). The issuer is the
//! server's own URL (`http://127.0.0.1:<port>`).
//!
//! The signing keys are test-only PEMs committed under `fixtures/idp/`
//! (RSA keys are slow to generate in debug builds). The RSA key is the one
//! [`Idp::rotate_key`] replaces; the EC P-256 and Ed25519 keys stay.
//!
//! Size: over 600 lines because this is one fake server: every endpoint
//! shares its signing key, its token table and the log tests read, so its
//! parts stay together.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine;
use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Deserialize;
use serde_json::{json, Map, Value};

const RSA_KEYS: [&str; 2] = [
    include_str!("../fixtures/idp/rsa-1.pem"),
    include_str!("../fixtures/idp/rsa-2.pem"),
];
const RSA_PUBLIC_KEYS: [&str; 2] = [
    include_str!("../fixtures/idp/rsa-1.pub.pem"),
    include_str!("../fixtures/idp/rsa-2.pub.pem"),
];
const EC_KEY: &str = include_str!("../fixtures/idp/ec-p256.pem");
const ED_KEY: &str = include_str!("../fixtures/idp/ed25519.pem");

/// The client the gateway authenticates as at `/token` and `/introspect`.
pub const CLIENT_ID: &str = "toolgate";
/// Its secret (a test value: the secrets-never-logged test greps for it).
pub const CLIENT_SECRET: &str = "idp-client-secret-5d1f0c7a9b";

/// RFC 8693's grant type and token type of access tokens.
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The signature algorithm of a minted token (each has its own key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Rs256,
    Ps256,
    Es256,
    EdDsa,
}

impl Alg {
    fn algorithm(self) -> Algorithm {
        match self {
            Alg::Rs256 => Algorithm::RS256,
            Alg::Ps256 => Algorithm::PS256,
            Alg::Es256 => Algorithm::ES256,
            Alg::EdDsa => Algorithm::EdDSA,
        }
    }
}

/// One signing key and its published id.
struct SigningKey {
    kid: String,
    key: EncodingKey,
    /// Published as the JWK's `alg`.
    alg: Algorithm,
}

/// One token exchange the IdP answered (or refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    pub subject_token: String,
    pub subject_token_type: String,
    pub audience: Option<String>,
    pub scope: Option<String>,
    /// The token it issued; `None` when refused.
    pub issued: Option<String>,
}

/// One introspection request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Introspection {
    pub token: String,
    pub active: bool,
}

/// An opaque token known to `/introspect`.
#[derive(Debug, Clone)]
struct OpaqueRecord {
    sub: String,
    scope: Option<String>,
    aud: Option<String>,
    exp: u64,
    revoked: bool,
}

struct Inner {
    issuer: String,
    /// The current RSA key: `rsa_index` picks the PEM, `generation` names it.
    rsa: SigningKey,
    rsa_public_pem: &'static str,
    rsa_index: usize,
    generation: u64,
    ec: SigningKey,
    ed: SigningKey,
    opaque: HashMap<String, OpaqueRecord>,
    jwks_fetches: usize,
    discovery_fetches: usize,
    exchanges: Vec<Exchange>,
    introspections: Vec<Introspection>,
    /// Introspections answered with this status instead (an outage).
    introspection_failure: Option<StatusCode>,
}

/// The running IdP; dropped with the test runtime.
#[derive(Clone)]
pub struct Idp {
    url: String,
    inner: Arc<Mutex<Inner>>,
    counter: Arc<AtomicU64>,
}

impl Idp {
    /// Serves on a free loopback port.
    pub async fn start() -> Idp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let inner = Arc::new(Mutex::new(Inner {
            issuer: url.clone(),
            rsa: rsa_key(0, 1),
            rsa_public_pem: RSA_PUBLIC_KEYS[0],
            rsa_index: 0,
            generation: 1,
            ec: SigningKey {
                kid: "ec-1".into(),
                key: EncodingKey::from_ec_pem(EC_KEY.as_bytes()).expect("test EC key"),
                alg: Algorithm::ES256,
            },
            ed: SigningKey {
                kid: "ed-1".into(),
                key: EncodingKey::from_ed_pem(ED_KEY.as_bytes()).expect("test Ed25519 key"),
                alg: Algorithm::EdDSA,
            },
            opaque: HashMap::new(),
            jwks_fetches: 0,
            discovery_fetches: 0,
            exchanges: Vec::new(),
            introspections: Vec::new(),
            introspection_failure: None,
        }));
        let idp = Idp {
            url,
            inner,
            counter: Arc::new(AtomicU64::new(0)),
        };
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/token", post(token))
            .route("/introspect", post(introspect))
            .with_state(idp.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        idp
    }

    /// The issuer (`iss` of its tokens), also its base URL.
    pub fn issuer(&self) -> &str {
        &self.url
    }

    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.url)
    }

    pub fn token_url(&self) -> String {
        format!("{}/token", self.url)
    }

    pub fn introspection_url(&self) -> String {
        format!("{}/introspect", self.url)
    }

    /// A token builder: `sub` "alice", no audience, valid for an hour,
    /// RS256 with the current RSA key.
    pub fn token(&self) -> TokenBuilder {
        TokenBuilder {
            idp: self.clone(),
            claims: Map::new(),
            sub: Some("alice".into()),
            aud: Vec::new(),
            iss: None,
            exp_in: 3600,
            alg: Alg::Rs256,
            kid: None,
        }
    }

    /// Replaces the RSA signing key: the JWKS then lists a new `kid` and
    /// no longer the old one. Returns the new `kid`.
    pub fn rotate_key(&self) -> String {
        let mut i = self.lock();
        i.rsa_index = (i.rsa_index + 1) % RSA_KEYS.len();
        i.generation += 1;
        i.rsa = rsa_key(i.rsa_index, i.generation);
        i.rsa_public_pem = RSA_PUBLIC_KEYS[i.rsa_index];
        i.rsa.kid.clone()
    }

    /// The current RSA key's `kid`.
    pub fn rsa_kid(&self) -> String {
        self.lock().rsa.kid.clone()
    }

    /// An opaque-token builder (for `/introspect`).
    pub fn opaque(&self) -> OpaqueBuilder {
        OpaqueBuilder {
            idp: self.clone(),
            record: OpaqueRecord {
                sub: "alice".into(),
                scope: None,
                aud: None,
                exp: now() + 3600,
                revoked: false,
            },
        }
    }

    /// `/introspect` answers `active: false` for `token` from now on.
    pub fn revoke(&self, token: &str) {
        if let Some(r) = self.lock().opaque.get_mut(token) {
            r.revoked = true;
        }
    }

    /// `/introspect` answers `status` (`None`: back to normal).
    pub fn fail_introspection(&self, status: Option<StatusCode>) {
        self.lock().introspection_failure = status;
    }

    /// The claims of `builder`, unsigned, with `alg: none`.
    pub fn attack_alg_none(&self, builder: &TokenBuilder) -> String {
        let header = json!({"alg": "none", "typ": "JWT"});
        format!(
            "{}.{}.",
            b64(&header),
            b64(&Value::Object(builder.claims()))
        )
    }

    /// The claims of `builder` signed HS256 with the current RSA public
    /// key's PEM as the HMAC secret (the key-confusion attack on verifiers
    /// that take the algorithm from the token).
    pub fn attack_hs256_with_public_key(&self, builder: &TokenBuilder) -> String {
        let (pem, kid) = {
            let i = self.lock();
            (i.rsa_public_pem, i.rsa.kid.clone())
        };
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid);
        let key = EncodingKey::from_secret(pem.as_bytes()).expect("an HMAC key");
        jsonwebtoken::encode(&header, &Value::Object(builder.claims()), &key).expect("signs")
    }

    /// Requests for the JWKS so far.
    pub fn jwks_fetches(&self) -> usize {
        self.lock().jwks_fetches
    }

    /// Requests for the discovery document so far.
    pub fn discovery_fetches(&self) -> usize {
        self.lock().discovery_fetches
    }

    /// Token exchanges asked for, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.lock().exchanges.clone()
    }

    /// Introspection requests, in order.
    pub fn introspections(&self) -> Vec<Introspection> {
        self.lock().introspections.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sign(&self, alg: Alg, kid: Option<&str>, claims: &Map<String, Value>) -> String {
        let i = self.lock();
        let key = match alg {
            Alg::Rs256 | Alg::Ps256 => &i.rsa,
            Alg::Es256 => &i.ec,
            Alg::EdDsa => &i.ed,
        };
        let mut header = Header::new(alg.algorithm());
        header.kid = Some(kid.unwrap_or(&key.kid).to_string());
        jsonwebtoken::encode(&header, claims, &key.key).expect("a test token signs")
    }

    /// Verifies a token this IdP minted, with its current keys.
    fn verify(&self, token: &str) -> Option<Map<String, Value>> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        let i = self.lock();
        let key = [&i.rsa, &i.ec, &i.ed]
            .into_iter()
            .find(|k| Some(&k.kid) == header.kid.as_ref())?;
        let jwk = public_jwk(key);
        let decoding = jsonwebtoken::DecodingKey::from_jwk(&jwk).ok()?;
        let mut v = jsonwebtoken::Validation::new(header.alg);
        v.validate_aud = false;
        v.set_issuer(&[&i.issuer]);
        jsonwebtoken::decode::<Map<String, Value>>(token, &decoding, &v)
            .ok()
            .map(|d| d.claims)
    }

    fn next_id(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed)
    }
}

/// Builds a signed token; see [`Idp::token`].
#[derive(Clone)]
pub struct TokenBuilder {
    idp: Idp,
    claims: Map<String, Value>,
    sub: Option<String>,
    aud: Vec<String>,
    iss: Option<String>,
    exp_in: i64,
    alg: Alg,
    kid: Option<String>,
}

impl TokenBuilder {
    pub fn subject(mut self, sub: &str) -> Self {
        self.sub = Some(sub.into());
        self
    }

    /// No `sub` claim at all.
    pub fn no_sub(mut self) -> Self {
        self.sub = None;
        self
    }

    /// Adds an audience (one: a string `aud`; more: a list).
    pub fn aud(mut self, aud: &str) -> Self {
        self.aud.push(aud.into());
        self
    }

    /// Another `iss` than the IdP's own.
    pub fn iss(mut self, iss: &str) -> Self {
        self.iss = Some(iss.into());
        self
    }

    /// The `scope` claim (space-separated).
    pub fn scope(self, scope: &str) -> Self {
        self.claim("scope", json!(scope))
    }

    pub fn groups(self, groups: &[&str]) -> Self {
        self.claim("groups", json!(groups))
    }

    /// Any claim, over the builder's own.
    pub fn claim(mut self, name: &str, value: Value) -> Self {
        self.claims.insert(name.into(), value);
        self
    }

    /// Expires `seconds` from now (negative: in the past).
    pub fn exp_in(mut self, seconds: i64) -> Self {
        self.exp_in = seconds;
        self
    }

    /// Expired an hour ago: past any clock-skew leeway.
    pub fn expired(self) -> Self {
        self.exp_in(-3600)
    }

    pub fn alg(mut self, alg: Alg) -> Self {
        self.alg = alg;
        self
    }

    /// A `kid` header other than the signing key's (e.g. one the JWKS does
    /// not list).
    pub fn kid(mut self, kid: &str) -> Self {
        self.kid = Some(kid.into());
        self
    }

    /// The claims as they will be signed.
    pub fn claims(&self) -> Map<String, Value> {
        let mut c = Map::new();
        let now = now() as i64;
        c.insert(
            "iss".into(),
            json!(self.iss.clone().unwrap_or_else(|| self.idp.url.clone())),
        );
        if let Some(sub) = &self.sub {
            c.insert("sub".into(), json!(sub));
        }
        match self.aud.as_slice() {
            [] => {}
            [one] => {
                c.insert("aud".into(), json!(one));
            }
            many => {
                c.insert("aud".into(), json!(many));
            }
        }
        c.insert("iat".into(), json!(now));
        c.insert("exp".into(), json!(now + self.exp_in));
        c.insert("jti".into(), json!(format!("jti-{}", self.idp.next_id())));
        for (k, v) in &self.claims {
            c.insert(k.clone(), v.clone());
        }
        c
    }

    /// Signs the token.
    pub fn mint(&self) -> String {
        self.idp.sign(self.alg, self.kid.as_deref(), &self.claims())
    }
}

/// Issues an opaque token; see [`Idp::opaque`].
pub struct OpaqueBuilder {
    idp: Idp,
    record: OpaqueRecord,
}

impl OpaqueBuilder {
    pub fn subject(mut self, sub: &str) -> Self {
        self.record.sub = sub.into();
        self
    }

    pub fn scope(mut self, scope: &str) -> Self {
        self.record.scope = Some(scope.into());
        self
    }

    pub fn aud(mut self, aud: &str) -> Self {
        self.record.aud = Some(aud.into());
        self
    }

    pub fn exp_in(mut self, seconds: u64) -> Self {
        self.record.exp = now() + seconds;
        self
    }

    pub fn issue(self) -> String {
        let token = format!("opaque-{}-{:x}", self.idp.next_id(), now_nanos());
        self.idp.lock().opaque.insert(token.clone(), self.record);
        token
    }
}

fn rsa_key(index: usize, generation: u64) -> SigningKey {
    SigningKey {
        kid: format!("rsa-{generation}"),
        key: EncodingKey::from_rsa_pem(RSA_KEYS[index].as_bytes()).expect("test RSA key"),
        alg: Algorithm::RS256,
    }
}

fn public_jwk(key: &SigningKey) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(&key.key, key.alg).expect("a public JWK");
    jwk.common.key_id = Some(key.kid.clone());
    jwk.common.public_key_use = Some(PublicKeyUse::Signature);
    // RSA keys sign RS256 and PS256 alike: no `alg` pins them to one.
    if key.alg == Algorithm::RS256 {
        jwk.common.key_algorithm = None;
    } else {
        jwk.common.key_algorithm = Some(match key.alg {
            Algorithm::ES256 => KeyAlgorithm::ES256,
            _ => KeyAlgorithm::EdDSA,
        });
    }
    jwk
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos()
}

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    json_response(status, json!({"error": error}))
}

/// `client_secret_basic` (RFC 6749 §2.3.1: id and secret form-encoded).
fn client_authenticated(headers: &HeaderMap) -> bool {
    let Some(basic) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
    else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(basic.trim()) else {
        return false;
    };
    let Ok(text) = String::from_utf8(decoded) else {
        return false;
    };
    let Some((id, secret)) = text.split_once(':') else {
        return false;
    };
    let form = |s: &str| {
        serde_urlencoded::from_str::<Vec<(String, String)>>(&format!("v={s}"))
            .ok()
            .and_then(|v| v.into_iter().next())
            .map(|(_, v)| v)
    };
    form(id).as_deref() == Some(CLIENT_ID) && form(secret).as_deref() == Some(CLIENT_SECRET)
}

async fn discovery(State(idp): State<Idp>) -> Response {
    idp.lock().discovery_fetches += 1;
    let u = &idp.url;
    json_response(
        StatusCode::OK,
        json!({
            "issuer": u,
            "jwks_uri": format!("{u}/jwks"),
            "token_endpoint": format!("{u}/token"),
            "introspection_endpoint": format!("{u}/introspect"),
            "grant_types_supported": [TOKEN_EXCHANGE_GRANT],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "id_token_signing_alg_values_supported": ["RS256", "PS256", "ES256", "EdDSA"],
        }),
    )
}

async fn jwks(State(idp): State<Idp>) -> Response {
    let set = {
        let mut i = idp.lock();
        i.jwks_fetches += 1;
        JwkSet {
            keys: vec![public_jwk(&i.rsa), public_jwk(&i.ec), public_jwk(&i.ed)],
        }
    };
    json_response(
        StatusCode::OK,
        serde_json::to_value(&set).unwrap_or_default(),
    )
}

#[derive(Deserialize)]
struct ExchangeForm {
    grant_type: String,
    subject_token: Option<String>,
    subject_token_type: Option<String>,
    audience: Option<String>,
    scope: Option<String>,
}

async fn token(State(idp): State<Idp>, headers: HeaderMap, body: Bytes) -> Response {
    if !client_authenticated(&headers) {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let Ok(form) = serde_urlencoded::from_bytes::<ExchangeForm>(&body) else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
    };
    if form.grant_type != TOKEN_EXCHANGE_GRANT {
        return oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type");
    }
    let (Some(subject_token), Some(subject_token_type)) =
        (form.subject_token.clone(), form.subject_token_type.clone())
    else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
    };
    let mut record = Exchange {
        subject_token: subject_token.clone(),
        subject_token_type,
        audience: form.audience.clone(),
        scope: form.scope.clone(),
        issued: None,
    };
    let subject = idp
        .verify(&subject_token)
        .and_then(|c| c.get("sub").and_then(Value::as_str).map(str::to_string))
        .or_else(|| {
            let i = idp.lock();
            i.opaque
                .get(&subject_token)
                .filter(|r| !r.revoked && r.exp > now())
                .map(|r| r.sub.clone())
        });
    let Some(sub) = subject else {
        idp.lock().exchanges.push(record);
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    };
    let expires_in = 300;
    let mut builder = idp.token().subject(&sub).exp_in(expires_in);
    if let Some(aud) = &form.audience {
        builder = builder.aud(aud);
    }
    if let Some(scope) = &form.scope {
        builder = builder.scope(scope);
    }
    let issued = builder.mint();
    record.issued = Some(issued.clone());
    idp.lock().exchanges.push(record);
    json_response(
        StatusCode::OK,
        json!({
            "access_token": issued,
            "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer",
            "expires_in": expires_in,
        }),
    )
}

#[derive(Deserialize)]
struct IntrospectForm {
    token: String,
}

async fn introspect(State(idp): State<Idp>, headers: HeaderMap, body: Bytes) -> Response {
    if !client_authenticated(&headers) {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let Ok(form) = serde_urlencoded::from_bytes::<IntrospectForm>(&body) else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
    };
    if let Some(status) = idp.lock().introspection_failure {
        return oauth_error(status, "temporarily_unavailable");
    }
    let answer = {
        let i = idp.lock();
        i.opaque
            .get(&form.token)
            .filter(|r| !r.revoked && r.exp > now())
            .map(|r| {
                let mut a = json!({
                    "active": true,
                    "sub": r.sub,
                    "exp": r.exp,
                    "iss": i.issuer,
                    "client_id": "some-client",
                    "token_type": "Bearer",
                });
                if let Some(s) = &r.scope {
                    a["scope"] = json!(s);
                }
                if let Some(aud) = &r.aud {
                    a["aud"] = json!(aud);
                }
                a
            })
    };
    let active = answer.is_some();
    idp.lock().introspections.push(Introspection {
        token: form.token,
        active,
    });
    json_response(
        StatusCode::OK,
        answer.unwrap_or_else(|| json!({"active": false})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get_json(url: &str) -> Value {
        let body = http_get(url).await;
        serde_json::from_str(&body).expect("JSON")
    }

    /// A bare HTTP/1.1 GET (the crate has no HTTP client).
    async fn http_get(url: &str) -> String {
        request(url, "GET", None, "").await.1
    }

    async fn request(url: &str, method: &str, auth: Option<&str>, body: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let rest = url.strip_prefix("http://").expect("http URL");
        let (host, path) = rest
            .split_once('/')
            .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
        let mut s = tokio::net::TcpStream::connect(host)
            .await
            .expect("connects");
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(a) = auth {
            req.push_str(&format!("Authorization: {a}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).await.expect("writes");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("reads");
        let status = out[9..12].parse().expect("a status");
        let body = out.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
        (status, body.to_string())
    }

    fn basic() -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD
                .encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
        )
    }

    fn verify_with(jwks: &Value, token: &str) -> Result<Map<String, Value>, String> {
        let set: JwkSet = serde_json::from_value(jwks.clone()).map_err(|e| e.to_string())?;
        let h = jsonwebtoken::decode_header(token).map_err(|e| e.to_string())?;
        let jwk = set
            .find(h.kid.as_deref().unwrap_or(""))
            .ok_or("unknown kid")?;
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
        let mut v = jsonwebtoken::Validation::new(h.alg);
        v.set_audience(&["api"]);
        jsonwebtoken::decode::<Map<String, Value>>(token, &key, &v)
            .map(|d| d.claims)
            .map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn tokens_of_every_algorithm_verify_against_the_published_jwks() {
        let idp = Idp::start().await;
        let discovered = get_json(&format!(
            "{}/.well-known/openid-configuration",
            idp.issuer()
        ))
        .await;
        assert_eq!(discovered["issuer"], idp.issuer());
        let jwks = get_json(discovered["jwks_uri"].as_str().unwrap()).await;
        for alg in [Alg::Rs256, Alg::Ps256, Alg::Es256, Alg::EdDsa] {
            let t = idp.token().aud("api").subject("bob").alg(alg).mint();
            let claims = verify_with(&jwks, &t).unwrap_or_else(|e| panic!("{alg:?}: {e}"));
            assert_eq!(claims["sub"], "bob");
        }
        assert_eq!((idp.discovery_fetches(), idp.jwks_fetches()), (1, 1));
    }

    #[tokio::test]
    async fn a_rotated_key_leaves_the_jwks_and_the_new_one_enters() {
        let idp = Idp::start().await;
        let old = idp.token().aud("api").mint();
        let kid = idp.rotate_key();
        let jwks = get_json(&idp.jwks_url()).await;
        let kids: Vec<_> = jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_string())
            .collect();
        assert!(
            kids.contains(&kid) && !kids.contains(&"rsa-1".to_string()),
            "{kids:?}"
        );
        assert_eq!(verify_with(&jwks, &old).unwrap_err(), "unknown kid");
        assert!(verify_with(&jwks, &idp.token().aud("api").mint()).is_ok());
    }

    #[tokio::test]
    async fn attack_tokens_do_not_verify_against_the_jwks() {
        let idp = Idp::start().await;
        let jwks = get_json(&idp.jwks_url()).await;
        let b = idp.token().aud("api");
        assert!(verify_with(&jwks, &idp.attack_alg_none(&b)).is_err());
        assert!(verify_with(&jwks, &idp.attack_hs256_with_public_key(&b)).is_err());
        assert_eq!(
            verify_with(&jwks, &b.clone().kid("nope").mint()).unwrap_err(),
            "unknown kid"
        );
        assert!(verify_with(&jwks, &b.clone().expired().mint()).is_err());
    }

    #[tokio::test]
    async fn exchange_mints_a_token_for_the_audience_and_refuses_bad_subjects() {
        let idp = Idp::start().await;
        let subject = idp.token().subject("carol").aud("toolgate").mint();
        let body = serde_urlencoded::to_string([
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("subject_token", &subject),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("audience", "api"),
            ("scope", "pets.read"),
        ])
        .unwrap();
        let (status, out) = request(&idp.token_url(), "POST", Some(&basic()), &body).await;
        assert_eq!(status, 200, "{out}");
        let out: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(out["issued_token_type"], ACCESS_TOKEN_TYPE);
        assert_eq!(out["token_type"], "Bearer");
        let jwks = get_json(&idp.jwks_url()).await;
        let claims = verify_with(&jwks, out["access_token"].as_str().unwrap()).unwrap();
        assert_eq!(
            (claims["sub"].as_str(), claims["scope"].as_str()),
            (Some("carol"), Some("pets.read"))
        );

        let bad = body.replace(&subject, "not-a-token");
        let (status, out) = request(&idp.token_url(), "POST", Some(&basic()), &bad).await;
        assert_eq!(
            (status, out.contains("invalid_grant")),
            (400, true),
            "{out}"
        );
        let (status, _) = request(&idp.token_url(), "POST", None, &body).await;
        assert_eq!(status, 401);
        let log = idp.exchanges();
        assert_eq!(log.len(), 2);
        assert_eq!(log[0].audience.as_deref(), Some("api"));
        assert!(log[0].issued.is_some() && log[1].issued.is_none());
    }

    #[tokio::test]
    async fn introspection_knows_issued_tokens_until_revoked() {
        let idp = Idp::start().await;
        let t = idp.opaque().subject("dave").scope("a b").issue();
        let ask = |token: String| {
            let idp = idp.clone();
            async move {
                let body = serde_urlencoded::to_string([("token", token)]).unwrap();
                let (s, out) =
                    request(&idp.introspection_url(), "POST", Some(&basic()), &body).await;
                assert_eq!(s, 200);
                serde_json::from_str::<Value>(&out).unwrap()
            }
        };
        let a = ask(t.clone()).await;
        assert_eq!(
            (a["active"].as_bool(), a["sub"].as_str()),
            (Some(true), Some("dave"))
        );
        idp.revoke(&t);
        assert_eq!(ask(t.clone()).await, json!({"active": false}));
        assert_eq!(ask("unknown".into()).await, json!({"active": false}));
        assert_eq!(idp.introspections().len(), 3);
    }
}
