//! Synthetic instances generated from JSON Schemas, for dry-running
//! transforms and for tests.
//!
//! # Contract
//!
//! [`instances`] takes a self-contained JSON Schema 2020-12 (local `$ref`s
//! into the same document are followed, others are treated as `{}`) and
//! returns up to [`MAX_INSTANCES`] distinct instances, in this order:
//!
//! 1. one with every declared property,
//! 2. one with the required properties only,
//! 3. one per alternative branch of each `oneOf`/`anyOf` met while building
//!    the first instance (the first instance uses branch 0 everywhere; each
//!    further one switches a single choice to another branch).
//!
//! Each value comes from, in order: `const`, `examples[0]`, `example`,
//! `default`, `enum[0]`, else a value built from the type and its
//! constraints (lengths, formats, patterns, bounds, `multipleOf`, item and
//! property counts). Type unions pick the first non-`null` type; a schema
//! without `type` gets one inferred from its keywords. `allOf` branches are
//! merged (properties, `required`, bounds).
//!
//! Examples and defaults are used only when they validate against their
//! (sub)schema; `const` and `enum[0]` always are.
//!
//! Best effort, not a solver: the instances are valid for the usual shapes
//! of API schemas, but a complex `pattern`, `not`, `if`/`then`, overlapping
//! `oneOf` branches or contradictory constraints can yield invalid ones
//! (a `oneOf`/`anyOf` whose chosen branch yields an invalid value is retried
//! with the other branches). It always terminates and never panics: beyond [`MAX_DEPTH`]
//! levels only required content is added,
//! recursion stops at [`HARD_MAX_DEPTH`] (reachable only through `$ref`
//! cycles), and the size of
//! each instance is capped too (lengths and counts are clamped).
//!
//! Modules: `allof` merges the branches of an `allOf`, `scalar` builds
//! numbers and strings within their constraints, `pattern` writes a string
//! that matches a regex.

mod allof;
mod pattern;
mod scalar;

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use allof::merge;
use scalar::{integer, number, string};

/// Maximum number of instances returned.
pub const MAX_INSTANCES: usize = 16;

/// Nesting up to which optional properties are generated; deeper levels get
/// only what validity requires.
pub const MAX_DEPTH: usize = 12;
/// Nesting at which generation stops (objects and arrays left empty).
pub const HARD_MAX_DEPTH: usize = 64;

/// Generated nodes per instance after which only required content is added,
/// and the absolute bound (keeps `minItems` chains from exploding).
const MAX_NODES: usize = 10_000;
const HARD_MAX_NODES: usize = 100_000;
/// Clamp for `minLength` and `minItems`.
const MAX_LEN: usize = 4096;
const MAX_ITEMS: usize = 64;

