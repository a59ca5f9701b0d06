//! Per-operation compilation: name, schemas, plan, annotations, transforms.
//!
//! Order matters and is part of the contract:
//! 1. overlays apply to the raw document, then the document is loaded;
//! 2. every operation gets its name first (cheap), then the filters run
//!    (`x-mcp-enabled`, `tools.disabled`, `readOnly`, toolsets) so that a
//!    filtered operation never takes part in a name conflict;
//! 3. name conflicts are resolved among the survivors;
//! 4. the expensive part — schemas, plan, transforms, schema checks — runs
//!    for the survivors; a failure there rejects only that operation.
//!
//! Size: over 600 lines because this is the compile's steps in contract order
//! (above); each step's work lives in its own module, this file only
//! sequences them and keeps what is partly applied from escaping.

mod annotate;
mod dry_run;
mod findings;
mod html;
pub mod naming;
mod node;
mod plan;
mod response;
mod schema;
mod tool;

use serde_json::{Map, Value};

use crate::error::CompileError;
use crate::model::{
    OperationRef, RejectReason, Rejected, ResponseFormat, SourceInfo, Tool, Transforms,
    UpstreamCatalog, Warning, WarningCode,
};
use crate::options::{CompileOptions, ConflictResolution};
use crate::overlay::Overlay;
use crate::spec::{self, Document, OperationSite};
use dry_run::DryRuns;
pub use findings::{lint_upstream, Linted};
use naming::{Candidate, NameSource};
use schema::SchemaConverter;
use tool::{build_tool, SchemaBytes, ToolFail};

/// Everything needed to compile one upstream.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamSource<'a> {
    /// Tool prefix.
    pub prefix: &'a str,
    /// Name of the document for errors (file path, `ConfigMap ns/name`, URL).
    pub document: &'a str,
    /// The OpenAPI document, JSON or YAML.
    pub spec: &'a [u8],
    /// Overlays, applied in this order.
    pub overlays: &'a [Overlay],
    pub options: &'a CompileOptions,
}

/// One overlay as read, before it is parsed: what [`input_hash`] covers.
#[derive(Debug, Clone, Copy)]
pub struct OverlayInput<'a> {
    pub name: &'a str,
    pub bytes: &'a [u8],
    pub strict: bool,
}

/// The key of one upstream's compile: SHA-256 (hex) of everything its
/// catalog depends on (prefix, document name, document bytes, each
/// overlay's name, strictness and bytes, in order, and the options).
/// Equal keys, equal catalogs: the operator's compile cache and the
/// gateway's local mode both key by it. Every field is length-prefixed,
/// so no two inputs spell the same bytes.
pub fn input_hash(
    prefix: &str,
    document: &str,
    spec: &[u8],
    overlays: &[OverlayInput<'_>],
    options: &CompileOptions,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(bytes);
    };
    field(prefix.as_bytes());
    field(document.as_bytes());
    field(spec);
    field(&(overlays.len() as u64).to_be_bytes());
    for o in overlays {
        field(o.name.as_bytes());
        field(&[u8::from(o.strict)]);
        field(o.bytes);
    }
    // NB: options are plain data; serde_json writes them the same way on
    // every run (fields in declaration order).
    field(&serde_json::to_vec(options).unwrap_or_default());
    hex::encode(h.finalize())
}

/// Name of the opt-in raw request tool (after the separator).
pub const RAW_TOOL: &str = "api_request";

/// Bounds on the schema text one compile emits. Not part of the
/// serialised settings (`McpUpstream` spec, `--config`): they protect the
/// process compiling, so the program embedding the compiler sets them.
///
/// Tool schemas inline every `$ref` (ADR 0002), so a small document can
/// ask for a huge catalog: one 5,000-property schema referenced by 800
/// operations (a 400 KB document) is 800 copies of it. The node budgets of
/// ADR 0002 bound one schema's structure but not its bytes (one node may
/// be a megabyte-long `enum`), nor the number of tools. These limits are
/// checked on lengths measured before any text is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileLimits {
    /// Largest schema text of one tool: `inputSchema`, `outputSchema` and
    /// `responses[].schema` together, compact JSON bytes. Past it the
    /// operation is rejected with `SchemaTooLarge`. Default 4 MiB (the
    /// largest tool of the test corpus, Argo Workflows', has 512 KiB).
    pub max_tool_schema_bytes: usize,
    /// Largest schema text of one catalog: every tool's schemas plus each
    /// shared expansion's text, which is rendered once and kept for the
    /// compile. Past it the compile fails with `CatalogTooLarge` before the
    /// tool that would pass it is rendered. Default 64 MiB (the largest
    /// catalog of the test corpus, Argo Workflows', has 8.7 MB of schemas).
    pub max_catalog_schema_bytes: usize,
}

