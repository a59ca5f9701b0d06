//! The catalog: the compiler's output, which the operator publishes and the
//! gateway serves. It is not all they share: the upstreams' runtime settings
//! ([`crate::runtime`]) and the published form ([`crate::publish`]) are
//! shared too.
//!
//! The format is versioned ([`CATALOG_FORMAT`]) and deterministic: the same
//! inputs always serialise to the same bytes, so content hashes can be used to
//! decide whether anything changed. Each [`Tool`] carries the fields of an MCP
//! `Tool` under MCP's own names (`name`, `title`, `description`,
//! `inputSchema`, `outputSchema`, `annotations`) plus what the gateway needs to
//! make the call (`operation`, `plan`, `transforms`, `responseFormat`, ...).
//!
//! Nothing is dropped silently: every operation of the source document ends up
//! either as a tool or as a [`Rejected`] entry with a reason.
//!
//! Size: over 600 lines because this is the catalog format: type definitions
//! whose documentation is the format's, kept in one place so a format change
//! is one diff.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub use crate::warning::{Location, Warning, WarningCode};

/// Identifies the catalog format. Bumped on any incompatible change.
pub const CATALOG_FORMAT: &str = "toolgate.dev/catalog/v1";

/// A whole catalog: every upstream that holds its prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Catalog {
    /// Always [`CATALOG_FORMAT`].
    pub format: String,
    /// sha256 over the upstreams' hashes, in order.
    pub hash: String,
    /// Sorted by prefix.
    pub upstreams: Vec<UpstreamCatalog>,
}

impl Catalog {
    /// Builds a catalog from compiled upstreams, sorting them by prefix and
    /// computing the overall hash. Callers are expected to have resolved
    /// prefix ownership first (see [`crate::resolve_prefixes`]).
    pub fn new(mut upstreams: Vec<UpstreamCatalog>) -> Self {
        upstreams.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        let mut hasher = Sha256::new();
        hasher.update(CATALOG_FORMAT.as_bytes());
        for u in &upstreams {
            hasher.update(u.prefix.as_bytes());
            hasher.update([0]);
            hasher.update(u.hash.as_bytes());
            hasher.update([0]);
        }
        Catalog {
            format: CATALOG_FORMAT.to_string(),
            hash: hex::encode(hasher.finalize()),
            upstreams,
        }
    }

    /// Total number of tools across upstreams.
    pub fn tool_count(&self) -> usize {
        self.upstreams.iter().map(|u| u.tools.len()).sum()
    }

    /// Looks a tool up by its full (prefixed) name.
    pub fn tool(&self, name: &str) -> Option<(&UpstreamCatalog, &Tool)> {
        self.upstreams
            .iter()
            .find_map(|u| u.tools.iter().find(|t| t.name == name).map(|t| (u, t)))
    }
}

/// One upstream's compiled tools, with everything the compiler noticed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamCatalog {
    /// The tool prefix; every tool name starts with `{prefix}{separator}`.
    pub prefix: String,
    /// Between prefix and base name (`naming.separator`). Written only
    /// when it is not the default `__`, so default catalogs keep their
    /// bytes and hashes.
    #[serde(
        default = "default_separator",
        skip_serializing_if = "is_default_separator"
    )]
    pub separator: String,
    /// sha256 of this upstream's canonical JSON with `hash` empty.
    pub hash: String,
    /// What the source document says about itself.
    pub source: SourceInfo,
    /// Server URL from the document (`servers[0].url`, or 2.0
    /// `schemes`/`host`/`basePath`), if any. Deployments usually override it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_base_url: Option<String>,
    /// Tools, in document order (the raw request tool, if enabled, last).
    pub tools: Vec<Tool>,
    /// Non-fatal findings: unmatched overlay targets, cut circular
    /// references, dropped invalid patterns, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// Operations that did not become tools, each with its reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<Rejected>,
}

fn default_separator() -> String {
    crate::prefix::SHARED_SEPARATOR.to_string()
}

