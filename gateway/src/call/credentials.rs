//! Outbound authentication, per upstream: none, bearer, API key (header or
//! query), basic, OAuth2 client credentials, OAuth2 token exchange on
//! behalf of the caller (RFC 8693).
//!
//! A credential replaces whatever the caller sent under its name (header
//! or query parameter), so an argument can never stand in for it.
//!
//! Credentials are resolved from the gateway config's secret references
//! ([`crate::config::SecretRef`]) when the upstream runtime is built; the
//! catalog never carries them. Requests are built from scratch by
//! [`crate::call::request`], so nothing of the inbound MCP request — in particular
//! its `Authorization` header — can reach an upstream.
//!
//! OAuth2 tokens are cached and refreshed shortly before they expire. Only
//! one refresh runs at a time: callers that find the token stale queue on a
//! mutex and the first one through refreshes for all of them. If a refresh
//! fails while the old token has not yet expired, the old token is used.
//!
//! Token exchange ([`TokenExchange`]) works the same way per caller: the
//! caller's inbound bearer token is exchanged for one meant for the
//! upstream, cached per subject (each upstream has its own cache) until
//! shortly before it expires — or the inbound token does, whichever comes
//! first — one exchange at a time per subject, in a bounded table. The
//! inbound token goes to the token endpoint only, never to the upstream.
//!
//! Token endpoints are trusted no more than upstreams: their answers are
//! read up to [`MAX_TOKEN_RESPONSE_BYTES`] within [`TOKEN_TIMEOUT`], and
//! what a failure tells the caller never includes a token or a secret.
//!
//! Size: over 600 lines because this is one `match` over the auth types; the
//! two OAuth2 grants (client credentials, token exchange), with their token
//! caching and refresh, are most of the file.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use base64::Engine;
use http::{HeaderName, HeaderValue};
use reqwest::Url;
use serde::Deserialize;

use crate::config::{ApiKeyLocation, AuthConfig, ClientAuthMethod};
use crate::identity::inbound::{BearerToken, CallContext, Caller};
use crate::secret::{Resolve, SecretError};

/// Cap on a token endpoint's response body.
pub(crate) const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;
/// Cap on one token request (and on waiting for one), within the call's
/// own timeout.
pub(crate) const TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Callers whose exchanged tokens one upstream keeps at most.
pub(crate) const MAX_EXCHANGED_TOKENS: usize = 10_000;

/// Ready-to-apply credentials of one upstream. Its `Debug` shows no
/// credential.
pub(crate) enum Auth {
    None,
    Header(HeaderName, HeaderValue),
    Query(String, String),
    OAuth2(OAuth2),
    TokenExchange(TokenExchange),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Header(name, _) => write!(f, "Header({name}: <redacted>)"),
            Auth::Query(name, _) => write!(f, "Query({name}=<redacted>)"),
            Auth::OAuth2(o) => o.fmt(f),
            Auth::TokenExchange(x) => x.fmt(f),
        }
    }
}

/// A failure to authenticate, shown to callers in general terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("could not obtain an access token for the upstream: {0}")]
    Token(String),
    #[error(
        "this upstream is called on behalf of the caller (token exchange) and needs a \
         caller authenticated with a bearer token (OAuth 2.0 / OIDC); API keys and \
         unauthenticated callers cannot call it"
    )]
    NeedsToken,
    #[error("could not exchange the caller's token for one of the upstream: {0}")]
    Exchange(String),
}

