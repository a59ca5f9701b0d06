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
use serde_json_path::{JsonPath, NormalizedPath, PathElement};

use crate::error::{OverlayError, OverlayErrorKind};
use crate::model::{Location, Warning, WarningCode};

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

/// How large and deep overlays may make a document: `update` and `copy`
/// are measured before anything is merged or copied, so 40 actions that
/// each copy a node into itself (doubling it) fail at the action that
/// would pass the limit instead of allocating gigabytes.
///
/// - Size: an estimate of the document's memory (JSON values, keys,
///   strings) may grow to [`MAX_GROWTH_FACTOR`] times its size before the
///   overlays, and to at least [`MIN_GROWTH_HEADROOM`] more than it. Every
///   merged or copied value is charged once per target, as if nothing it
///   replaces were freed; removals are not credited. Not configurable.
/// - Depth: no action may nest containers deeper than
///   [`MAX_DOCUMENT_DEPTH`], the depth serde_json and yaml_serde parse.
///
/// Errors are [`OverlayErrorKind::TooLarge`] (condition reason
/// `OverlayInvalid`), naming the overlay and the action.
#[derive(Debug, Clone)]
pub struct DocumentBudget {
    size: usize,
    max_size: usize,
}

/// See [`DocumentBudget`].
pub const MAX_GROWTH_FACTOR: usize = 4;
/// See [`DocumentBudget`]: 16 MiB.
pub const MIN_GROWTH_HEADROOM: usize = 16 << 20;
/// See [`DocumentBudget`].
pub const MAX_DOCUMENT_DEPTH: usize = 128;

impl DocumentBudget {
    /// A budget for `doc` as it is before the overlays.
    pub fn for_document(doc: &Value) -> DocumentBudget {
        let size = measure(doc).size;
        DocumentBudget {
            size,
            max_size: size
                .saturating_mul(MAX_GROWTH_FACTOR)
                .max(size.saturating_add(MIN_GROWTH_HEADROOM)),
        }
    }

