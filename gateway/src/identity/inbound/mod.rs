//! Who is calling: inbound authentication of the MCP endpoints.
//!
//! [`Inbound::admit`] runs on every request to `/mcp` and `/mcp/{prefix}`
//! after the Host and Origin checks and before anything else (the body,
//! the prefix lookup): it verifies the request's credentials and puts the
//! verified [`Caller`] into the request's extensions, where rmcp hands it
//! to the tool handlers ([`caller_of`]). A request it refuses is answered
//! `401` with the RFC 9728 `WWW-Authenticate` challenge.
//!
//! With no method configured every request is admitted without a caller
//! (open mode, today's behaviour; logged as a warning at start-up).

pub(crate) mod api_keys;
pub mod config;
pub(crate) mod fetch;
pub(crate) mod introspection;
pub mod jwks;
pub(crate) mod jwt;
pub(crate) mod metadata;

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request};
use axum::response::{IntoResponse, Response};
use axum::Json;
pub use catalog::access::AuthMethod;
use catalog::access::Principal;
use http::{HeaderMap, HeaderValue, StatusCode};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::file_watch::WatchOptions;
use crate::observe::metrics::DenialReason;
use api_keys::ApiKeys;
use config::{ClaimNames, InboundConfig, InvalidField};
use introspection::Introspector;
use jwt::JwtVerifier;
use metadata::ProtectedResource;

/// Longest credential read from a request; a longer one is refused
/// before it is parsed.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Seconds a client is told to wait when credentials cannot be checked.
const UNAVAILABLE_RETRY_AFTER: &str = "5";

/// A verified caller. Its identity (method, issuer, subject) is
/// `principal`'s ([`Principal::identity`]).
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    /// The bearer token it presented (a JWT or an opaque token checked by
    /// introspection), kept only to exchange it for an upstream's token
    /// (RFC 8693); never forwarded as is, never logged.
    pub token: Option<BearerToken>,
}

/// A credential whose `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(Arc<str>);

impl BearerToken {
    pub fn new(token: &str) -> Self {
        BearerToken(Arc::from(token))
    }

    /// The token itself: only for sending it where it is meant to go.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// What [`Inbound::from_config`] needs besides the config.
#[derive(Debug, Clone, Default)]
pub struct InboundRuntime {
    /// Ends the API key file watch.
    pub cancel: CancellationToken,
    /// How the API key file is polled.
    pub watch: WatchOptions,
}

/// The inbound authentication of one gateway process.
#[derive(Default)]
pub struct Inbound {
    /// `None`: open.
    methods: Option<Methods>,
}

struct Methods {
    metadata: ProtectedResource,
    jwt: Option<JwtVerifier>,
    api_keys: Option<Arc<ApiKeys>>,
    introspection: Option<Introspector>,
    claims: ClaimNames,
}

impl fmt::Debug for Inbound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.methods {
            None => f.write_str("Inbound(open)"),
            Some(m) => f
                .debug_struct("Inbound")
                .field("resource", &m.metadata.resource)
                .field(
                    "jwt_issuers",
                    &m.jwt.as_ref().map(|j| j.issuers().collect::<Vec<_>>()),
                )
                .field("api_keys", &m.api_keys)
                .field("introspection", &m.introspection.is_some())
                .finish(),
        }
    }
}

