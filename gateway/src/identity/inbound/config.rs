//! The `inbound:` section of the gateway config file (`toolgate serve
//! --config`, and the Helm chart's `gateway.inbound`).
//!
//! ```yaml
//! inbound:
//!   resource: https://mcp.example.com/mcp   # the gateway's public URL
//!   jwt:
//!     - issuer: https://login.example.com/realms/main
//!       audiences: [toolgate]
//!       # jwksUrl: ...                       # default: OIDC discovery
//!   apiKeys: {file: /var/run/toolgate/api-keys/keys.yaml}
//!   introspection:
//!     url: https://login.example.com/introspect
//!     clientId: toolgate
//!     clientSecret: {file: /var/run/toolgate/introspection/clientSecret}
//!     # audiences: [toolgate]                # default: [resource]
//!     # requireAudience: false               # true: an answer without aud is refused
//!     # issuer: https://login.example.com    # when set, a present `iss` must equal it
//!   defaultAccess: allow                     # upstreams without `access`
//! ```
//!
//! No method configured (`inbound: {}` or no `inbound`) means open: every
//! request is admitted without a caller.

use std::path::PathBuf;

use catalog::access::DefaultAccess;
use catalog::runtime::SecretRef;
use serde::{Deserialize, Serialize};

/// Default clock-skew leeway for `exp`/`nbf`/`iat`.
pub(crate) const DEFAULT_LEEWAY_SECONDS: u64 = 60;
/// Default longest time an introspection result is reused.
pub(crate) const DEFAULT_INTROSPECTION_CACHE_SECONDS: u64 = 300;
/// Default shortest time between two JWKS fetches of one issuer caused by
/// a token whose `kid` the cached keys lack.
pub(crate) const DEFAULT_JWKS_MIN_REFETCH_SECONDS: u64 = 10;
/// Default age at which an issuer's keys are fetched again in the
/// background (they keep serving meanwhile): a key removed from the JWKS
/// is refused at most this long plus one fetch after its removal.
pub(crate) const DEFAULT_JWKS_REFRESH_SECONDS: u64 = 300;
/// Default most introspection requests in flight at once.
pub(crate) const DEFAULT_INTROSPECTION_MAX_CONCURRENT: u32 = 16;
/// Default most introspection requests per second (also the burst).
pub(crate) const DEFAULT_INTROSPECTION_MAX_PER_SECOND: u32 = 20;
/// Default longest token sent to introspection.
pub(crate) const DEFAULT_INTROSPECTION_MAX_TOKEN_BYTES: usize = 4096;
/// Default most cached active answers (inactive ones: as many again, apart).
pub(crate) const DEFAULT_INTROSPECTION_CACHE_ENTRIES: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct InboundConfig {
    /// The gateway's public URL, as clients reach it (RFC 9728 `resource`).
    /// Required when any method is configured.
    pub resource: Option<String>,
    /// Trusted token issuers.
    pub jwt: Vec<JwtIssuer>,
    /// Static API keys, for callers that are programs (CI, scripts).
    pub api_keys: Option<ApiKeysConfig>,
    /// RFC 7662 token introspection, for opaque tokens.
    pub introspection: Option<IntrospectionConfig>,
    /// Where subject, scopes and groups are read from in tokens.
    pub claims: ClaimNames,
    /// Clock-skew leeway in seconds ([`DEFAULT_LEEWAY_SECONDS`]).
    pub leeway_seconds: u64,
    /// Advertised in the protected resource metadata.
    pub scopes_supported: Vec<String>,
    /// Access to upstreams without an `access` policy.
    pub default_access: DefaultAccess,
    /// Shortest time between two JWKS fetches of one issuer caused by an
    /// unknown `kid` (a key rotated at the issuer): tokens with made-up
    /// `kid`s cannot make the gateway hammer the issuer
    /// ([`DEFAULT_JWKS_MIN_REFETCH_SECONDS`]).
    pub jwks_min_refetch_seconds: u64,
    /// Age at which an issuer's keys are fetched again, in the background
    /// while they keep serving ([`DEFAULT_JWKS_REFRESH_SECONDS`]).
    pub jwks_refresh_seconds: u64,
}

impl Default for InboundConfig {
    fn default() -> Self {
        InboundConfig {
            resource: None,
            jwt: Vec::new(),
            api_keys: None,
            introspection: None,
            claims: ClaimNames::default(),
            leeway_seconds: DEFAULT_LEEWAY_SECONDS,
            scopes_supported: Vec::new(),
            default_access: DefaultAccess::Allow,
            jwks_min_refetch_seconds: DEFAULT_JWKS_MIN_REFETCH_SECONDS,
            jwks_refresh_seconds: DEFAULT_JWKS_REFRESH_SECONDS,
        }
    }
}

impl InboundConfig {
    /// Whether any authentication method is configured.
    pub fn enabled(&self) -> bool {
        !self.jwt.is_empty() || self.api_keys.is_some() || self.introspection.is_some()
    }