impl Auth {
    /// Resolves the secrets named in `cfg`. `field` prefixes error fields,
    /// e.g. `upstreams.pets.auth`.
    pub(crate) fn from_config(
        cfg: &AuthConfig,
        field: &str,
        http: reqwest::Client,
    ) -> Result<Auth, SecretError> {
        let bad = |sub: &str, message: &str| SecretError {
            field: format!("{field}.{sub}"),
            message: message.to_string(),
        };
        Ok(match cfg {
            AuthConfig::None => Auth::None,
            AuthConfig::Bearer { token } => {
                let t = token.resolve(&format!("{field}.token"))?;
                Auth::Header(
                    http::header::AUTHORIZATION,
                    sensitive(&format!("Bearer {t}"))
                        .ok_or_else(|| bad("token", "not a valid header value"))?,
                )
            }
            AuthConfig::ApiKey {
                location,
                name,
                value,
            } => {
                let v = value.resolve(&format!("{field}.value"))?;
                match location {
                    ApiKeyLocation::Header => Auth::Header(
                        HeaderName::from_bytes(name.as_bytes())
                            .map_err(|_| bad("name", "not a valid header name"))?,
                        sensitive(&v).ok_or_else(|| bad("value", "not a valid header value"))?,
                    ),
                    ApiKeyLocation::Query => Auth::Query(name.clone(), v),
                }
            }
            AuthConfig::Basic { username, password } => {
                let u = username.resolve(&format!("{field}.username"))?;
                let p = password.resolve(&format!("{field}.password"))?;
                let enc = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
                Auth::Header(
                    http::header::AUTHORIZATION,
                    sensitive(&format!("Basic {enc}"))
                        .ok_or_else(|| bad("username", "not a valid header value"))?,
                )
            }
            AuthConfig::Oauth2ClientCredentials {
                token_url,
                client_id,
                client_secret,
                scopes,
                audience,
                client_auth,
            } => Auth::OAuth2(OAuth2 {
                endpoint: TokenEndpoint {
                    url: Url::parse(token_url).map_err(|e| bad("tokenUrl", &e.to_string()))?,
                    client_id: client_id.resolve(&format!("{field}.clientId"))?,
                    client_secret: client_secret.resolve(&format!("{field}.clientSecret"))?,
                    client_auth: *client_auth,
                    http,
                },
                scopes: scopes.join(" "),
                audience: audience.clone(),
                cached: ArcSwapOption::empty(),
                refresh: tokio::sync::Mutex::new(()),
            }),
            AuthConfig::TokenExchange {
                token_url,
                client_id,
                client_secret,
                audience,
                scopes,
                resource,
                client_auth,
            } => Auth::TokenExchange(TokenExchange {
                endpoint: TokenEndpoint {
                    url: Url::parse(token_url).map_err(|e| bad("tokenUrl", &e.to_string()))?,
                    client_id: client_id.resolve(&format!("{field}.clientId"))?,
                    client_secret: client_secret.resolve(&format!("{field}.clientSecret"))?,
                    client_auth: *client_auth,
                    http,
                },
                audience: audience.clone(),
                scopes: scopes.join(" "),
                resource: resource.clone(),
                slots: Mutex::new(HashMap::new()),
                max_slots: MAX_EXCHANGED_TOKENS,
            }),
        })
    }

    /// The header this upstream's credential travels in, if it is one
    /// header of its own (an API key's).
    pub(crate) fn header_name(&self) -> Option<&HeaderName> {
        match self {
            Auth::Header(name, _) => Some(name),
            _ => None,
        }
    }

    /// Adds the credentials to `req`, for the caller `ctx` describes,
    /// waiting for a token until `deadline` at most.
    pub(crate) async fn apply(
        &self,
        req: &mut reqwest::Request,
        ctx: &CallContext,
        deadline: tokio::time::Instant,
    ) -> Result<(), AuthError> {
        match self {
            Auth::None => {}
            Auth::Header(name, value) => {
                // `insert` replaces every caller-supplied value of the name.
                req.headers_mut().insert(name.clone(), value.clone());
            }
            Auth::Query(name, value) => set_query_credential(req.url_mut(), name, value),
            Auth::OAuth2(o) => {
                let token = tokio::time::timeout_at(deadline, o.token())
                    .await
                    .map_err(|_| AuthError::Token("timed out".into()))??;
                req.headers_mut()
                    .insert(http::header::AUTHORIZATION, token.header.clone());
            }
            Auth::TokenExchange(x) => {
                let caller = ctx.caller.as_deref().ok_or(AuthError::NeedsToken)?;
                let token = tokio::time::timeout_at(deadline, x.token(caller))
                    .await
                    .map_err(|_| AuthError::Exchange("timed out".into()))??;
                req.headers_mut()
                    .insert(http::header::AUTHORIZATION, token.header.clone());
            }
        }
        Ok(())
    }
}

