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
//! [`crate::identity::inbound::config`]); [`GatewayFile`] is the whole file.
//!
//! An upstream may also say where its tools come from, for a gateway that
//! compiles its own catalog (`serve --config` without `--catalog`, see
//! [`crate::serving::local`]): `openapi: {file | url}`, `overlays`, and the
//! McpUpstream's `naming`, `tools`, `schema` and `validation` blocks, with
//! the same names and meaning ([`UpstreamEntry`]).
//!
//! ```yaml
//! upstreams:
//!   pets:
//!     openapi: {file: specs/pets.yaml}   # relative to this file
//!     overlays: [agents.yaml]
//!     tools: {readOnly: true}
//!     baseUrl: http://pets.internal:8080/v1
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use catalog::listing::{ListMode, MetaToolDescriptions, SearchSettings};
pub use catalog::runtime::*;

use crate::identity::inbound::config::InboundConfig;

/// The whole gateway config file.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct GatewayFile {
    /// Who may call (authentication of MCP clients).
    pub inbound: InboundConfig,
    /// Settings per tool prefix. Leave it out with `serve --kube`: the
    /// operator publishes them. A prefix given twice is an error, not the
    /// last one winning.
    #[serde(deserialize_with = "unique_prefixes")]
    pub upstreams: Option<BTreeMap<String, UpstreamEntry>>,
    /// How `/mcp` and `/mcp/{prefix}` list their tools.
    pub listing: ListingConfig,
    /// Settings of the Prometheus metrics (`serve` flags win).
    pub metrics: MetricsConfig,
}

/// The `metrics:` section.
///
/// ```yaml
/// metrics:
///   toolLabels: auto      # auto | on | off
///   toolLabelLimit: 1000  # auto: per-tool series up to this many tools
/// ```
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Whether `mcp_server_operation_duration_seconds` has per-tool series
    /// (`--metrics-tool-labels`).
    #[schemars(extend("default" = "auto"))]
    pub tool_labels: Option<crate::observe::metrics::ToolLabels>,
    /// `auto` labels per tool while the served catalog has at most this
    /// many tools (`--metrics-tool-label-limit`).
    #[schemars(extend("default" = crate::observe::metrics::DEFAULT_TOOL_LABEL_LIMIT))]
    pub tool_label_limit: Option<usize>,
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
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
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
    pub(crate) fn search_settings(&self) -> SearchSettings {
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
            upstreams: self
                .upstreams
                .iter()
                .flatten()
                .map(|(prefix, e)| (prefix.clone(), e.runtime()))
                .collect(),
        }
    }

    /// Whether any upstream says where its tools come from.
    pub fn has_sources(&self) -> bool {
        self.upstreams
            .iter()
            .flatten()
            .any(|(_, e)| e.openapi.is_some())
    }
}

/// One upstream of the config file: how to reach it ([`UpstreamConfig`],
/// flattened: `baseUrl`, `auth`, limits, ...) and, when the gateway
/// compiles its own catalog, where its tools come from and how they are
/// compiled — the fields of an McpUpstream with the same names.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamEntry {
    /// The OpenAPI document. Without it the upstream's tools come from
    /// `--catalog` (or `--spec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openapi: Option<OpenApiSource>,
    /// Overlay files applied to the document, in this order; relative
    /// paths resolve against the config file's directory. Only with
    /// `openapi`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlays: Vec<PathBuf>,
    /// As `McpUpstream.spec.naming` (`separator` can only be `__`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naming: Option<catalog::NamingOptions>,
    /// As `McpUpstream.spec.tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<catalog::ToolOptions>,
    /// As `McpUpstream.spec.schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<catalog::SchemaOptions>,
    /// As `McpUpstream.spec.validation`: instead of `responseValidation`,
    /// `successStatus` and `errorStatus`, which it sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    #[serde(flatten)]
    pub settings: UpstreamConfig,
}