impl Default for CompileLimits {
    fn default() -> Self {
        CompileLimits {
            max_tool_schema_bytes: 4 << 20,
            max_catalog_schema_bytes: 64 << 20,
        }
    }
}

/// Compiles one upstream: parse, overlay, load, compile every operation,
/// within the default [`CompileLimits`].
pub fn compile_upstream(src: &UpstreamSource<'_>) -> Result<UpstreamCatalog, CompileError> {
    compile_upstream_with_limits(src, &CompileLimits::default())
}

/// [`compile_upstream`] within the given limits.
pub fn compile_upstream_with_limits(
    src: &UpstreamSource<'_>,
    limits: &CompileLimits,
) -> Result<UpstreamCatalog, CompileError> {
    check_options(src)?;
    let mut raw = spec::parse_value(src.document, src.spec)?;
    let mut warnings = Vec::new();
    if !src.overlays.is_empty() {
        // One budget for all overlays, from the document as written.
        let mut budget = crate::overlay::DocumentBudget::for_document(&raw);
        for overlay in src.overlays {
            warnings.extend(overlay.apply_within(&mut raw, &mut budget)?);
        }
    }
    let doc = match spec::load(src.document, raw, src.options.allow_external_refs) {
        Ok(doc) => doc,
        Err(e) if !src.overlays.is_empty() => return Err(blame_overlay(src, e)),
        Err(e) => return Err(e.into()),
    };
    compile_document(&doc, src.prefix, src.options, limits, warnings)
}

/// The document was invalid after the overlays: say so against the
/// overlay that made it invalid, not the document the user did not touch.
/// Only on this failure path: loads the document as written, then again
/// after each overlay in turn.
fn blame_overlay(src: &UpstreamSource<'_>, failure: crate::SpecError) -> CompileError {
    let allow = src.options.allow_external_refs;
    let Ok(mut raw) = spec::parse_value(src.document, src.spec) else {
        return failure.into();
    };
    if spec::load(src.document, raw.clone(), allow).is_err() {
        return failure.into();
    }
    let mut budget = crate::overlay::DocumentBudget::for_document(&raw);
    for overlay in src.overlays {
        if overlay.apply_within(&mut raw, &mut budget).is_err() {
            break;
        }
        if let Err(e) = spec::load(src.document, raw.clone(), allow) {
            return crate::OverlayError {
                overlay: overlay.name.clone(),
                action: None,
                target: None,
                kind: crate::error::OverlayErrorKind::BrokeDocument(e.to_string()),
            }
            .into();
        }
    }
    failure.into()
}

fn check_options(src: &UpstreamSource<'_>) -> Result<(), CompileError> {
    if !naming::is_valid_name(src.prefix) {
        return Err(CompileError::Options {
            field: "toolPrefix".into(),
            message: format!("{:?} must match ^[A-Za-z0-9_.-]+$", src.prefix),
        });
    }
    // A bad schema here would otherwise reject every tool it is added to.
    for (i, extra) in src.options.tools.extra_parameters.iter().enumerate() {
        if let Some(schema) = &extra.schema {
            if let Err(e) = jsonschema::draft202012::meta::validate(schema) {
                return Err(CompileError::Options {
                    field: format!("tools.extraParameters[{i}].schema"),
                    message: format!("is not valid JSON Schema 2020-12: {e}"),
                });
            }
        }
    }
    naming::check_settings(src.prefix, &src.options.naming)
}

struct Draft<'a> {
    site: OperationSite<'a>,
    method: String,
    name: String,
    base: String,
    /// Named by `x-mcp-tool-name`.
    pinned: bool,
}

fn op_ref(site: &OperationSite<'_>, method: &str) -> OperationRef {
    OperationRef {
        method: method.to_string(),
        path: site.path.to_string(),
        operation_id: site
            .operation
            .get("operationId")
            .and_then(Value::as_str)
            .map(String::from),
        pointer: site.pointer.clone(),
    }
}