fn is_default_separator(s: &str) -> bool {
    s == crate::prefix::SHARED_SEPARATOR
}

impl UpstreamCatalog {
    /// `name` without `{prefix}{separator}`: what access rules' tool globs
    /// match. `None` for a name of another upstream.
    pub fn base_name<'a>(&self, name: &'a str) -> Option<&'a str> {
        name.strip_prefix(self.prefix.as_str())?
            .strip_prefix(self.separator.as_str())
    }

    /// Why this catalog must not be served, when an operation's transform
    /// does not work: serving the upstream without that tool would
    /// silently drop what an overlay asked for. Names the first such
    /// operation.
    pub fn transform_failure(&self) -> Option<String> {
        let bad: Vec<&Rejected> = self
            .rejected
            .iter()
            .filter(|r| r.reason == RejectReason::TransformInvalid)
            .collect();
        let first = bad.first()?;
        Some(format!(
            "{} operation(s) have an invalid transform; first: {} {} at {}: {}",
            bad.len(),
            first.method.to_ascii_uppercase(),
            first.path,
            first.pointer,
            first.message
        ))
    }

    /// Recomputes [`UpstreamCatalog::hash`] from the content.
    pub fn seal(&mut self) {
        self.hash = String::new();
        let mut w = HashWriter::new();
        // Serialising our own plain data types into a hasher cannot fail.
        let _ = serde_json::to_writer(&mut w, self);
        self.hash = hex::encode(w.finalize());
    }
}

/// Metadata of the source document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceInfo {
    /// `openapi` or `swagger` field as found.
    pub openapi_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Number of operations in the document after overlays
    /// (`tools` from operations + `rejected`).
    pub operation_count: usize,
}

/// A JSON Schema in a catalog, held as its compact JSON text.
///
/// Why text: schemas are the bulk of a catalog and nobody edits them after
/// the compiler. The compiler writes each inlined component once and copies
/// its bytes into every tool that embeds it (see ADR 0006), and the gateway
/// serves the text as it is; code that needs the structure calls
/// [`Schema::to_value`].
///
/// NB: it serialises as embedded JSON text (`serde_json`'s raw values), so
/// a catalog must be written with `serde_json`. It deserialises from any
/// format (the gateway also reads YAML catalogs).
#[derive(Clone)]
pub struct Schema(Box<serde_json::value::RawValue>);

impl Schema {
    pub(crate) fn from_raw(raw: Box<serde_json::value::RawValue>) -> Schema {
        Schema(raw)
    }

    /// The schema of a JSON value.
    pub fn from_value(v: &Value) -> Schema {
        // Serialising a `Value` into a string cannot fail.
        Schema(serde_json::value::to_raw_value(v).expect("a JSON value always serialises"))
    }

    /// Compact JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The schema parsed into a JSON value.
    pub fn to_value(&self) -> Value {
        // The text was serialised from, or validated as, JSON.
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// Whether the schema is a JSON object (as MCP requires of `inputSchema`
    /// and `outputSchema`), not a boolean schema.
    pub fn is_object(&self) -> bool {
        self.0.get().starts_with('{')
    }
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.get())
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Schema) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Default for Schema {
    /// `{}`: accepts anything.
    fn default() -> Schema {
        Schema::from_value(&Value::Object(Map::new()))
    }
}

impl Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Schema, D::Error> {
        // Through `Value`: this accepts any self-describing format and
        // makes the text canonical (compact, as the compiler writes it).
        Ok(Schema::from_value(&Value::deserialize(d)?))
    }
}