    /// Checks what can be checked without I/O; the error names the field
    /// (`inbound.jwt[0].audiences`).
    pub fn validate(&self) -> Result<(), InvalidField> {
        let bad = |field: String, message: &str| InvalidField {
            field,
            message: message.to_string(),
        };
        if !self.enabled() {
            return Ok(());
        }
        match &self.resource {
            None => {
                return Err(bad(
                    "inbound.resource".into(),
                    "required once an authentication method is configured: the gateway's \
                     public URL, e.g. https://mcp.example.com/mcp",
                ))
            }
            Some(r) => {
                let u = http_url(r).map_err(|m| bad("inbound.resource".into(), &m))?;
                if u.query().is_some() || u.fragment().is_some() {
                    return Err(bad(
                        "inbound.resource".into(),
                        "must have no query or fragment (RFC 9728)",
                    ));
                }
            }
        }
        for (i, j) in self.jwt.iter().enumerate() {
            let field = |f: &str| format!("inbound.jwt[{i}].{f}");
            http_url(&j.issuer).map_err(|m| bad(field("issuer"), &m))?;
            if j.audiences.is_empty() || j.audiences.iter().any(String::is_empty) {
                return Err(bad(
                    field("audiences"),
                    "must list at least one audience, none empty",
                ));
            }
            if let Some(u) = &j.jwks_url {
                http_url(u).map_err(|m| bad(field("jwksUrl"), &m))?;
            }
            if self.jwt[..i].iter().any(|o| o.issuer == j.issuer) {
                return Err(bad(field("issuer"), "listed twice"));
            }
        }
        if let Some(k) = &self.api_keys {
            if k.file.as_os_str().is_empty() {
                return Err(bad("inbound.apiKeys.file".into(), "must not be empty"));
            }
        }
        if self.jwks_refresh_seconds == 0 {
            return Err(bad(
                "inbound.jwksRefreshSeconds".into(),
                "must be at least 1",
            ));
        }
        if let Some(i) = &self.introspection {
            let field = |f: &str| format!("inbound.introspection.{f}");
            http_url(&i.url).map_err(|m| bad(field("url"), &m))?;
            if i.client_id.is_empty() {
                return Err(bad(field("clientId"), "must not be empty"));
            }
            if i.audiences.iter().any(String::is_empty) {
                return Err(bad(field("audiences"), "must not list an empty audience"));
            }
            if i.issuer.as_ref().is_some_and(String::is_empty) {
                return Err(bad(field("issuer"), "must not be empty"));
            }
            if i.max_concurrent_requests == 0 {
                return Err(bad(field("maxConcurrentRequests"), "must be at least 1"));
            }
            if i.max_requests_per_second == 0 {
                return Err(bad(field("maxRequestsPerSecond"), "must be at least 1"));
            }
            if i.max_token_bytes == 0 || i.max_token_bytes > super::MAX_TOKEN_BYTES {
                return Err(bad(
                    field("maxTokenBytes"),
                    &format!("must be between 1 and {}", super::MAX_TOKEN_BYTES),
                ));
            }
            if i.cache_max_entries == 0 {
                return Err(bad(field("cacheMaxEntries"), "must be at least 1"));
            }
        }
        for (f, v) in [
            ("subject", &self.claims.subject),
            ("scopes", &self.claims.scopes),
            ("groups", &self.claims.groups),
        ] {
            if v.is_empty() {
                return Err(bad(format!("inbound.claims.{f}"), "must not be empty"));
            }
        }
        Ok(())
    }
}

/// A setting that cannot work, named by its path in the config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidField {
    pub field: String,
    pub message: String,
}

/// An absolute http(s) URL.
pub(crate) fn http_url(s: &str) -> Result<reqwest::Url, String> {
    let u = reqwest::Url::parse(s).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err("must be an http(s) URL with a host".into());
    }
    Ok(u)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtIssuer {
    /// Must equal the token's `iss`.
    pub issuer: String,
    /// The token's `aud` must name one of these. Required, not empty.
    pub audiences: Vec<String>,
    /// Default: `jwks_uri` of `{issuer}/.well-known/openid-configuration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiKeysConfig {
    /// `name: key` lines (YAML): the name is the caller's subject. Re-read
    /// when it changes.
    pub file: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// The identity provider's introspection endpoint (RFC 7662).
    pub url: String,
    /// The gateway's client id at the endpoint (HTTP Basic).
    pub client_id: String,
    /// The gateway's client secret at the endpoint.
    pub client_secret: SecretRef,
    /// Longest reuse of a result, never past the token's `exp`
    /// ([`DEFAULT_INTROSPECTION_CACHE_SECONDS`]).
    #[serde(default = "default_introspection_cache")]
    pub cache_ttl_seconds: u64,
    /// An active answer's `aud` (a string or a list) must name one of
    /// these. Empty (the default): the gateway's `resource`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// Whether an active answer without `aud` is refused. Default `false`:
    /// RFC 7662 makes `aud` optional and many identity providers leave it
    /// out of their answers; set it when yours always sends one.
    #[serde(default)]
    pub require_audience: bool,
    /// When set, an answer's `iss`, if it has one, must equal it (and it
    /// is the issuer of callers whose answer has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Most requests to the endpoint in flight at once; past it a token
    /// not cached is answered 503 with `Retry-After`
    /// ([`DEFAULT_INTROSPECTION_MAX_CONCURRENT`]).
    #[serde(default = "default_introspection_concurrency")]
    pub max_concurrent_requests: u32,
    /// Most requests to the endpoint per second, and the burst; past it
    /// likewise 503 ([`DEFAULT_INTROSPECTION_MAX_PER_SECOND`]).
    #[serde(default = "default_introspection_rate")]
    pub max_requests_per_second: u32,
    /// Longer tokens are refused without asking the endpoint
    /// ([`DEFAULT_INTROSPECTION_MAX_TOKEN_BYTES`]).
    #[serde(default = "default_introspection_token_bytes")]
    pub max_token_bytes: usize,
    /// Most active answers cached; inactive answers are cached apart, as
    /// many at most, so they never push active ones out
    /// ([`DEFAULT_INTROSPECTION_CACHE_ENTRIES`]).
    #[serde(default = "default_introspection_entries")]
    pub cache_max_entries: usize,
}