/// Where an upstream's OpenAPI document comes from: exactly one of `file`
/// and `url`.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenApiSource {
    /// A file; a relative path resolves against the config file's
    /// directory. Watched: a change recompiles the upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// An http(s) URL, fetched at start-up, whenever the config is
    /// reloaded, and every `refreshInterval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// How often `url` is fetched again, e.g. `5m` (units `ms`, `s`, `m`,
    /// `h`), as in an McpUpstream; absent means 10m. Only with `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval: Option<String>,
}

impl OpenApiSource {
    /// `refreshInterval`, default applied (after [`parse_file`] checked it).
    pub fn refresh(&self) -> Option<std::time::Duration> {
        self.url.as_ref()?;
        catalog::runtime::parse_duration(
            self.refresh_interval
                .as_deref()
                .unwrap_or(DEFAULT_REFRESH_INTERVAL),
        )
    }
}

impl UpstreamEntry {
    /// How the gateway reaches this upstream: the settings, with
    /// `validation` applied.
    pub fn runtime(&self) -> UpstreamConfig {
        let mut settings = self.settings.clone();
        if let Some(v) = &self.validation {
            v.apply(&mut settings);
        }
        settings
    }

    /// The compile options, as the operator makes them of an McpUpstream.
    pub(crate) fn compile_options(&self) -> catalog::CompileOptions {
        catalog::CompileOptions::declared(
            self.naming.as_ref(),
            self.tools.as_ref(),
            self.schema.as_ref(),
        )
    }

    /// Checks what the McpUpstream schema (and the operator) would,
    /// naming fields relative to `upstreams.<prefix>`.
    fn check(&self, prefix: &str, all: &BTreeMap<String, UpstreamEntry>) -> Result<(), String> {
        let at = |field: &str| format!("upstreams.{prefix}.{field}");
        let Some(openapi) = &self.openapi else {
            let compiled = [
                ("overlays", !self.overlays.is_empty()),
                ("naming", self.naming.is_some()),
                ("tools", self.tools.is_some()),
                ("schema", self.schema.is_some()),
            ];
            if let Some((field, _)) = compiled.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "{}: only with openapi (it says how the document is compiled)",
                    at(field)
                ));
            }
            return self.check_validation(&at);
        };
        match (&openapi.file, &openapi.url) {
            (Some(_), None) => {
                if openapi.refresh_interval.is_some() {
                    return Err(format!(
                        "{}: only with openapi.url",
                        at("openapi.refreshInterval")
                    ));
                }
            }
            (None, Some(url)) => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|e| format!("{}: {url:?}: {e}", at("openapi.url")))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(format!(
                        "{}: {url:?} is not an http or https URL",
                        at("openapi.url")
                    ));
                }
                if let Some(r) = &openapi.refresh_interval {
                    if catalog::runtime::parse_duration(r).is_none_or(|d| d.is_zero()) {
                        return Err(format!(
                            "{}: {r:?} is not a duration such as 30s, 5m or 1h30m",
                            at("openapi.refreshInterval")
                        ));
                    }
                }
            }
            _ => {
                return Err(format!(
                    "{}: set exactly one of file and url",
                    at("openapi")
                ));
            }
        }
        // The operator's rules for a gateway several upstreams share:
        // with them a tool name always says which upstream it belongs to.
        let options = self.compile_options();
        if let Err(e) = catalog::prefix::check_shared(prefix, &options.naming.separator) {
            let catalog::CompileError::Options { field, message } = e else {
                return Err(format!("upstreams.{prefix}: {e}"));
            };
            if field != "toolPrefix" {
                return Err(format!("{}: {message}", at(&field)));
            }
            // A key such as `pets__v2` would name tools `pets__v2__...`,
            // which are prefix `pets`'s names.
            let owner = catalog::prefix::prefix_of(prefix)
                .filter(|p| *p != prefix && all.contains_key(*p))
                .map(|p| format!("; its tool names would be upstream {p}'s"))
                .unwrap_or_default();
            return Err(format!("upstreams.{prefix}: the prefix {message}{owner}"));
        }
        self.check_validation(&at)
    }

    fn check_validation(&self, at: &dyn Fn(&str) -> String) -> Result<(), String> {
        let Some(v) = &self.validation else {
            return Ok(());
        };
        v.check()
            .map_err(|e| format!("{}: {}", at(&format!("validation.{}", e.field)), e.message))?;
        let s = &self.settings;
        if s.response_validation != ResponseValidation::default()
            || s.success_status.is_some()
            || s.error_status.is_some()
        {
            return Err(format!(
                "{}: give either validation (as in an McpUpstream) or responseValidation, \
                 successStatus and errorStatus, not both",
                at("validation")
            ));
        }
        Ok(())
    }
}

