//! MCP annotations and descriptions from the operation.
//!
//! Defaults: `title` from `summary`; `readOnlyHint` for GET/HEAD/OPTIONS/
//! TRACE; `destructiveHint` for DELETE, PUT and PATCH (they replace or
//! remove state); `idempotentHint` for GET/HEAD/OPTIONS/TRACE/PUT/DELETE;
//! `openWorldHint` always (every tool talks to an external system).
//! `x-mcp-annotations` overrides any of them.

use serde_json::{Map, Value};

use crate::model::ToolAnnotations;
use crate::options::NamingOptions;

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

pub fn annotations(method: &str, op: &Value) -> Result<ToolAnnotations, String> {
    let mut a = ToolAnnotations {
        title: op
            .get("summary")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from),
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

/// `x-mcp-description`, else summary and description combined, truncated
/// per `descriptionMaxLength`. `None` when the operation says nothing.
pub fn description(op: &Value, naming: &NamingOptions) -> Option<String> {
    let get = |k: &str| {
        op.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    let text = if let Some(d) = get("x-mcp-description") {
        d.to_string()
    } else {
        match (get("summary"), get("description")) {
            (Some(s), Some(d)) if d.starts_with(s) => d.to_string(),
            (Some(s), Some(d)) => format!("{s}\n\n{d}"),
            (Some(s), None) => s.to_string(),
            (None, Some(d)) => d.to_string(),
            (None, None) => return None,
        }
    };
    let text = if op.get("deprecated") == Some(&Value::Bool(true)) {
        format!("[deprecated] {text}")
    } else {
        text
    };
    Some(super::naming::truncate_description(&text, naming))
}