/// Sets the credential parameter `name`, dropping any the caller sent
/// under that name first: with both present (`?api_key=CALLER&api_key=KEY`)
/// servers that read the first value would take the caller's key. Names
/// are compared decoded and ignoring ASCII case, as some servers look them
/// up. Other parameters keep their exact encoding.
fn set_query_credential(url: &mut Url, name: &str, value: &str) {
    let same_name = |pair: &str| {
        let key = pair.split('=').next().unwrap_or_default().replace('+', " ");
        percent_encoding::percent_decode_str(&key)
            .decode_utf8_lossy()
            .eq_ignore_ascii_case(name)
    };
    let kept = url.query().map(|q| {
        q.split('&')
            .filter(|p| !p.is_empty() && !same_name(p))
            .collect::<Vec<_>>()
            .join("&")
    });
    url.set_query(kept.as_deref().filter(|q| !q.is_empty()));
    url.query_pairs_mut().append_pair(name, value);
}

fn sensitive(s: &str) -> Option<HeaderValue> {
    let mut v = HeaderValue::from_str(s).ok()?;
    v.set_sensitive(true);
    Some(v)
}

/// OAuth2 client credentials grant with a cached token.
pub(crate) struct OAuth2 {
    endpoint: TokenEndpoint,
    scopes: String,
    audience: Option<String>,
    cached: ArcSwapOption<Token>,
    /// Held while a refresh runs: one refresh at a time.
    refresh: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for OAuth2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth2")
            .field("token_url", &self.endpoint.url.as_str())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Token {
    header: HeaderValue,
    refresh_at: Instant,
    expires_at: Instant,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
    /// RFC 8693 responses only.
    #[serde(default)]
    issued_token_type: Option<String>,
}

/// Assumed lifetime when the token endpoint does not say.
const DEFAULT_EXPIRES_IN: u64 = 3600;

impl OAuth2 {
    async fn token(&self) -> Result<Arc<Token>, AuthError> {
        if let Some(t) = self.cached.load_full() {
            if Instant::now() < t.refresh_at {
                return Ok(t);
            }
        }
        let _guard = self.refresh.lock().await;
        // Another caller may have refreshed while we waited.
        let old = self.cached.load_full();
        if let Some(t) = &old {
            if Instant::now() < t.refresh_at {
                return Ok(t.clone());
            }
        }
        match self.fetch().await {
            Ok(t) => {
                let t = Arc::new(t);
                self.cached.store(Some(t.clone()));
                Ok(t)
            }
            Err(e) => match old {
                Some(t) if Instant::now() < t.expires_at => {
                    tracing::warn!(error = %e, "oauth2 token refresh failed; using the current token until it expires");
                    Ok(t)
                }
                _ => Err(e),
            },
        }
    }

