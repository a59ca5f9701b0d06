//! Tool names: base names from `x-mcp-tool-name`, operationId or method+path;
//! prefixing, length limits, description truncation, conflicts.
//!
//! CONTRACT (owned by the naming work; signatures are used by compile/mod.rs):

use crate::error::{NameConflict, NameConflicts};
use crate::options::{ConflictResolution, NamingOptions, SlugRules};

/// What a base name is made from.
#[derive(Debug, Clone, Copy)]
pub struct NameSource<'a> {
    /// Upper-case method.
    pub method: &'a str,
    /// Path key, possibly with a `#fragment`.
    pub path: &'a str,
    pub operation_id: Option<&'a str>,
    /// `x-mcp-tool-name`, used verbatim.
    pub tool_name: Option<&'a str>,
}

/// The base name (without prefix). Never empty.
pub fn base_name(src: &NameSource<'_>, rules: &SlugRules) -> String {
    let _ = rules;
    src.tool_name
        .or(src.operation_id)
        .unwrap_or(src.path)
        .to_string()
}

/// `{prefix}{separator}{base}`, shortened to `max_length` with a stable hash
/// suffix when needed; the prefix is never cut.
pub fn full_name(prefix: &str, base: &str, opts: &NamingOptions) -> String {
    format!("{prefix}{}{base}", opts.separator)
}

/// Whether `name` is a valid MCP tool name for toolgate (`^[A-Za-z0-9_.-]+$`).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Truncates a description to `description_max_length` characters (0 = off),
/// ending with the suffix, which counts toward the limit.
pub fn truncate_description(desc: &str, opts: &NamingOptions) -> String {
    let _ = opts;
    desc.to_string()
}

/// A named candidate, in document order.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub name: String,
    pub method: String,
    pub path: String,
}

/// Applies `conflictResolution`. Returns, for each candidate (same order),
/// `true` when it keeps its name, `false` when it is rejected for a conflict.
/// With `Error`, any conflict yields every conflicting pair.
pub fn resolve_conflicts(
    candidates: &[Candidate],
    mode: ConflictResolution,
) -> Result<Vec<bool>, NameConflicts> {
    let _ = (
        mode,
        NameConflict {
            name: String::new(),
            first: (String::new(), String::new()),
            second: (String::new(), String::new()),
        },
    );
    Ok(vec![true; candidates.len()])
}