fn reject(
    site: &OperationSite<'_>,
    method: &str,
    reason: RejectReason,
    message: String,
) -> Box<Rejected> {
    let r = op_ref(site, method);
    Box::new(Rejected {
        method: r.method,
        path: r.path,
        operation_id: r.operation_id,
        pointer: r.pointer,
        reason,
        message,
    })
}

fn compile_document(
    doc: &Document,
    prefix: &str,
    options: &CompileOptions,
    limits: &CompileLimits,
    mut warnings: Vec<Warning>,
) -> Result<UpstreamCatalog, CompileError> {
    let mut rejected = Vec::new();
    let mut drafts = Vec::new();
    let sites = spec::operations(doc);
    let operation_count = sites.len();
    for site in sites {
        let site = match site {
            Ok(s) => s,
            Err((method, path, err)) => {
                rejected.push(Rejected {
                    method,
                    path: path.clone(),
                    operation_id: None,
                    pointer: err.pointer.clone(),
                    reason: RejectReason::OperationInvalid,
                    message: err.to_string(),
                });
                continue;
            }
        };
        let method = site.method.to_ascii_uppercase();
        let Some(op) = site.operation.as_object() else {
            rejected.push(*reject(
                &site,
                &method,
                RejectReason::OperationInvalid,
                format!("{} is not an object", site.pointer),
            ));
            continue;
        };
        if let Some(r) = filter(op, &site, &method, options) {
            rejected.push(r);
            continue;
        }
        let tool_name = op.get("x-mcp-tool-name").and_then(Value::as_str);
        let base = naming::base_name(
            &NameSource {
                method: &method,
                path: site.path,
                operation_id: op.get("operationId").and_then(Value::as_str),
                tool_name,
            },
            &options.naming.slug,
        );
        let name = naming::full_name(prefix, &base, &options.naming);
        if !naming::is_valid_name(&name) {
            rejected.push(*reject(
                &site,
                &method,
                RejectReason::OperationInvalid,
                match tool_name {
                    Some(_) => format!(
                        "tool name {name:?} (from {}/x-mcp-tool-name) must match ^[A-Za-z0-9_.-]+$",
                        site.pointer
                    ),
                    None => format!("tool name {name:?} must match ^[A-Za-z0-9_.-]+$"),
                },
            ));
            continue;
        }
        let disabled = &options.tools.disabled;
        if disabled.iter().any(|d| *d == name || *d == base) {
            rejected.push(*reject(
                &site,
                &method,
                RejectReason::DisabledByConfig,
                format!("tool {name:?} is listed in tools.disabled"),
            ));
            continue;
        }
        drafts.push(Draft {
            site,
            method,
            name,
            base,
            pinned: tool_name.is_some(),
        });
    }

    // Name conflicts among what survived the filters. The raw request tool
    // takes part, last, so an operation that happens to produce its name
    // wins under firstWins and both fail under error.
    let raw_name = options
        .tools
        .raw_request_tool
        .then(|| naming::full_name(prefix, RAW_TOOL, &options.naming));
    let mut candidates: Vec<Candidate> = drafts
        .iter()
        .map(|d| Candidate {
            name: d.name.clone(),
            base: d.base.clone(),
            method: d.method.clone(),
            path: d.site.path.to_string(),
            tag: d
                .site
                .operation
                .pointer("/tags/0")
                .and_then(Value::as_str)
                .map(String::from),
            pinned: d.pinned,
        })
        .collect();
    if let Some(n) = &raw_name {
        candidates.push(Candidate {
            name: n.clone(),
            base: RAW_TOOL.into(),
            method: "*".into(),
            path: "(raw request tool)".into(),
            tag: None,
            pinned: true,
        });
    }
    let mode = options.naming.conflict_resolution;
    let mut disabled_after_qualify = vec![false; candidates.len()];
    if mode == ConflictResolution::Qualify {
        let qualified = naming::qualify(&candidates, prefix, &options.naming);
        let notes = qualify_warnings(&drafts, &candidates, &qualified);
        warnings.extend(notes);
        for (i, q) in qualified.into_iter().enumerate() {
            let Some(q) = q else { continue };
            let disabled = &options.tools.disabled;
            disabled_after_qualify[i] = disabled.iter().any(|d| *d == q.name || *d == q.base);
            candidates[i].name = q.name;
        }
        for (d, c) in drafts.iter_mut().zip(&candidates) {
            d.name.clone_from(&c.name);
        }
    }
    let raw_name = raw_name.and(candidates.last().map(|c| c.name.clone()));
    let keep = naming::resolve_conflicts(&candidates, mode)?;

    let mut conv = SchemaConverter::new(doc);
    let mut dry_runs = DryRuns::default();
    let mut bytes = SchemaBytes {
        limits,
        used: 0,
        tools: 0,
    };
    let mut tools = Vec::new();
    for ((draft, keep), disabled) in drafts
        .into_iter()
        .zip(keep.iter().copied())
        .zip(disabled_after_qualify.iter().copied())
    {
        if !keep {
            rejected.push(*reject(
                &draft.site,
                &draft.method,
                RejectReason::NameConflict,
                format!(
                    "tool name {:?} is taken by another operation (naming.conflictResolution: {})",
                    draft.name,
                    mode.as_str()
                ),
            ));
            continue;
        }
        if disabled {
            rejected.push(*reject(
                &draft.site,
                &draft.method,
                RejectReason::DisabledByConfig,
                format!("tool {:?} is listed in tools.disabled", draft.name),
            ));
            continue;
        }
        warnings.extend(findings::body_on_method(&draft.site, &draft.method));
        match build_tool(doc, &draft, &mut conv, &mut dry_runs, &mut bytes, options) {
            Ok(tool) => tools.push(tool),
            Err(ToolFail::Reject(r)) => rejected.push(*r),
            Err(ToolFail::Abort(e)) => return Err(e),
        }
    }
    let raw_kept = keep.last() == Some(&true) && disabled_after_qualify.last() == Some(&false);
    if let (Some(name), true) = (raw_name, raw_kept) {
        tools.push(raw_request_tool(name, "*"));
    }
    warnings.append(&mut conv.warnings);
    warnings.extend(findings::server_variables(doc));
    // Said against the document as written, not its 3.0 conversion.
    for w in &mut warnings {
        if let Some(crate::model::Location::Document { pointer }) = &mut w.at {
            *pointer = doc.origins.original(pointer);
        }
    }

    let mut out = UpstreamCatalog {
        prefix: prefix.to_string(),
        separator: options.naming.separator.clone(),
        hash: String::new(),
        source: SourceInfo {
            openapi_version: doc.version_string.clone(),
            title: doc
                .root
                .pointer("/info/title")
                .and_then(Value::as_str)
                .map(String::from),
            version: doc
                .root
                .pointer("/info/version")
                .and_then(Value::as_str)
                .map(String::from),
            operation_count,
        },
        default_base_url: spec::default_base_url(doc),
        tools,
        warnings,
        rejected,
    };
    out.seal();
    Ok(out)
}