    async fn fetch(&self) -> Result<Token, AuthError> {
        let mut form: Vec<(&str, &str)> = vec![("grant_type", "client_credentials")];
        if !self.scopes.is_empty() {
            form.push(("scope", &self.scopes));
        }
        if let Some(a) = &self.audience {
            form.push(("audience", a));
        }
        let (started, body) = post_token_form(&self.endpoint, form)
            .await
            .map_err(AuthError::Token)?;
        let life = Duration::from_secs(body.expires_in.unwrap_or(DEFAULT_EXPIRES_IN));
        Token::new(&body.access_token, started, life, None).map_err(AuthError::Token)
    }
}

impl Token {
    /// A token received at `started` that lives `life`, or less when
    /// `not_after` comes first.
    fn new(
        access_token: &str,
        started: Instant,
        life: Duration,
        not_after: Option<Instant>,
    ) -> Result<Token, String> {
        let header = sensitive(&format!("Bearer {access_token}"))
            .ok_or_else(|| "the token is not a valid header value".to_string())?;
        let expires_at = match not_after {
            Some(n) => (started + life).min(n),
            None => started + life,
        };
        let life = expires_at.saturating_duration_since(started);
        // Refresh a little early: 10% of the lifetime, at most a minute.
        let margin = (life / 10).min(Duration::from_secs(60));
        Ok(Token {
            header,
            refresh_at: expires_at - margin,
            expires_at,
        })
    }
}

/// A token endpoint and how the gateway authenticates itself there: what
/// the client credentials grant and token exchange share.
struct TokenEndpoint {
    url: Url,
    client_id: String,
    client_secret: String,
    client_auth: ClientAuthMethod,
    http: reqwest::Client,
}

/// POSTs `form` to `endpoint` and reads the answer, bounded in time and
/// size. `Err` is a message for callers: a status, an RFC 6749 error code,
/// never a credential or the response body.
async fn post_token_form(
    endpoint: &TokenEndpoint,
    mut form: Vec<(&str, &str)>,
) -> Result<(Instant, TokenResponse), String> {
    let mut req = endpoint
        .http
        .post(endpoint.url.clone())
        .timeout(TOKEN_TIMEOUT);
    match endpoint.client_auth {
        ClientAuthMethod::Basic => {
            req = req.basic_auth(
                form_urlencode(&endpoint.client_id),
                Some(form_urlencode(&endpoint.client_secret)),
            );
        }
        ClientAuthMethod::Post => {
            form.push(("client_id", &endpoint.client_id));
            form.push(("client_secret", &endpoint.client_secret));
        }
    }
    let started = Instant::now();
    let mut resp = req
        .form(&form)
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| crate::net::describe_transport_error(&e))?;
    let status = resp.status();
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_TOKEN_RESPONSE_BYTES as u64)
    {
        return Err("token endpoint response is too large".into());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| crate::net::describe_transport_error(&e))?
    {
        if body.len() + chunk.len() > MAX_TOKEN_RESPONSE_BYTES {
            return Err("token endpoint response is too large".into());
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        // RFC 6749 §5.2: `error` is a code from a fixed alphabet; show it
        // only if it is one (an endpoint might echo anything).
        let code = serde_json::from_slice::<TokenErrorResponse>(&body)
            .ok()
            .map(|e| e.error)
            .filter(|c| {
                !c.is_empty()
                    && c.len() <= 64
                    && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            });
        return Err(match code {
            Some(c) => format!("token endpoint returned HTTP {} ({c})", status.as_u16()),
            None => format!("token endpoint returned HTTP {}", status.as_u16()),
        });
    }
    let body: TokenResponse = serde_json::from_slice(&body)
        .map_err(|_| "token endpoint returned an unreadable response".to_string())?;
    if let Some(tt) = &body.token_type {
        if !tt.eq_ignore_ascii_case("bearer") {
            return Err("token endpoint issued a token that is not a bearer token".into());
        }
    }
    Ok((started, body))
}

#[derive(Deserialize)]
struct TokenErrorResponse {
    error: String,
}

/// RFC 8693 token exchange per caller, with cached results.
pub(crate) struct TokenExchange {
    endpoint: TokenEndpoint,
    audience: Option<String>,
    scopes: String,
    resource: Option<String>,
    /// Per subject: the exchanged token and the lock one exchange holds.
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    max_slots: usize,
}

impl std::fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenExchange")
            .field("token_url", &self.endpoint.url.as_str())
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// One subject's exchanged token.
#[derive(Default)]
struct Slot {
    cached: ArcSwapOption<Token>,
    /// Held while an exchange runs: one at a time per subject.
    exchange: tokio::sync::Mutex<()>,
}

impl Slot {
    fn fresh(&self) -> Option<Arc<Token>> {
        self.cached
            .load_full()
            .filter(|t| Instant::now() < t.refresh_at)
    }
}

/// RFC 8693 §3 token type identifiers.
const TOKEN_TYPE_ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
const TOKEN_TYPE_JWT: &str = "urn:ietf:params:oauth:token-type:jwt";
const GRANT_TYPE_TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// Assumed lifetime of an exchanged token when the endpoint does not say:
/// short, as it acts for one caller.
const DEFAULT_EXCHANGED_EXPIRES_IN: u64 = 300;