/// One MCP tool and how to call it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    // ---- MCP Tool fields (MCP names) ----
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema 2020-12, self-contained, `type: object`.
    pub input_schema: Schema,
    /// JSON Schema 2020-12, `type: object` (non-object results are wrapped
    /// as `{"result": ...}`, see [`OutputWrap`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Schema>,
    pub annotations: ToolAnnotations,

    // ---- toolgate fields ----
    /// Where the tool comes from.
    pub operation: OperationRef,
    /// How arguments become an HTTP request.
    pub plan: RequestPlan,
    #[serde(default, skip_serializing_if = "Transforms::is_empty")]
    pub transforms: Transforms,
    pub response_format: ResponseFormat,
    /// Whether the structured result is the body itself or `{"result": body}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_wrap: Option<OutputWrap>,
    /// JSON Schemas of success responses, for response validation. Keyed by
    /// status as written in the document (`200`, `2XX`, `default`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub responses: Vec<ResponseSchema>,
    /// `x-mcp-auth-required`: `false` means the upstream auth is not sent.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub auth_required: bool,
    /// Tags and `x-mcp-toolsets`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolsets: Vec<String>,
}

fn yes() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}

/// MCP tool annotations (hints for clients).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// The operation a tool was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationRef {
    /// Upper-case HTTP method; `*` for the raw request tool.
    pub method: String,
    /// Path key as written in the document (may carry a `#fragment`).
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    /// JSON pointer of the operation in the (overlaid) document.
    pub pointer: String,
}

/// How the arguments of a tool become an HTTP request. The gateway follows it
/// without jq; `toolgate compile --explain` prints the jq equivalent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPlan {
    /// Upper-case HTTP method.
    pub method: String,
    /// Path template relative to the upstream base URL, `#fragment` removed,
    /// e.g. `/pets/{petId}`.
    pub path: String,
    /// Arguments that become path, query, header or cookie parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<ParamBinding>,
    /// Parameters sent with every request, which are not arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<ConstantParam>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<BodyPlan>,
    /// Set only on the raw request tool: the arguments are
    /// `{method, path, query, headers, body}` and are confined to the base URL.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub raw: bool,
}

/// One argument → one request parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParamBinding {
    /// Argument name in `inputSchema`.
    pub arg: String,
    /// Parameter name on the wire.
    pub name: String,
    #[serde(rename = "in")]
    pub location: ParamLocation,
    pub style: ParamStyle,
    pub explode: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_reserved: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ParamLocation {
    Path,
    Query,
    Header,
    Cookie,
}

/// A parameter the plan always sends with one value, because the document
/// allows no other: a required header or query parameter whose schema is a
/// `const` or an `enum` of one value. Asking an agent for it would only
/// invite a wrong value, so it is not an argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConstantParam {
    /// Parameter name on the wire.
    pub name: String,
    #[serde(rename = "in")]
    pub location: ParamLocation,
    pub style: ParamStyle,
    pub explode: bool,
    pub value: Value,
}

/// OpenAPI 3 serialization styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ParamStyle {
    Simple,
    Label,
    Matrix,
    Form,
    SpaceDelimited,
    PipeDelimited,
    DeepObject,
}

/// How the request body is assembled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BodyPlan {
    /// Media type sent as `Content-Type`.
    pub content_type: String,
    pub encoding: BodyEncoding,
    pub required: bool,
    /// Where the body comes from in the arguments.
    pub source: BodySource,
    /// Multipart fields whose argument is base64 and must be sent as bytes
    /// (files). Names are wire names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binary_fields: Vec<String>,
    /// [`BodyEncoding::Raw`] only: the argument is base64 and is decoded to
    /// bytes before sending (binary media types); otherwise it is sent as
    /// UTF-8 text.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub base64: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BodyEncoding {
    /// `application/json` and `+json` types.
    Json,
    /// `application/x-www-form-urlencoded`.
    Form,
    /// `multipart/form-data`.
    Multipart,
    /// Anything else: the argument is a string (base64 when the schema is
    /// binary) sent as is.
    Raw,
}

