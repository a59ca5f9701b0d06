//! OpenAPI Overlay 1.0 / 1.1 applied to the raw document.
//!
//! Contract:
//! - [`Overlay::parse`] accepts an Overlay 1.0.x or 1.1.x document (JSON or
//!   YAML), checks its structure (required fields, field types, unknown
//!   fields, one effect per action) and compiles every JSONPath (RFC 9535),
//!   so a broken overlay fails before any document is touched. Errors name
//!   the overlay and, for action problems, the action index and target.
//! - [`Overlay::apply`] runs the actions in order, each against the result
//!   of the previous one. A target that matches nothing is a
//!   `OverlayTargetUnmatched` warning, or an `UnmatchedTarget` error when
//!   the overlay is strict. On error the document may be partly modified.
//!
//! Semantics (Overlay 1.1.0 §Action Object, which refines 1.0.0):
//! - `update` on objects merges recursively: keys only in the update are
//!   added, primitives replace primitives, arrays are concatenated, objects
//!   merge; any other pairing (e.g. object into string, `null` onto an
//!   object) is an error naming the JSON pointer.
//! - `update` on an array appends the value, or concatenates it when the
//!   value is itself an array.
//! - `update` on a primitive replaces it with a primitive. Overlay 1.0 says
//!   targets must be objects or arrays; we accept primitive targets in 1.0
//!   too because 1.1 gives them a meaning that cannot change any valid 1.0
//!   result.
//! - All nodes one `update`/`copy` selects must be of one kind (all objects,
//!   all arrays or all primitives), as 1.1 requires.
//! - `remove: true` deletes each selected node from its parent; several
//!   array elements are deleted highest index first so that every selected
//!   element (and only those) goes. Removing the root `$` is an error.
//! - `copy` (1.1 only) takes the value of the single node its JSONPath
//!   selects in the current document and merges it into each target like
//!   `update`. No source node, or more than one, is an error.
//! - Actions combining `update`, `copy` and `remove: true` are rejected
//!   rather than resolved by the spec's precedence: such a combination is
//!   almost always an authoring mistake.
//!
//! Bounds (hostile overlays are the normal case):
//! - a `target` or `copy` JSONPath has at most [`MAX_JSONPATH_BYTES`]
//!   bytes, [`MAX_JSONPATH_NESTING`] levels of brackets and
//!   [`MAX_JSONPATH_DESCENDANTS`] `..`, and calls none of
//!   [`FORBIDDEN_JSONPATH_FUNCTIONS`], checked before it is parsed;
//! - every `update` and `copy` is measured against a [`DocumentBudget`]
//!   (size and depth) before anything is merged or copied.
//!
//! Why not the `roas-overlay` crate (0.3): it compiles JSONPaths only while
//! applying (so nothing fails up front), rejects primitive targets that
//! Overlay 1.1 allows (`tags[?@ == 'x']` removal, primitive replacement),
//! replaces instead of failing on incompatible merges, silently ignores
//! removal of the root, and deletes several array elements in reverse
//! *query* order, which removes the wrong element for e.g. `$.a[2,0]`.

use serde_json::{Map, Value};
use serde_json_path::JsonPath;

use crate::error::{OverlayError, OverlayErrorKind};
use crate::model::{Location, Warning, WarningCode};

mod budget;
mod jsonpath;
mod tree;

pub use budget::{DocumentBudget, MAX_DOCUMENT_DEPTH, MAX_GROWTH_FACTOR, MIN_GROWTH_HEADROOM};
use jsonpath::parse_jsonpath;
pub use jsonpath::{
    FORBIDDEN_JSONPATH_FUNCTIONS, MAX_JSONPATH_BYTES, MAX_JSONPATH_DESCENDANTS,
    MAX_JSONPATH_NESTING,
};
use tree::{kind_name, locate, locate_source, merge_all, remove_all};

