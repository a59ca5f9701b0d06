//! `McpUpstream`: one HTTP API, described by an OpenAPI document, served to
//! MCP clients as tools named `{toolPrefix}{separator}{name}`.
//!
//! Field comments say, for each field, whether it is required, what absence
//! means and whether the API server fills in a default (the convention of
//! kube's `crd_derive_schema.rs` example), in Kubernetes terms because they
//! become the CRD's field descriptions. In short: `Option` fields
//! ("Optional; omitted when unset") are skipped when `None` and have no
//! schema default, so absence reaches the operator, which applies the
//! documented default; plain scalar fields inside an optional block
//! ("Defaults to ...") carry a schema default, so the API server fills them
//! in whenever the block is present.
//!
//! "Exactly one of" rules are CEL rules (`x-kubernetes-validations`) on the
//! struct holding the alternatives, so `kubectl apply` rejects a bad object
//! with a message naming the fields; each rule only uses `has()`, `size()` and
//! comparisons, which keeps it far below the API server's CEL cost budget.

use std::collections::BTreeMap;

/// `spec.validation`: the `catalog` crate's type, so the gateway config's
/// `validation` reads, and maps to runtime settings, alike.
pub use catalog::runtime::{ResponseFailure, Validation as ValidationSpec};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ConfigMapKeyRef, SecretRef, DURATION_PATTERN, OBJECT_NAME_PATTERN};

mod status;

pub use status::{ListingSize, McpUpstreamStatus, RejectedOperation};

/// Schema `pattern` of `spec.toolPrefix`: short enough that prefixed names fit
/// MCP clients' tool-name limits, and made of characters every client accepts.
/// No `__` inside and no `_` at the end: with the fixed `__` separator the
/// first `__` of a tool name ends its prefix, so owning a prefix is owning
/// its names (`catalog::prefix::check_shared`). At most 30 characters.
pub const TOOL_PREFIX_PATTERN: &str = "^[a-z](_?[a-z0-9])*$";

/// Schema `pattern` of URL fields (`baseUrl`, `openapi.url`, `auth.tokenUrl`).
pub const HTTP_URL_PATTERN: &str = "^https?://[^\\s/?#]+[^\\s]*$";

/// Schema `pattern` of HTTP header names (RFC 9110 `token`).
pub const HEADER_NAME_PATTERN: &str = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

/// Schema `pattern` of HTTP header values: no control characters but tab
/// (RFC 9110 `field-value`; a line break would split the request).
pub const HEADER_VALUE_PATTERN: &str = "^[^\\x00-\\x08\\x0a-\\x1f\\x7f]*$";

/// Used when `spec.openapi.url` is set without `refreshInterval`.
pub const DEFAULT_REFRESH_INTERVAL: &str = catalog::runtime::DEFAULT_REFRESH_INTERVAL;
/// Used when `spec.http.timeout` is absent.
pub const DEFAULT_TIMEOUT: &str = "30s";
/// Used when `spec.http.maxResponseBytes` is absent: 10 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 10 * 1024 * 1024;

/// At most this many entries in `status.warnings` (the schema's `maxItems`);
/// `status.warningCount` holds the total.
pub const MAX_STATUS_WARNINGS: usize = 20;
/// At most this many entries in `status.rejectedOperations` (the schema's
/// `maxItems`); `status.rejectedCount` holds the total.
pub const MAX_STATUS_REJECTED: usize = 50;

/// An HTTP API served to MCP clients as tools.
// NB: clippy reads the repeated `type_ = "string"` of the printer columns
// inside `#[kube(...)]` as duplicated attributes; they are separate columns.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "toolgate.dev",
    version = "v1alpha1",
    kind = "McpUpstream",
    plural = "mcpupstreams",
    namespaced,
    shortname = "mcpu",
    category = "mcp",
    status = "McpUpstreamStatus",
    derive = "PartialEq",
    doc = "An HTTP API, described by an OpenAPI document, served to MCP clients as tools.",
    printcolumn(name = "Prefix", type_ = "string", json_path = ".spec.toolPrefix"),
    printcolumn(name = "Tools", type_ = "integer", json_path = ".status.toolCount"),
    printcolumn(
        name = "Tokens",
        type_ = "integer",
        json_path = ".status.listing.tokens"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].reason"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = (
    "has(self.baseUrl) != has(self.serviceRef)",
    "exactly one of spec.baseUrl or spec.serviceRef must be set"
))]
#[x_kube(validation = (
    "!has(self.naming) || !has(self.naming.separator) || self.naming.separator == '__'",
    "spec.naming.separator must be \"__\": tool names must say which upstream they belong to"
))]
#[serde(rename_all = "camelCase")]
pub struct McpUpstreamSpec {
    /// Prefix of every tool name of this upstream (`{toolPrefix}__{name}`).
    /// Unique cluster-wide: the oldest McpUpstream holding a prefix keeps it,
    /// later claimants get `PrefixAccepted=False, reason=PrefixConflict`.
    /// Lowercase letters and digits, starting with a letter, with single `_`
    /// between them (no `__`, no `_` at the end), so a tool name always says
    /// which upstream it belongs to. Required; no default.
    #[schemars(length(min = 1, max = 30), pattern(TOOL_PREFIX_PATTERN))]
    pub tool_prefix: String,