    /// Charges merging `value` into every target, or says why not.
    fn charge(
        &mut self,
        doc: &Value,
        targets: &[Vec<Seg>],
        value: &Value,
        verb: &str,
    ) -> Result<(), String> {
        let m = measure(value);
        for path in targets {
            // An array target takes a non-array value as one more element.
            let element = matches!(node(doc, path), Some(Value::Array(_))) && !value.is_array();
            let depth = path.len() + m.depth + usize::from(element);
            if depth > MAX_DOCUMENT_DEPTH {
                return Err(format!(
                    "at {}: the {verb} would nest the document {depth} levels deep, over the \
                     limit of {MAX_DOCUMENT_DEPTH}",
                    pointer(path)
                ));
            }
        }
        let added = m.size.saturating_mul(targets.len());
        let size = self.size.saturating_add(added);
        if size > self.max_size {
            return Err(format!(
                "the {verb} of {} into {} target(s) would grow the document to about {} in \
                 memory, over the limit of {} ({MAX_GROWTH_FACTOR}× its size before the overlays, \
                 and at least {} more)",
                mib(m.size),
                targets.len(),
                mib(size),
                mib(self.max_size),
                mib(MIN_GROWTH_HEADROOM),
            ));
        }
        self.size = size;
        Ok(())
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

struct Measure {
    /// Estimated bytes in memory.
    size: usize,
    /// Containers on the deepest path (0 for a primitive).
    depth: usize,
}

/// Estimates `v`'s memory: a `Value` slot per node, string and key bytes,
/// and an index map's per-entry overhead. Iterative: the value may be
/// deeper than the stack allows (callers may build any `Value`).
fn measure(v: &Value) -> Measure {
    const SLOT: usize = std::mem::size_of::<Value>();
    // Hash, key `String` and index slot of one map entry.
    const ENTRY: usize = 8 + std::mem::size_of::<String>() + 16;
    let mut out = Measure { size: 0, depth: 0 };
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        out.size = out.size.saturating_add(SLOT);
        match v {
            Value::String(s) => out.size = out.size.saturating_add(s.len()),
            Value::Array(a) => {
                out.depth = out.depth.max(depth + 1);
                stack.extend(a.iter().map(|c| (c, depth + 1)));
            }
            Value::Object(m) => {
                out.depth = out.depth.max(depth + 1);
                for (k, c) in m {
                    out.size = out.size.saturating_add(ENTRY + k.len());
                    stack.push((c, depth + 1));
                }
            }
            _ => {}
        }
    }
    out
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

/// Longest JSONPath (`target` or `copy`) an overlay may use, in bytes.
/// Real targets are well under 200 bytes. Not configurable.
pub const MAX_JSONPATH_BYTES: usize = 4096;

/// Deepest nesting of brackets and parentheses (outside string literals) a
/// JSONPath may use; `$.paths.*[?(@.tags[?@ == 'x'])]` nests 4 deep. Not
/// configurable.
///
/// NB: why so low. `serde_json_path`'s parser recurses and backtracks per
/// level: 1,200 nested parentheses overflow a 2 MiB stack (a tokio worker,
/// where the operator parses overlays), and nested filter queries
/// (`$[?@[?@[?@...]]]`) take about twice as long per level, so 18 levels
/// already cost a second in a debug build and 32 would take hours. At 10
/// the worst case parses in about 2 ms (debug build).
pub const MAX_JSONPATH_NESTING: usize = 10;

/// Most descendant segments (`..`) a JSONPath may use, filters included.
/// Not configurable.
///
/// NB: why. serde_json_path builds a located path for every node a query
/// selects, and each `..` applies to every node the previous step
/// selected: `$..*` on a 3 MB document is ~300,000 nodes with paths about
/// 10 long, `$..*..*` ten times that, each further `..` ten times more, so
/// two already risk gigabytes. Filters with `..` inside a `..` query cost
/// time the same way.
pub const MAX_JSONPATH_DESCENDANTS: usize = 1;

/// The RFC 9535 functions overlays may not use: serde_json_path compiles
/// the regular expression again for every node it tests, so one
/// `$..[?match(@, '((a{1,30}){1,30}){1,30}')]` costs 33 ms per node (debug
/// build) — hours on a large document, in a compile that cannot be
/// interrupted.
pub const FORBIDDEN_JSONPATH_FUNCTIONS: [&str; 2] = ["match", "search"];

/// Parses an RFC 9535 JSONPath after checking it against
/// [`MAX_JSONPATH_BYTES`], [`MAX_JSONPATH_NESTING`],
/// [`MAX_JSONPATH_DESCENDANTS`] and [`FORBIDDEN_JSONPATH_FUNCTIONS`], so
/// that hostile input costs a linear scan, not the parser's stack or time
/// nor the evaluator's.
fn parse_jsonpath(path: &str) -> Result<JsonPath, String> {
    if path.len() > MAX_JSONPATH_BYTES {
        return Err(format!(
            "the JSONPath is {} bytes, over the limit of {MAX_JSONPATH_BYTES}",
            path.len()
        ));
    }
    let shape = jsonpath_shape(path);
    if shape.nesting > MAX_JSONPATH_NESTING {
        return Err(format!(
            "the JSONPath nests brackets and parentheses {} deep, over the limit of \
             {MAX_JSONPATH_NESTING}",
            shape.nesting
        ));
    }
    if shape.descendants > MAX_JSONPATH_DESCENDANTS {
        return Err(format!(
            "the JSONPath has {} descendant segments (`..`), over the limit of \
             {MAX_JSONPATH_DESCENDANTS}: each multiplies the nodes the query selects",
            shape.descendants
        ));
    }
    if let Some(f) = shape.regex_function {
        return Err(format!(
            "the JSONPath calls {f}(), which overlays do not support: it compiles its regular \
             expression again for every node tested; select by comparison (==) instead"
        ));
    }
    JsonPath::parse(path).map_err(|e| e.to_string())
}

/// What [`parse_jsonpath`] checks before parsing.
struct Shape {
    /// Deepest nesting of `[` and `(`.
    nesting: usize,
    /// `..` occurrences.
    descendants: usize,
    /// The first forbidden function called, if any.
    regex_function: Option<&'static str>,
}

/// Scans a JSONPath outside quoted names and string literals (RFC 9535
/// strings are `'...'` or `"..."` with backslash escapes). Closers are not
/// matched against openers: the parser reports malformed paths; this only
/// bounds what it is handed.
fn jsonpath_shape(path: &str) -> Shape {
    let mut shape = Shape {
        nesting: 0,
        descendants: 0,
        regex_function: None,
    };
    let mut depth = 0usize;
    let mut quote = None;
    let mut escaped = false;
    let mut prev = 0u8;
    // The identifier just before the current byte (a function name when a
    // `(` follows it, spaces aside).
    let mut word = String::new();
    for b in path.bytes() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == q {
                    quote = None;
                }
                prev = 0;
                continue;
            }
            None => match b {
                b'\'' | b'"' => quote = Some(b),
                b'[' | b'(' => {
                    if b == b'(' {
                        if let Some(f) = FORBIDDEN_JSONPATH_FUNCTIONS.iter().find(|f| **f == word) {
                            shape.regex_function.get_or_insert(f);
                        }
                    }
                    depth += 1;
                    shape.nesting = shape.nesting.max(depth);
                }
                b']' | b')' => depth = depth.saturating_sub(1),
                // `...` counts once: the third dot starts a name (an error).
                b'.' if prev == b'.' => {
                    shape.descendants += 1;
                    prev = 0;
                    word.clear();
                    continue;
                }
                _ => {}
            },
        }
        if b.is_ascii_alphanumeric() || b == b'_' {
            if !prev.is_ascii_alphanumeric() && prev != b'_' {
                word.clear();
            }
            // Function names are short; longer words cannot match.
            if word.len() < 8 {
                word.push(char::from(b));
            }
        } else if b != b' ' && b != b'(' {
            word.clear();
        }
        prev = b;
    }
    shape
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

/// Located nodes in query order. RFC 9535 lets a query (`$.a[0,0]`) select
/// a node twice; each node is acted on once, so duplicates are dropped.
fn locate(path: &JsonPath, doc: &Value) -> Vec<Vec<Seg>> {
    let mut seen = std::collections::HashSet::new();
    path.query_located(doc)
        .iter()
        .map(|node| owned_path(node.location()))
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

fn owned_path(p: &NormalizedPath<'_>) -> Vec<Seg> {
    p.iter()
        .map(|e| match e {
            PathElement::Name(n) => Seg::Key((*n).to_string()),
            PathElement::Index(i) => Seg::Index(*i),
        })
        .collect()
}

fn pointer(path: &[Seg]) -> String {
    if path.is_empty() {
        return "/ (the root)".to_string();
    }
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            Seg::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
            Seg::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

fn node_mut<'a>(doc: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(doc, |node, seg| match (node, seg) {
        (Value::Object(m), Seg::Key(k)) => m.get_mut(k),
        (Value::Array(a), Seg::Index(i)) => a.get_mut(*i),
        _ => None,
    })
}