/// A parsed, validated overlay document.
#[derive(Debug, Clone)]
pub struct Overlay {
    /// Name used in errors and warnings (file path, `McpOverlay ns/name`).
    pub name: String,
    /// Unmatched targets are errors instead of warnings.
    pub strict: bool,
    actions: Vec<Action>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1_0,
    V1_1,
}

#[derive(Debug, Clone)]
struct Action {
    target: String,
    path: JsonPath,
    op: Op,
}

#[derive(Debug, Clone)]
enum Op {
    Remove,
    Update(Value),
    Copy { source: String, path: JsonPath },
}

/// One step of a located node's path, owned so the document can be
/// mutated after the query. The derived order (lexicographic over a path)
/// puts descendants after their ancestors and higher indices after lower
/// ones; removal walks it backwards.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Seg {
    Key(String),
    Index(usize),
}

const ROOT_FIELDS: &[&str] = &["overlay", "info", "extends", "actions"];
const INFO_FIELDS: &[&str] = &["title", "version", "description"];
const ACTION_FIELDS: &[&str] = &["target", "description", "update", "remove", "copy"];

impl Overlay {
    /// Parses JSON or YAML and checks the overlay's structure; JSONPath
    /// targets are compiled here so a bad one fails before anything applies.
    pub fn parse(name: &str, bytes: &[u8], strict: bool) -> Result<Overlay, OverlayError> {
        let fail = |action: Option<usize>, target: Option<&str>, kind| OverlayError {
            overlay: name.to_string(),
            action,
            target: target.map(str::to_string),
            kind,
        };
        let invalid = |msg: String| fail(None, None, OverlayErrorKind::Invalid(msg));

        let value = crate::spec::parse_value(name, bytes).map_err(|e| {
            let msg = match e.kind {
                crate::error::SpecErrorKind::Parse(m) => m,
                other => other.to_string(),
            };
            fail(None, None, OverlayErrorKind::Parse(msg))
        })?;
        let Value::Object(root) = value else {
            return Err(invalid(format!(
                "the document must be a mapping with `overlay`, `info` and `actions`, found {}",
                kind_name(&value)
            )));
        };
        check_fields(&root, ROOT_FIELDS, "").map_err(invalid)?;

        let version = match root.get("overlay") {
            None => return Err(invalid("missing required field `overlay`".into())),
            Some(Value::String(s)) => parse_version(s)
                .ok_or_else(|| fail(None, None, OverlayErrorKind::UnsupportedVersion(s.clone())))?,
            // YAML reads `overlay: 1.1` as a number; report what was written.
            Some(Value::Number(n)) => {
                return Err(fail(
                    None,
                    None,
                    OverlayErrorKind::UnsupportedVersion(n.to_string()),
                ))
            }
            Some(other) => {
                return Err(invalid(format!(
                    "`overlay` must be a version string such as \"1.0.0\", found {}",
                    kind_name(other)
                )))
            }
        };

        match root.get("info") {
            None => return Err(invalid("missing required field `info`".into())),
            Some(Value::Object(info)) => {
                check_fields(info, INFO_FIELDS, "/info").map_err(invalid)?;
                for field in ["title", "version"] {
                    match info.get(field) {
                        Some(Value::String(_)) => {}
                        None => {
                            return Err(invalid(format!(
                                "missing required field `{field}` at /info"
                            )))
                        }
                        Some(other) => {
                            return Err(invalid(format!(
                                "/info/{field} must be a string, found {}",
                                kind_name(other)
                            )))
                        }
                    }
                }
                if let Some(d) = info.get("description").filter(|d| !d.is_string()) {
                    return Err(invalid(format!(
                        "/info/description must be a string, found {}",
                        kind_name(d)
                    )));
                }
            }
            Some(other) => {
                return Err(invalid(format!(
                    "`info` must be a mapping, found {}",
                    kind_name(other)
                )))
            }
        }
        if let Some(e) = root.get("extends").filter(|e| !e.is_string()) {
            return Err(invalid(format!(
                "`extends` must be a URI string, found {}",
                kind_name(e)
            )));
        }

        let raw_actions = match root.get("actions") {
            None => return Err(invalid("missing required field `actions`".into())),
            Some(Value::Array(a)) if a.is_empty() => {
                return Err(invalid("`actions` must contain at least one action".into()))
            }
            Some(Value::Array(a)) => a,
            Some(other) => {
                return Err(invalid(format!(
                    "`actions` must be a list, found {}",
                    kind_name(other)
                )))
            }
        };

        let mut actions = Vec::with_capacity(raw_actions.len());
        for (i, raw) in raw_actions.iter().enumerate() {
            let action = parse_action(raw, i, version).map_err(|(target, kind)| OverlayError {
                overlay: name.to_string(),
                action: Some(i),
                target,
                kind,
            })?;
            actions.push(action);
        }

        Ok(Overlay {
            name: name.to_string(),
            strict,
            actions,
        })
    }