    /// Where tool calls go, e.g. `https://api.example.com/v2`; paths of the
    /// document are appended. Exactly one of `baseUrl` and `serviceRef`.
    /// Optional, no default (the document's `servers` are never used, so
    /// the cluster decides where calls go).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), pattern(HTTP_URL_PATTERN))]
    pub base_url: Option<String>,

    /// A Service in this namespace to send tool calls to. Exactly one of
    /// `baseUrl` and `serviceRef`. Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_ref: Option<ServiceRef>,

    /// Where the OpenAPI (2.0, 3.0 or 3.1) document comes from. Required.
    pub openapi: OpenApiSource,

    /// Names of McpOverlays in this namespace, applied in this order before
    /// McpOverlays that select this upstream themselves. A missing name
    /// fails the upstream with `OverlayNotFound`. Optional, no default; omitted
    /// when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 32),
        inner(length(min = 1, max = 253), pattern(OBJECT_NAME_PATTERN))
    )]
    pub overlays: Vec<String>,

    /// How tool names and descriptions are derived. `separator` can only be
    /// `__` here (the gateway is shared). Optional; absent
    /// means the compiler's defaults (separator `__`, names
    /// up to 64 characters, conflicts are errors). Inside the block, omitted
    /// fields get the defaults shown in the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naming: Option<catalog::NamingOptions>,

    /// Which operations become tools, plus extra parameters and the raw
    /// request tool. Optional; absent means every
    /// operation is a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<catalog::ToolOptions>,

    /// Shape of the tools' input schemas. Optional; absent
    /// means `bodyMode: auto`, `additionalProperties: false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<catalog::SchemaOptions>,

    /// Request and response validation at the gateway. Optional; absent
    /// means every field below at its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationSpec>,

    /// Credentials the gateway sends upstream. Optional; absent means no
    /// credentials (`type: none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,

    /// HTTP client settings for tool calls. Optional; absent means every
    /// field below at its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSpec>,

    /// Calls per caller (its verified subject, else its client IP) to this
    /// upstream, as a token bucket. Enforced by each gateway replica on its
    /// own: N replicas allow a caller up to N times the rate. A call over
    /// the limit is a tool error saying when to retry; the upstream is not
    /// called. Optional; absent means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<catalog::access::RateLimit>,

    /// Sends the verified caller's subject to the upstream in a header,
    /// replacing whatever a client or `http.headers` put there; without
    /// inbound authentication the header is removed. Optional; absent means
    /// no identity header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_identity: Option<catalog::access::ForwardIdentity>,

    /// Who may see and call this upstream's tools: a caller sees in
    /// `tools/list`, and may call, exactly the tools some rule grants it;
    /// other tools answer as if they did not exist. A rule grants its
    /// `tools` (globs over names without the prefix, narrowed to
    /// `readOnlyHint` tools by `readOnly`) to callers holding all its
    /// `scopes` for whom its CEL `when` (over `subject`, `scopes`,
    /// `claims`) is true; a `when` that fails or is not a bool grants
    /// nothing. A rule that does not compile fails the upstream with
    /// `InvalidAccessRule` and the last good version keeps serving.
    /// Optional; absent means the gateway's `defaultAccess` (allow, unless
    /// configured otherwise); `rules: []` means nobody.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<catalog::access::AccessPolicy>,
}

impl McpUpstream {
    /// `namespace/name`: how the operator keys an upstream, and the
    /// `source` of its published catalog.
    pub fn key(&self) -> String {
        use kube::ResourceExt;
        format!(
            "{}/{}",
            self.namespace().unwrap_or_default(),
            self.name_any()
        )
    }
}

