//! Search mode's meta-tools: what `tools/list` offers instead of the
//! catalog on an endpoint in [`ListMode::Search`] (`/mcp?mode=search`).
//!
//! - `search_tools {query, limit?, prefix?}`: ranked matches from the
//!   snapshot's index ([`catalog::search`]) among the endpoint's tools the
//!   caller may call: name, title, description and annotations, and the
//!   input schema of the first [`SCHEMA_HITS`] only (schemas are most of a
//!   listing's bytes; `describe_tool` gives any other).
//! - `describe_tool {name}`: the tool as `tools/list` would list it.
//! - `call_tool {name, arguments}`: the direct call's pipeline
//!   ([`crate::call::pipeline`]); its result is the tool's result.
//!
//! A tool the endpoint does not serve, or the caller may not call, is
//! "unknown" to `describe_tool` and `call_tool` exactly as it is to a
//! direct `tools/call`, and `search_tools` never returns it. The
//! meta-tools' arguments are checked against their input schemas (strict
//! and bounded) like any tool's, and a failure is reported the same way.
//!
//! [`ListMode::Search`]: catalog::listing::ListMode::Search

use std::sync::{Arc, OnceLock};

use catalog::listing::SearchSettings;
use catalog::search::Query;
use jsonschema::Validator;
use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use crate::call::response::error_text;
use crate::call::tool::ToolEntry;
use crate::serving::snapshot::Snapshot;

/// Search results that carry their input schema.
pub(crate) const SCHEMA_HITS: usize = 3;

/// Longest tool name the meta-tools accept.
const MAX_NAME_BYTES: u64 = 256;

/// One of the meta-tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Meta {
    SearchTools,
    DescribeTool,
    CallTool,
}

impl Meta {
    pub(crate) const ALL: [Meta; 3] = [Meta::SearchTools, Meta::DescribeTool, Meta::CallTool];

    /// The meta-tool called `name`, if any.
    pub(crate) fn of(name: &str) -> Option<Meta> {
        Meta::ALL.into_iter().find(|m| m.name() == name)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Meta::SearchTools => "search_tools",
            Meta::DescribeTool => "describe_tool",
            Meta::CallTool => "call_tool",
        }
    }

    fn default_description(self) -> String {
        match self {
            Meta::SearchTools => format!(
                "Find this endpoint's tools by what they do. `query` is the task in plain \
                 words, best in the words an API's documentation would use (e.g. \"delete \
                 a webhook of a repository\"). Returns the best matches \
                 first: each tool's name, title, description and annotations, and the input \
                 schema of the first {SCHEMA_HITS} results only (use describe_tool for the \
                 schema of any other). Then run one with call_tool, or call it directly by \
                 its name. `prefix` searches one upstream API only (the part of a tool name \
                 before `__`)."
            ),
            Meta::DescribeTool => "The full definition of one tool (name, title, description, \
                 input schema, output schema, annotations), as a tool listing shows it. Use it \
                 for a search result that came without its input schema."
                .to_string(),
            Meta::CallTool => "Run a tool found with search_tools: `name` is its exact name, \
                 `arguments` the object its input schema describes. The result is the tool's \
                 own result; invalid arguments are reported without running the tool."
                .to_string(),
        }
    }

    fn configured(self, settings: &SearchSettings) -> Option<&str> {
        let d = &settings.descriptions;
        match self {
            Meta::SearchTools => d.search_tools.as_deref(),
            Meta::DescribeTool => d.describe_tool.as_deref(),
            Meta::CallTool => d.call_tool.as_deref(),
        }
    }

    fn input_schema(self) -> Value {
        let name = json!({"type": "string", "minLength": 1, "maxLength": MAX_NAME_BYTES,
                          "description": "The tool's exact name."});
        match self {
            Meta::SearchTools => json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1,
                              "maxLength": catalog::search::MAX_QUERY_BYTES,
                              "description": "What the tool should do, in plain words."},
                    "limit": {"type": "integer", "minimum": 1,
                              "maximum": catalog::search::MAX_LIMIT,
                              "default": catalog::search::DEFAULT_LIMIT,
                              "description": "How many results, best first."},
                    "prefix": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_BYTES,
                               "description": "Only tools of the upstream API with this prefix."},
                },
                "required": ["query"],
                "additionalProperties": false,
            }),
            Meta::DescribeTool => json!({
                "type": "object",
                "properties": {"name": name},
                "required": ["name"],
                "additionalProperties": false,
            }),
            Meta::CallTool => json!({
                "type": "object",
                "properties": {
                    "name": name,
                    "arguments": {"type": "object",
                                  "description": "The tool's arguments, as its input schema describes them."},
                },
                "required": ["name"],
                "additionalProperties": false,
            }),
        }
    }

    /// The input schema as MCP carries it, and its validator; built once.
    fn schema(self) -> &'static (Arc<JsonObject>, Validator) {
        static SCHEMAS: OnceLock<Vec<(Arc<JsonObject>, Validator)>> = OnceLock::new();
        let all = SCHEMAS.get_or_init(|| {
            Meta::ALL
                .iter()
                .map(|m| {
                    let schema = m.input_schema();
                    // NB: a literal of this module; the unit tests compile
                    // each one.
                    let validator = crate::call::validate::compile(&schema)
                        .unwrap_or_else(|e| panic!("{} input schema: {e}", m.name()));
                    let Value::Object(object) = schema else {
                        unreachable!("input schemas are objects")
                    };
                    (Arc::new(object), validator)
                })
                .collect()
        });
        &all[self as usize]
    }

    /// The meta-tool as `tools/list` lists it.
    pub(crate) fn tool(self, settings: &SearchSettings) -> Tool {
        let description = self
            .configured(settings)
            .map_or_else(|| self.default_description(), str::to_string);
        let tool = Tool::new_with_raw(
            self.name(),
            Some(description.into()),
            self.schema().0.clone(),
        );
        match self {
            Meta::SearchTools | Meta::DescribeTool => {
                tool.with_annotations(ToolAnnotations::new().read_only(true).open_world(false))
            }
            Meta::CallTool => tool,
        }
    }

    /// `arguments` checked against the meta-tool's schema, then read;
    /// `Err` is the message for the caller, in the form a tool's invalid
    /// arguments take (return it with [`error_text`]).
    pub(crate) fn arguments<T: DeserializeOwned>(
        self,
        arguments: Option<JsonObject>,
    ) -> Result<T, String> {
        let instance = Value::Object(arguments.unwrap_or_default());
        if let Err(errors) = crate::call::validate::check(&self.schema().1, &instance) {
            return Err(format!(
                "invalid arguments for {}:\n- {}",
                self.name(),
                errors.join("\n- ")
            ));
        }
        serde_json::from_value(instance)
            .map_err(|e| format!("invalid arguments for {}: {e}", self.name()))
    }
}

