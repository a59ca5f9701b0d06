//! One operation to one tool: its arguments and request plan, output and
//! response schemas, annotations and transforms, each checked (schema size,
//! meta-schema, dry runs); a failure rejects the operation, or past the
//! catalog's schema limit fails the compile.

use serde_json::Value;

use super::dry_run::{body_schema, check_transforms, DryRunInputs, DryRuns};
use super::node::slim as slim_node;
use super::node::{self, Node};
use super::response::{success_responses, Success};
use super::schema::SchemaConverter;
use super::{annotate, op_ref, plan, reject, toolsets, CompileLimits, Draft};
use crate::error::CompileError;
use crate::model::{
    RejectReason, Rejected, ResponseFormat, ResponseSchema, Schema, Tool, Transforms,
};
use crate::options::{CompileOptions, SchemaOptions, SchemaRefs};
use crate::slim::Listed;
use crate::spec::Document;

/// Running total of the schema text one compile has rendered.
pub(super) struct SchemaBytes<'a> {
    pub(super) limits: &'a CompileLimits,
    pub(super) used: usize,
    pub(super) tools: usize,
}

/// Why [`build_tool`] made no tool.
pub(super) enum ToolFail {
    /// The operation is rejected; the compile goes on.
    Reject(Box<Rejected>),
    /// The whole compile fails.
    Abort(CompileError),
}

impl From<Box<Rejected>> for ToolFail {
    fn from(r: Box<Rejected>) -> Self {
        ToolFail::Reject(r)
    }
}

pub(super) fn build_tool<'d>(
    doc: &'d Document,
    draft: &Draft<'d>,
    conv: &mut SchemaConverter<'d>,
    dry_runs: &mut DryRuns,
    bytes: &mut SchemaBytes<'_>,
    options: &CompileOptions,
) -> Result<Tool, ToolFail> {
    let site = &draft.site;
    let method = draft.method.as_str();
    let invalid = |m: String| reject(site, method, RejectReason::OperationInvalid, m);
    let op = site.operation;

    let response_format = match op.get("x-mcp-response-format") {
        None => ResponseFormat::Auto,
        Some(v) => v.as_str().and_then(ResponseFormat::parse).ok_or_else(|| {
            invalid(format!(
                "{}/x-mcp-response-format is {v}; expected one of json, text, image, audio, binary, auto",
                site.pointer
            ))
        })?,
    };
    let auth_required = match op.get("x-mcp-auth-required") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(invalid(format!(
                "{}/x-mcp-auth-required is {v}; expected a boolean",
                site.pointer
            ))
            .into())
        }
    };

    let args =
        plan::arguments(doc, site, method, conv, options).map_err(|plan::Invalid(m)| invalid(m))?;
    let Success {
        output: output_schema,
        wrap: output_wrap,
        responses,
    } = success_responses(doc, site, conv);

    let mut transforms = Transforms::default();
    for (key, slot) in [
        ("x-mcp-request-transform", &mut transforms.request),
        ("x-mcp-response-transform", &mut transforms.response),
        ("x-mcp-error-transform", &mut transforms.error),
    ] {
        match op.get(key) {
            None => {}
            Some(Value::String(s)) => *slot = Some(s.clone()),
            Some(v) => {
                return Err(reject(
                    site,
                    method,
                    RejectReason::TransformInvalid,
                    format!(
                        "{}/{key} is {v}; expected a jq program as a string",
                        site.pointer
                    ),
                )
                .into())
            }
        }
    }
    let input = args.input_schema;
    // The response transform reshapes the body, so the body's schema no
    // longer describes what the client gets: advertise no outputSchema.
    let emits_output = transforms.response.is_none();
    charge_schema_bytes(
        &doc.name,
        draft,
        bytes,
        [
            Some(&input),
            output_schema.as_ref().filter(|_| emits_output),
        ]
        .into_iter()
        .flatten()
        .chain(responses.iter().filter_map(|(_, _, s)| s.as_ref())),
    )?;
    if !transforms.is_empty() {
        let body = body_schema(output_schema.as_ref(), output_wrap);
        let inputs = DryRunInputs {
            tool: &draft.name,
            input: &input.to_value(),
            body: body.as_ref(),
        };
        check_transforms(site, method, &transforms, &inputs, dry_runs)?;
    }

    let (output, output_wrap) = if emits_output {
        (output_schema, output_wrap)
    } else {
        (None, None)
    };

    // NB: the converter only emits keywords it has checked (patterns
    // compile, counts are non-negative integers, ...); this meta-schema
    // check is the safety net that keeps a bad schema out of the gateway.
    // Response schemas are checked too: the gateway compiles them all, and
    // one bad schema would make it refuse the whole catalog.
    let invalid_schema = |what: String, s: &Node<'_>| {
        // Only now the whole value, for the validator's message.
        let e = match jsonschema::draft202012::meta::validate(&s.to_value()) {
            Err(e) => e.to_string(),
            Ok(()) => "rejected by the meta-schema".to_string(),
        };
        reject(
            site,
            method,
            RejectReason::SchemaInvalid,
            format!("generated {what} is not valid JSON Schema 2020-12: {e}"),
        )
    };
    for (what, s) in [
        ("inputSchema", Some(&input)),
        ("outputSchema", output.as_ref()),
    ] {
        if let Some(s) = s.filter(|s| !s.meta_valid()) {
            return Err(invalid_schema(what.to_string(), s).into());
        }
    }
    for (status, _, s) in &responses {
        if let Some(s) = s.as_ref().filter(|s| !s.meta_valid()) {
            return Err(invalid_schema(format!("responses[{status}].schema"), s).into());
        }
    }
    let responses = responses
        .into_iter()
        .map(|(status, content_type, schema)| ResponseSchema {
            status,
            content_type,
            schema: schema.as_ref().map(Node::to_schema),
        })
        .collect();

    let text_site = annotate::Site {
        operation: op,
        path_item: doc.root.pointer(&site.path_item_pointer),
        method,
        path: &args.plan.path,
    };
    let description = annotate::description(&text_site, &options.naming);
    let annotations = annotate::annotations(&text_site).map_err(invalid)?;
    bytes.tools += 1;
    Ok(Tool {
        name: draft.name.clone(),
        title: annotations.title.clone(),
        description,
        input_schema: listed(input, Listed::Input, &options.schema, &mut conv.cuts),
        output_schema: output.map(|o| listed(o, Listed::Output, &options.schema, &mut conv.cuts)),
        annotations,
        operation: op_ref(site, method),
        plan: args.plan,
        transforms,
        response_format,
        output_wrap,
        responses,
        auth_required,
        toolsets: op.as_object().map(toolsets).unwrap_or_default(),
    })
}