impl TokenExchange {
    /// The upstream token for `caller`: cached, or exchanged now.
    async fn token(&self, caller: &Caller) -> Result<Arc<Token>, AuthError> {
        let subject_token = caller.token.as_ref().ok_or(AuthError::NeedsToken)?;
        let slot = self.slot(&caller.principal.identity());
        if let Some(t) = slot.fresh() {
            return Ok(t);
        }
        let _guard = slot.exchange.lock().await;
        // Another call may have exchanged while we waited.
        if let Some(t) = slot.fresh() {
            return Ok(t);
        }
        match self.exchange(subject_token, inbound_expiry(caller)).await {
            Ok(t) => {
                let t = Arc::new(t);
                slot.cached.store(Some(t.clone()));
                Ok(t)
            }
            Err(e) => match slot.cached.load_full() {
                Some(t) if Instant::now() < t.expires_at => {
                    tracing::warn!(error = %e, "token exchange failed; using the current token until it expires");
                    Ok(t)
                }
                _ => Err(e),
            },
        }
    }

    /// The slot of `subject`, made room for if the table is full: first
    /// by dropping expired tokens, then the one expiring soonest. Slots in
    /// use (an exchange running or awaited) are kept.
    fn slot(&self, subject: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = slots.get(subject) {
            return s.clone();
        }
        if slots.len() >= self.max_slots {
            let now = Instant::now();
            slots.retain(|_, s| {
                Arc::strong_count(s) > 1
                    || s.cached.load().as_ref().is_some_and(|t| now < t.expires_at)
            });
        }
        if slots.len() >= self.max_slots {
            let soonest = slots
                .iter()
                .filter(|(_, s)| Arc::strong_count(s) == 1)
                .min_by_key(|(_, s)| s.cached.load().as_ref().map(|t| t.expires_at))
                .map(|(k, _)| k.clone());
            if let Some(k) = soonest {
                slots.remove(&k);
            }
        }
        slots.entry(subject.to_string()).or_default().clone()
    }

