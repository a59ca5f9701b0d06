//! How the gateway reaches one upstream: base URL, outbound auth, limits and
//! response checks — what a catalog does not and must not say.
//!
//! Data only. The gateway reads these from its config file (`toolgate serve
//! --config`) or from what the operator publishes (see [`crate::publish`]);
//! the operator writes them from an `McpUpstream`. Credentials are always
//! *references* ([`SecretRef`]), resolved by the gateway when it builds a
//! snapshot; their values never enter a catalog or a ConfigMap.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::access::SettingError;
pub use crate::access::{AccessPolicy, AccessRule, ForwardIdentity, RateLimit};

/// Parses a duration as McpUpstream fields and the gateway config write
/// them (`500ms`, `30s`, `1h30m`; the CRD's `DURATION_PATTERN`). Returns `None` for anything the schema would reject, so callers
/// holding objects that bypassed validation (older CRD versions) can report
/// the field instead of panicking.
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    if s.is_empty() {
        return None;
    }
    let mut total = std::time::Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        // `ms` must be tried before `m`.
        let (unit, len) = if rest.starts_with("ms") {
            (std::time::Duration::from_millis(1), 2)
        } else if rest.starts_with('s') {
            (std::time::Duration::from_secs(1), 1)
        } else if rest.starts_with('m') {
            (std::time::Duration::from_secs(60), 1)
        } else if rest.starts_with('h') {
            (std::time::Duration::from_secs(3600), 1)
        } else {
            return None;
        };
        rest = &rest[len..];
        total = total.checked_add(unit.checked_mul(u32::try_from(n).ok()?)?)?;
    }
    Some(total)
}

/// Default cap on an upstream response body.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 10 * 1024 * 1024;
/// Default limit on calls in flight to one upstream; further calls wait
/// (within their timeout). Memory is bounded gateway-wide by the response
/// budget (`toolgate serve --max-response-memory-bytes`), so this mostly
/// protects the upstream.
pub const DEFAULT_MAX_CONCURRENCY: usize = 32;
/// Default per-request upstream timeout.
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 30.0;
/// Statuses that take the success path unless configured otherwise.
/// How often a document fetched from a URL is fetched again when the
/// source names no `refreshInterval`.
pub const DEFAULT_REFRESH_INTERVAL: &str = "10m";

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
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Overrides the catalog's `defaultBaseUrl`.
    pub base_url: Option<String>,
    pub auth: AuthConfig,
    /// Whole request, body included.
    #[cfg_attr(feature = "schemars", schemars(extend("default" = DEFAULT_TIMEOUT_SECONDS)))]
    pub timeout_seconds: Option<f64>,
    /// Larger response bodies are a tool error; memory stays bounded.
    #[cfg_attr(feature = "schemars", schemars(extend("default" = DEFAULT_MAX_RESPONSE_BYTES)))]
    pub max_response_bytes: Option<u64>,
    /// Calls in flight to this upstream; further calls wait, within their
    /// timeout. At least 1.
    #[cfg_attr(feature = "schemars", schemars(extend("default" = DEFAULT_MAX_CONCURRENCY)))]
    pub max_concurrency: Option<usize>,
    /// Sent on every request (after the plan's own headers, so they win).
    pub headers: BTreeMap<String, String>,
    pub response_validation: ResponseValidation,
    /// Statuses that are a tool result; prefer `validation.successStatus`,
    /// which adds to these.
    #[cfg_attr(feature = "schemars", schemars(extend("default" = DEFAULT_SUCCESS_STATUS)))]
    pub success_status: Option<Vec<u16>>,
    /// Statuses that are a tool error (`isError`); prefer
    /// `validation.errorStatus`, which adds to these.
    #[cfg_attr(feature = "schemars", schemars(extend("default" = DEFAULT_ERROR_STATUS)))]
    pub error_status: Option<Vec<u16>>,
    /// Who may see and call this upstream's tools. Absent: the gateway's
    /// `inbound.defaultAccess` (every authenticated caller, unless it says
    /// deny).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<AccessPolicy>,
    /// Calls per caller per second, per replica.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// Sends the verified caller's subject in a header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward_identity: Option<ForwardIdentity>,
}

/// What to do when a success response does not match its schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ResponseValidation {
    /// Log, count and return the data; output schemas are not listed.
    #[default]
    Warn,
    /// Return isError with the validation errors; output schemas are
    /// listed, and every success result matches them.
    Fail,
    /// Do not validate; output schemas are not listed.
    Off,
}