    /// Applies every action in order to `doc`, within a [`DocumentBudget`]
    /// made from `doc` as it is now. On error `doc` may be partly modified;
    /// callers discard it.
    pub fn apply(&self, doc: &mut Value) -> Result<Vec<Warning>, OverlayError> {
        let mut budget = DocumentBudget::for_document(doc);
        self.apply_within(doc, &mut budget)
    }

    /// [`Overlay::apply`] with a budget shared by several overlays (made
    /// once from the document before the first), so that each one cannot
    /// grow the document 4× again.
    pub fn apply_within(
        &self,
        doc: &mut Value,
        budget: &mut DocumentBudget,
    ) -> Result<Vec<Warning>, OverlayError> {
        let mut warnings = Vec::new();
        for (i, action) in self.actions.iter().enumerate() {
            let fail = |kind| OverlayError {
                overlay: self.name.clone(),
                action: Some(i),
                target: Some(action.target.clone()),
                kind,
            };
            let targets = locate(&action.path, doc);
            if targets.is_empty() {
                if self.strict {
                    return Err(fail(OverlayErrorKind::UnmatchedTarget));
                }
                warnings.push(Warning {
                    code: WarningCode::OverlayTargetUnmatched,
                    message: format!(
                        "overlay {}: action {i}: target {:?} matched nothing; the action was skipped",
                        self.name, action.target
                    ),
                    at: Some(Location::Overlay {
                        name: self.name.clone(),
                        action: u32::try_from(i).unwrap_or(u32::MAX),
                    }),
                });
                continue;
            }
            let result = match &action.op {
                Op::Remove => remove_all(doc, targets),
                Op::Update(value) => {
                    budget
                        .charge(doc, &targets, value, "update")
                        .map_err(|e| fail(OverlayErrorKind::TooLarge(e)))?;
                    merge_all(doc, &targets, value, "update")
                }
                Op::Copy { source, path } => {
                    let value = match locate_source(doc, source, path) {
                        Ok(found) => found,
                        Err(msg) => return Err(fail(OverlayErrorKind::Action(msg))),
                    };
                    // Measured in place: only a copy within the budget is made.
                    budget
                        .charge(doc, &targets, value, "copy")
                        .map_err(|e| fail(OverlayErrorKind::TooLarge(e)))?;
                    let value = value.clone();
                    merge_all(doc, &targets, &value, "copy")
                }
            };
            result.map_err(|msg| fail(OverlayErrorKind::Action(msg)))?;
        }
        Ok(warnings)
    }
}