/// The config file's JSON Schema (draft 2020-12): what the reference page
/// `docs/reference/gateway-file.md` is rendered from, and what an editor's
/// YAML language server checks a `gateway.yaml` against
/// (`docs/reference/gateway-file.schema.json`). Checks made in code
/// ([`parse_file`]: a prefix given twice, `file` or `url`) are not in it.
pub fn json_schema() -> serde_json::Value {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<GatewayFile>()
        .to_value();
    numeric_exclusive_bounds(&mut schema);
    schema
}

/// The settings types shared with the CRDs write an exclusive bound as
/// OpenAPI 3.0 does (`minimum: 0, exclusiveMinimum: true`, which a
/// structural schema needs); draft 2020-12 wants `exclusiveMinimum: 0`.
fn numeric_exclusive_bounds(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(o) => {
            for (exclusive, bound) in [
                ("exclusiveMinimum", "minimum"),
                ("exclusiveMaximum", "maximum"),
            ] {
                match o.get(exclusive) {
                    Some(Value::Bool(true)) => {
                        match o.remove(bound) {
                            Some(b) => o.insert(exclusive.to_string(), b),
                            None => o.remove(exclusive),
                        };
                    }
                    Some(Value::Bool(false)) => {
                        o.remove(exclusive);
                    }
                    _ => {}
                }
            }
            o.values_mut().for_each(numeric_exclusive_bounds);
        }
        Value::Array(a) => a.iter_mut().for_each(numeric_exclusive_bounds),
        _ => {}
    }
}