impl McpUpstreamSpec {
    /// The compiler settings of this spec, with compiler defaults for absent
    /// blocks.
    pub fn compile_options(&self) -> catalog::CompileOptions {
        catalog::CompileOptions::declared(
            self.naming.as_ref(),
            self.tools.as_ref(),
            self.schema.as_ref(),
        )
    }
}

/// A Service in the upstream's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceRef {
    /// Name of the Service. Required.
    #[schemars(length(min = 1, max = 63), pattern("^[a-z]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
    /// Service port number. Required.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Defaults to `http`.
    #[serde(default)]
    pub scheme: Scheme,
    /// Path prefix prepended to the document's paths, e.g. `/api/v2`.
    /// Optional; absent means `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024), pattern("^/"))]
    pub path: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    #[default]
    Http,
    Https,
}

/// Where the OpenAPI document comes from: exactly one of `inline`,
/// `configMapRef` and `url`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = (
    "(has(self.inline) ? 1 : 0) + (has(self.configMapRef) ? 1 : 0) + (has(self.url) ? 1 : 0) == 1",
    "exactly one of spec.openapi.inline, spec.openapi.configMapRef or spec.openapi.url must be set"
))]
#[x_kube(validation = (
    "has(self.url) || !has(self.refreshInterval)",
    "spec.openapi.refreshInterval is only valid with spec.openapi.url"
))]
#[x_kube(validation = (
    "has(self.url) || !has(self.headersFrom)",
    "spec.openapi.headersFrom is only valid with spec.openapi.url"
))]
#[serde(rename_all = "camelCase")]
pub struct OpenApiSource {
    /// The document itself, YAML or JSON. Optional; omitted when unset.
    /// Mind the 1.5 MiB object size limit: large documents belong in a
    /// ConfigMap (`binaryData` may hold it gzipped) or behind a URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<String>,

    /// A ConfigMap key in this namespace holding the document. The upstream
    /// recompiles when the ConfigMap changes. Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ConfigMapKeyRef>,

    /// An http(s) URL the operator fetches the document from. Refetched
    /// every `refreshInterval` with a conditional GET (`If-None-Match` with
    /// the last `ETag`, else `If-Modified-Since`), so an unchanged document
    /// costs one 304. Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), pattern(HTTP_URL_PATTERN))]
    pub url: Option<String>,

    /// How often `url` is refetched, e.g. `5m`, `1h30m` (units `ms`, `s`,
    /// `m`, `h`). Only with `url`. Optional; absent means 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub refresh_interval: Option<String>,

    /// A Secret in this namespace whose entries are sent as request headers
    /// when fetching `url` (key = header name, value = header value), e.g.
    /// `Authorization`. Only with `url`. Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_from: Option<SecretRef>,
}

/// Credentials the gateway sends upstream. Values live in a Secret of this
/// namespace; the published catalog only ever holds references.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(validation = (
    "self.type == 'none' || has(self.secretRef)",
    "spec.auth.secretRef is required unless spec.auth.type is none"
))]
#[x_kube(validation = (
    "self.type != 'none' || !has(self.secretRef)",
    "spec.auth.secretRef must not be set when spec.auth.type is none"
))]
#[x_kube(validation = (
    "self.type != 'apiKey' || has(self.header) != has(self.query)",
    "spec.auth.type apiKey needs exactly one of spec.auth.header or spec.auth.query"
))]
#[x_kube(validation = (
    "self.type == 'apiKey' || (!has(self.header) && !has(self.query))",
    "spec.auth.header and spec.auth.query are only valid with spec.auth.type apiKey"
))]
#[x_kube(validation = (
    "(self.type != 'oauth2ClientCredentials' && self.type != 'tokenExchange') || has(self.tokenUrl)",
    "spec.auth.tokenUrl is required when spec.auth.type is oauth2ClientCredentials or tokenExchange"
))]
#[x_kube(validation = (
    "self.type == 'oauth2ClientCredentials' || self.type == 'tokenExchange' || (!has(self.tokenUrl) && (!has(self.scopes) || size(self.scopes) == 0))",
    "spec.auth.tokenUrl and spec.auth.scopes are only valid with spec.auth.type oauth2ClientCredentials or tokenExchange"
))]
#[x_kube(validation = (
    "self.type == 'tokenExchange' || !has(self.audience)",
    "spec.auth.audience is only valid with spec.auth.type tokenExchange"
))]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    /// Required.
    #[serde(rename = "type")]
    pub type_: AuthType,

    /// The Secret holding the credentials. Required unless `type` is
    /// `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<AuthSecretRef>,

    /// `apiKey`: the header carrying the key, e.g. `X-API-Key`. Exactly one
    /// of `header` and `query` with `apiKey`. Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), pattern(HEADER_NAME_PATTERN))]
    pub header: Option<String>,

    /// `apiKey`: the query parameter carrying the key, e.g. `api_key`.
    /// Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub query: Option<String>,

    /// `oauth2ClientCredentials`, `tokenExchange`: the token endpoint.
    /// Required with those types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), pattern(HTTP_URL_PATTERN))]
    pub token_url: Option<String>,

    /// `oauth2ClientCredentials`, `tokenExchange`: scopes to request.
    /// Optional, no default; omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub scopes: Vec<String>,

    /// `tokenExchange`: the RFC 8693 `audience` to ask for, the upstream
    /// as the token endpoint names it, e.g. `pets-api`. Optional; omitted
    /// when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub audience: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AuthType {
    /// No credentials.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer,
    /// A key in a header or query parameter.
    ApiKey,
    /// `Authorization: Basic` from a username and password.
    Basic,
    /// OAuth 2.0 client credentials grant; the gateway fetches and caches
    /// the token.
    Oauth2ClientCredentials,
    /// OAuth 2.0 token exchange (RFC 8693) on behalf of the caller: the
    /// caller's inbound bearer token is exchanged at `tokenUrl` for one with
    /// `audience` and `scopes`, cached per caller until it expires. Only
    /// callers authenticated with a bearer token (not API keys) can call
    /// the upstream; their own token is never sent to it.
    TokenExchange,
}

