//! OpenAPI Schema Objects (3.0 dialect, 3.1 = JSON Schema 2020-12, and 2.0
//! after conversion) → self-contained JSON Schema 2020-12.
//!
//! Every `$ref` is inlined, so a tool's schema never points outside itself
//! (LLM clients handle `$ref` poorly and MCP tools must stand alone).
//!
//! NB: inlining must terminate on hostile and cyclic input. Three guards:
//! - a `$ref` already being expanded higher up (a cycle) is cut and replaced
//!   by an open schema whose description names the ref;
//! - a node budget per top-level schema: past it, further refs are cut the
//!   same way (keeps GitHub-sized APIs from producing megabyte schemas);
//! - a nesting depth limit, so the walk's stack is bounded whatever the
//!   document.
//!
//! Expansions that did not depend on the current stack are memoised, which
//! keeps large specs (thousands of refs) linear rather than exponential, and
//! shared rather than copied ([`Node::Shared`]).
//!
//! This file is the walk alone (refs, memo, budget, one schema object's
//! keywords); what single keywords become is in `keywords`, and the
//! questions the request plan asks of a built schema in `shape`.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::node::{object, Node};

mod keywords;
mod shape;

use crate::model::{Location, Warning, WarningCode};
use crate::spec::{ref_pointer, Document, Version};
use keywords::{convert_type, dedup, is_open, may_be_array, ref_name, scalar_keyword_ok, t_value};
pub use shape::{flat_property_names, is_object_schema, make_nullable, take_flat};

/// Which side of the call a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Arguments: `readOnly` properties are dropped.
    Request,
    /// Results: `writeOnly` properties are dropped.
    Response,
}

/// Nodes one top-level schema may expand to before refs are cut, and how
/// many `$ref`s deep inlining goes. Responses get less: their schemas are
/// only used to validate and to advertise `outputSchema`, and real APIs
/// (Discord, Box) otherwise produce 100+ KiB per tool, which bloats
/// `tools/list` and the gateway's memory. A cut is an open schema, so
/// validation gets looser below it, never wrong.
fn limits(dir: Dir) -> (usize, usize) {
    match dir {
        Dir::Request => (2_500, 8),
        Dir::Response => (600, 3),
    }
}
/// Maximum nesting depth of the walk.
const MAX_DEPTH: usize = 48;

struct Memo<'d> {
    /// Always [`Node::Shared`]: a hit costs a reference count.
    node: Node<'d>,
    nodes: usize,
    /// Whether the expansion met any `$ref` (expanded, shared or cut).
    has_refs: bool,
    /// Walk levels below the ref's target that the expansion reached.
    height: usize,
}

/// Converts schemas of one document; caches expansions across calls.
pub struct SchemaConverter<'d> {
    doc: &'d Document,
    /// Keyed by ref, direction and ref depth (depth cuts depend on it).
    memo: HashMap<(String, Dir, usize), Memo<'d>>,
    /// Refs being expanded, innermost last.
    stack: Vec<String>,
    nodes: usize,
    warned: HashSet<String>,
    pattern_ok: HashMap<String, bool>,
    /// Budget and depth-limit cuts so far in this top-level conversion.
    budget_cuts: usize,
    /// `$ref`s met so far, and the deepest walk level reached (both read
    /// around one expansion, for [`Memo`]).
    refs_seen: usize,
    deepest: usize,
    /// JSON pointer of the node being converted, for warnings. One buffer
    /// pushed and truncated as the walk goes: pointers for every node would
    /// otherwise be a large share of the compile time.
    ptr: String,
    pub warnings: Vec<Warning>,
    /// Expansions as the listed-schema cuts left them.
    pub(super) cuts: super::node::slim::Cuts<'d>,
}

/// Result of converting a subtree: the lowest stack index it was cut at
/// (if any) says whether the result depends on the current stack.
struct Out<'d> {
    node: Node<'d>,
    cut_at: Option<usize>,
}

impl<'d> Out<'d> {
    fn plain(node: Node<'d>) -> Self {
        Out { node, cut_at: None }
    }
}