/// A schema as `tools/list` lists it: slimmed as the settings say (see
/// [`crate::slim`]), after the meta-schema check (slimming only removes
/// annotations or moves sub-schemas under `$defs`, which keeps a valid
/// schema valid).
fn listed<'d>(
    mut s: Node<'d>,
    role: Listed,
    options: &SchemaOptions,
    cuts: &mut slim_node::Cuts<'d>,
) -> Schema {
    // The shared expansions' texts are rendered all the same, as
    // `charge_schema_bytes` counted them (else every later tool measures
    // them again); the tool's own full text is not, as a cut would throw it
    // away.
    s.render_shared();
    if crate::slim::is_noop(options) {
        return s.to_schema();
    }
    if options.refs == SchemaRefs::Inline
        && slim_node::slim_in_place(&mut s, role, options, cuts).is_ok()
    {
        return s.to_schema();
    }
    Schema::from_value(&crate::slim::slim(s.to_schema().to_value(), role, options))
}

/// Measures the schemas a tool will emit, before any text is rendered:
/// rejects the tool past [`CompileLimits::max_tool_schema_bytes`], fails
/// the compile past [`CompileLimits::max_catalog_schema_bytes`], and
/// otherwise charges the text to the catalog's total.
///
/// NB: charged when measured, though a later check (meta-schema,
/// transforms) may still reject the tool: the total then overstates what
/// was rendered by at most one such tool's schemas each, and charging here
/// keeps a single early exit.
fn charge_schema_bytes<'n, 'd: 'n>(
    document: &str,
    draft: &Draft<'_>,
    bytes: &mut SchemaBytes<'_>,
    schemas: impl Iterator<Item = &'n Node<'d>>,
) -> Result<(), ToolFail> {
    // Shared expansions keep their text for the compile once rendered.
    let mut unrendered = node::Unrendered::default();
    let tool_bytes: usize = schemas.map(|s| s.measure(Some(&mut unrendered))).sum();
    let limits = bytes.limits;
    if tool_bytes > limits.max_tool_schema_bytes {
        return Err(reject(
            &draft.site,
            &draft.method,
            RejectReason::SchemaTooLarge,
            format!(
                "the tool's schemas come to {tool_bytes} bytes, over the limit of {} per tool; \
                 shrink the referenced schemas or disable the operation",
                limits.max_tool_schema_bytes
            ),
        )
        .into());
    }
    let used = bytes
        .used
        .saturating_add(tool_bytes)
        .saturating_add(unrendered.bytes);
    if used > limits.max_catalog_schema_bytes {
        return Err(ToolFail::Abort(CompileError::CatalogTooLarge {
            document: document.to_string(),
            limit: limits.max_catalog_schema_bytes,
            tools: bytes.tools,
            method: draft.method.clone(),
            path: draft.site.path.to_string(),
        }));
    }
    bytes.used = used;
    Ok(())
}