fn node<'a>(doc: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |node, seg| match (node, seg) {
        (Value::Object(m), Seg::Key(k)) => m.get(k),
        (Value::Array(a), Seg::Index(i)) => a.get(*i),
        _ => None,
    })
}

fn remove_all(doc: &mut Value, mut targets: Vec<Vec<Seg>>) -> Result<(), String> {
    if targets.iter().any(Vec::is_empty) {
        return Err("`remove` cannot delete the document root `$`".to_string());
    }
    // Highest index first within each array, descendants before their
    // ancestors: every earlier removal leaves the later paths valid.
    targets.sort_unstable_by(|a, b| b.cmp(a));
    for path in &targets {
        let Some((last, parent)) = path.split_last() else {
            continue;
        };
        match (node_mut(doc, parent), last) {
            (Some(Value::Object(m)), Seg::Key(k)) => {
                // shift_remove keeps the remaining keys in document order.
                m.shift_remove(k);
            }
            (Some(Value::Array(a)), Seg::Index(i)) if *i < a.len() => {
                a.remove(*i);
            }
            _ => {}
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
    Primitive,
}

fn kind(v: &Value) -> Kind {
    match v {
        Value::Object(_) => Kind::Object,
        Value::Array(_) => Kind::Array,
        _ => Kind::Primitive,
    }
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
    }
}

/// The single node a `copy` source selects, not yet copied.
fn locate_source<'a>(doc: &'a Value, source: &str, path: &JsonPath) -> Result<&'a Value, String> {
    let found = locate(path, doc);
    match found.as_slice() {
        [one] => {
            node(doc, one).ok_or_else(|| format!("`copy` source {source:?} vanished while copying"))
        }
        [] => Err(format!(
            "`copy` source {source:?} matched nothing; it must select exactly one node"
        )),
        many => Err(format!(
            "`copy` source {source:?} matched {} nodes ({} ...); it must select exactly one",
            many.len(),
            pointer(&many[0])
        )),
    }
}

/// Applies an `update` (or copied) value to every target. Kinds are
/// checked for all targets first, so a wrong-typed update fails before it
/// changes anything; a nested incompatibility can still fail midway.
fn merge_all(
    doc: &mut Value,
    targets: &[Vec<Seg>],
    value: &Value,
    verb: &str,
) -> Result<(), String> {
    let nodes: Vec<(&Vec<Seg>, &Value)> = targets
        .iter()
        .filter_map(|p| node(doc, p).map(|n| (p, n)))
        .collect();
    if let Some(&(p0, n0)) = nodes.first() {
        if let Some(&(p, n)) = nodes.iter().find(|(_, n)| kind(n) != kind(n0)) {
            return Err(format!(
                "the target selects nodes of different kinds ({} at {}, {} at {}); \
                 an {verb} needs all objects, all arrays or all primitive values",
                kind_name(n0),
                pointer(p0),
                kind_name(n),
                pointer(p)
            ));
        }
        let expected = match kind(n0) {
            Kind::Object if !value.is_object() => Some("an object of properties to merge"),
            Kind::Primitive if kind(value) != Kind::Primitive => {
                Some("a primitive value (string, number, boolean or null) to replace it")
            }
            _ => None,
        };
        if let Some(expected) = expected {
            return Err(format!(
                "at {}: the {verb} value is {} but the target is {}; expected {expected}",
                pointer(p0),
                kind_name(value),
                kind_name(n0)
            ));
        }
    }
    for path in targets {
        let Some(target) = node_mut(doc, path) else {
            continue;
        };
        match (target, value) {
            (Value::Array(items), Value::Array(more)) => items.extend(more.iter().cloned()),
            (Value::Array(items), one) => items.push(one.clone()),
            (Value::Object(props), Value::Object(update)) => {
                let mut at = pointer(path);
                if path.is_empty() {
                    at.clear();
                }
                merge_object(props, update, &mut at, verb)?;
            }
            (slot, primitive) => *slot = primitive.clone(),
        }
    }
    Ok(())
}