/// A credential as the request carries it.
enum Credential<'a> {
    None,
    Bearer(&'a str),
    ApiKey(&'a str),
}

/// Why a request was not admitted.
enum Failure {
    /// No credentials (or none of a kind the gateway takes).
    Missing,
    /// Credentials were sent and refused. `detail` is for the debug log.
    Invalid { expired: bool, detail: String },
    /// They could not be checked (the IdP is unreachable).
    Unavailable(String),
    /// They could not be checked now without asking the IdP more than
    /// the introspection limits allow; retry after this long.
    Throttled(std::time::Duration),
}

impl Inbound {
    /// No authentication: every request is admitted without a caller.
    pub fn open() -> Arc<Self> {
        Arc::new(Inbound::default())
    }

    /// Builds the configured methods: validates `cfg` (errors name the
    /// field), reads the API key file (an error is fatal) and starts
    /// following it, reads the introspection secret. JWKS are fetched on
    /// first use, so the gateway starts while the IdP is away.
    pub async fn from_config(
        cfg: &InboundConfig,
        rt: InboundRuntime,
    ) -> Result<Arc<Self>, InvalidField> {
        cfg.validate()?;
        if !cfg.enabled() {
            return Ok(Self::open());
        }
        let field = |f: &str| {
            let f = f.to_string();
            move |message: String| InvalidField { field: f, message }
        };
        let resource = cfg.resource.clone().unwrap_or_default();
        let url = config::http_url(&resource).map_err(field("inbound.resource"))?;
        let client = fetch::client().map_err(field("inbound"))?;
        let jwt = if cfg.jwt.is_empty() {
            None
        } else {
            Some(JwtVerifier::new(
                &cfg.jwt,
                cfg.leeway_seconds,
                std::time::Duration::from_secs(cfg.jwks_min_refetch_seconds),
                std::time::Duration::from_secs(cfg.jwks_refresh_seconds),
                client.clone(),
            )?)
        };
        let api_keys = match &cfg.api_keys {
            Some(k) => Some(
                ApiKeys::load_and_follow(&k.file, rt.watch, rt.cancel.clone())
                    .map_err(field("inbound.apiKeys.file"))?,
            ),
            None => None,
        };
        let introspection = match &cfg.introspection {
            Some(i) => Some(Introspector::new(i, &resource, client)?),
            None => None,
        };
        let servers = cfg.jwt.iter().map(|j| j.issuer.clone()).collect();
        Ok(Arc::new(Inbound {
            methods: Some(Methods {
                metadata: ProtectedResource::new(&resource, &url, servers, &cfg.scopes_supported),
                jwt,
                api_keys,
                introspection,
                claims: cfg.claims.clone(),
            }),
        }))
    }

    /// Whether any method is configured.
    pub fn enabled(&self) -> bool {
        self.methods.is_some()
    }

    /// The RFC 9728 protected resource metadata; `None` when open.
    pub fn metadata(&self) -> Option<&serde_json::Value> {
        self.methods.as_ref().map(|m| m.metadata.document())
    }

    /// Verifies `req`'s credentials and records the [`Caller`] in its
    /// extensions; `Err` is the 401 (or, when the IdP cannot be reached,
    /// 503) that ends the request.
    #[allow(clippy::result_large_err)]
    pub(crate) async fn admit(&self, req: &mut Request) -> Result<(), Response> {
        let Some(m) = &self.methods else {
            return Ok(());
        };
        match m.authenticate(req.headers()).await {
            Ok(caller) => {
                req.extensions_mut().insert(Arc::new(caller));
                Ok(())
            }
            Err(f) => Err(m.refuse(f)),
        }
    }
}

impl Methods {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Failure> {
        let invalid = |detail: &str| Failure::Invalid {
            expired: false,
            detail: detail.to_string(),
        };
        let token = match self.credential(headers).map_err(invalid)? {
            Credential::None => return Err(Failure::Missing),
            Credential::ApiKey(key) => {
                return self
                    .api_key(key)
                    .ok_or_else(|| invalid("unknown API key (X-API-Key)"))
            }
            Credential::Bearer(t) => t,
        };
        if let Some(jwt) = self.jwt.as_ref().filter(|_| jwt::looks_like_jwt(token)) {
            match jwt.verify(token).await {
                jwt::Verdict::Valid(claims) => {
                    let principal = jwt::principal(claims, &self.claims)
                        .ok_or_else(|| invalid("JWT without a subject claim"))?;
                    return Ok(Caller {
                        principal,
                        token: Some(BearerToken::new(token)),
                    });
                }
                jwt::Verdict::Refused(r) if r.unavailable() => {
                    return Err(Failure::Unavailable(format!("JWT: {r}")))
                }
                jwt::Verdict::Refused(r) => {
                    return Err(Failure::Invalid {
                        expired: r.expired(),
                        detail: format!("JWT: {r}"),
                    })
                }
                jwt::Verdict::NotOurs => {}
            }
        }
        if let Some(caller) = self.api_key(token) {
            return Ok(caller);
        }
        if let Some(i) = &self.introspection {
            return match i.check(token, &self.claims).await {
                introspection::Verdict::Active(principal) => Ok(Caller {
                    principal,
                    token: Some(BearerToken::new(token)),
                }),
                introspection::Verdict::Refused(why) => {
                    Err(invalid(&format!("introspection: {why}")))
                }
                introspection::Verdict::Unavailable(e) => {
                    tracing::warn!(error = %e, "token introspection failed");
                    Err(Failure::Unavailable(format!("introspection: {e}")))
                }
                introspection::Verdict::Throttled(after) => Err(Failure::Throttled(after)),
            };
        }
        Err(invalid(if jwt::looks_like_jwt(token) {
            "JWT of an issuer not configured"
        } else {
            "not a known credential"
        }))
    }

    fn api_key(&self, key: &str) -> Option<Caller> {
        let (subject, scopes) = self.api_keys.as_ref()?.check(key)?;
        Some(Caller {
            principal: Principal {
                method: AuthMethod::ApiKey,
                issuer: None,
                subject,
                subject_claim: None,
                scopes,
                claims: Default::default(),
            },
            token: None,
        })
    }

    /// The credential `headers` carry: `X-API-Key` (when API keys are
    /// configured), else `Authorization: Bearer`. `Err` names what is
    /// malformed.
    fn credential<'a>(&self, headers: &'a HeaderMap) -> Result<Credential<'a>, &'static str> {
        let one = |name: &str| -> Result<Option<&'a str>, &'static str> {
            let mut all = headers.get_all(name).iter();
            let Some(v) = all.next() else {
                return Ok(None);
            };
            if all.next().is_some() {
                return Err("the header is repeated");
            }
            if v.len() > MAX_TOKEN_BYTES + 16 {
                return Err("credential too long");
            }
            v.to_str().map(Some).map_err(|_| "not visible ASCII")
        };
        let authorization = one(http::header::AUTHORIZATION.as_str())?;
        if self.api_keys.is_some() {
            if let Some(key) = one("x-api-key")? {
                if authorization.is_some() {
                    return Err("both X-API-Key and Authorization");
                }
                return Ok(Credential::ApiKey(key.trim()));
            }
        }
        let Some(value) = authorization else {
            return Ok(Credential::None);
        };
        let Some((scheme, token)) = value.split_once(' ') else {
            return Ok(Credential::None);
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Ok(Credential::None);
        }
        let token = token.trim();
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
            return Err("bearer token empty or too long");
        }
        if token.contains(char::is_whitespace) {
            return Err("bearer token contains spaces");
        }
        Ok(Credential::Bearer(token))
    }

    /// The response to a refused request. Says what RFC 6750 lets a client
    /// act on (no credentials; refused; expired), nothing about which
    /// check failed: that goes to the debug log, without the credential.
    fn refuse(&self, f: Failure) -> Response {
        let reason = match &f {
            Failure::Missing => DenialReason::Missing,
            Failure::Invalid { expired: true, .. } => DenialReason::Expired,
            Failure::Invalid { .. } => DenialReason::Invalid,
            Failure::Unavailable(_) => DenialReason::Unavailable,
            Failure::Throttled(_) => DenialReason::Throttled,
        };
        let retry_after = match &f {
            // Whole seconds (RFC 9110 §10.2.3), never 0: "now" would make
            // clients hammer.
            Failure::Throttled(d) => HeaderValue::from(d.as_secs_f64().ceil().max(1.0) as u64),
            _ => HeaderValue::from_static(UNAVAILABLE_RETRY_AFTER),
        };
        let (status, challenge, body) = match f {
            Failure::Missing => {
                tracing::debug!("no credentials");
                (
                    StatusCode::UNAUTHORIZED,
                    Some(self.metadata.challenge(None)),
                    json!({"error": "unauthorized", "error_description": "authentication required"}),
                )
            }
            Failure::Invalid { expired, detail } => {
                tracing::debug!(reason = %detail, "credentials refused");
                let d = if expired {
                    "the access token expired"
                } else {
                    "the credentials are not valid"
                };
                (
                    StatusCode::UNAUTHORIZED,
                    Some(self.metadata.challenge(Some(d))),
                    json!({"error": "invalid_token", "error_description": d}),
                )
            }
            Failure::Throttled(_) => {
                tracing::debug!("credentials cannot be checked now: introspection limits");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    None,
                    json!({"error": "temporarily_unavailable",
                           "error_description": "credentials cannot be checked now; retry later"}),
                )
            }
            Failure::Unavailable(detail) => {
                tracing::debug!(reason = %detail, "credentials cannot be checked now");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    None,
                    json!({"error": "temporarily_unavailable",
                           "error_description": "credentials cannot be checked now; retry later"}),
                )
            }
        };
        let mut r = (status, Json(body)).into_response();
        // For the metrics, which the edge keeps ([`denial_reason`]).
        r.extensions_mut().insert(reason);
        if let Some(c) = challenge {
            r.headers_mut().insert(http::header::WWW_AUTHENTICATE, c);
        } else {
            r.headers_mut()
                .insert(http::header::RETRY_AFTER, retry_after);
        }
        r
    }
}

