//! One tool, ready to call: its catalog definition, its schemas kept as
//! compact text and compiled on first use, its jq programs and its
//! upstream. The serving catalog builds these (`build_tool`); the call
//! pipeline runs them.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use catalog::access::ToolInfo;
use catalog::toolset::ToolsetName;
use catalog::transform::JqProgram;
use jsonschema::Validator;
use sha2::{Digest, Sha256};

use crate::call::rawjson::RawJson;
use crate::call::schema_text::{SchemaPool, SchemaText};
use crate::call::upstream::UpstreamRuntime;
use crate::call::validate;

/// One tool, ready to call.
pub struct ToolEntry {
    /// The catalog definition (plan, formats, transforms, annotations),
    /// with its schemas removed: they live in the compact fields below.
    pub def: catalog::Tool,
    pub prefix: String,
    pub upstream: Arc<UpstreamRuntime>,
    input_json: SchemaText,
    output_json: Option<SchemaText>,
    /// Whether `tools/list` shows `output_json`: then every success result
    /// carries `structuredContent` matching it ([`crate::call::output_schema`]).
    lists_output: bool,
    /// Success response checks by status key (`200`, `2XX`, `default`).
    responses: Vec<(String, ResponseSource)>,
    input: OnceLock<Result<Validator, String>>,
    /// Output and response validators read response text in place.
    output: OnceLock<Option<Compiled>>,
    response_validators: OnceLock<Vec<Option<Compiled>>>,
    mcp: OnceLock<rmcp::model::Tool>,
    pub request_jq: Option<JqProgram>,
    pub response_jq: Option<JqProgram>,
    pub error_jq: Option<JqProgram>,
    /// sha256 of the tool's catalog JSON: decides "modified" on reload.
    pub fingerprint: String,
    /// Where the name without `{prefix}{separator}` starts: what access
    /// rules match.
    base_start: usize,
    /// JSON bytes of the tool in a `tools/list` result.
    listed_bytes: usize,
    /// The toolsets that serve this tool.
    toolsets: HashSet<ToolsetName>,
}

/// A response validator, or why its schema does not compile.
type Compiled = Result<Validator<RawJson>, String>;

enum ResponseSource {
    /// Its own schema.
    Schema(SchemaText),
    /// The schema behind `outputSchema`: validate the wrapped body with
    /// the output validator (keeps `$defs` references intact).
    Output,
}