/// A Secret in the upstream's namespace and the keys to read from it. Each
/// key field is optional and omitted when unset; absent means the default
/// named on the field.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthSecretRef {
    /// Name of the Secret. Required.
    #[schemars(length(min = 1, max = 253), pattern(OBJECT_NAME_PATTERN))]
    pub name: String,
    /// `bearer`: key of the token (default `token`). `apiKey`: key of the
    /// API key (default `apiKey`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(crate::common::DATA_KEY_PATTERN))]
    pub key: Option<String>,
    /// `basic`: key of the username (default `username`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(crate::common::DATA_KEY_PATTERN))]
    pub username_key: Option<String>,
    /// `basic`: key of the password (default `password`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(crate::common::DATA_KEY_PATTERN))]
    pub password_key: Option<String>,
    /// `oauth2ClientCredentials`, `tokenExchange`: key of the client id
    /// (default `clientId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(crate::common::DATA_KEY_PATTERN))]
    pub client_id_key: Option<String>,
    /// `oauth2ClientCredentials`, `tokenExchange`: key of the client secret
    /// (default `clientSecret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(crate::common::DATA_KEY_PATTERN))]
    pub client_secret_key: Option<String>,
}

impl AuthSecretRef {
    /// The Secret keys to read for `auth_type`, defaults applied, in a fixed
    /// order (`bearer`: token; `apiKey`: key; `basic`: username, password;
    /// `oauth2ClientCredentials` and `tokenExchange`: client id, client
    /// secret; `none`: none).
    pub fn keys(&self, auth_type: AuthType) -> Vec<&str> {
        fn or<'a>(v: &'a Option<String>, default: &'static str) -> &'a str {
            v.as_deref().unwrap_or(default)
        }
        match auth_type {
            AuthType::None => vec![],
            AuthType::Bearer => vec![or(&self.key, "token")],
            AuthType::ApiKey => vec![or(&self.key, "apiKey")],
            AuthType::Basic => vec![
                or(&self.username_key, "username"),
                or(&self.password_key, "password"),
            ],
            AuthType::Oauth2ClientCredentials | AuthType::TokenExchange => {
                vec![
                    or(&self.client_id_key, "clientId"),
                    or(&self.client_secret_key, "clientSecret"),
                ]
            }
        }
    }
}

/// HTTP client settings for tool calls.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpSpec {
    /// Per-call timeout, e.g. `30s`, `1m` (units `ms`, `s`, `m`, `h`).
    /// Optional; absent means 30s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub timeout: Option<String>,

    /// Responses larger than this fail the call instead of reaching the
    /// model. Optional; absent means 10 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_response_bytes: Option<u64>,

    /// Headers added to every call. Plain values: credentials belong in
    /// `auth`. Values are one line: no line breaks or other control
    /// characters (tab allowed). Optional, no default; omitted when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "header_map_schema")]
    pub headers: BTreeMap<String, String>,
}

fn header_map_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 64,
        "additionalProperties": {
            "type": "string",
            "maxLength": 4096,
            "pattern": HEADER_VALUE_PATTERN,
        },
    })
}