/// Instances of `schema` (a self-contained JSON Schema 2020-12): one with all
/// properties, one with required properties only, one per oneOf/anyOf branch.
/// Values come from example → default → `enum[0]` → type fallback.
pub fn instances(schema: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut push = |v: Value, out: &mut Vec<Value>| {
        if out.len() < MAX_INSTANCES && seen.insert(v.to_string()) {
            out.push(v);
        }
    };

    let none = HashMap::new();
    let mut full = Gen::new(schema, Mode::All, &none);
    let first = full.value(schema, 0, "");
    let choices = std::mem::take(&mut full.choices);
    push(first, &mut out);

    let mut required = Gen::new(schema, Mode::Required, &none);
    let v = required.value(schema, 0, "");
    push(v, &mut out);

    for (key, branches) in choices {
        for branch in 1..branches {
            if out.len() >= MAX_INSTANCES {
                return out;
            }
            let select = HashMap::from([(key.clone(), branch)]);
            let mut g = Gen::new(schema, Mode::All, &select);
            let v = g.value(schema, 0, "");
            push(v, &mut out);
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every property, at least one array item.
    All,
    /// Required properties, `minItems` items.
    Required,
}

struct Gen<'a> {
    root: &'a Value,
    mode: Mode,
    /// Branch to take at a choice point (`instance path#keyword`).
    select: &'a HashMap<String, usize>,
    /// Choice points met, with their number of branches, in order.
    choices: Vec<(String, usize)>,
    /// Branches forced while retrying an overlapping `oneOf`.
    overrides: HashMap<String, usize>,
    nodes: usize,
}

impl<'a> Gen<'a> {
    fn new(root: &'a Value, mode: Mode, select: &'a HashMap<String, usize>) -> Self {
        Gen {
            root,
            mode,
            select,
            choices: Vec::new(),
            overrides: HashMap::new(),
            nodes: 0,
        }
    }

    /// `path` is the instance location (JSON pointer), which names choice
    /// points stably across runs.
    fn value(&mut self, schema: &Value, depth: usize, path: &str) -> Value {
        let v = self.value_once(schema, depth, path);
        // A value built from one `oneOf` branch may match another one too
        // (`oneOf: [integer, number]`), or a branch may be unsatisfiable
        // (`pattern: ".^"`, a `null` branch under an object `allOf`); then
        // try the branches of the choices made here, in order.
        let local: Vec<(String, usize)> = ["oneOf", "anyOf"]
            .iter()
            .map(|kw| format!("{path}#{kw}"))
            .filter_map(|key| {
                self.choices
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(k, n)| (k.clone(), *n))
            })
            .collect();
        if local.is_empty() || depth >= MAX_DEPTH || contains_ref(schema) {
            return v;
        }
        let Ok(validator) = jsonschema::validator_for(schema) else {
            return v;
        };
        if validator.is_valid(&v) {
            return v;
        }
        for (key, branches) in local {
            for i in 0..branches {
                self.overrides.insert(key.clone(), i);
                let alt = self.value_once(schema, depth, path);
                self.overrides.remove(&key);
                if validator.is_valid(&alt) {
                    return alt;
                }
            }
        }
        v
    }

    fn value_once(&mut self, schema: &Value, depth: usize, path: &str) -> Value {
        self.nodes += 1;
        let schema = self.flatten(schema, path);
        let Some(s) = schema.as_object() else {
            // `true` accepts anything; `false` nothing (no valid instance).
            return Value::Null;
        };
        if let Some(v) = literal(s) {
            return v;
        }
        // Past the soft caps only what validity needs is generated (required
        // properties, `minItems` items); past the hard cap nothing, which
        // only `$ref` cycles reach since the schema is otherwise a finite tree.
        let over = depth >= HARD_MAX_DEPTH || self.nodes >= HARD_MAX_NODES;
        let mode = if depth >= MAX_DEPTH || self.nodes >= MAX_NODES {
            Mode::Required
        } else {
            self.mode
        };
        match pick_type(s).as_str() {
            "null" => Value::Null,
            "boolean" => Value::Bool(true),
            "integer" => integer(s),
            "number" => number(s),
            "string" => string(s),
            "array" if over => Value::Array(Vec::new()),
            "array" => self.array(s, depth, path, mode),
            "object" if over => Value::Object(Map::new()),
            "object" => self.object(s, depth, path, mode),
            _ => Value::Null,
        }
    }

    /// Resolves `$ref`, merges `allOf` and picks `oneOf`/`anyOf` branches
    /// until none is left, giving one schema with the relevant keywords.
    fn flatten(&mut self, schema: &Value, path: &str) -> Value {
        let mut current = schema.clone();
        // Each round removes one keyword or follows one `$ref`; the bound
        // stops reference cycles.
        for _ in 0..(4 * MAX_DEPTH) {
            let Some(obj) = current.as_object_mut() else {
                return current;
            };
            if let Some(reference) = obj.remove("$ref") {
                let target = reference
                    .as_str()
                    .and_then(|r| r.strip_prefix('#'))
                    .and_then(|p| self.root.pointer(p))
                    .cloned()
                    .unwrap_or(Value::Bool(true));
                current = merge(current, target);
                continue;
            }
            if let Some(Value::Array(branches)) = obj.remove("allOf") {
                for b in branches {
                    current = merge(current, b);
                }
                continue;
            }
            let choice = ["oneOf", "anyOf"]
                .into_iter()
                .find(|k| obj.contains_key(*k));
            if let Some(kw) = choice {
                let branches = match obj.remove(kw) {
                    Some(Value::Array(b)) if !b.is_empty() => b,
                    _ => continue,
                };
                let key = format!("{path}#{kw}");
                if branches.len() > 1 && !self.choices.iter().any(|(k, _)| *k == key) {
                    self.choices.push((key.clone(), branches.len()));
                }
                let i = self
                    .overrides
                    .get(&key)
                    .or_else(|| self.select.get(&key))
                    .copied()
                    .unwrap_or(0);
                let branch = branches.into_iter().nth(i).unwrap_or(Value::Bool(true));
                current = merge(current, branch);
                continue;
            }
            return current;
        }
        current
    }

    fn array(&mut self, s: &Map<String, Value>, depth: usize, path: &str, mode: Mode) -> Value {
        let min = count(s, "minItems").unwrap_or(0).min(MAX_ITEMS);
        let max = count(s, "maxItems").unwrap_or(usize::MAX);
        let prefix: &[Value] = match s.get("prefixItems") {
            Some(Value::Array(p)) => p,
            _ => &[],
        };
        let wanted = match mode {
            Mode::All => min.max(1).max(prefix.len().min(MAX_ITEMS)),
            Mode::Required => min,
        };
        let n = wanted.min(max);
        let items = s.get("items").cloned().unwrap_or(Value::Bool(true));
        let unique = s.get("uniqueItems") == Some(&Value::Bool(true));
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            if self.nodes >= HARD_MAX_NODES {
                break;
            }
            let item_path = format!("{path}/{i}");
            let schema = prefix.get(i).unwrap_or(&items);
            let mut v = self.value(schema, depth + 1, &item_path);
            if unique && out.contains(&v) {
                v = distinct(schema, &v, i, &out);
            }
            out.push(v);
        }
        Value::Array(out)
    }

    fn object(&mut self, s: &Map<String, Value>, depth: usize, path: &str, mode: Mode) -> Value {
        let empty = Map::new();
        let props = s
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let min_props = count(s, "minProperties").unwrap_or(0);

        let mut names: Vec<&str> = Vec::new();
        for name in props.keys() {
            if mode == Mode::All || required.contains(&name.as_str()) {
                names.push(name);
            }
        }
        for name in &required {
            if !names.contains(name) {
                names.push(name);
            }
        }
        for name in props.keys() {
            if names.len() >= min_props {
                break;
            }
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }

        let extra = match s.get("additionalProperties") {
            Some(v @ Value::Object(_)) => v.clone(),
            _ => Value::Bool(true),
        };
        let mut out = Map::new();
        for name in names {
            let schema = props.get(name).unwrap_or(&extra);
            let v = self.value(schema, depth + 1, &format!("{path}/{}", escape(name)));
            out.insert(name.to_string(), v);
        }
        // `minProperties` beyond the declared properties: invent keys, when
        // additional properties are allowed.
        let open = s.get("additionalProperties") != Some(&Value::Bool(false));
        let mut i = 1;
        while open && out.len() < min_props.min(MAX_ITEMS) {
            let name = format!("key{i}");
            i += 1;
            if out.contains_key(&name) {
                continue;
            }
            let v = self.value(&extra, depth + 1, &format!("{path}/{name}"));
            out.insert(name, v);
        }
        Value::Object(out)
    }
}

fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// A value given by the schema itself. Examples and defaults in real
/// documents are often wrong (a JSON string where an object is declared, a
/// value outside the enum), so they are used only if they validate.
fn literal(s: &Map<String, Value>) -> Option<Value> {
    if let Some(c) = s.get("const") {
        return Some(c.clone());
    }
    let first_example = s
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first());
    let candidates = [first_example, s.get("example"), s.get("default")];
    for c in candidates.into_iter().flatten() {
        if acceptable(c, s) {
            return Some(c.clone());
        }
    }
    s.get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
        .cloned()
}

fn acceptable(v: &Value, s: &Map<String, Value>) -> bool {
    if let Some(Value::Array(allowed)) = s.get("enum") {
        if !allowed.contains(v) {
            return false;
        }
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| has_type(v, t)) {
        return false;
    }
    // Full check, which compiles a validator, only when there is more to
    // check and the schema stands alone (no references to resolve).
    const CONSTRAINTS: &[&str] = &[
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "const",
        "dependentRequired",
        "dependentSchemas",
    ];
    if !CONSTRAINTS.iter().any(|k| s.contains_key(*k)) {
        return true;
    }
    let schema = Value::Object(s.clone());
    if contains_ref(&schema) {
        return true;
    }
    jsonschema::validator_for(&schema).map_or(true, |validator| validator.is_valid(v))
}

fn has_type(v: &Value, t: &str) -> bool {
    match (t, v) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn contains_ref(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("$ref") || m.values().any(contains_ref),
        Value::Array(a) => a.iter().any(contains_ref),
        _ => false,
    }
}

fn pick_type(s: &Map<String, Value>) -> String {
    match s.get("type") {
        Some(Value::String(t)) => return t.clone(),
        Some(Value::Array(ts)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            if let Some(t) = names.iter().find(|t| **t != "null") {
                return t.to_string();
            }
            if !names.is_empty() {
                return "null".into();
            }
        }
        _ => {}
    }
    let has = |keys: &[&str]| keys.iter().any(|k| s.contains_key(*k));
    if has(&[
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
        "patternProperties",
    ]) {
        "object".into()
    } else if has(&[
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
    ]) {
        "array".into()
    } else if has(&["minLength", "maxLength", "pattern", "format"]) {
        "string".into()
    } else if has(&[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ]) {
        "number".into()
    } else {
        "null".into()
    }
}

fn count(s: &Map<String, Value>, key: &str) -> Option<usize> {
    let v = s.get(key)?;
    v.as_u64()
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as usize))
}
/// Another valid item for arrays with `uniqueItems` whose generated items
/// collide.
fn distinct(schema: &Value, v: &Value, i: usize, taken: &[Value]) -> Value {
    let candidates: Vec<Value> = match v {
        Value::Number(n) if n.is_i64() => {
            let n = n.as_i64().unwrap_or(0);
            let i = i64::try_from(i).unwrap_or(i64::MAX);
            [n.saturating_add(i), n.saturating_sub(i), i]
                .into_iter()
                .map(Value::from)
                .collect()
        }
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            [f + i as f64, f - i as f64, f / (i as f64 + 1.0)]
                .into_iter()
                .map(Value::from)
                .collect()
        }
        Value::String(s) => [
            format!("{s}{i}"),
            format!("{i}{s}"),
            i.to_string(),
            format!("{s}{s}"),
        ]
        .into_iter()
        .map(Value::String)
        .collect(),
        other => vec![other.clone()],
    };
    let validator = if contains_ref(schema) {
        None
    } else {
        jsonschema::validator_for(schema).ok()
    };
    let valid = |c: &Value| validator.as_ref().is_none_or(|val| val.is_valid(c));
    candidates
        .iter()
        .find(|c| !taken.contains(c) && valid(c))
        .or_else(|| candidates.first())
        .cloned()
        .unwrap_or_else(|| v.clone())
}

#[cfg(test)]
mod tests;