fn min_cut(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl<'d> SchemaConverter<'d> {
    pub fn new(doc: &'d Document) -> Self {
        SchemaConverter {
            doc,
            memo: HashMap::new(),
            stack: Vec::new(),
            nodes: 0,
            warned: HashSet::new(),
            pattern_ok: HashMap::new(),
            budget_cuts: 0,
            refs_seen: 0,
            deepest: 0,
            ptr: String::new(),
            warnings: Vec::new(),
            cuts: Default::default(),
        }
    }

    /// Converts one top-level schema (a parameter's, a body's, a
    /// response's). `at` is its JSON pointer, used in warnings.
    pub fn convert(&mut self, schema: &'d Value, at: &str, dir: Dir) -> Node<'d> {
        self.nodes = 0;
        self.budget_cuts = 0;
        self.stack.clear();
        self.ptr.clear();
        self.ptr.push_str(at);
        let out = self.walk(schema, dir, 0);
        out.node
    }

    /// Resolves a `$ref` chain to the target schema without converting it.
    /// Used by callers that need to look at a body's shape.
    pub fn deref<'a>(&'a self, schema: &'a Value) -> &'a Value {
        let mut cur = schema;
        for _ in 0..16 {
            match cur.get("$ref").and_then(Value::as_str) {
                Some(r) => match ref_pointer(r).and_then(|p| self.doc.root.pointer(&p)) {
                    Some(t) => cur = t,
                    None => return cur,
                },
                None => return cur,
            }
        }
        cur
    }

    /// A `$ref` as the document has it: a converted 2.0 document's refs
    /// point into its 3.0 shape.
    fn as_written<'r>(&self, r: &'r str) -> Cow<'r, str> {
        match ref_pointer(r) {
            Some(p) if self.doc.version == Version::Swagger2 => {
                Cow::Owned(format!("#{}", self.doc.origins.original(&p)))
            }
            _ => Cow::Borrowed(r),
        }
    }

    /// Records a warning at the current pointer, once per `key`.
    fn warn_once(&mut self, key: String, code: WarningCode, message: String) {
        if self.warned.insert(key) {
            self.warnings.push(Warning {
                code,
                message,
                at: Some(Location::Document {
                    pointer: self.ptr.clone(),
                }),
            });
        }
    }

    /// Appends one escaped pointer token; returns the length to truncate
    /// back to.
    fn enter(&mut self, token: &str) -> usize {
        let len = self.ptr.len();
        self.ptr.push('/');
        for c in token.chars() {
            match c {
                '~' => self.ptr.push_str("~0"),
                '/' => self.ptr.push_str("~1"),
                c => self.ptr.push(c),
            }
        }
        len
    }

    fn enter_index(&mut self, i: usize) -> usize {
        use std::fmt::Write;
        let len = self.ptr.len();
        let _ = write!(self.ptr, "/{i}");
        len
    }

    fn open_schema(description: String) -> Node<'d> {
        let mut m = object(1);
        m.insert("description".into(), Node::string(description));
        Node::Object(m)
    }

    /// Marks that a budget cut happened during the current top-level
    /// conversion; such expansions depend on the budget left and are never
    /// memoised.
    fn walk(&mut self, schema: &'d Value, dir: Dir, depth: usize) -> Out<'d> {
        self.nodes += 1;
        self.deepest = self.deepest.max(depth);
        let obj = match schema {
            Value::Bool(_) => return Out::plain(Node::borrowed(schema)),
            Value::Object(o) => o,
            // Not a schema at all: the most honest conversion is "anything".
            _ => return Out::plain(Node::default()),
        };
        if depth > MAX_DEPTH {
            self.warn_once(
                format!("depth:{}", self.ptr),
                WarningCode::SchemaTooDeep,
                format!("schema nesting deeper than {MAX_DEPTH} levels was cut"),
            );
            self.budget_cuts += 1;
            return Out::plain(Self::open_schema(format!(
                "Not expanded: nesting deeper than {MAX_DEPTH} levels."
            )));
        }
        if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
            let mut out = self.expand_ref(r, dir, depth);
            // 3.1 allows keywords beside $ref; 3.0 says to ignore them, but
            // descriptions next to refs are common and harmless to keep.
            // Only then is the shared expansion copied (one level deep).
            const SIBLINGS: [&str; 5] =
                ["description", "title", "default", "deprecated", "example"];
            let nullable = obj.get("nullable") == Some(&Value::Bool(true));
            if nullable || SIBLINGS.iter().any(|k| obj.contains_key(*k)) {
                if let Some(target) = out.node.object_mut() {
                    for key in SIBLINGS {
                        if let Some(v) = obj.get(key) {
                            let (k, v) = if key == "example" {
                                ("examples", Node::owned(Value::Array(vec![v.clone()])))
                            } else {
                                (key, Node::borrowed(v))
                            };
                            target.insert(k.into(), v);
                        }
                    }
                    if nullable {
                        let inner = std::mem::take(target);
                        out.node = make_nullable(inner);
                    }
                }
            }
            return out;
        }
        self.walk_object(obj, dir, depth)
    }

    fn expand_ref(&mut self, r: &str, dir: Dir, depth: usize) -> Out<'d> {
        self.refs_seen += 1;
        let Some(ptr) = ref_pointer(r) else {
            // External refs were refused at load time unless allowed; an
            // allowed one cannot be fetched by a pure compiler.
            return Out::plain(Self::open_schema(format!(
                "Not expanded: external reference {r}."
            )));
        };
        if let Some(i) = self.stack.iter().position(|s| *s == ptr) {
            self.warn_once(
                format!("cycle:{ptr}"),
                WarningCode::CircularRef,
                format!(
                    "circular reference {} is cut where it recurs (open schema)",
                    self.as_written(r)
                ),
            );
            return Out {
                node: Self::open_schema(format!(
                    "Circular reference to {}; not expanded.",
                    ref_name(r)
                )),
                cut_at: Some(i),
            };
        }
        let (budget, max_refs) = limits(dir);
        let level = self.stack.len();
        if level >= max_refs {
            return Out::plain(Self::open_schema(format!(
                "{} (not expanded: nested deeper than {max_refs} references).",
                ref_name(r)
            )));
        }
        if let Some(m) = self.memo.get(&(ptr.clone(), dir, level)) {
            // An expansion that does not fit the budget left is walked
            // again below, where inner refs may now be cut. With no refs
            // inside and no depth cut possible, that walk would build the
            // very same tree: share it instead (one 5,000-property schema
            // used by 800 operations was otherwise rebuilt and rendered
            // for each of them).
            let same_as_rewalk =
                !m.has_refs && self.nodes < budget && depth + 1 + m.height <= MAX_DEPTH;
            if self.nodes + m.nodes <= budget || same_as_rewalk {
                self.nodes += m.nodes;
                return Out::plain(m.node.clone());
            }
        }
        if self.nodes >= budget {
            self.warn_once(
                format!("budget:{}", self.ptr),
                WarningCode::SchemaTooLarge,
                format!("schema exceeds {budget} nodes; further references are not expanded"),
            );
            self.budget_cuts += 1;
            return Out::plain(Self::open_schema(format!(
                "{}; not expanded (schema size limit).",
                ref_name(r)
            )));
        }
        let Some(target) = self.doc.root.pointer(&ptr) else {
            self.warn_once(
                format!("dangling:{ptr}"),
                WarningCode::DanglingRef,
                format!(
                    "$ref {} does not resolve; replaced by an open schema",
                    self.as_written(r)
                ),
            );
            return Out::plain(Self::open_schema(format!("Unresolved reference {r}.")));
        };
        let before = self.nodes;
        let cuts_before = self.budget_cuts;
        let refs_before = self.refs_seen;
        let deepest_before = std::mem::replace(&mut self.deepest, depth + 1);
        self.stack.push(ptr.clone());
        let saved = std::mem::replace(&mut self.ptr, ptr.clone());
        let out = self.walk(target, dir, depth + 1);
        self.ptr = saved;
        self.stack.pop();
        let height = self.deepest - (depth + 1);
        self.deepest = self.deepest.max(deepest_before);
        // Independent of the stack when every cycle cut inside points at
        // this ref or deeper, and of the budget when none was hit.
        let independent = out.cut_at.is_none_or(|i| i >= level) && self.budget_cuts == cuts_before;
        let node = if independent {
            let node = out.node.share();
            self.memo.insert(
                (ptr, dir, level),
                Memo {
                    node: node.clone(),
                    nodes: self.nodes - before,
                    has_refs: self.refs_seen != refs_before,
                    height,
                },
            );
            node
        } else {
            out.node
        };
        Out {
            node,
            // Cuts pointing at this ref or deeper are resolved here.
            cut_at: out.cut_at.filter(|&i| i < level),
        }
    }

    fn walk_object(&mut self, obj: &'d Map<String, Value>, dir: Dir, depth: usize) -> Out<'d> {
        let v30 = self.doc.version != Version::OpenApi31;
        // Sized up front: growing an index map reallocates both its entries
        // and its table, and this runs for every node of every schema.
        let mut out = object(obj.len());
        let mut cut = None;
        let mut dropped_props: Vec<String> = Vec::new();
        let base_len = self.ptr.len();
        for (key, v) in obj {
            // Reset first: match arms below `continue` early.
            self.ptr.truncate(base_len);
            self.enter(key);
            match key.as_str() {
                "type" => {
                    if let Some(t) = convert_type(v) {
                        if t == "file-as-string" {
                            out.insert("type".into(), Node::string("string"));
                            out.insert("format".into(), Node::string("binary"));
                        } else {
                            out.insert("type".into(), t_value(t, v));
                        }
                    } else {
                        self.warn_once(
                            format!("type:{}", self.ptr),
                            WarningCode::SchemaKeywordDropped,
                            format!("invalid type {v} dropped"),
                        );
                    }
                }
                "properties" | "patternProperties" | "dependentSchemas" => {
                    let Some(props) = v.as_object() else { continue };
                    let mut m = object(props.len());
                    for (name, s) in props {
                        if key == "properties" && self.hidden_in(s, dir) {
                            dropped_props.push(name.clone());
                            continue;
                        }
                        if key == "patternProperties" && !self.pattern_valid(name) {
                            continue;
                        }
                        let l = self.enter(name);
                        let o = self.walk(s, dir, depth + 1);
                        self.ptr.truncate(l);
                        cut = min_cut(cut, o.cut_at);
                        m.insert(Cow::Borrowed(name.as_str()), o.node);
                    }
                    out.insert(Cow::Borrowed(key.as_str()), Node::Object(m));
                }
                "items" => {
                    if let Value::Array(items) = v {
                        // 2.0/3.0 tuple form.
                        let mut arr = Vec::new();
                        for (i, s) in items.iter().enumerate() {
                            let l = self.enter_index(i);
                            let o = self.walk(s, dir, depth + 1);
                            self.ptr.truncate(l);
                            cut = min_cut(cut, o.cut_at);
                            arr.push(o.node);
                        }
                        out.insert("prefixItems".into(), Node::Array(arr));
                    } else {
                        let o = self.walk(v, dir, depth + 1);
                        cut = min_cut(cut, o.cut_at);
                        out.insert(Cow::Borrowed(key.as_str()), o.node);
                    }
                }
                "additionalProperties"
                | "unevaluatedProperties"
                | "unevaluatedItems"
                | "not"
                | "contains"
                | "propertyNames"
                | "if"
                | "then"
                | "else" => {
                    let o = self.walk(v, dir, depth + 1);
                    cut = min_cut(cut, o.cut_at);
                    out.insert(Cow::Borrowed(key.as_str()), o.node);
                }
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                    let Some(items) = v.as_array() else { continue };
                    if items.is_empty() {
                        continue;
                    }
                    let mut arr = Vec::with_capacity(items.len());
                    for (i, s) in items.iter().enumerate() {
                        let l = self.enter_index(i);
                        let o = self.walk(s, dir, depth + 1);
                        self.ptr.truncate(l);
                        cut = min_cut(cut, o.cut_at);
                        arr.push(o.node);
                    }
                    // NB: a oneOf with an open branch (a cut ref, or an
                    // empty schema) can never hold: every instance matches
                    // that branch and any other it fits. anyOf keeps the
                    // intent and stays satisfiable.
                    let key: Cow<'d, str> = if key == "oneOf" && arr.iter().any(is_open) {
                        Cow::Borrowed("anyOf")
                    } else {
                        Cow::Borrowed(key.as_str())
                    };
                    match out.get_mut(&key) {
                        // Both oneOf (degraded) and anyOf present.
                        Some(Node::Array(existing)) => {
                            let mut all = vec![
                                Node::Object(
                                    [(key.clone(), Node::Array(std::mem::take(existing)))]
                                        .into_iter()
                                        .collect(),
                                ),
                                Node::Object(
                                    [(key.clone(), Node::Array(arr))].into_iter().collect(),
                                ),
                            ];
                            // swap_remove: the order serde_json's map gave.
                            out.swap_remove(key.as_ref());
                            match out.get_mut("allOf") {
                                Some(Node::Array(a)) => a.append(&mut all),
                                _ => {
                                    out.insert("allOf".into(), Node::Array(all));
                                }
                            }
                        }
                        _ => {
                            out.insert(key, Node::Array(arr));
                        }
                    }
                }
                "required" => {
                    if let Some(items) = v.as_array() {
                        let names: Vec<Value> =
                            items.iter().filter(|x| x.is_string()).cloned().collect();
                        out.insert(
                            Cow::Borrowed(key.as_str()),
                            Node::owned(Value::Array(dedup(names))),
                        );
                    } else {
                        self.warn_once(
                            format!("required:{}", self.ptr),
                            WarningCode::SchemaKeywordDropped,
                            format!("`required: {v}` is not an array of names; dropped"),
                        );
                    }
                }
                "pattern" => {
                    if let Some(p) = v.as_str() {
                        if self.pattern_valid(p) {
                            out.insert(Cow::Borrowed(key.as_str()), Node::borrowed(v));
                        } else {
                            self.warn_once(
                                format!("pattern:{}", self.ptr),
                                WarningCode::PatternDropped,
                                format!("pattern {p:?} is not a valid ECMA-262 regex; dropped"),
                            );
                        }
                    }
                }
                "enum" => {
                    if let Some(a) = v.as_array().filter(|a| !a.is_empty()) {
                        out.insert(
                            Cow::Borrowed(key.as_str()),
                            Node::owned(Value::Array(dedup(a.clone()))),
                        );
                    }
                }
                "example" if !obj.contains_key("examples") => {
                    out.insert(
                        "examples".into(),
                        Node::owned(Value::Array(vec![v.clone()])),
                    );
                }
                // Only arrays have items to be unique; on anything else
                // the keyword asserts nothing, and its author likely meant
                // an array.
                "uniqueItems" if !may_be_array(obj.get("type")) => {
                    self.warn_once(
                        format!("uniqueItems:{}", self.ptr),
                        WarningCode::SchemaKeywordDropped,
                        format!(
                            "`uniqueItems` on a schema of type {} has no effect; dropped",
                            obj.get("type").unwrap_or(&Value::Null)
                        ),
                    );
                }
                _ if scalar_keyword_ok(key, v) => {
                    out.insert(Cow::Borrowed(key.as_str()), Node::borrowed(v));
                }
                // OpenAPI-only (`nullable` handled below, `discriminator`,
                // `xml`, `externalDocs`), extensions, and identifiers that
                // would change the base URI of an inlined schema.
                _ => {}
            }
        }
        self.ptr.truncate(base_len);
        if v30 {
            for (flag, bound) in [
                ("exclusiveMinimum", "minimum"),
                ("exclusiveMaximum", "maximum"),
            ] {
                if obj.get(flag) == Some(&Value::Bool(true)) {
                    if let Some(b) = out.swap_remove(bound) {
                        out.insert(flag.into(), b);
                    }
                }
            }
        }
        if !dropped_props.is_empty() {
            if let Some(Node::Leaf(req)) = out.get_mut("required") {
                if let Value::Array(req) = req.to_mut() {
                    let dropped: HashSet<&str> = dropped_props.iter().map(String::as_str).collect();
                    req.retain(|r| !r.as_str().is_some_and(|s| dropped.contains(s)));
                }
            }
        }
        if matches!(out.get("required"), Some(Node::Leaf(a)) if a.as_array().is_some_and(Vec::is_empty))
        {
            out.swap_remove("required");
        }
        let node = if obj.get("nullable") == Some(&Value::Bool(true)) {
            make_nullable(out)
        } else {
            Node::Object(out)
        };
        Out { node, cut_at: cut }
    }

    /// Whether a property schema is `readOnly` (request side) or `writeOnly`
    /// (response side) and so left out.
    fn hidden_in(&self, s: &Value, dir: Dir) -> bool {
        let s = self.deref(s);
        let key = match dir {
            Dir::Request => "readOnly",
            Dir::Response => "writeOnly",
        };
        s.get(key) == Some(&Value::Bool(true))
    }

    fn pattern_valid(&mut self, p: &str) -> bool {
        if let Some(&ok) = self.pattern_ok.get(p) {
            return ok;
        }
        let ok = jsonschema::draft202012::new(&serde_json::json!({ "pattern": p })).is_ok();
        self.pattern_ok.insert(p.to_string(), ok);
        ok
    }
}
