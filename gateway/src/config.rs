//! The gateway config file (`--config gateway.yaml`): what the catalog does
//! not and must not say about an upstream — where it lives, how to
//! authenticate, and how much to trust it.
//!
//! The catalog is generated from OpenAPI documents that anyone may edit, so
//! credentials never come from it. Here they are *references*: a file path or
//! an environment variable name, resolved when a snapshot is built. Their
//! values, paths and names are never shown to MCP clients.
//!
//! ```yaml
//! upstreams:
//!   pets:                      # the catalog prefix
//!     baseUrl: http://pets.internal:8080/v1
//!     timeoutSeconds: 10
//!     maxResponseBytes: 1048576
//!     maxConcurrency: 64
//!     headers: {X-Client: toolgate}
//!     responseValidation: warn # warn | fail | off
//!     auth:
//!       type: bearer
//!       token: {file: /var/run/secrets/pets/token}
//! ```
//!
//! Every field has a default; an empty file means "defaults".

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Default cap on an upstream response body.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 10 * 1024 * 1024;
/// Default per-request upstream timeout.
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 30.0;
/// Statuses that take the success path unless configured otherwise.
pub const DEFAULT_SUCCESS_STATUS: &[u16] = &[200, 201, 202, 204];
/// Statuses that take the error path unless configured otherwise.
pub const DEFAULT_ERROR_STATUS: &[u16] = &[400, 401, 403, 404, 409, 422, 429, 500, 502, 503, 504];

/// The whole gateway config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Settings per catalog prefix.
    pub upstreams: BTreeMap<String, UpstreamConfig>,
}

/// How the gateway talks to one upstream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Overrides the catalog's `defaultBaseUrl`.
    pub base_url: Option<String>,
    pub auth: AuthConfig,
    /// Whole request, body included. Default [`DEFAULT_TIMEOUT_SECONDS`].
    pub timeout_seconds: Option<f64>,
    /// Default [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub max_response_bytes: Option<u64>,
    /// In-flight requests to this upstream; further calls wait. None = no limit.
    pub max_concurrency: Option<usize>,
    /// Sent on every request (after the plan's own headers, so they win).
    pub headers: BTreeMap<String, String>,
    pub response_validation: ResponseValidation,
    /// Default [`DEFAULT_SUCCESS_STATUS`].
    pub success_status: Option<Vec<u16>>,
    /// Default [`DEFAULT_ERROR_STATUS`].
    pub error_status: Option<Vec<u16>>,
}

/// What to do when a success response does not match its schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ResponseValidation {
    /// Log and return the data.
    #[default]
    Warn,
    /// Return isError with the validation errors.
    Fail,
    /// Do not validate.
    Off,
}

/// Outbound authentication of one upstream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type", deny_unknown_fields)]
pub enum AuthConfig {
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer { token: SecretRef },
    /// An API key in a header or a query parameter.
    #[serde(rename_all = "camelCase")]
    ApiKey {
        #[serde(rename = "in")]
        location: ApiKeyLocation,
        name: String,
        value: SecretRef,
    },
    /// `Authorization: Basic base64(user:password)`.
    Basic {
        username: SecretRef,
        password: SecretRef,
    },
    /// OAuth2 client credentials grant; the token is cached and refreshed
    /// before it expires.
    #[serde(rename_all = "camelCase")]
    Oauth2ClientCredentials {
        token_url: String,
        client_id: SecretRef,
        client_secret: SecretRef,
        #[serde(default)]
        scopes: Vec<String>,
        #[serde(default)]
        audience: Option<String>,
        /// `basic` (default, RFC 6749 §2.3.1) or `post` (credentials in the form).
        #[serde(default)]
        client_auth: ClientAuthMethod,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ApiKeyLocation {
    Header,
    Query,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClientAuthMethod {
    #[default]
    Basic,
    Post,
}

/// Where a secret lives. Exactly one of `file` and `env`; a plain `value`
/// is also accepted for non-secret strings such as a username.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SecretRef {
    pub file: Option<PathBuf>,
    pub env: Option<String>,
    pub value: Option<String>,
}

/// A config file that cannot be read or does not parse.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Parse { path: String, message: String },
}

/// A secret reference that cannot be resolved. Logged by the operator side,
/// never shown to MCP clients.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SecretError {
    pub field: String,
    pub message: String,
}

impl GatewayConfig {
    /// Reads a YAML (or JSON) config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text).map_err(|message| ConfigError::Parse {
            path: path.display().to_string(),
            message,
        })
    }

    /// Parses YAML (JSON is YAML). Empty text means defaults.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        yaml_serde::from_str(text).map_err(|e| e.to_string())
    }
}

impl SecretRef {
    /// Reads the secret. A file's trailing newline is dropped, as
    /// Kubernetes Secrets written by hand usually carry one.
    pub fn resolve(&self, field: &str) -> Result<String, SecretError> {
        let err = |message: String| SecretError {
            field: field.to_string(),
            message,
        };
        match (&self.file, &self.env, &self.value) {
            (Some(path), None, None) => std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .map_err(|e| err(format!("cannot read {}: {e}", path.display()))),
            (None, Some(name), None) => std::env::var(name)
                .map_err(|_| err(format!("environment variable {name} is not set"))),
            (None, None, Some(v)) => Ok(v.clone()),
            _ => Err(err("set exactly one of file, env, value".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_means_defaults() {
        assert_eq!(GatewayConfig::parse("").unwrap(), GatewayConfig::default());
    }

    #[test]
    fn auth_kinds_parse_from_yaml() {
        let cfg = GatewayConfig::parse(
            r#"
upstreams:
  a: {auth: {type: bearer, token: {env: TOKEN}}}
  b: {auth: {type: apiKey, in: query, name: key, value: {value: k}}}
  c: {auth: {type: basic, username: {value: u}, password: {file: /x}}}
  d: {auth: {type: oauth2ClientCredentials, tokenUrl: "http://t/token",
             clientId: {value: id}, clientSecret: {value: s}, scopes: [r, w]}}
"#,
        )
        .unwrap();
        assert!(matches!(cfg.upstreams["a"].auth, AuthConfig::Bearer { .. }));
        assert!(matches!(
            cfg.upstreams["b"].auth,
            AuthConfig::ApiKey {
                location: ApiKeyLocation::Query,
                ..
            }
        ));
        assert!(matches!(cfg.upstreams["c"].auth, AuthConfig::Basic { .. }));
        assert!(matches!(
            cfg.upstreams["d"].auth,
            AuthConfig::Oauth2ClientCredentials { .. }
        ));
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(GatewayConfig::parse("upstreams: {a: {baseURL: x}}").is_err());
    }

    #[test]
    fn secret_from_missing_env_names_the_field() {
        let s = SecretRef {
            env: Some("TOOLGATE_TEST_SURELY_UNSET_VAR".into()),
            ..Default::default()
        };
        let e = s.resolve("upstreams.a.auth.token").unwrap_err();
        assert_eq!(e.field, "upstreams.a.auth.token");
    }
}