/// How a success response body is validated.
pub(crate) enum ResponseCheck<'a> {
    Schema(&'a Validator<RawJson>),
    /// Validate `wrap(body)` with this (the output) validator.
    Output(&'a Validator<RawJson>),
}

fn compile_text(text: &SchemaText) -> Result<Validator, String> {
    validate::compile(&text.value()?)
}

fn compile_raw_text(text: &SchemaText) -> Result<Validator<RawJson>, String> {
    validate::compile_raw(&text.value()?)
}

impl ToolEntry {
    /// Records that the toolset `name` serves this tool: while its
    /// snapshot is built.
    pub(crate) fn add_to_toolset(&mut self, name: ToolsetName) {
        self.toolsets.insert(name);
    }

    /// Whether the toolset `name` serves this tool.
    pub(crate) fn in_toolset(&self, name: &ToolsetName) -> bool {
        self.toolsets.contains(name)
    }

    /// What access rules know of this tool.
    pub(crate) fn access_info(&self) -> ToolInfo<'_> {
        ToolInfo {
            base_name: self
                .def
                .name
                .get(self.base_start..)
                .unwrap_or(&self.def.name),
            read_only: self.def.annotations.read_only_hint == Some(true),
        }
    }

    /// The input validator. `None` only if the schema stopped compiling
    /// between the snapshot build and now, which cannot happen; callers
    /// treat it as a defect rather than panic.
    pub fn input(&self) -> Option<&Validator> {
        self.input
            .get_or_init(|| compile_text(&self.input_json))
            .as_ref()
            .ok()
    }

    /// The outputSchema validator, if the tool has an output schema.
    pub fn output(&self) -> Option<&Validator<RawJson>> {
        self.output
            .get_or_init(|| self.output_json.as_ref().map(compile_raw_text))
            .as_ref()
            .and_then(|r| r.as_ref().ok())
    }

    /// The response check for `status`: exact, then `2XX`-style, then
    /// `default`.
    pub(crate) fn response_check(&self, status: u16) -> Option<ResponseCheck<'_>> {
        let exact = status.to_string();
        let range = format!("{}XX", status / 100);
        let i = self
            .responses
            .iter()
            .position(|(k, _)| *k == exact)
            .or_else(|| {
                self.responses
                    .iter()
                    .position(|(k, _)| k.eq_ignore_ascii_case(&range))
            })
            .or_else(|| self.responses.iter().position(|(k, _)| k == "default"))?;
        match &self.responses[i].1 {
            ResponseSource::Output => self.output().map(ResponseCheck::Output),
            ResponseSource::Schema(_) => {
                let all = self.response_validators.get_or_init(|| {
                    self.responses
                        .iter()
                        .map(|(_, src)| match src {
                            ResponseSource::Schema(text) => Some(compile_raw_text(text)),
                            ResponseSource::Output => None,
                        })
                        .collect()
                });
                all.get(i)?
                    .as_ref()?
                    .as_ref()
                    .ok()
                    .map(ResponseCheck::Schema)
            }
        }
    }

    /// The MCP view, built from the compact schemas. Cached, since rmcp
    /// asks for it on every call (`get_tool`).
    pub fn mcp(&self) -> &rmcp::model::Tool {
        self.mcp.get_or_init(|| self.build_mcp())
    }

    /// JSON bytes of [`Self::mcp`] as `tools/list` sends it, counted when
    /// the snapshot was built: what pages are measured with.
    pub(crate) fn listed_bytes(&self) -> usize {
        self.listed_bytes
    }

    /// Whether the tool lists its outputSchema, promising `structuredContent`
    /// that matches it on every success result.
    pub(crate) fn lists_output(&self) -> bool {
        self.lists_output
    }

    fn listed_output(&self) -> Option<&SchemaText> {
        self.output_json.as_ref().filter(|_| self.lists_output)
    }

    /// The MCP view for a listing: the cached one if the tool was used,
    /// else a fresh one that is not kept (listings must not grow memory).
    pub(crate) fn mcp_for_listing(&self) -> rmcp::model::Tool {
        match self.mcp.get() {
            Some(t) => t.clone(),
            None => self.build_mcp(),
        }
    }

    fn build_mcp(&self) -> rmcp::model::Tool {
        let t = &self.def;
        let mut mcp = rmcp::model::Tool::new_with_raw(
            t.name.clone(),
            t.description.clone().map(Cow::Owned),
            Arc::new(self.input_json.object()),
        );
        if let Some(title) = &t.title {
            mcp = mcp.with_title(title.clone());
        }
        if let Some(os) = self.listed_output() {
            mcp = mcp.with_raw_output_schema(Arc::new(os.object()));
        }
        let a = &t.annotations;
        if a.title.is_some()
            || a.read_only_hint.is_some()
            || a.destructive_hint.is_some()
            || a.idempotent_hint.is_some()
            || a.open_world_hint.is_some()
        {
            mcp = mcp.with_annotations(rmcp::model::ToolAnnotations::from_raw(
                a.title.clone(),
                a.read_only_hint,
                a.destructive_hint,
                a.idempotent_hint,
                a.open_world_hint,
            ));
        }
        mcp
    }
}