    async fn exchange(
        &self,
        subject_token: &BearerToken,
        not_after: Option<Instant>,
    ) -> Result<Token, AuthError> {
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", GRANT_TYPE_TOKEN_EXCHANGE),
            ("subject_token", subject_token.expose()),
            ("subject_token_type", TOKEN_TYPE_ACCESS_TOKEN),
            ("requested_token_type", TOKEN_TYPE_ACCESS_TOKEN),
        ];
        if let Some(a) = &self.audience {
            form.push(("audience", a));
        }
        if let Some(r) = &self.resource {
            form.push(("resource", r));
        }
        if !self.scopes.is_empty() {
            form.push(("scope", &self.scopes));
        }
        let (started, body) = post_token_form(&self.endpoint, form)
            .await
            .map_err(AuthError::Exchange)?;
        if let Some(t) = &body.issued_token_type {
            if t != TOKEN_TYPE_ACCESS_TOKEN && t != TOKEN_TYPE_JWT {
                return Err(AuthError::Exchange(
                    "token endpoint issued a token that is not an access token".into(),
                ));
            }
        }
        let life = Duration::from_secs(body.expires_in.unwrap_or(DEFAULT_EXCHANGED_EXPIRES_IN));
        Token::new(&body.access_token, started, life, not_after).map_err(AuthError::Exchange)
    }

    #[cfg(test)]
    /// Subjects with a cached token (or an exchange under way).
    pub(crate) fn cached_subjects(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// When the caller's own token expires (its `exp` claim, if it has one):
/// a token exchanged from it is not used beyond that.
fn inbound_expiry(caller: &Caller) -> Option<Instant> {
    let exp = caller.principal.claims.get("exp")?.as_f64()?;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()?
        .as_secs_f64();
    let left = (exp - now).clamp(0.0, 365.0 * 86_400.0);
    Some(Instant::now() + Duration::from_secs_f64(left))
}

/// RFC 6749 §2.3.1: client id and secret are form-urlencoded before Basic.
fn form_urlencode(s: &str) -> String {
    let mut ser = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                ser.push(b as char)
            }
            b' ' => ser.push('+'),
            other => ser.push_str(&format!("%{other:02X}")),
        }
    }
    ser
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SecretRef;

    fn client() -> reqwest::Client {
        crate::net::install_crypto_provider();
        reqwest::Client::new()
    }

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(5)
    }

    fn lit(s: &str) -> SecretRef {
        SecretRef {
            value: Some(s.into()),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn basic_auth_header_is_base64_of_user_colon_password() {
        let a = Auth::from_config(
            &AuthConfig::Basic {
                username: lit("u"),
                password: lit("p w"),
            },
            "auth",
            client(),
        )
        .unwrap();
        let mut req = reqwest::Request::new(reqwest::Method::GET, "http://x/".parse().unwrap());
        a.apply(&mut req, &CallContext::default(), soon())
            .await
            .unwrap();
        assert_eq!(req.headers()["authorization"], "Basic dTpwIHc=");
    }

    #[tokio::test]
    async fn api_key_in_query_is_appended() {
        let a = Auth::from_config(
            &AuthConfig::ApiKey {
                location: ApiKeyLocation::Query,
                name: "api_key".into(),
                value: lit("s e"),
            },
            "auth",
            client(),
        )
        .unwrap();
        let mut req =
            reqwest::Request::new(reqwest::Method::GET, "http://x/p?a=1".parse().unwrap());
        a.apply(&mut req, &CallContext::default(), soon())
            .await
            .unwrap();
        assert_eq!(req.url().query(), Some("a=1&api_key=s+e"));
    }

    #[test]
    fn debug_shows_no_credential() {
        for cfg in [
            AuthConfig::ApiKey {
                location: ApiKeyLocation::Query,
                name: "api_key".into(),
                value: lit("k-secret"),
            },
            AuthConfig::Bearer {
                token: lit("k-secret"),
            },
            AuthConfig::TokenExchange {
                token_url: "http://idp/token".into(),
                client_id: lit("gw"),
                client_secret: lit("k-secret"),
                audience: None,
                scopes: vec![],
                resource: None,
                client_auth: ClientAuthMethod::Basic,
            },
        ] {
            let a = Auth::from_config(&cfg, "auth", client()).unwrap();
            assert!(!format!("{a:?}").contains("k-secret"), "{a:?}");
        }
    }

    #[test]
    fn an_exchanged_token_does_not_outlive_the_callers_token() {
        let started = Instant::now();
        let hour = Duration::from_secs(3600);
        let t = Token::new("x", started, hour, Some(started + Duration::from_secs(100))).unwrap();
        assert_eq!(t.expires_at, started + Duration::from_secs(100));
        assert_eq!(t.refresh_at, started + Duration::from_secs(90));
        let t = Token::new("x", started, hour, None).unwrap();
        assert_eq!(t.refresh_at, started + hour - Duration::from_secs(60));
    }

    #[test]
    fn the_exchanged_token_table_is_bounded_and_keeps_slots_in_use() {
        let cfg = AuthConfig::TokenExchange {
            token_url: "http://idp/token".into(),
            client_id: lit("gw"),
            client_secret: lit("s"),
            audience: None,
            scopes: vec![],
            resource: None,
            client_auth: ClientAuthMethod::Basic,
        };
        let Auth::TokenExchange(mut x) = Auth::from_config(&cfg, "auth", client()).unwrap() else {
            unreachable!()
        };
        x.max_slots = 2;
        let in_use = x.slot("a");
        let fresh = x.slot("b");
        fresh.cached.store(Some(Arc::new(
            Token::new("t", Instant::now(), Duration::from_secs(60), None).unwrap(),
        )));
        drop(fresh);
        // Full: c takes the place of b (not in use), not of a (in use).
        let _c = x.slot("c");
        assert_eq!(x.cached_subjects(), 2);
        assert!(Arc::ptr_eq(&in_use, &x.slot("a")));
        let slots = x.slots.lock().unwrap();
        assert!(slots.contains_key("c") && !slots.contains_key("b"));
    }

    #[test]
    fn client_credentials_are_form_encoded_for_basic() {
        assert_eq!(form_urlencode("a b:c"), "a+b%3Ac");
    }
}
