//! Outbound authentication, per upstream: none, bearer, API key (header or
//! query), basic, OAuth2 client credentials.
//!
//! A credential replaces whatever the caller sent under its name (header
//! or query parameter), so an argument can never stand in for it.
//!
//! Credentials are resolved from the gateway config's secret references
//! ([`crate::config::SecretRef`]) when the upstream runtime is built; the
//! catalog never carries them. Requests are built from scratch by
//! [`crate::request`], so nothing of the inbound MCP request — in particular
//! its `Authorization` header — can reach an upstream.
//!
//! OAuth2 tokens are cached and refreshed shortly before they expire. Only
//! one refresh runs at a time: callers that find the token stale queue on a
//! mutex and the first one through refreshes for all of them. If a refresh
//! fails while the old token has not yet expired, the old token is used.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use base64::Engine;
use http::{HeaderName, HeaderValue};
use reqwest::Url;
use serde::Deserialize;

use crate::config::{ApiKeyLocation, AuthConfig, ClientAuthMethod, Resolve, SecretError};

/// Ready-to-apply credentials of one upstream.
#[derive(Debug)]
pub enum Auth {
    None,
    Header(HeaderName, HeaderValue),
    Query(String, String),
    OAuth2(OAuth2),
}

/// A failure to authenticate, shown to callers in general terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("could not obtain an access token for the upstream: {0}")]
    Token(String),
}

impl Auth {
    /// Resolves the secrets named in `cfg`. `field` prefixes error fields,
    /// e.g. `upstreams.pets.auth`.
    pub fn from_config(
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
                token_url: Url::parse(token_url).map_err(|e| bad("tokenUrl", &e.to_string()))?,
                client_id: client_id.resolve(&format!("{field}.clientId"))?,
                client_secret: client_secret.resolve(&format!("{field}.clientSecret"))?,
                scopes: scopes.join(" "),
                audience: audience.clone(),
                client_auth: *client_auth,
                http,
                cached: ArcSwapOption::empty(),
                refresh: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// Adds the credentials to `req`.
    pub async fn apply(&self, req: &mut reqwest::Request) -> Result<(), AuthError> {
        match self {
            Auth::None => {}
            Auth::Header(name, value) => {
                // `insert` replaces every caller-supplied value of the name.
                req.headers_mut().insert(name.clone(), value.clone());
            }
            Auth::Query(name, value) => set_query_credential(req.url_mut(), name, value),
            Auth::OAuth2(o) => {
                let token = o.token().await?;
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
pub struct OAuth2 {
    token_url: Url,
    client_id: String,
    client_secret: String,
    scopes: String,
    audience: Option<String>,
    client_auth: ClientAuthMethod,
    http: reqwest::Client,
    cached: ArcSwapOption<Token>,
    /// Held while a refresh runs: one refresh at a time.
    refresh: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for OAuth2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth2")
            .field("token_url", &self.token_url.as_str())
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
        let mut req = self.http.post(self.token_url.clone());
        match self.client_auth {
            ClientAuthMethod::Basic => {
                req = req.basic_auth(
                    form_urlencode(&self.client_id),
                    Some(form_urlencode(&self.client_secret)),
                );
            }
            ClientAuthMethod::Post => {
                form.push(("client_id", &self.client_id));
                form.push(("client_secret", &self.client_secret));
            }
        }
        let started = Instant::now();
        let resp = req
            .form(&form)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| AuthError::Token(crate::upstream::describe_transport_error(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(AuthError::Token(format!(
                "token endpoint returned HTTP {}",
                status.as_u16()
            )));
        }
        let body: TokenResponse = resp.json().await.map_err(|_| {
            AuthError::Token("token endpoint returned an unreadable response".into())
        })?;
        if let Some(tt) = &body.token_type {
            if !tt.eq_ignore_ascii_case("bearer") {
                return Err(AuthError::Token(format!("unsupported token type {tt}")));
            }
        }
        let life = Duration::from_secs(body.expires_in.unwrap_or(DEFAULT_EXPIRES_IN));
        // Refresh a little early: 10% of the lifetime, at most a minute.
        let margin = (life / 10).min(Duration::from_secs(60));
        let header = sensitive(&format!("Bearer {}", body.access_token))
            .ok_or_else(|| AuthError::Token("token is not a valid header value".into()))?;
        Ok(Token {
            header,
            refresh_at: started + life - margin,
            expires_at: started + life,
        })
    }
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
        crate::upstream::install_crypto_provider();
        reqwest::Client::new()
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
        a.apply(&mut req).await.unwrap();
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
        a.apply(&mut req).await.unwrap();
        assert_eq!(req.url().query(), Some("a=1&api_key=s+e"));
    }

    #[test]
    fn client_credentials_are_form_encoded_for_basic() {
        assert_eq!(form_urlencode("a b:c"), "a+b%3Ac");
    }
}