/// One [`WarningCode::NameQualified`] per operation `qualify` renamed,
/// naming who else wanted the name.
fn qualify_warnings(
    drafts: &[Draft<'_>],
    candidates: &[Candidate],
    qualified: &[Option<naming::Qualified>],
) -> Vec<Warning> {
    let mut out = Vec::new();
    for (i, (d, q)) in drafts.iter().zip(qualified).enumerate() {
        let Some(q) = q else { continue };
        let others: Vec<String> = candidates
            .iter()
            .enumerate()
            .filter(|&(j, c)| j != i && c.name == d.name)
            .map(|(_, c)| format!("{} {}", c.method, c.path))
            .collect();
        let shown = others
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        let more = match others.len() {
            0..=3 => String::new(),
            n => format!(" and {} more", n - 3),
        };
        out.push(Warning {
            code: WarningCode::NameQualified,
            message: format!(
                "tool name {:?} is also wanted by {shown}{more}; this operation's tool is {:?} \
                 (naming.conflictResolution: qualify)",
                d.name, q.name
            ),
            at: Some(crate::model::Location::Document {
                pointer: d.site.pointer.clone(),
            }),
        });
    }
    out
}

/// `x-mcp-enabled`, `readOnly` and toolset filters. Returns the rejection,
/// if any.
fn filter(
    op: &Map<String, Value>,
    site: &OperationSite<'_>,
    method: &str,
    options: &CompileOptions,
) -> Option<Rejected> {
    if op.get("x-mcp-enabled") == Some(&Value::Bool(false)) {
        return Some(*reject(
            site,
            method,
            RejectReason::Disabled,
            format!("x-mcp-enabled is false at {}/x-mcp-enabled", site.pointer),
        ));
    }
    if options.tools.read_only && !annotate::is_read_only(method, op) {
        return Some(*reject(
            site,
            method,
            RejectReason::ReadOnlyMode,
            format!("{method} is not read-only and tools.readOnly is on"),
        ));
    }
    let sets = toolsets(op);
    let include = &options.tools.include_toolsets;
    if !include.is_empty() && !sets.iter().any(|s| include.contains(s)) {
        return Some(*reject(
            site,
            method,
            RejectReason::ToolsetFiltered,
            format!("toolsets {sets:?} are not in tools.includeToolsets {include:?}"),
        ));
    }
    if let Some(s) = sets
        .iter()
        .find(|s| options.tools.exclude_toolsets.contains(s))
    {
        return Some(*reject(
            site,
            method,
            RejectReason::ToolsetFiltered,
            format!("toolset {s:?} is in tools.excludeToolsets"),
        ));
    }
    None
}

/// Tags plus `x-mcp-toolsets`, deduplicated, in order.
fn toolsets(op: &Map<String, Value>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for key in ["tags", "x-mcp-toolsets"] {
        if let Some(list) = op.get(key).and_then(Value::as_array) {
            for s in list.iter().filter_map(Value::as_str) {
                if !out.iter().any(|o| o == s) {
                    out.push(s.to_string());
                }
            }
        }
    }
    out
}

/// `{prefix}__api_request`: any method and path under the upstream's base
/// URL. The gateway confines the path (no scheme, host, or dot segments).
fn raw_request_tool(name: String, method: &str) -> Tool {
    let input = serde_json::json!({
        "type": "object",
        "properties": {
            "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]},
            "path": {"type": "string", "pattern": "^/", "description": "Path relative to the API base URL, starting with `/`."},
            "query": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean", "array"]}, "description": "Query parameters."},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra request headers."},
            "body": {"description": "JSON request body."}
        },
        "required": ["method", "path"],
        "additionalProperties": false
    });
    let input_schema = crate::model::Schema::from_value(&input);
    Tool {
        name,
        title: Some("Raw API request".into()),
        description: Some(
            "Send an arbitrary HTTP request to this API (confined to its base URL). Use only when no specific tool fits.".into(),
        ),
        input_schema,
        output_schema: None,
        annotations: crate::model::ToolAnnotations {
            title: Some("Raw API request".into()),
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: Some(true),
        },
        operation: OperationRef {
            method: method.into(),
            path: "/".into(),
            operation_id: None,
            pointer: String::new(),
        },
        plan: crate::model::RequestPlan {
            method: method.into(),
            path: "/".into(),
            params: vec![],
            constants: vec![],
            body: None,
            raw: true,
        },
        transforms: Transforms::default(),
        response_format: ResponseFormat::Auto,
        output_wrap: None,
        responses: vec![],
        auth_required: true,
        toolsets: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_hash_changes_with_every_input_and_only_with_them() {
        let options = CompileOptions::default();
        let o = |name, bytes, strict| OverlayInput {
            name,
            bytes,
            strict,
        };
        let key = |prefix, doc, spec: &[u8], overlays: &[OverlayInput<'_>]| {
            input_hash(prefix, doc, spec, overlays, &options)
        };
        let base = key("p", "d", b"s", &[o("o", b"x", false)]);
        assert_eq!(base, key("p", "d", b"s", &[o("o", b"x", false)]));
        let variants = [
            key("q", "d", b"s", &[o("o", b"x", false)]),
            key("p", "e", b"s", &[o("o", b"x", false)]),
            key("p", "d", b"t", &[o("o", b"x", false)]),
            key("p", "d", b"s", &[o("n", b"x", false)]),
            key("p", "d", b"s", &[o("o", b"y", false)]),
            key("p", "d", b"s", &[o("o", b"x", true)]),
            key("p", "d", b"s", &[]),
            // Fields cannot run into each other.
            key("pd", "", b"s", &[o("o", b"x", false)]),
        ];
        for v in &variants {
            assert_ne!(&base, v);
        }
        let other = CompileOptions {
            allow_external_refs: !options.allow_external_refs,
            ..CompileOptions::default()
        };
        assert_ne!(
            base,
            input_hash("p", "d", b"s", &[o("o", b"x", false)], &other)
        );
    }
}