/// `upstreams:` as a map that refuses a key given twice (YAML parsers
/// keep the last one, which would silently drop an upstream).
fn unique_prefixes<'de, D>(d: D) -> Result<Option<BTreeMap<String, UpstreamEntry>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Unique;
    impl<'de> serde::de::Visitor<'de> for Unique {
        type Value = BTreeMap<String, UpstreamEntry>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map from tool prefix to upstream settings")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(prefix) = map.next_key::<String>()? {
                if out.contains_key(&prefix) {
                    return Err(serde::de::Error::custom(format!(
                        "prefix {prefix:?} is given to two upstreams; a prefix belongs to one"
                    )));
                }
                let entry = map.next_value()?;
                out.insert(prefix, entry);
            }
            Ok(out)
        }
    }
    struct Optional;
    impl<'de> serde::de::Visitor<'de> for Optional {
        type Value = Option<BTreeMap<String, UpstreamEntry>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map from tool prefix to upstream settings")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: serde::Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_map(Unique).map(Some)
        }
    }
    d.deserialize_option(Optional)
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
    if let Some(all) = &file.upstreams {
        for (prefix, entry) in all {
            entry.check(prefix, all)?;
        }
    }
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
    fn an_upstream_may_say_where_its_tools_come_from() {
        let f = parse_file(
            "upstreams:\n  pets:\n    openapi: {file: specs/pets.yaml}\n    overlays: [a.yaml, b.yaml]\n    naming: {maxLength: 40}\n    tools: {readOnly: true}\n    schema: {bodyMode: nested}\n    validation: {response: true, responseFailure: fail, successStatus: [404]}\n    baseUrl: http://pets\n    timeoutSeconds: 5\n  weather:\n    openapi: {url: 'https://example.com/openapi.yaml', refreshInterval: 1m}\n",
        )
        .unwrap();
        assert!(f.has_sources());
        let pets = &f.upstreams.as_ref().unwrap()["pets"];
        let options = pets.compile_options();
        assert_eq!(options.naming.max_length, 40);
        assert!(options.tools.read_only);
        assert_eq!(options.schema.body_mode, catalog::BodyMode::Nested);
        let runtime = &f.gateway_config().upstreams["pets"];
        assert_eq!(runtime.base_url.as_deref(), Some("http://pets"));
        assert_eq!(runtime.timeout_seconds, Some(5.0));
        assert_eq!(runtime.response_validation, ResponseValidation::Fail);
        assert!(runtime.success_status.as_ref().unwrap().contains(&404));
        let weather = f.upstreams.as_ref().unwrap()["weather"]
            .openapi
            .clone()
            .unwrap();
        assert_eq!(weather.refresh(), Some(std::time::Duration::from_secs(60)));
        // Settings alone (for --catalog) are not sources.
        assert!(!parse_file("upstreams: {a: {baseUrl: 'http://a'}}")
            .unwrap()
            .has_sources());
    }

    #[test]
    fn a_prefix_given_twice_is_refused_naming_it() {
        let e = parse_file(
            "upstreams:\n  pets: {openapi: {file: a.yaml}}\n  pets: {openapi: {file: b.yaml}}\n",
        )
        .unwrap_err();
        assert!(e.contains("\"pets\" is given to two upstreams"), "{e}");
        assert!(parse_file("upstreams:\n").unwrap().upstreams.is_none());
    }

    #[test]
    fn prefixes_and_separators_follow_the_shared_gateway_rules() {
        // A prefix that would own another prefix's tool names.
        let e = parse_file(
            "upstreams:\n  pets: {openapi: {file: a.yaml}}\n  pets__v2: {openapi: {file: b.yaml}}\n",
        )
        .unwrap_err();
        assert!(e.starts_with("upstreams.pets__v2: the prefix"), "{e}");
        assert!(e.contains("upstream pets's"), "{e}");
        let e = parse_file("upstreams:\n  Pets: {openapi: {file: a.yaml}}\n").unwrap_err();
        assert!(e.starts_with("upstreams.Pets: the prefix"), "{e}");
        let e =
            parse_file("upstreams:\n  pets: {openapi: {file: a.yaml}, naming: {separator: '_'}}\n")
                .unwrap_err();
        assert!(e.starts_with("upstreams.pets.naming.separator:"), "{e}");
    }

    #[test]
    fn source_fields_are_checked_naming_the_field() {
        let cases = [
            (
                "{openapi: {}}",
                "upstreams.a.openapi: set exactly one of file and url",
            ),
            (
                "{openapi: {file: x, url: 'http://x'}}",
                "upstreams.a.openapi: set exactly one of file and url",
            ),
            ("{openapi: {url: 'ftp://x/y'}}", "upstreams.a.openapi.url:"),
            (
                "{openapi: {file: x, refreshInterval: 5m}}",
                "upstreams.a.openapi.refreshInterval: only with openapi.url",
            ),
            (
                "{openapi: {url: 'http://x', refreshInterval: soon}}",
                "upstreams.a.openapi.refreshInterval:",
            ),
            (
                "{overlays: [o.yaml]}",
                "upstreams.a.overlays: only with openapi",
            ),
            (
                "{tools: {readOnly: true}}",
                "upstreams.a.tools: only with openapi",
            ),
            (
                "{validation: {successStatus: [404], errorStatus: [404]}}",
                "upstreams.a.validation.successStatus:",
            ),
            (
                "{validation: {response: true}, responseValidation: fail}",
                "upstreams.a.validation: give either",
            ),
        ];
        for (entry, want) in cases {
            let e = parse_file(&format!("upstreams:\n  a: {entry}\n")).unwrap_err();
            assert!(e.starts_with(want), "{entry}: {e}");
        }
        // Typos are refused inside the blocks and beside them.
        let e = parse_file("upstreams:\n  a: {openapi: {file: x}, naming: {maxLenght: 3}}\n")
            .unwrap_err();
        assert!(e.contains("maxLenght"), "{e}");
        let e = parse_file("upstreams:\n  a: {openapi: {file: x}, overlay: [o]}\n").unwrap_err();
        assert!(e.contains("unknown field `overlay`"), "{e}");
    }
}
