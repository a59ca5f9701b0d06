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
//! Every field has a default; an empty file means "defaults". The file
//! also holds the gateway's inbound authentication (`inbound:`, see
//! [`crate::inbound::config`]); [`GatewayFile`] is the whole file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use catalog::listing::{ListMode, MetaToolDescriptions, SearchSettings};
pub use catalog::runtime::*;

use crate::inbound::config::InboundConfig;

/// The whole gateway config file.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct GatewayFile {
    /// Who may call (authentication of MCP clients).
    pub inbound: InboundConfig,
    /// Settings per catalog prefix; `None` when the key is absent (with
    /// `serve --kube` it must be: the operator publishes them).
    pub upstreams: Option<BTreeMap<String, UpstreamConfig>>,
    /// How `/mcp` and `/mcp/{prefix}` list their tools.
    pub listing: ListingConfig,
}

/// The `listing:` section: each endpoint's mode when the client does not
/// choose one with `?mode=`, and what search mode presents.
///
/// ```yaml
/// listing:
///   mode: search          # /mcp: all | search (default all)
///   prefixMode: all       # /mcp/{prefix} (default: mode)
///   pinned: [gitea__repo_get]
///   descriptions:
///     searchTools: "Find tools of our internal APIs by what they do."
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ListingConfig {
    /// `/mcp` without `?mode=`.
    pub mode: ListMode,
    /// `/mcp/{prefix}` without `?mode=`; default: `mode`.
    pub prefix_mode: Option<ListMode>,
    /// Listed beside the meta-tools in search mode, by full name.
    pub pinned: Vec<String>,
    /// The meta-tools' descriptions; unset ones keep the built-in text.
    pub descriptions: MetaToolDescriptions,
}

impl ListingConfig {
    /// What search mode presents on `/mcp` and `/mcp/{prefix}`.
    pub fn search_settings(&self) -> SearchSettings {
        SearchSettings {
            pinned: self.pinned.clone(),
            descriptions: self.descriptions.clone(),
        }
    }

    /// The mode of `/mcp` (`prefix: false`) or `/mcp/{prefix}` when the
    /// request does not name one.
    pub fn default_mode(&self, prefix: bool) -> ListMode {
        match (prefix, self.prefix_mode) {
            (true, Some(m)) => m,
            _ => self.mode,
        }
    }
}

impl GatewayFile {
    /// The upstream part, as the catalog store takes it.
    pub fn gateway_config(&self) -> GatewayConfig {
        GatewayConfig {
            upstreams: self.upstreams.clone().unwrap_or_default(),
        }
    }
}

/// Where `secretKey` references are read from: the operator's credentials
/// Secret, mounted as a volume (one file per key). A mounted Secret is
/// updated in place by the kubelet, and the gateway then needs no RBAC on
/// Secrets at all.
pub const DEFAULT_CREDENTIALS_DIR: &str = "/var/run/toolgate/credentials";

static CREDENTIALS_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Sets the credentials directory once, at start-up (`--credentials-dir`).
pub fn set_credentials_dir(dir: PathBuf) {
    let _ = CREDENTIALS_DIR.set(dir);
}

/// The directory `secretKey` references are read from.
pub fn credentials_dir() -> &'static Path {
    CREDENTIALS_DIR.get_or_init(|| PathBuf::from(DEFAULT_CREDENTIALS_DIR))
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

/// Reads a YAML (or JSON) config file: its upstream settings.
pub fn load(path: &Path) -> Result<GatewayConfig, ConfigError> {
    load_file(path).map(|f| f.gateway_config())
}

/// Reads a YAML (or JSON) config file, whole.
pub fn load_file(path: &Path) -> Result<GatewayFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse_file(&text).map_err(|message| ConfigError::Parse {
        path: path.display().to_string(),
        message,
    })
}

/// Parses YAML (JSON is YAML): the upstream settings. Empty text means
/// defaults.
pub fn parse(text: &str) -> Result<GatewayConfig, String> {
    parse_file(text).map(|f| f.gateway_config())
}

/// Parses the whole file. Empty text means defaults.
pub fn parse_file(text: &str) -> Result<GatewayFile, String> {
    if text.trim().is_empty() {
        return Ok(GatewayFile::default());
    }
    let file: GatewayFile = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
    check_access(&file.gateway_config())?;
    file.listing
        .search_settings()
        .check()
        .map_err(|e| format!("listing.{e}"))?;
    Ok(file)
}