/// Overlay 1.1 merge rules; `at` is the JSON pointer of `target`.
fn merge_object(
    target: &mut Map<String, Value>,
    update: &Map<String, Value>,
    at: &mut String,
    verb: &str,
) -> Result<(), String> {
    for (key, new) in update {
        let Some(old) = target.get_mut(key) else {
            target.insert(key.clone(), new.clone());
            continue;
        };
        let len = at.len();
        at.push('/');
        at.push_str(&key.replace('~', "~0").replace('/', "~1"));
        match (old, new) {
            (Value::Object(o), Value::Object(n)) => merge_object(o, n, at, verb)?,
            (Value::Array(o), Value::Array(n)) => o.extend(n.iter().cloned()),
            (o, n) if kind(o) == Kind::Primitive && kind(n) == Kind::Primitive => *o = n.clone(),
            (o, n) => {
                return Err(format!(
                    "at {at}: the {verb} has {} where the document has {}; objects merge \
                     into objects, arrays into arrays, primitives into primitives",
                    kind_name(n),
                    kind_name(o)
                ))
            }
        }
        at.truncate(len);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CompileError;
    use serde_json::json;

    fn overlay(yaml: &str) -> Overlay {
        match Overlay::parse("test.overlay.yaml", yaml.as_bytes(), false) {
            Ok(o) => o,
            Err(e) => panic!("overlay should parse: {e}"),
        }
    }

    fn parse_err(yaml: &str) -> OverlayError {
        match Overlay::parse("bad.overlay.yaml", yaml.as_bytes(), false) {
            Ok(o) => panic!("overlay should not parse: {o:?}"),
            Err(e) => e,
        }
    }

    fn pets() -> Value {
        json!({
            "openapi": "3.0.0",
            "info": {"title": "Pets", "version": "1"},
            "paths": {
                "/pets": {
                    "get": {"operationId": "listPets", "tags": ["pets", "read"], "parameters": [
                        {"name": "limit", "in": "query"},
                        {"name": "debug", "in": "query"},
                        {"name": "offset", "in": "query"},
                        {"name": "trace", "in": "header", "x-internal": true}
                    ]},
                    "post": {"operationId": "createPets"}
                },
                "/pets/{id}": {
                    "get": {"operationId": "showPet"},
                    "delete": {"operationId": "deletePet", "x-internal": true}
                }
            }
        })
    }

    const HEAD_10: &str = "overlay: 1.0.0\ninfo: {title: t, version: '1'}\n";
    const HEAD_11: &str = "overlay: 1.1.0\ninfo: {title: t, version: '1'}\n";

    #[test]
    fn remove_deletes_the_matched_node_from_its_parent_object() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: \"$.paths['/pets/{{id}}'].delete\"\n    remove: true\n"
        ));
        let mut doc = pets();
        let warnings = o.apply(&mut doc).unwrap();
        assert!(warnings.is_empty());
        assert!(doc.pointer("/paths/~1pets~1{id}/delete").is_none());
        assert!(doc.pointer("/paths/~1pets~1{id}/get").is_some());
    }

    #[test]
    fn update_merges_recursively_adding_keys_and_replacing_scalars() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.info\n    update:\n      title: New title\n      \
             description: added\n      contact: {{name: me}}\n"
        ));
        let mut doc = pets();
        doc["info"]["contact"] = json!({"email": "a@b.c"});
        o.apply(&mut doc).unwrap();
        assert_eq!(
            doc["info"],
            json!({"title": "New title", "version": "1",
                   "contact": {"email": "a@b.c", "name": "me"}, "description": "added"})
        );
    }

    #[test]
    fn update_concatenates_arrays_nested_in_the_merged_object() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.paths['/pets'].get\n    update: {{tags: [extra]}}\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert_eq!(
            doc["paths"]["/pets"]["get"]["tags"],
            json!(["pets", "read", "extra"])
        );
    }

    #[test]
    fn update_on_an_array_target_appends_the_entry() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.paths['/pets'].get.parameters\n    \
             update: {{name: newParam, in: query}}\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        let params = doc["paths"]["/pets"]["get"]["parameters"]
            .as_array()
            .unwrap();
        assert_eq!(params.len(), 5);
        assert_eq!(params[4], json!({"name": "newParam", "in": "query"}));
    }

    #[test]
    fn update_with_an_array_on_an_array_target_appends_each_value() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.paths['/pets'].get.tags\n    update: [a, b]\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert_eq!(
            doc["paths"]["/pets"]["get"]["tags"],
            json!(["pets", "read", "a", "b"])
        );
    }

    #[test]
    fn update_on_a_primitive_target_replaces_it() {
        let o = overlay(&format!(
            "{HEAD_11}actions:\n  - target: $.info.title\n    update: Renamed\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert_eq!(doc["info"]["title"], json!("Renamed"));
    }

    #[test]
    fn object_update_on_a_string_is_an_action_error_naming_the_expected_type() {
        let o = overlay(&format!(
            "{HEAD_11}actions:\n  - target: $.info\n    update: {{x-a: 1}}\n  \
             - target: $.info.title\n    update: {{a: 1}}\n"
        ));
        let err = o.apply(&mut pets()).unwrap_err();
        assert_eq!(err.action, Some(1));
        assert_eq!(err.target.as_deref(), Some("$.info.title"));
        let OverlayErrorKind::Action(msg) = &err.kind else {
            panic!("expected Action error, got {err:?}");
        };
        assert!(msg.contains("/info/title"), "{msg}");
        assert!(msg.contains("expected a primitive value"), "{msg}");
    }

    #[test]
    fn nested_incompatible_merge_is_an_error_naming_the_pointer() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.paths['/pets'].get\n    update: {{tags: {{a: 1}}}}\n"
        ));
        let err = o.apply(&mut pets()).unwrap_err();
        let OverlayErrorKind::Action(msg) = &err.kind else {
            panic!("expected Action error, got {err:?}");
        };
        assert!(msg.contains("/paths/~1pets/get/tags"), "{msg}");
        assert!(
            msg.contains("has an object where the document has an array"),
            "{msg}"
        );
    }

    #[test]
    fn update_selecting_objects_and_arrays_together_is_an_error() {
        let o = overlay(&format!(
            "{HEAD_11}actions:\n  - target: $.*\n    update: {{x: 1}}\n"
        ));
        let err = o.apply(&mut json!({"a": {}, "b": []})).unwrap_err();
        assert!(
            matches!(&err.kind, OverlayErrorKind::Action(m) if m.contains("different kinds")),
            "{err}"
        );
    }

    #[test]
    fn unmatched_target_is_a_warning_not_an_error() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.info\n    update: {{x-a: 1}}\n  \
             - target: $.paths['/nope'].get\n    update: {{x-b: 1}}\n"
        ));
        let mut doc = pets();
        let warnings = o.apply(&mut doc).unwrap();
        assert_eq!(warnings.len(), 1);
        let w = &warnings[0];
        assert_eq!(w.code, WarningCode::OverlayTargetUnmatched);
        let at = Location::Overlay {
            name: "test.overlay.yaml".into(),
            action: 1,
        };
        assert_eq!(w.at, Some(at));
        assert!(w.message.contains("test.overlay.yaml"), "{}", w.message);
        assert!(w.message.contains("action 1"), "{}", w.message);
        assert!(w.message.contains("$.paths['/nope'].get"), "{}", w.message);
        assert_eq!(doc["info"]["x-a"], json!(1));
    }

    #[test]
    fn strict_mode_makes_an_unmatched_target_an_error() {
        let text = format!("{HEAD_10}actions:\n  - target: $.nothing\n    remove: true\n");
        let o = Overlay::parse("s.yaml", text.as_bytes(), true).unwrap();
        assert!(o.strict);
        let err = o.apply(&mut pets()).unwrap_err();
        assert_eq!(err.kind, OverlayErrorKind::UnmatchedTarget);
        assert_eq!(err.action, Some(0));
        assert_eq!(err.target.as_deref(), Some("$.nothing"));
        assert_eq!(err.overlay, "s.yaml");
    }

    #[test]
    fn invalid_jsonpath_fails_parse_naming_action_index_and_target() {
        let err = parse_err(&format!(
            "{HEAD_10}actions:\n  - target: $.info\n    update: {{}}\n  \
             - target: $.paths[?@.x ==]\n    remove: true\n"
        ));
        assert_eq!(err.action, Some(1));
        assert_eq!(err.target.as_deref(), Some("$.paths[?@.x ==]"));
        let OverlayErrorKind::InvalidJsonPath(msg) = &err.kind else {
            panic!("expected InvalidJsonPath, got {err:?}");
        };
        assert!(msg.contains("position"), "{msg}");
        assert!(err.to_string().contains("/actions/1"), "{err}");
    }

    /// Runs `f` on a thread with a tokio worker's default stack (2 MiB), where
    /// the operator parses McpOverlays; a stack overflow aborts the test run.
    fn on_a_2_mib_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn a_target_with_1200_nested_parentheses_is_refused_without_overflowing_the_stack() {
        let target = format!("$[?{}@.a{}]", "(".repeat(1200), ")".repeat(1200));
        let text = format!("{HEAD_10}actions:\n  - target: \"{target}\"\n    remove: true\n");
        assert!(text.len() < 4200, "a 4 KB overlay: {}", text.len());
        let err = on_a_2_mib_stack(move || {
            Overlay::parse("mcpoverlay ns/deep", text.as_bytes(), false).unwrap_err()
        });
        assert_eq!(err.action, Some(0));
        assert_eq!(err.target.as_deref(), Some(target.as_str()));
        let OverlayErrorKind::InvalidJsonPath(msg) = &err.kind else {
            panic!("expected InvalidJsonPath, got {err:?}");
        };
        assert!(
            msg.contains("1201 deep") && msg.contains("limit of 10"),
            "{msg}"
        );
        let shown = err.to_string();
        assert!(shown.contains("mcpoverlay ns/deep: /actions/0"), "{shown}");
        assert_eq!(
            CompileError::from(err).reason(),
            crate::Reason::OverlayInvalid
        );
    }

    #[test]
    fn a_copy_source_with_deeply_nested_filters_is_refused_before_parsing() {
        // Nested filter queries cost the parser about twice as much per
        // level: 32 levels would parse for hours.
        let source = format!("${}{}", "[?@".repeat(32), "]".repeat(32));
        let err = on_a_2_mib_stack(move || {
            parse_err(&format!(
                "{HEAD_11}actions:\n  - target: $.info\n    update: {{}}\n  \
                 - target: $.info\n    copy: \"{source}\"\n"
            ))
        });
        assert_eq!(err.action, Some(1));
        assert_eq!(err.target.as_deref(), Some("$.info"));
        assert!(
            matches!(&err.kind, OverlayErrorKind::InvalidJsonPath(m)
                if m.starts_with("`copy` \"$[?@") && m.contains("32 deep")),
            "{err}"
        );
    }

    #[test]
    fn a_jsonpath_over_4_kib_is_refused() {
        let target = format!("${}", ".a".repeat(2100));
        let err = parse_err(&format!(
            "{HEAD_10}actions:\n  - target: {target}\n    remove: true\n"
        ));
        assert!(
            matches!(&err.kind, OverlayErrorKind::InvalidJsonPath(m)
                if m.contains("4201 bytes") && m.contains("limit of 4096")),
            "{err}"
        );
    }

    #[test]
    fn a_second_descendant_segment_is_refused_before_it_multiplies_the_nodes_selected() {
        for (target, n) in [("$..*..*", 2), ("$..paths[?@..x == 1]", 2), ("$....a", 2)] {
            let err = parse_err(&format!(
                "{HEAD_10}actions:\n  - target: \"{target}\"\n    remove: true\n"
            ));
            assert!(
                matches!(&err.kind, OverlayErrorKind::InvalidJsonPath(m)
                    if m.contains(&format!("has {n} descendant segments")) && m.contains("limit of 1")),
                "{target}: {err}"
            );
        }
        // In string literals `..` is a name, not a segment.
        overlay(&format!(
            "{HEAD_10}actions:\n  - target: \"$..['a..b'][?@.x == '..']\"\n    remove: true\n"
        ));
    }

    #[test]
    fn regex_functions_are_refused_because_they_compile_once_per_node() {
        for target in [
            "$..[?match(@, '((a{1,30}){1,30}){1,30}')]",
            "$.paths.*.*[?search (@.operationId, 'admin')]",
        ] {
            let err = parse_err(&format!(
                "{HEAD_10}actions:\n  - target: \"{target}\"\n    remove: true\n"
            ));
            assert!(
                matches!(&err.kind, OverlayErrorKind::InvalidJsonPath(m) if m.contains("overlays do not support")),
                "{target}: {err}"
            );
        }
        // Other functions, and the words in strings or names, are fine.
        overlay(&format!(
            "{HEAD_10}actions:\n  - target: \"$.paths.*.*[?length(@.tags) > 1 && @.x == 'match(']\"\n    \
             remove: true\n  - target: $.match\n    remove: true\n"
        ));
    }

    #[test]
    fn jsonpaths_nested_up_to_the_limit_still_parse() {
        // Brackets inside string literals do not count.
        let quoted = format!("$.paths[?@['{}']]", "([".repeat(40));
        let at_limit = format!("$[?{}@.a{}]", "(".repeat(9), ")".repeat(9));
        let filters = format!("${}{}", "[?@".repeat(10), "]".repeat(10));
        for target in [quoted, at_limit, filters] {
            overlay(&format!(
                "{HEAD_10}actions:\n  - target: \"{target}\"\n    remove: true\n"
            ));
        }
    }

    #[test]
    fn nonstandard_jsonpath_is_rejected_at_parse() {
        // Jayway-style trailing functions such as `.length()` are not RFC 9535.
        let err = parse_err(&format!(
            "{HEAD_10}actions:\n  - target: $.paths.length()\n    remove: true\n"
        ));
        assert!(
            matches!(err.kind, OverlayErrorKind::InvalidJsonPath(_)),
            "{err:?}"
        );
        assert_eq!(err.action, Some(0));
    }

    #[test]
    fn copy_merges_the_single_source_node_into_the_target() {
        let o = overlay(&format!(
            "{HEAD_11}actions:\n  - target: $.paths\n    update: {{/copies: {{}}}}\n  \
             - target: $.paths['/copies']\n    copy: $.paths['/pets']\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert_eq!(doc["paths"]["/copies"], doc["paths"]["/pets"]);
        assert_eq!(
            doc["paths"]["/copies"]["get"]["operationId"],
            json!("listPets")
        );
    }

    #[test]
    fn copy_then_remove_moves_a_node() {
        let o = overlay(&format!(
            "{HEAD_11}actions:\n  - target: $.paths\n    update: {{/animals: {{}}}}\n  \
             - target: $.paths['/animals']\n    copy: $.paths['/pets']\n  \
             - target: $.paths['/pets']\n    remove: true\n"
        ));
        let before = pets();
        let mut doc = before.clone();
        o.apply(&mut doc).unwrap();
        assert!(doc["paths"].get("/pets").is_none());
        assert_eq!(doc["paths"]["/animals"], before["paths"]["/pets"]);
    }

    #[test]
    fn copy_source_must_select_exactly_one_node() {
        let many = overlay(&format!(
            "{HEAD_11}actions:\n  - target: $.info\n    copy: $.paths.*.get\n"
        ));
        let err = many.apply(&mut pets()).unwrap_err();
        assert!(
            matches!(&err.kind, OverlayErrorKind::Action(m) if m.contains("matched 2 nodes")),
            "{err}"
        );
        let none = overlay(&format!(
            "{HEAD_11}actions:\n  - target: $.info\n    copy: $.components\n"
        ));
        let err = none.apply(&mut pets()).unwrap_err();
        assert!(
            matches!(&err.kind, OverlayErrorKind::Action(m) if m.contains("matched nothing")),
            "{err}"
        );
    }

    #[test]
    fn copy_is_rejected_in_an_overlay_1_0() {
        let err = parse_err(&format!(
            "{HEAD_10}actions:\n  - target: $.info\n    copy: $.paths\n"
        ));
        assert_eq!(err.action, Some(0));
        assert!(
            matches!(&err.kind, OverlayErrorKind::Invalid(m) if m.contains("1.1.0")),
            "{err}"
        );
    }

    #[test]
    fn wildcard_target_updates_every_get_operation() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.paths.*.get\n    update: {{x-safe: true}}\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert_eq!(doc["paths"]["/pets"]["get"]["x-safe"], json!(true));
        assert_eq!(doc["paths"]["/pets/{id}"]["get"]["x-safe"], json!(true));
        assert!(doc["paths"]["/pets"]["post"].get("x-safe").is_none());
        assert!(doc["paths"]["/pets/{id}"]["delete"].get("x-safe").is_none());
    }

    #[test]
    fn filter_target_sets_mcp_extensions_on_one_operation() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: \"$.paths.*[?(@.operationId == 'listPets')]\"\n    \
             update:\n      x-mcp-enabled: false\n      x-mcp-tool-name: list_all_pets\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        let op = &doc["paths"]["/pets"]["get"];
        assert_eq!(op["x-mcp-enabled"], json!(false));
        assert_eq!(op["x-mcp-tool-name"], json!("list_all_pets"));
        let others = ["/paths/~1pets/post", "/paths/~1pets~1{id}/get"];
        for p in others {
            assert!(
                doc.pointer(p).unwrap().get("x-mcp-enabled").is_none(),
                "{p}"
            );
        }
    }

    #[test]
    fn second_overlay_sees_the_first_overlays_result() {
        let first = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.paths.*.get\n    update: {{x-mcp-enabled: false}}\n"
        ));
        let second = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.paths.*[?@['x-mcp-enabled'] == false]\n    \
             update: {{x-mcp-tool-name: hidden}}\n"
        ));
        let mut doc = pets();
        first.apply(&mut doc).unwrap();
        let warnings = second.apply(&mut doc).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(
            doc["paths"]["/pets"]["get"]["x-mcp-tool-name"],
            json!("hidden")
        );
        assert_eq!(
            doc["paths"]["/pets/{id}"]["get"]["x-mcp-tool-name"],
            json!("hidden")
        );
        assert!(doc["paths"]["/pets"]["post"]
            .get("x-mcp-tool-name")
            .is_none());
    }

    #[test]
    fn later_actions_see_earlier_actions_of_the_same_overlay() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.info\n    update: {{x-stage: one}}\n  \
             - target: $[?@['x-stage'] == 'one']\n    update: {{x-seen: true}}\n"
        ));
        let mut doc = pets();
        let warnings = o.apply(&mut doc).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(doc["info"]["x-seen"], json!(true));
    }

    #[test]
    fn removing_several_array_elements_by_filter_removes_exactly_those() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: \"$.paths.*.get.parameters[?@.name == 'debug' || @['x-internal'] == true]\"\n    remove: true\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert_eq!(
            doc["paths"]["/pets"]["get"]["parameters"],
            json!([{"name": "limit", "in": "query"}, {"name": "offset", "in": "query"}])
        );
    }

    #[test]
    fn removing_array_elements_listed_lowest_index_first_keeps_indices_valid() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.list[0,2]\n    remove: true\n  \
             - target: $.other[2,0]\n    remove: true\n"
        ));
        let mut doc = json!({"list": [0, 1, 2, 3], "other": [0, 1, 2, 3]});
        o.apply(&mut doc).unwrap();
        assert_eq!(doc, json!({"list": [1, 3], "other": [1, 3]}));
    }

    #[test]
    fn a_node_selected_twice_is_acted_on_once() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $.lists[0,0]\n    update: 2\n  \
             - target: $.list[0,0]\n    remove: true\n"
        ));
        let mut doc = json!({"lists": [[1]], "list": [0, 1, 2]});
        o.apply(&mut doc).unwrap();
        assert_eq!(doc, json!({"lists": [[1, 2]], "list": [1, 2]}));
    }

    #[test]
    fn removing_primitive_array_items_by_filter_works() {
        let o = overlay(&format!(
            "{HEAD_11}actions:\n  - target: \"$.paths.*.get.tags[?@ == 'read']\"\n    remove: true\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert_eq!(doc["paths"]["/pets"]["get"]["tags"], json!(["pets"]));
    }

    #[test]
    fn removing_a_node_and_its_descendant_together_is_fine() {
        let o = overlay(&format!(
            "{HEAD_11}actions:\n  - target: $..['x-internal']\n    remove: true\n  \
             - target: \"$.paths[*][?@.operationId == 'deletePet']\"\n    remove: true\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert!(!doc.to_string().contains("x-internal"));
        assert!(doc.pointer("/paths/~1pets~1{id}/delete").is_none());
    }

    #[test]
    fn removing_the_root_is_an_error() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $\n    remove: true\n"
        ));
        let err = o.apply(&mut pets()).unwrap_err();
        assert_eq!(err.action, Some(0));
        assert!(
            matches!(&err.kind, OverlayErrorKind::Action(m) if m.contains("root")),
            "{err}"
        );
    }

    #[test]
    fn root_target_update_merges_into_the_document() {
        let o = overlay(&format!(
            "{HEAD_10}actions:\n  - target: $\n    update: {{info: {{x-overlay-applied: yes}}}}\n"
        ));
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert_eq!(doc["info"]["x-overlay-applied"], json!("yes"));
        assert_eq!(doc["info"]["title"], json!("Pets"));
    }

    #[test]
    fn json_overlays_are_accepted() {
        let text = r#"{"overlay": "1.1.0", "info": {"title": "t", "version": "1"},
            "actions": [{"target": "$.info", "update": {"x-json": true}}]}"#;
        let o = Overlay::parse("o.json", text.as_bytes(), false).unwrap();
        let mut doc = pets();
        o.apply(&mut doc).unwrap();
        assert_eq!(doc["info"]["x-json"], json!(true));
    }

    #[test]
    fn structure_errors_name_the_problem() {
        let cases: &[(&str, Option<usize>, &str)] = &[
            (
                "info: {title: t, version: '1'}\nactions: []\n",
                None,
                "`overlay`",
            ),
            (
                "overlay: 1.0.0\nactions:\n  - {target: $, update: {}}\n",
                None,
                "`info`",
            ),
            (
                "overlay: 1.0.0\ninfo: {title: t}\nactions:\n  - {target: $, update: {}}\n",
                None,
                "`version`",
            ),
            (HEAD_10, None, "`actions`"),
            (&format!("{HEAD_10}actions: []\n"), None, "at least one"),
            (
                &format!("{HEAD_10}actions:\n  - {{update: {{}}}}\n"),
                Some(0),
                "`target`",
            ),
            (
                &format!("{HEAD_10}actions:\n  - {{target: paths, update: {{}}}}\n"),
                Some(0),
                "`$`",
            ),
            (
                &format!("{HEAD_10}actions:\n  - {{target: $.a, remove: true, update: {{}}}}\n"),
                Some(0),
                "found `remove: true` and `update`",
            ),
            (
                &format!("{HEAD_10}actions:\n  - {{target: $.a}}\n"),
                Some(0),
                "found none",
            ),
            (
                &format!("{HEAD_10}actions:\n  - {{target: $.a, remove: false}}\n"),
                Some(0),
                "found none",
            ),
            (
                &format!("{HEAD_10}actions:\n  - {{target: $.a, remove: 'yes'}}\n"),
                Some(0),
                "boolean",
            ),
            (
                &format!("{HEAD_10}actions:\n  - {{target: $.a, updates: {{}}}}\n"),
                Some(0),
                "unknown field `updates`",
            ),
            (
                &format!("{HEAD_11}actions:\n  - {{target: $.a, copy: $.b, update: {{}}}}\n"),
                Some(0),
                "`update` and `copy`",
            ),
            (
                &format!("{HEAD_10}action:\n  - {{target: $.a, update: {{}}}}\n"),
                None,
                "unknown field `action`",
            ),
        ];
        for (text, action, needle) in cases {
            let err = parse_err(text);
            assert!(
                matches!(err.kind, OverlayErrorKind::Invalid(_)),
                "{text}: {err:?}"
            );
            assert_eq!(err.action, *action, "{text}: {err}");
            assert!(err.to_string().contains(needle), "{text}: {err}");
            assert!(err.to_string().contains("bad.overlay.yaml"), "{err}");
        }
    }

    #[test]
    fn unsupported_versions_are_rejected() {
        for v in ["2.0.0", "1.2.0", "'1.0'", "1.1", "1.0.0-beta"] {
            let err = parse_err(&format!(
                "overlay: {v}\ninfo: {{title: t, version: '1'}}\nactions:\n  - {{target: $, update: {{}}}}\n"
            ));
            assert!(
                matches!(err.kind, OverlayErrorKind::UnsupportedVersion(_)),
                "{v}: {err:?}"
            );
        }
        overlay("overlay: 1.0.7\ninfo: {title: t, version: '1'}\nactions:\n  - {target: $, update: {}}\n");
    }

    #[test]
    fn unparsable_text_is_a_parse_error() {
        let err = parse_err("overlay: [1.0.0\n");
        assert!(matches!(err.kind, OverlayErrorKind::Parse(_)), "{err:?}");
        assert_eq!(err.overlay, "bad.overlay.yaml");
    }

    #[test]
    fn overlay_applies_to_the_corpus_petstore() {
        let bytes = toolgate_corpus::read("oai-petstore-v3.yaml");
        let mut doc = crate::spec::parse_value("oai-petstore-v3.yaml", &bytes).unwrap();
        let o = overlay(&format!(
            "{HEAD_11}actions:\n\
             \x20 - target: \"$.paths.*[?@.operationId == 'createPets']\"\n    update: {{x-mcp-enabled: false}}\n\
             \x20 - target: \"$.paths['/pets'].get\"\n    update: {{x-mcp-tool-name: list_pets, summary: Lists pets}}\n\
             \x20 - target: \"$.paths.*.*.parameters[?@.in == 'query']\"\n    remove: true\n\
             \x20 - target: $.paths.*.*.responses.default\n    remove: true\n"
        ));
        let warnings = o.apply(&mut doc).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let pets = &doc["paths"]["/pets"];
        assert_eq!(pets["post"]["x-mcp-enabled"], json!(false));
        assert_eq!(pets["get"]["x-mcp-tool-name"], json!("list_pets"));
        assert_eq!(pets["get"]["summary"], json!("Lists pets"));
        assert_eq!(pets["get"]["operationId"], json!("listPets"));
        assert_eq!(pets["get"]["parameters"], json!([]));
        assert_eq!(
            doc["paths"]["/pets/{petId}"]["get"]["parameters"][0]["name"],
            json!("petId")
        );
        let text = doc.to_string();
        assert!(
            !text.contains("\"default\""),
            "default responses should be gone"
        );
        assert!(doc["components"]["schemas"]["Error"].is_object());
    }
}
