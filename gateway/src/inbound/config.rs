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
pub const DEFAULT_LEEWAY_SECONDS: u64 = 60;
/// Default longest time an introspection result is reused.
pub const DEFAULT_INTROSPECTION_CACHE_SECONDS: u64 = 300;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct InboundConfig {
    /// The gateway's public URL, as clients reach it (RFC 9728 `resource`).
    /// Required when any method is configured.
    pub resource: Option<String>,
    /// Trusted token issuers.
    pub jwt: Vec<JwtIssuer>,
    pub api_keys: Option<ApiKeysConfig>,
    /// RFC 7662 token introspection, for opaque tokens.
    pub introspection: Option<IntrospectionConfig>,
    /// Where subject, scopes and groups are read from in tokens.
    pub claims: ClaimNames,
    /// Clock-skew leeway in seconds. Default [`DEFAULT_LEEWAY_SECONDS`].
    pub leeway_seconds: u64,
    /// Advertised in the protected resource metadata.
    pub scopes_supported: Vec<String>,
    /// Access to upstreams without an `access` policy.
    pub default_access: DefaultAccess,
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
        }
    }
}

impl InboundConfig {
    /// Whether any authentication method is configured.
    pub fn enabled(&self) -> bool {
        !self.jwt.is_empty() || self.api_keys.is_some() || self.introspection.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiKeysConfig {
    /// `name: key` lines (YAML): the name is the caller's subject. Re-read
    /// when it changes.
    pub file: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntrospectionConfig {
    pub url: String,
    pub client_id: String,
    pub client_secret: SecretRef,
    /// Longest reuse of a result (never past the token's `exp`). Default
    /// [`DEFAULT_INTROSPECTION_CACHE_SECONDS`].
    #[serde(default = "default_introspection_cache")]
    pub cache_ttl_seconds: u64,
}

fn default_introspection_cache() -> u64 {
    DEFAULT_INTROSPECTION_CACHE_SECONDS
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ClaimNames {
    pub subject: String,
    /// A space-separated string or a list; `scp` is read when this claim
    /// is absent.
    pub scopes: String,
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