pub(crate) fn build_tool(
    t: &catalog::Tool,
    prefix: &str,
    base_start: usize,
    upstream: Arc<UpstreamRuntime>,
    advertise_output: bool,
    pool: &mut SchemaPool,
) -> Result<ToolEntry, (String, String)> {
    fn e(field: &str) -> impl Fn(String) -> (String, String) + '_ {
        move |m| (field.to_string(), m)
    }
    // Each schema is compiled here once, to refuse a bad catalog as a
    // whole, and then dropped; see the module docs.
    // MCP wants object schemas; a boolean schema cannot be listed.
    let object = |s: &catalog::Schema, field: &str| {
        if s.is_object() {
            Ok(())
        } else {
            Err((
                field.to_string(),
                format!("must be a JSON object, not {s:?}"),
            ))
        }
    };
    object(&t.input_schema, "inputSchema")?;
    // NB: kept as serde_json writes the parsed value, which is what a
    // listing sends (a catalog file may have been written otherwise, e.g.
    // `1E3`), so that `listed_bytes` is exact.
    let input = t.input_schema.to_value();
    validate::compile(&input).map_err(e("inputSchema"))?;
    let input_json = pool.intern(input.to_string());
    drop(input);
    let lists_output = catalog::listing::lists_output_schema(t, advertise_output);
    let output_json = match &t.output_schema {
        Some(s) => {
            object(s, "outputSchema")?;
            let value = s.to_value();
            validate::compile_raw(&value).map_err(e("outputSchema"))?;
            // Listed and checked alike; without `format`, which the
            // validator does not assert either.
            let text = match lists_output {
                true => crate::call::output_schema::listed(value).to_string(),
                false => value.to_string(),
            };
            Some(pool.intern(text))
        }
        None => None,
    };
    let mut responses = Vec::new();
    for r in &t.responses {
        let source = match &r.schema {
            Some(s) => {
                validate::compile_raw(&s.to_value())
                    .map_err(e(&format!("responses[{}].schema", r.status)))?;
                ResponseSource::Schema(pool.intern(s.as_str().to_string()))
            }
            None if output_json.is_some() => ResponseSource::Output,
            None => continue,
        };
        responses.push((r.status.clone(), source));
    }
    let jq = |src: &Option<String>, field: &str| -> Result<Option<JqProgram>, (String, String)> {
        src.as_deref()
            .map(|s| JqProgram::compile(s).map_err(|err| (field.to_string(), err.message)))
            .transpose()
    };
    // What the tool lists changes with `lists_output` too (a config
    // switched to `fail`): that is a modified tool.
    let mut fingerprint = Sha256::new();
    fingerprint.update(serde_json::to_vec(t).unwrap_or_default());
    fingerprint.update([u8::from(lists_output)]);
    let fingerprint = hex::encode(fingerprint.finalize());
    // The schemas live in the compact fields above; not twice.
    let mut def = catalog::Tool {
        name: t.name.clone(),
        title: t.title.clone(),
        description: t.description.clone(),
        input_schema: catalog::Schema::default(),
        // Placeholders while the listing is measured.
        output_schema: output_json
            .as_ref()
            .filter(|_| lists_output)
            .map(|_| catalog::Schema::default()),
        annotations: t.annotations.clone(),
        operation: t.operation.clone(),
        plan: t.plan.clone(),
        transforms: t.transforms.clone(),
        response_format: t.response_format,
        output_wrap: t.output_wrap,
        responses: Vec::new(),
        auth_required: t.auth_required,
        toolsets: t.toolsets.clone(),
    };
    let listed_bytes = listed_bytes(
        &def,
        &input_json,
        output_json.as_ref().filter(|_| lists_output),
    );
    def.output_schema = None;
    Ok(ToolEntry {
        def,
        prefix: prefix.to_string(),
        upstream,
        input_json,
        output_json,
        lists_output,
        responses,
        input: OnceLock::new(),
        output: OnceLock::new(),
        response_validators: OnceLock::new(),
        mcp: OnceLock::new(),
        request_jq: jq(&t.transforms.request, "transforms.request")?,
        response_jq: jq(&t.transforms.response, "transforms.response")?,
        error_jq: jq(&t.transforms.error, "transforms.error")?,
        fingerprint,
        base_start,
        listed_bytes,
        toolsets: HashSet::new(),
    })
}

/// JSON bytes of a tool as [`ToolEntry::build_mcp`] lists it: `def`
/// with placeholder schemas (`{}`, and an output schema where one is
/// advertised), measured by [`catalog::listing::tool_bytes`], with the
/// placeholders' length swapped for that of the texts the listing is
/// built from.
fn listed_bytes(def: &catalog::Tool, input: &SchemaText, output: Option<&SchemaText>) -> usize {
    let placeholder = catalog::Schema::default().as_str().len();
    let counted = catalog::listing::tool_bytes(def, output.is_some());
    let counted = usize::try_from(counted).unwrap_or(usize::MAX);
    let schemas = input.text_len() + output.map_or(0, SchemaText::text_len);
    let placeholders = placeholder * (1 + usize::from(output.is_some()));
    (counted + schemas).saturating_sub(placeholders)
}

impl ToolEntry {
    /// A deep copy made of fresh allocations, schema texts shared through
    /// `seen` ([`crate::serving::snapshot::Snapshot::compacted`]).
    pub(crate) fn compacted(&self, seen: &mut HashMap<usize, SchemaText>) -> ToolEntry {
        let t = self;
        ToolEntry {
            def: t.def.clone(),
            prefix: t.prefix.clone(),
            upstream: t.upstream.clone(),
            input_json: t.input_json.copied(seen),
            output_json: t.output_json.as_ref().map(|s| s.copied(seen)),
            lists_output: t.lists_output,
            responses: t
                .responses
                .iter()
                .map(|(k, s)| {
                    let s = match s {
                        ResponseSource::Schema(text) => ResponseSource::Schema(text.copied(seen)),
                        ResponseSource::Output => ResponseSource::Output,
                    };
                    (k.clone(), s)
                })
                .collect(),
            input: OnceLock::new(),
            output: OnceLock::new(),
            response_validators: OnceLock::new(),
            mcp: OnceLock::new(),
            request_jq: t.request_jq.clone(),
            response_jq: t.response_jq.clone(),
            error_jq: t.error_jq.clone(),
            fingerprint: t.fingerprint.clone(),
            base_start: t.base_start,
            listed_bytes: t.listed_bytes,
            toolsets: t.toolsets.clone(),
        }
    }
}
