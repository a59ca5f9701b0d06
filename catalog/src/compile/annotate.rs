//! MCP annotations and descriptions from the operation.
//!
//! Defaults: `title` from `summary` (see [`Site`] for the fallbacks);
//! `readOnlyHint` for GET/HEAD/OPTIONS/
//! TRACE; `destructiveHint` for DELETE, PUT and PATCH (they replace or
//! remove state); `idempotentHint` for GET/HEAD/OPTIONS/TRACE/PUT/DELETE;
//! `openWorldHint` always (every tool talks to an external system).
//! `x-mcp-annotations` overrides any of them.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::html;
use crate::model::ToolAnnotations;
use crate::options::NamingOptions;

/// Where an operation sits, for the fallbacks of its texts: an empty
/// operation `summary` or `description` is taken from its path item, and
/// with neither anywhere the tool is described (and titled) `METHOD /path`.
/// Document text is reduced to plain text ([`html::to_text`]) before any
/// length limit applies.
pub struct Site<'a> {
    pub operation: &'a Value,
    pub path_item: Option<&'a Value>,
    /// Upper case.
    pub method: &'a str,
    /// Without `#fragment`.
    pub path: &'a str,
}

impl<'a> Site<'a> {
    fn text(&self, key: &str) -> Option<Cow<'a, str>> {
        let own = |v: Option<&'a Value>| {
            let s = v?.get(key)?.as_str()?.trim();
            let s = match html::to_text(s) {
                Cow::Borrowed(b) => Cow::Borrowed(b),
                Cow::Owned(o) => Cow::Owned(o.trim().to_string()),
            };
            (!s.is_empty()).then_some(s)
        };
        own(Some(self.operation)).or_else(|| own(self.path_item))
    }

    fn method_and_path(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

fn safe(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS" | "TRACE")
}

/// Whether the operation counts as read-only for `tools.readOnly`: a safe
/// method, or an explicit `x-mcp-annotations.readOnlyHint: true` (some APIs
/// use POST for searches).
pub fn is_read_only(method: &str, op: &Map<String, Value>) -> bool {
    match op
        .get("x-mcp-annotations")
        .and_then(|a| a.get("readOnlyHint"))
        .and_then(Value::as_bool)
    {
        Some(b) => b,
        None => safe(method),
    }
}

pub fn annotations(site: &Site<'_>) -> Result<ToolAnnotations, String> {
    let (method, op) = (site.method, site.operation);
    let mut a = ToolAnnotations {
        title: Some(
            site.text("summary")
                .map_or_else(|| site.method_and_path(), Cow::into_owned),
        ),
        read_only_hint: Some(safe(method)),
        destructive_hint: Some(matches!(method, "DELETE" | "PUT" | "PATCH")),
        idempotent_hint: Some(safe(method) || matches!(method, "PUT" | "DELETE")),
        open_world_hint: Some(true),
    };
    if let Some(over) = op.get("x-mcp-annotations") {
        let Some(over) = over.as_object() else {
            return Err(format!("x-mcp-annotations is {over}; expected an object"));
        };
        for (k, v) in over {
            let bool_slot = match k.as_str() {
                "readOnlyHint" => &mut a.read_only_hint,
                "destructiveHint" => &mut a.destructive_hint,
                "idempotentHint" => &mut a.idempotent_hint,
                "openWorldHint" => &mut a.open_world_hint,
                "title" => {
                    a.title = match v {
                        Value::String(s) => Some(s.clone()),
                        Value::Null => None,
                        _ => {
                            return Err(format!(
                                "x-mcp-annotations.title is {v}; expected a string"
                            ))
                        }
                    };
                    continue;
                }
                other => {
                    return Err(format!(
                        "x-mcp-annotations.{other} is not an MCP tool annotation"
                    ))
                }
            };
            *bool_slot = match v {
                Value::Bool(b) => Some(*b),
                Value::Null => None,
                _ => return Err(format!("x-mcp-annotations.{k} is {v}; expected a boolean")),
            };
        }
    }
    Ok(a)
}

/// `x-mcp-description` as written, else summary and description combined
/// (each falling back per [`Site`]), truncated per `descriptionMaxLength`.
pub fn description(site: &Site<'_>, naming: &NamingOptions) -> Option<String> {
    let op = site.operation;
    let own = op
        .get("x-mcp-description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let text = if let Some(d) = own {
        d.to_string()
    } else {
        match (site.text("summary"), site.text("description")) {
            (Some(s), Some(d)) if d.starts_with(s.as_ref()) => d.into_owned(),
            (Some(s), Some(d)) => format!("{s}\n\n{d}"),
            (Some(s), None) => s.into_owned(),
            (None, Some(d)) => d.into_owned(),
            (None, None) => site.method_and_path(),
        }
    };
    let text = if op.get("deprecated") == Some(&Value::Bool(true)) {
        format!("[deprecated] {text}")
    } else {
        text
    };
    Some(super::naming::truncate_description(&text, naming))
}