/// Refuses access rules that do not compile, naming the field
/// (`upstreams.<prefix>.access.rules[i].when`), so a bad `--config` stops
/// the gateway at start-up instead of leaving it unready. A snapshot
/// build checks them again, for configs from elsewhere.
fn check_access(config: &GatewayConfig) -> Result<(), String> {
    for (prefix, upstream) in &config.upstreams {
        if let Some(policy) = &upstream.access {
            let site = catalog::access::PolicySite::GatewayConfig {
                prefix: prefix.clone(),
            };
            policy.compile(&site).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Reading a [`SecretRef`]'s value: I/O, so it lives here, not with the type.
pub trait Resolve {
    /// Reads the secret. A file's trailing newline is dropped, as
    /// Kubernetes Secrets written by hand usually carry one.
    fn resolve(&self, field: &str) -> Result<String, SecretError>;
}

impl Resolve for SecretRef {
    fn resolve(&self, field: &str) -> Result<String, SecretError> {
        let err = |message: String| SecretError {
            field: field.to_string(),
            message,
        };
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .map_err(|e| err(format!("cannot read {}: {e}", path.display())))
        };
        match (&self.file, &self.env, &self.value, &self.secret_key) {
            (Some(path), None, None, None) => read(path),
            (None, Some(name), None, None) => std::env::var(name)
                .map_err(|_| err(format!("environment variable {name} is not set"))),
            (None, None, Some(v), None) => Ok(v.clone()),
            (None, None, None, Some(key)) => {
                // Keys are config keys (no '/'), so they cannot escape the dir.
                if key.is_empty() || key.contains('/') || key.starts_with('.') {
                    return Err(err(format!("invalid credentials key {key:?}")));
                }
                read(&credentials_dir().join(key))
            }
            _ => Err(err("set exactly one of file, env, value, secretKey".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_means_defaults() {
        assert_eq!(parse("").unwrap(), GatewayConfig::default());
    }

    #[test]
    fn auth_kinds_parse_from_yaml() {
        let cfg = parse(
            r#"
upstreams:
  a: {auth: {type: bearer, token: {env: TOKEN}}}
  b: {auth: {type: apiKey, in: query, name: key, value: {value: k}}}
  c: {auth: {type: basic, username: {value: u}, password: {file: /x}}}
  d: {auth: {type: oauth2ClientCredentials, tokenUrl: "http://t/token",
             clientId: {value: id}, clientSecret: {value: s}, scopes: [r, w]}}
  e: {auth: {type: tokenExchange, tokenUrl: "http://t/token", audience: e-api,
             clientId: {value: id}, clientSecret: {value: s}, clientAuth: post},
      rateLimit: {requestsPerSecond: 0.5}, forwardIdentity: {header: X-User}}
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
        let e = &cfg.upstreams["e"];
        assert!(matches!(
            &e.auth,
            AuthConfig::TokenExchange {
                audience: Some(a),
                client_auth: ClientAuthMethod::Post,
                ..
            } if a == "e-api"
        ));
        assert_eq!(e.rate_limit.as_ref().map(|r| r.effective_burst()), Some(1));
        assert_eq!(
            e.forward_identity.as_ref().map(|f| f.header.as_str()),
            Some("X-User")
        );
    }

    #[test]
    fn inbound_and_upstreams_share_the_file() {
        let f = parse_file(
            "inbound:\n  resource: https://mcp.example.com/mcp\n  jwt:\n    - {issuer: 'https://idp', audiences: [toolgate]}\nupstreams:\n  a: {baseUrl: 'http://a'}\n",
        )
        .unwrap();
        assert_eq!(f.inbound.jwt[0].audiences, ["toolgate"]);
        assert!(f.gateway_config().upstreams.contains_key("a"));
        assert!(parse_file("inbound: {}\n").unwrap().upstreams.is_none());
        assert!(parse("inbound: {jwt: []}\n").is_ok());
        assert!(parse_file("inbound: {jwks: []}\n").is_err());
    }

    #[test]
    fn access_rules_that_do_not_compile_are_refused_naming_the_field() {
        let e = parse(
            "upstreams:\n  pets:\n    access:\n      rules:\n        - {scopes: [a]}\n        - {when: 'claims.groups.exists('}\n",
        )
        .unwrap_err();
        assert!(
            e.starts_with("upstreams.pets.access.rules[1].when: invalid CEL"),
            "{e}"
        );
        parse("upstreams:\n  pets:\n    access:\n      rules:\n        - {when: '\"sre\" in claims.groups'}\n").unwrap();
    }

    #[test]
    fn listing_sets_modes_and_search_settings() {
        let f = parse_file(
            "listing:\n  mode: search\n  pinned: [a__b]\n  descriptions: {callTool: Run it.}\n",
        )
        .unwrap();
        assert_eq!(f.listing.default_mode(false), ListMode::Search);
        assert_eq!(f.listing.default_mode(true), ListMode::Search);
        assert_eq!(f.listing.search_settings().pinned, ["a__b"]);
        let f = parse_file("listing: {mode: search, prefixMode: all}\n").unwrap();
        assert_eq!(f.listing.default_mode(true), ListMode::All);
        assert_eq!(
            parse_file("").unwrap().listing.default_mode(false),
            ListMode::All
        );
        assert!(parse_file("listing: {mode: bogus}\n").is_err());
        let long = format!(
            "listing:\n  descriptions: {{searchTools: '{}'}}\n",
            "x".repeat(5000)
        );
        let e = parse_file(&long).unwrap_err();
        assert!(e.starts_with("listing.descriptions.searchTools:"), "{e}");
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(parse("upstreams: {a: {baseURL: x}}").is_err());
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