/// Where the body value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum BodySource {
    /// The body is the argument `arg` (usually `body`).
    Nested { arg: String },
    /// The body's properties were merged into the top-level arguments.
    /// Each field maps an argument name to the body property name; they
    /// differ only when a name collided and was renamed.
    Merged { fields: Vec<FieldBinding> },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldBinding {
    pub arg: String,
    pub name: String,
}

/// jq programs attached by `x-mcp-*-transform`. Stored as source; the
/// compiler has already checked they compile and run on synthetic data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transforms {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Transforms {
    pub fn is_empty(&self) -> bool {
        self.request.is_none() && self.response.is_none() && self.error.is_none()
    }
}

/// `x-mcp-response-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ResponseFormat {
    Json,
    Text,
    Image,
    Audio,
    Binary,
    /// Decided by the response's `Content-Type`.
    #[default]
    Auto,
}

impl ResponseFormat {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "json" => Self::Json,
            "text" => Self::Text,
            "image" => Self::Image,
            "audio" => Self::Audio,
            "binary" => Self::Binary,
            "auto" => Self::Auto,
            _ => return None,
        })
    }
}

/// How the structured result relates to the response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OutputWrap {
    /// `structuredContent` is the body (an object).
    Body,
    /// `structuredContent` is `{"result": body}`.
    Result,
}

/// Schema of one success response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseSchema {
    /// `200`, `2XX` or `default`.
    pub status: String,
    pub content_type: String,
    /// JSON Schema 2020-12 of the body; `None` when it is the body schema
    /// behind `outputSchema` (not stored twice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
}

/// An operation that did not become a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejected {
    pub method: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    pub pointer: String,
    pub reason: RejectReason,
    pub message: String,
}

/// Why an operation is not a tool. The names double as Kubernetes condition
/// reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RejectReason {
    /// `x-mcp-enabled: false`.
    Disabled,
    /// Named in `tools.disabled`.
    DisabledByConfig,
    /// Not read-only while `readOnly` is on.
    ReadOnlyMode,
    /// Filtered out by include/exclude toolsets.
    ToolsetFiltered,
    /// Lost a name conflict (`firstWins`/`skip`).
    NameConflict,
    /// A transform does not compile or fails on every synthetic input.
    TransformInvalid,
    /// The operation itself is malformed (bad parameter, bad `$ref`, ...).
    OperationInvalid,
    /// An emitted schema does not compile as JSON Schema.
    SchemaInvalid,
    /// The tool's schemas are larger than
    /// [`crate::CompileLimits::max_tool_schema_bytes`].
    SchemaTooLarge,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "Disabled",
            Self::DisabledByConfig => "DisabledByConfig",
            Self::ReadOnlyMode => "ReadOnlyMode",
            Self::ToolsetFiltered => "ToolsetFiltered",
            Self::NameConflict => "NameConflict",
            Self::TransformInvalid => "TransformInvalid",
            Self::OperationInvalid => "OperationInvalid",
            Self::SchemaInvalid => "SchemaInvalid",
            Self::SchemaTooLarge => "SchemaTooLarge",
        }
    }
}

/// Streams serialised bytes into the hash instead of buffering the whole
/// upstream (megabytes for large APIs).
///
/// The serialiser writes a few bytes at a time (a quote, a key, a comma);
/// hashing each of those on its own cost more than the hashing itself, so
/// they are gathered into chunks first.
struct HashWriter {
    hasher: Sha256,
    buf: Vec<u8>,
}

const HASH_CHUNK: usize = 64 * 1024;

impl HashWriter {
    fn new() -> Self {
        HashWriter {
            hasher: Sha256::new(),
            buf: Vec::with_capacity(HASH_CHUNK),
        }
    }

    fn finalize(mut self) -> Vec<u8> {
        self.hasher.update(&self.buf);
        self.hasher.finalize().to_vec()
    }
}

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + buf.len() > HASH_CHUNK {
            self.hasher.update(&self.buf);
            self.buf.clear();
        }
        if buf.len() >= HASH_CHUNK {
            self.hasher.update(buf);
        } else {
            self.buf.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