impl ResponseValidation {
    /// Whether an upstream validated this way lists its tools' output
    /// schemas in `tools/list`. A listed outputSchema is a promise that
    /// every success result carries `structuredContent` matching it
    /// (clients check, and throw on a result that breaks it), and only
    /// `fail` can keep that promise: it turns a nonconforming response
    /// into an error, where `warn` and `off` return it as a success.
    /// The gateway lists by this rule, the operator and `toolgate lint`
    /// estimate listing sizes by it ([`crate::listing`]).
    pub fn advertises_output_schemas(self) -> bool {
        self == ResponseValidation::Fail
    }
}

/// Request and response validation of one upstream as it is declared:
/// `McpUpstream.spec.validation`, and `validation` of an upstream in the
/// gateway config. [`Validation::apply`] turns it into the runtime fields
/// of [`UpstreamConfig`], for both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schemars",
    schemars(extend("x-kubernetes-validations" = [{
        "rule": "!has(self.successStatus) || !has(self.errorStatus) || self.successStatus.all(s, !(s in self.errorStatus))",
        "message": "spec.validation.successStatus and spec.validation.errorStatus must not share a status code",
    }]))
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    /// Check tool arguments against the input schema before calling; a
    /// failing call never reaches the upstream and the model is told which
    /// fields are wrong. Defaults to `true`.
    #[serde(default = "default_true")]
    pub request: bool,

    /// Check response bodies against the operation's response schema.
    /// Defaults to `false`.
    #[serde(default)]
    pub response: bool,

    /// What a response failing its schema does when `response` is on.
    /// Only `fail` lists the tools' output schemas in `tools/list`: MCP
    /// clients reject a success result that does not match a listed
    /// schema, and only `fail` never returns one. Defaults to `warn`.
    #[serde(default)]
    pub response_failure: ResponseFailure,

    /// Status codes that count as success (a normal tool result) in
    /// addition to 2xx, e.g. `[404]` for an API that answers "not found"
    /// for empty searches. Optional, no default; omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(max = 64), inner(range(min = 100, max = 599)))
    )]
    pub success_status: Vec<u16>,

    /// Status codes that count as tool errors (`isError: true`) even though
    /// they are 2xx, e.g. `[202]` for an API that only accepts work.
    /// Optional, no default; omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(max = 64), inner(range(min = 100, max = 599)))
    )]
    pub error_status: Vec<u16>,
}

impl Default for Validation {
    fn default() -> Self {
        Validation {
            request: true,
            response: false,
            response_failure: ResponseFailure::Warn,
            success_status: Vec::new(),
            error_status: Vec::new(),
        }
    }
}

fn default_true() -> bool {
    true
}

/// What a response failing its schema does, in [`Validation`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ResponseFailure {
    /// Return the response and log a warning; list no output schemas.
    #[default]
    Warn,
    /// Return a tool error naming the failing fields; list output schemas,
    /// which every success result then matches.
    Fail,
}

impl Validation {
    /// Checks what the McpUpstream schema states (no status code both a
    /// success and an error), for configs that did not go through it (the
    /// gateway config file).
    pub fn check(&self) -> Result<(), SettingError> {
        match self
            .success_status
            .iter()
            .find(|s| self.error_status.contains(s))
        {
            Some(s) => Err(SettingError {
                field: "successStatus",
                message: format!("{s} is also in errorStatus; a status code is one or the other"),
            }),
            None => Ok(()),
        }
    }

    /// What the gateway does with a response failing its schema.
    pub fn response_validation(&self) -> ResponseValidation {
        match (self.response, self.response_failure) {
            (false, _) => ResponseValidation::Off,
            (true, ResponseFailure::Warn) => ResponseValidation::Warn,
            (true, ResponseFailure::Fail) => ResponseValidation::Fail,
        }
    }