fn default_introspection_cache() -> u64 {
    DEFAULT_INTROSPECTION_CACHE_SECONDS
}

fn default_introspection_concurrency() -> u32 {
    DEFAULT_INTROSPECTION_MAX_CONCURRENT
}

fn default_introspection_rate() -> u32 {
    DEFAULT_INTROSPECTION_MAX_PER_SECOND
}

fn default_introspection_token_bytes() -> usize {
    DEFAULT_INTROSPECTION_MAX_TOKEN_BYTES
}

fn default_introspection_entries() -> usize {
    DEFAULT_INTROSPECTION_CACHE_ENTRIES
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ClaimNames {
    /// The caller's subject: with the issuer, who the caller is.
    pub subject: String,
    /// A space-separated string or a list; `scp` is read when this claim
    /// is absent.
    pub scopes: String,
    /// The claim holding the caller's groups; access rules read it as
    /// `claims.groups`, whatever the issuer calls it.
    pub groups: String,
}

impl Default for ClaimNames {
    fn default() -> Self {
        ClaimNames {
            subject: "sub".into(),
            scopes: "scope".into(),
            groups: "groups".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(yaml: &str) -> String {
        let cfg: InboundConfig = yaml_serde::from_str(yaml).unwrap();
        cfg.validate().unwrap_err().field
    }

    #[test]
    fn errors_name_the_field() {
        let jwt = "jwt: [{issuer: 'https://idp', audiences: [a]}]";
        assert_eq!(field_of(jwt), "inbound.resource");
        let r = "resource: https://mcp.example.com/mcp";
        assert_eq!(
            field_of(&format!("{r}\njwt: [{{issuer: 'https://i', audiences: [a]}}, {{issuer: 'https://j', audiences: []}}]")),
            "inbound.jwt[1].audiences"
        );
        assert_eq!(
            field_of(&format!("{r}\njwt: [{{issuer: idp, audiences: [a]}}]")),
            "inbound.jwt[0].issuer"
        );
        assert_eq!(
            field_of(&format!(
                "{r}\njwt: [{{issuer: 'https://i', audiences: [a], jwksUrl: 'ftp://x'}}]"
            )),
            "inbound.jwt[0].jwksUrl"
        );
        assert_eq!(
            field_of(&format!("{jwt}\nresource: 'https://x/mcp?a=b'")),
            "inbound.resource"
        );
        assert_eq!(
            field_of(&format!(
                "{r}\nintrospection: {{url: nope, clientId: c, clientSecret: {{value: s}}}}"
            )),
            "inbound.introspection.url"
        );
        let i = "introspection: {url: 'https://i/x', clientId: c, clientSecret: {value: s}";
        assert_eq!(
            field_of(&format!("{r}\n{i}, maxRequestsPerSecond: 0}}")),
            "inbound.introspection.maxRequestsPerSecond"
        );
        assert_eq!(
            field_of(&format!("{r}\n{i}, maxTokenBytes: 100000}}")),
            "inbound.introspection.maxTokenBytes"
        );
        assert_eq!(
            field_of(&format!("{r}\n{i}, audiences: ['']}}")),
            "inbound.introspection.audiences"
        );
        assert_eq!(
            field_of(&format!("{jwt}\n{r}\njwksRefreshSeconds: 0")),
            "inbound.jwksRefreshSeconds"
        );
    }

    #[test]
    fn no_method_needs_nothing() {
        let cfg: InboundConfig = yaml_serde::from_str("{}").unwrap();
        assert!(!cfg.enabled());
        assert!(cfg.validate().is_ok());
        assert_eq!(
            cfg.jwks_min_refetch_seconds,
            DEFAULT_JWKS_MIN_REFETCH_SECONDS
        );
    }
}