/// What a tool handler knows of the request it serves.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// `None` in open mode.
    pub caller: Option<Arc<Caller>>,
    /// The TCP peer (the ingress, behind one).
    pub client_ip: Option<IpAddr>,
}

impl CallContext {
    /// The key per-caller state counts under: the caller's identity
    /// (method, issuer, subject: [`Principal::identity`]), else the IP.
    pub(crate) fn caller_key(&self) -> Option<String> {
        match (&self.caller, self.client_ip) {
            (Some(c), _) => Some(format!("id:{}", c.principal.identity())),
            (None, Some(ip)) => Some(format!("ip:{ip}")),
            (None, None) => None,
        }
    }
}

/// Why [`Inbound::admit`] refused, read from the refusal it returned.
pub(crate) fn denial_reason(refusal: &Response) -> Option<DenialReason> {
    refusal.extensions().get::<DenialReason>().copied()
}

/// The context of the HTTP request behind an MCP request (rmcp puts the
/// request's `http::request::Parts` into the context's extensions).
pub(crate) fn caller_of(ctx: &RequestContext<RoleServer>) -> CallContext {
    let Some(parts) = ctx.extensions.get::<http::request::Parts>() else {
        return CallContext::default();
    };
    CallContext {
        caller: parts.extensions.get::<Arc<Caller>>().cloned(),
        client_ip: parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip()),
    }
}