    /// Sets `config`'s response validation and status classes. The
    /// defaults ([`DEFAULT_SUCCESS_STATUS`], [`DEFAULT_ERROR_STATUS`]) stay,
    /// `successStatus` and `errorStatus` move codes between them: a 404
    /// made a success is no longer an error, a 202 made an error no longer
    /// a success.
    pub fn apply(&self, config: &mut UpstreamConfig) {
        config.response_validation = self.response_validation();
        if self.success_status.is_empty() && self.error_status.is_empty() {
            config.success_status = None;
            config.error_status = None;
            return;
        }
        let moved = |defaults: &[u16], add: &[u16], remove: &[u16]| {
            let mut codes: Vec<u16> = defaults
                .iter()
                .chain(add)
                .copied()
                .filter(|c| !remove.contains(c))
                .collect();
            codes.sort_unstable();
            codes.dedup();
            codes
        };
        let (success, error) = (&self.success_status, &self.error_status);
        config.success_status = Some(moved(DEFAULT_SUCCESS_STATUS, success, error));
        config.error_status = Some(moved(DEFAULT_ERROR_STATUS, error, success));
    }
}

/// Outbound authentication of one upstream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
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
    /// OAuth 2.0 token exchange (RFC 8693) on behalf of the caller: the
    /// caller's inbound bearer token is exchanged at `tokenUrl` for one
    /// meant for this upstream (`audience`, `scopes`, `resource`), cached
    /// per caller until shortly before it expires. Needs callers
    /// authenticated with a bearer token (JWT or introspection), not API
    /// keys; the inbound token itself is never sent upstream.
    #[serde(rename_all = "camelCase")]
    TokenExchange {
        token_url: String,
        /// The gateway's own client credentials at the token endpoint.
        client_id: SecretRef,
        client_secret: SecretRef,
        /// RFC 8693 `audience`: the upstream as the token endpoint names it.
        #[serde(default)]
        audience: Option<String>,
        #[serde(default)]
        scopes: Vec<String>,
        /// RFC 8693 `resource`: the upstream's URI, for endpoints that
        /// want it instead of (or with) `audience`.
        #[serde(default)]
        resource: Option<String>,
        /// `basic` (default) or `post`.
        #[serde(default)]
        client_auth: ClientAuthMethod,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ApiKeyLocation {
    Header,
    Query,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ClientAuthMethod {
    #[default]
    Basic,
    Post,
}

/// Where a secret lives: exactly one of `file`, `env`, `secretKey`; a plain
/// `value` is also accepted for non-secret strings such as a username.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SecretRef {
    /// A file holding the value (a trailing newline dropped), such as a
    /// mounted Secret's key.
    pub file: Option<PathBuf>,
    /// An environment variable of the gateway holding the value.
    pub env: Option<String>,
    /// The value itself, for what is not secret (a username, a client id).
    pub value: Option<String>,
    /// A key of the credentials Secret the operator maintains in its own
    /// namespace (see `crds::publish`); resolved by the gateway from that
    /// Secret, so published catalogs hold references, never values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(v: Validation) -> UpstreamConfig {
        let mut c = UpstreamConfig::default();
        v.apply(&mut c);
        c
    }

    #[test]
    fn validation_maps_response_checks_as_the_mcpupstream_documents_them() {
        assert_eq!(
            applied(Validation::default()).response_validation,
            ResponseValidation::Off
        );
        let on = |response_failure| Validation {
            response: true,
            response_failure,
            ..Validation::default()
        };
        assert_eq!(
            applied(on(ResponseFailure::Warn)).response_validation,
            ResponseValidation::Warn
        );
        assert_eq!(
            applied(on(ResponseFailure::Fail)).response_validation,
            ResponseValidation::Fail
        );
        let plain = applied(Validation::default());
        assert_eq!((plain.success_status, plain.error_status), (None, None));
    }

    #[test]
    fn status_lists_move_codes_between_the_defaults() {
        // "In addition to 2xx": a 200 stays a success when 404 joins.
        let c = applied(Validation {
            success_status: vec![404],
            error_status: vec![202],
            ..Validation::default()
        });
        let success = c.success_status.unwrap();
        let error = c.error_status.unwrap();
        assert!(
            success.contains(&200) && success.contains(&404),
            "{success:?}"
        );
        assert!(!success.contains(&202), "{success:?}");
        assert!(error.contains(&202) && error.contains(&500), "{error:?}");
        assert!(!error.contains(&404), "{error:?}");
    }

    #[test]
    fn a_status_in_both_lists_is_refused_naming_the_field() {
        let e = Validation {
            success_status: vec![404, 409],
            error_status: vec![409],
            ..Validation::default()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.field, "successStatus");
        assert!(e.message.contains("409"), "{e}");
    }
}