/// `search_tools` arguments.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct SearchArgs {
    pub query: String,
    pub limit: Option<u64>,
    pub prefix: Option<String>,
}

/// `describe_tool` arguments.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct DescribeArgs {
    pub name: String,
}

/// `call_tool` arguments.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct CallArgs {
    pub name: String,
    pub arguments: Option<JsonObject>,
}

/// Runs `search_tools` over the tools of `snapshot` that `allowed`
/// accepts (the endpoint's, that the caller may call).
pub(crate) fn search<'s>(
    snapshot: &'s Snapshot,
    args: &SearchArgs,
    mut allowed: impl FnMut(&'s ToolEntry) -> bool,
) -> CallToolResult {
    let query = Query::parse(&args.query).and_then(|q| match args.limit {
        Some(n) => q.with_limit(n),
        None => Ok(q),
    });
    let mut query = match query {
        Ok(q) => q,
        Err(e) => return error_text(format!("invalid arguments for search_tools: {e}")),
    };
    if let Some(p) = &args.prefix {
        query = query.with_prefix(p.clone());
    }
    let hits = snapshot.search_index().search(&query, |i| {
        snapshot.tool_at(i).is_some_and(|t| allowed(t.as_ref()))
    });
    let tools: Vec<Value> = hits
        .iter()
        .filter_map(|h| snapshot.tool_at(h.tool))
        .enumerate()
        .map(|(rank, t)| summary(t, rank < SCHEMA_HITS))
        .collect();
    CallToolResult::structured(json!({ "tools": tools }))
}

/// A search result: what tells the tools apart, and the input schema when
/// `with_schema`.
fn summary(t: &ToolEntry, with_schema: bool) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), t.def.name.clone().into());
    if let Some(title) = &t.def.title {
        m.insert("title".into(), title.clone().into());
    }
    if let Some(d) = &t.def.description {
        m.insert("description".into(), d.clone().into());
    }
    if let Ok(Value::Object(a)) = serde_json::to_value(&t.def.annotations) {
        if !a.is_empty() {
            m.insert("annotations".into(), Value::Object(a));
        }
    }
    if with_schema {
        let listed = t.mcp_for_listing();
        m.insert(
            "inputSchema".into(),
            Value::Object((*listed.input_schema).clone()),
        );
    }
    Value::Object(m)
}

/// `describe_tool`'s result for a tool the caller may see.
pub(crate) fn describe(t: &ToolEntry) -> CallToolResult {
    match serde_json::to_value(t.mcp_for_listing()) {
        Ok(v) => CallToolResult::structured(v),
        Err(e) => {
            tracing::error!(tool = %t.def.name, error = %e, "cannot serialise a tool");
            error_text(format!("cannot describe {}", t.def.name))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_tool_schemas_compile_and_are_strict() {
        for m in Meta::ALL {
            let (schema, _) = m.schema();
            assert_eq!(schema["additionalProperties"], false, "{}", m.name());
            assert_eq!(Meta::of(m.name()), Some(m));
        }
        assert_eq!(Meta::of("pets__get_pet"), None);
    }

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let args = |v: Value| v.as_object().cloned();
        let ok: SearchArgs = Meta::SearchTools
            .arguments(args(json!({"query": "pets", "limit": 3})))
            .unwrap();
        assert_eq!((ok.query.as_str(), ok.limit), ("pets", Some(3)));
        for bad in [
            json!({}),
            json!({"query": ""}),
            json!({"query": "pets", "limit": 51}),
            json!({"query": "pets", "other": 1}),
            json!({"query": "x".repeat(1025)}),
        ] {
            let e = Meta::SearchTools
                .arguments::<SearchArgs>(args(bad.clone()))
                .unwrap_err();
            assert!(
                e.starts_with("invalid arguments for search_tools"),
                "{bad}: {e}"
            );
        }
        let e = Meta::CallTool
            .arguments::<CallArgs>(args(json!({"name": "a", "arguments": 3})))
            .unwrap_err();
        assert!(e.starts_with("invalid arguments for call_tool"), "{e}");
    }

    #[test]
    fn descriptions_are_configurable() {
        let mut s = SearchSettings::default();
        let builtin = Meta::SearchTools.tool(&s).description.unwrap();
        assert!(builtin.contains("first 3 results only"), "{builtin}");
        s.descriptions.search_tools = Some("Find our tools.".into());
        assert_eq!(
            Meta::SearchTools.tool(&s).description.as_deref(),
            Some("Find our tools.")
        );
        assert_ne!(
            Meta::CallTool.tool(&s).description.as_deref(),
            Some("Find our tools.")
        );
    }
}