/// Validates one action; errors carry the action's target when known.
fn parse_action(
    raw: &Value,
    i: usize,
    version: Version,
) -> Result<Action, (Option<String>, OverlayErrorKind)> {
    let at = format!("/actions/{i}");
    let invalid = |target: Option<&str>, msg: String| {
        (target.map(str::to_string), OverlayErrorKind::Invalid(msg))
    };
    let Value::Object(obj) = raw else {
        return Err(invalid(
            None,
            format!("{at} must be a mapping, found {}", kind_name(raw)),
        ));
    };
    let target = match obj.get("target") {
        Some(Value::String(t)) => t.as_str(),
        None => {
            return Err(invalid(
                None,
                format!("missing required field `target` at {at}"),
            ))
        }
        Some(other) => {
            return Err(invalid(
                None,
                format!("{at}/target must be a string, found {}", kind_name(other)),
            ))
        }
    };
    let t = Some(target);
    if version == Version::V1_0 && obj.contains_key("copy") {
        return Err(invalid(
            t,
            format!("{at}/copy: `copy` needs overlay 1.1.0 or later, this overlay is 1.0.x"),
        ));
    }
    check_fields(obj, ACTION_FIELDS, &at).map_err(|m| invalid(t, m))?;
    if !target.starts_with('$') {
        return Err(invalid(
            t,
            format!("{at}/target must be a JSONPath starting with `$`"),
        ));
    }
    if let Some(d) = obj.get("description").filter(|d| !d.is_string()) {
        return Err(invalid(
            t,
            format!("{at}/description must be a string, found {}", kind_name(d)),
        ));
    }
    let remove = match obj.get("remove") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(invalid(
                t,
                format!("{at}/remove must be a boolean, found {}", kind_name(other)),
            ))
        }
    };
    let copy = match obj.get("copy") {
        None => None,
        Some(Value::String(c)) if c.starts_with('$') => Some(c.as_str()),
        Some(Value::String(_)) => {
            return Err(invalid(
                t,
                format!("{at}/copy must be a JSONPath starting with `$`"),
            ))
        }
        Some(other) => {
            return Err(invalid(
                t,
                format!("{at}/copy must be a string, found {}", kind_name(other)),
            ))
        }
    };
    let update = obj.get("update");

    let mut effects = Vec::new();
    if remove {
        effects.push("`remove: true`");
    }
    if update.is_some() {
        effects.push("`update`");
    }
    if copy.is_some() {
        effects.push("`copy`");
    }
    if effects.len() != 1 {
        let wanted = match version {
            Version::V1_0 => "exactly one of `update` or `remove: true`",
            Version::V1_1 => "exactly one of `update`, `copy` or `remove: true`",
        };
        let found = if effects.is_empty() {
            "none".to_string()
        } else {
            effects.join(" and ")
        };
        return Err(invalid(
            t,
            format!("{at}: an action needs {wanted}; found {found}"),
        ));
    }

    let path = parse_jsonpath(target).map_err(|e| {
        (
            Some(target.to_string()),
            OverlayErrorKind::InvalidJsonPath(e),
        )
    })?;
    let op = match (update, copy) {
        (Some(v), _) => Op::Update(v.clone()),
        (None, Some(source)) => Op::Copy {
            source: source.to_string(),
            path: parse_jsonpath(source).map_err(|e| {
                (
                    Some(target.to_string()),
                    OverlayErrorKind::InvalidJsonPath(format!("`copy` {source:?}: {e}")),
                )
            })?,
        },
        (None, None) => Op::Remove,
    };
    Ok(Action {
        target: target.to_string(),
        path,
        op,
    })
}

/// `1.0.x` or `1.1.x`; the patch number is ignored as the spec says.
fn parse_version(s: &str) -> Option<Version> {
    let mut parts = s.split('.');
    let (major, minor, patch) = (parts.next()?, parts.next()?, parts.next()?);
    let numeric = !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit());
    if parts.next().is_some() || major != "1" || !numeric {
        return None;
    }
    match minor {
        "0" => Some(Version::V1_0),
        "1" => Some(Version::V1_1),
        _ => None,
    }
}

/// Unknown fields are rejected so a misspelt `update`/`target` is reported
/// instead of silently doing nothing; `x-` extensions are always allowed.
fn check_fields(obj: &Map<String, Value>, allowed: &[&str], at: &str) -> Result<(), String> {
    match obj
        .keys()
        .find(|k| !k.starts_with("x-") && !allowed.contains(&k.as_str()))
    {
        None => Ok(()),
        Some(k) => Err(format!(
            "unknown field `{k}` at {} (allowed: {}, x-*)",
            if at.is_empty() { "the top level" } else { at },
            allowed.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests;
