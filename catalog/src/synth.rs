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

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

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
/// Values come from example → default → enum[0] → type fallback.
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

fn num(s: &Map<String, Value>, key: &str) -> Option<f64> {
    s.get(key).and_then(Value::as_f64).filter(|f| f.is_finite())
}

/// A numeric bound and whether it is exclusive.
type Bound = (f64, bool);

/// Lower/upper bounds with exclusiveness, accepting both the 2020-12 numeric
/// form and the draft-4 boolean form of `exclusiveMinimum`/`exclusiveMaximum`.
fn bounds(s: &Map<String, Value>) -> (Option<Bound>, Option<Bound>) {
    let mut lo = num(s, "minimum").map(|m| (m, s.get("exclusiveMinimum") == Some(&json!(true))));
    if let Some(e) = num(s, "exclusiveMinimum") {
        if lo.is_none_or(|(m, _)| e >= m) {
            lo = Some((e, true));
        }
    }
    let mut hi = num(s, "maximum").map(|m| (m, s.get("exclusiveMaximum") == Some(&json!(true))));
    if let Some(e) = num(s, "exclusiveMaximum") {
        if hi.is_none_or(|(m, _)| e <= m) {
            hi = Some((e, true));
        }
    }
    (lo, hi)
}

fn integer(s: &Map<String, Value>) -> Value {
    let (lo, hi) = bounds(s);
    let lo = lo.map(|(m, excl)| {
        let c = m.ceil();
        if excl && c == m {
            c + 1.0
        } else {
            c
        }
    });
    let hi = hi.map(|(m, excl)| {
        let f = m.floor();
        if excl && f == m {
            f - 1.0
        } else {
            f
        }
    });
    let step = num(s, "multipleOf").filter(|m| *m > 0.0 && m.fract() == 0.0);
    let v = choose(lo, hi, 1.0, step);
    if v.abs() < 9.0e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

fn number(s: &Map<String, Value>) -> Value {
    let (lo, hi) = bounds(s);
    let step = num(s, "multipleOf").filter(|m| *m > 0.0);
    // Exclusive bounds: move inside by a margin that fits between them.
    let gap = match (lo, hi) {
        (Some((l, _)), Some((h, _))) if h > l => ((h - l) / 2.0).min(1.0),
        _ => 1.0,
    };
    let lo = lo.map(|(m, excl)| if excl { m + gap } else { m });
    let hi = hi.map(|(m, excl)| if excl { m - gap } else { m });
    let v = choose(lo, hi, 1.0, step);
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

/// `preferred` if within bounds, else the lowest allowed value; rounded up
/// to a multiple of `step` when given.
fn choose(lo: Option<f64>, hi: Option<f64>, preferred: f64, step: Option<f64>) -> f64 {
    let mut v = match (lo, hi) {
        (Some(l), _) if preferred < l => l,
        (_, Some(h)) if preferred > h => h,
        _ => preferred,
    };
    if let Some(m) = step {
        let up = (v / m).ceil() * m;
        let down = (v / m).floor() * m;
        v = if hi.is_none_or(|h| up <= h) { up } else { down };
        if !v.is_finite() {
            v = 0.0;
        }
    }
    v
}

fn string(s: &Map<String, Value>) -> Value {
    let min = count(s, "minLength").unwrap_or(0).min(MAX_LEN);
    let max = count(s, "maxLength").unwrap_or(usize::MAX);
    let fit = |c: &str| {
        let n = c.chars().count();
        n >= min && n <= max
    };
    let format = s.get("format").and_then(Value::as_str).unwrap_or("");
    let formatted = match format {
        "date-time" => Some("2024-01-01T00:00:00Z"),
        "date" => Some("2024-01-01"),
        "time" => Some("00:00:00Z"),
        "duration" => Some("P1D"),
        "email" | "idn-email" => Some("user@example.com"),
        "hostname" | "idn-hostname" => Some("example.com"),
        "ipv4" => Some("192.0.2.1"),
        "ipv6" => Some("2001:db8::1"),
        "uuid" => Some("00000000-0000-4000-8000-000000000000"),
        "uri" | "iri" | "url" => Some("https://example.com/"),
        "uri-reference" | "iri-reference" => Some("/example"),
        "uri-template" => Some("/example/{id}"),
        "json-pointer" => Some("/example"),
        "regex" => Some(".*"),
        // base64 of "example", a multiple of 4 characters.
        "byte" | "binary" | "base64" => Some("ZXhhbXBsZQ=="),
        _ => None,
    };

    let Some(pattern) = s.get("pattern").and_then(Value::as_str) else {
        let base = formatted.unwrap_or("example");
        return Value::String(pad(base, min, max));
    };
    // Prefer a value that matches the pattern; check candidates with the
    // same regex engine the validator uses.
    let matcher = jsonschema::validator_for(&json!({"pattern": pattern})).ok();
    let matches = |c: &str| {
        matcher
            .as_ref()
            .is_none_or(|m| m.is_valid(&Value::String(c.to_string())))
    };
    let mut candidates: Vec<String> = Vec::new();
    if let Some(f) = formatted {
        candidates.push(f.to_string());
    }
    candidates.extend(from_pattern(pattern, min));
    candidates.extend(from_pattern(pattern, 0));
    for base in ["example", "a", "0", "A", "abc", "123", "a1", "x-1", "a_b"] {
        candidates.push(pad(base, min, max));
    }
    if let Some(c) = candidates.iter().find(|c| fit(c) && matches(c)) {
        return Value::String(c.clone());
    }
    if let Some(c) = candidates.iter().find(|c| matches(c)) {
        return Value::String(c.clone());
    }
    Value::String(pad(formatted.unwrap_or("example"), min, max))
}

fn pad(base: &str, min: usize, max: usize) -> String {
    let mut s: String = base.chars().take(max).collect();
    let n = s.chars().count();
    if n < min {
        s.extend(std::iter::repeat_n('x', min - n));
    }
    s
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

/// Merges schema `b` into `a` (allOf semantics, approximately): properties
/// and `required` are united, bounds tightened, other keywords kept from `a`
/// and filled in from `b`.
fn merge(a: Value, b: Value) -> Value {
    let (mut a, b) = match (a, b) {
        (Value::Object(a), Value::Object(b)) => (a, b),
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return Value::Bool(false),
        (Value::Object(a), _) => return Value::Object(a),
        (_, b) => return b,
    };
    for (k, bv) in b {
        let Some(av) = a.remove(&k) else {
            a.insert(k, bv);
            continue;
        };
        let merged = match k.as_str() {
            "properties" => match (av, bv) {
                (Value::Object(mut ap), Value::Object(bp)) => {
                    for (name, schema) in bp {
                        let combined = match ap.remove(&name) {
                            Some(existing) => json!({"allOf": [existing, schema]}),
                            None => schema,
                        };
                        ap.insert(name, combined);
                    }
                    Value::Object(ap)
                }
                (av, _) => av,
            },
            "required" => match (av, bv) {
                (Value::Array(mut ar), Value::Array(br)) => {
                    for r in br {
                        if !ar.contains(&r) {
                            ar.push(r);
                        }
                    }
                    Value::Array(ar)
                }
                (av, _) => av,
            },
            "type" => intersect_types(av, bv),
            "enum" => match (&av, &bv) {
                (Value::Array(ae), Value::Array(be)) => {
                    let both: Vec<Value> = ae.iter().filter(|x| be.contains(x)).cloned().collect();
                    if both.is_empty() {
                        av
                    } else {
                        Value::Array(both)
                    }
                }
                _ => av,
            },
            "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties" => {
                tighten(av, bv, true)
            }
            "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties" => {
                tighten(av, bv, false)
            }
            "items" | "additionalProperties" if av.is_object() && bv.is_object() => {
                json!({"allOf": [av, bv]})
            }
            _ => av,
        };
        a.insert(k, merged);
    }
    Value::Object(a)
}

fn tighten(a: Value, b: Value, larger: bool) -> Value {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if (y > x) == larger && y != x => b,
        _ => a,
    }
}

fn intersect_types(a: Value, b: Value) -> Value {
    let list = |v: &Value| -> Vec<Value> {
        match v {
            Value::Array(a) => a.clone(),
            Value::String(_) => vec![v.clone()],
            _ => Vec::new(),
        }
    };
    let (la, lb) = (list(&a), list(&b));
    let both: Vec<Value> = la
        .iter()
        .filter(|t| {
            lb.contains(t) || (t.as_str() == Some("number") && lb.contains(&json!("integer")))
        })
        .map(|t| {
            if t.as_str() == Some("number") && lb.contains(&json!("integer")) {
                json!("integer")
            } else {
                t.clone()
            }
        })
        .collect();
    match both.len() {
        0 => b,
        1 => both.into_iter().next().unwrap_or(b),
        _ => Value::Array(both),
    }
}

// ------------------------------------------------------- pattern synthesis

/// One regex element with its repetition bounds.
#[derive(Debug, Clone)]
enum Atom {
    Char(char),
    /// Ranges of a character class; `negated` classes pick outside them.
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    Any,
    /// Alternatives of a group; the first is used.
    Group(Vec<Vec<(Atom, usize, usize)>>),
}

/// A string matching `pattern` (a common regex subset) with at least
/// `min_len` characters if the repetitions allow it. `None` for unsupported
/// syntax (backreferences, lookaround, ...).
fn from_pattern(pattern: &str, min_len: usize) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut pos = 0;
    let alts = parse_alts(&chars, &mut pos, 0)?;
    if pos != chars.len() {
        return None;
    }
    let seq = alts.into_iter().next()?;
    let mut out = String::new();
    emit(&seq, min_len, &mut out);
    Some(out)
}

const MAX_REGEX_NESTING: usize = 16;

fn parse_alts(
    c: &[char],
    pos: &mut usize,
    nesting: usize,
) -> Option<Vec<Vec<(Atom, usize, usize)>>> {
    if nesting > MAX_REGEX_NESTING {
        return None;
    }
    let mut alts = vec![Vec::new()];
    while let Some(&ch) = c.get(*pos) {
        let atom = match ch {
            ')' => break,
            '|' => {
                *pos += 1;
                alts.push(Vec::new());
                continue;
            }
            '^' | '$' => {
                *pos += 1;
                continue;
            }
            '(' => {
                *pos += 1;
                if c.get(*pos) == Some(&'?') {
                    // Only non-capturing groups are understood.
                    if c.get(*pos + 1) == Some(&':') {
                        *pos += 2;
                    } else {
                        return None;
                    }
                }
                let inner = parse_alts(c, pos, nesting + 1)?;
                if c.get(*pos) != Some(&')') {
                    return None;
                }
                *pos += 1;
                Atom::Group(inner)
            }
            '[' => {
                *pos += 1;
                parse_class(c, pos)?
            }
            '.' => {
                *pos += 1;
                Atom::Any
            }
            '\\' => {
                *pos += 1;
                let e = *c.get(*pos)?;
                *pos += 1;
                escape_atom(e)?
            }
            '*' | '+' | '?' | '{' => return None,
            other => {
                *pos += 1;
                Atom::Char(other)
            }
        };
        let (min, max) = parse_quantifier(c, pos);
        alts.last_mut()?.push((atom, min, max));
    }
    Some(alts)
}

fn escape_atom(e: char) -> Option<Atom> {
    Some(match e {
        'd' => Atom::Class {
            ranges: vec![('0', '9')],
            negated: false,
        },
        'w' => Atom::Class {
            ranges: vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')],
            negated: false,
        },
        's' => Atom::Char(' '),
        'D' | 'W' | 'S' => Atom::Class {
            ranges: match e {
                'D' => vec![('0', '9')],
                'W' => vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')],
                _ => vec![(' ', ' '), ('\t', '\r')],
            },
            negated: true,
        },
        'n' => Atom::Char('\n'),
        't' => Atom::Char('\t'),
        'b' | 'B' | 'A' | 'z' | 'Z' => Atom::Group(vec![Vec::new()]),
        c if c.is_ascii_digit() => return None,
        c if c.is_ascii_alphabetic() => return None,
        c => Atom::Char(c),
    })
}

fn parse_class(c: &[char], pos: &mut usize) -> Option<Atom> {
    let negated = c.get(*pos) == Some(&'^');
    if negated {
        *pos += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let ch = *c.get(*pos)?;
        *pos += 1;
        if ch == ']' && !first {
            break;
        }
        first = false;
        let lo = if ch == '\\' {
            let e = *c.get(*pos)?;
            *pos += 1;
            match escape_atom(e)? {
                Atom::Char(x) => x,
                Atom::Class {
                    ranges: r,
                    negated: false,
                } => {
                    ranges.extend(r);
                    continue;
                }
                _ => continue,
            }
        } else {
            ch
        };
        if c.get(*pos) == Some(&'-') && c.get(*pos + 1).is_some_and(|n| *n != ']') {
            let hi = *c.get(*pos + 1)?;
            *pos += 2;
            let hi = if hi == '\\' {
                let e = *c.get(*pos)?;
                *pos += 1;
                e
            } else {
                hi
            };
            ranges.push((lo, hi));
        } else {
            ranges.push((lo, lo));
        }
    }
    Some(Atom::Class { ranges, negated })
}

fn parse_quantifier(c: &[char], pos: &mut usize) -> (usize, usize) {
    let q = match c.get(*pos) {
        Some('*') => Some((0, usize::MAX)),
        Some('+') => Some((1, usize::MAX)),
        Some('?') => Some((0, 1)),
        Some('{') => {
            let close = c[*pos..].iter().position(|x| *x == '}');
            close.and_then(|end| {
                let body: String = c[*pos + 1..*pos + end].iter().collect();
                let (a, b) = match body.split_once(',') {
                    Some((a, "")) => (a.trim().parse().ok()?, usize::MAX),
                    Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
                    None => {
                        let n = body.trim().parse().ok()?;
                        (n, n)
                    }
                };
                *pos += end;
                Some((a, b))
            })
        }
        _ => None,
    };
    match q {
        Some((min, max)) => {
            *pos += 1;
            // Lazy/possessive suffixes do not change what matches.
            if matches!(c.get(*pos), Some('?') | Some('+')) {
                *pos += 1;
            }
            (min.min(MAX_LEN), max)
        }
        None => (1, 1),
    }
}

fn emit(seq: &[(Atom, usize, usize)], min_len: usize, out: &mut String) {
    // Minimum repetitions first; then grow the first open-ended element to
    // reach `min_len`.
    let base_len: usize = seq.iter().map(|(a, min, _)| atom_len(a) * min).sum();
    let mut missing = min_len.saturating_sub(base_len);
    for (atom, min, max) in seq {
        let mut reps = *min;
        let unit = atom_len(atom).max(1);
        if missing > 0 && max > min {
            let extra = missing.div_ceil(unit).min(max - min).min(MAX_LEN);
            reps += extra;
            missing = missing.saturating_sub(extra * unit);
        }
        for _ in 0..reps.min(MAX_LEN) {
            emit_atom(atom, out);
        }
    }
}

fn atom_len(a: &Atom) -> usize {
    match a {
        Atom::Group(alts) => alts
            .first()
            .map(|s| s.iter().map(|(a, min, _)| atom_len(a) * min).sum())
            .unwrap_or(0),
        _ => 1,
    }
}

fn emit_atom(a: &Atom, out: &mut String) {
    match a {
        Atom::Char(c) => out.push(*c),
        Atom::Any => out.push('a'),
        Atom::Class {
            ranges,
            negated: false,
        } => {
            // Prefer a letter or digit when the class offers one.
            let pick = ['a', 'A', '0']
                .into_iter()
                .find(|p| ranges.iter().any(|(lo, hi)| lo <= p && p <= hi))
                .or_else(|| ranges.first().map(|(lo, _)| *lo))
                .unwrap_or('a');
            out.push(pick);
        }
        Atom::Class {
            ranges,
            negated: true,
        } => {
            let pick = ['a', 'A', '0', 'x', '-', '_', ' ']
                .into_iter()
                .find(|p| !ranges.iter().any(|(lo, hi)| lo <= p && p <= hi))
                .unwrap_or('~');
            out.push(pick);
        }
        Atom::Group(alts) => {
            if let Some(first) = alts.first() {
                emit(first, 0, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn assert_all_valid(schema: &Value) -> Vec<Value> {
        let validator = jsonschema::validator_for(schema).expect("test schema compiles");
        let out = instances(schema);
        assert!(!out.is_empty());
        for v in &out {
            let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{v} invalid for {schema}: {errors:?}");
        }
        out
    }

    #[test]
    fn full_and_required_only_instances_come_first() {
        let schema = json!({
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "name": {"type": "string"}
            }
        });
        let out = assert_all_valid(&schema);
        assert_eq!(
            out,
            vec![json!({"id": 1, "name": "example"}), json!({"id": 1})]
        );
    }

    #[test]
    fn values_prefer_const_examples_default_enum() {
        let schema = json!({
            "type": "object",
            "properties": {
                "c": {"type": "string", "const": "fixed", "default": "other"},
                "x": {"type": "integer", "examples": [42], "example": 7, "default": 3},
                "y": {"type": "integer", "example": 7, "default": 3},
                "d": {"type": "integer", "default": 3, "enum": [3, 9]},
                "e": {"type": "string", "enum": ["red", "green"]}
            }
        });
        let out = assert_all_valid(&schema);
        assert_eq!(
            out[0],
            json!({"c": "fixed", "x": 42, "y": 7, "d": 3, "e": "red"})
        );
    }

    #[test]
    fn numeric_bounds_and_multiples_are_respected() {
        for schema in [
            json!({"type": "integer", "minimum": 10, "maximum": 20}),
            json!({"type": "integer", "exclusiveMinimum": 5}),
            json!({"type": "integer", "maximum": -3}),
            json!({"type": "integer", "exclusiveMaximum": 0}),
            json!({"type": "integer", "minimum": 7, "multipleOf": 5}),
            json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5}),
            json!({"type": "number", "minimum": 0.25, "maximum": 0.75, "multipleOf": 0.25}),
            json!({"type": "number", "minimum": 1.5}),
        ] {
            assert_all_valid(&schema);
        }
    }

    #[test]
    fn strings_respect_lengths_formats_and_simple_patterns() {
        for schema in [
            json!({"type": "string", "minLength": 12}),
            json!({"type": "string", "maxLength": 3}),
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!({"type": "string", "pattern": "^[a-z]+$", "minLength": 10}),
            json!({"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"}),
            json!({"type": "string", "pattern": "^(foo|bar)_[0-9]+$"}),
            json!({"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+$"}),
            json!({"type": "string", "pattern": "^\\+?[1-9]\\d{1,14}$"}),
            json!({"type": "string", "format": "uuid", "pattern": "^[0-9a-f-]{36}$"}),
        ] {
            let out = assert_all_valid(&schema);
            let jsonschema_pattern = schema.get("pattern").and_then(Value::as_str);
            if let Some(p) = jsonschema_pattern {
                let check = jsonschema::validator_for(&json!({"pattern": p})).unwrap();
                assert!(check.is_valid(&out[0]), "{p}: {}", out[0]);
            }
        }
        let date = instances(&json!({"type": "string", "format": "date-time"}));
        assert_eq!(date[0], json!("2024-01-01T00:00:00Z"));
        let bytes = instances(&json!({"type": "string", "format": "byte"}));
        assert_eq!(bytes[0], json!("ZXhhbXBsZQ=="));
    }

    #[test]
    fn nested_objects_and_arrays_with_min_items() {
        let schema = json!({
            "type": "object",
            "required": ["tags", "owner"],
            "properties": {
                "tags": {"type": "array", "minItems": 3, "uniqueItems": true,
                         "items": {"type": "string", "minLength": 2}},
                "owner": {
                    "type": "object",
                    "required": ["email"],
                    "properties": {
                        "email": {"type": "string", "format": "email"},
                        "address": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}
                    }
                },
                "matrix": {"type": "array", "items": {"type": "array", "minItems": 2, "items": {"type": "integer", "minimum": 3}}}
            }
        });
        let out = assert_all_valid(&schema);
        assert_eq!(out[0]["tags"].as_array().map(Vec::len), Some(3));
        assert_eq!(out[0]["owner"]["address"]["zip"], json!("00000"));
        assert_eq!(out[0]["matrix"], json!([[3, 3]]));
        assert_eq!(out[1]["owner"], json!({"email": "user@example.com"}));
    }

    #[test]
    fn one_instance_per_one_of_branch_top_level_and_nested() {
        let schema = json!({
            "oneOf": [
                {"type": "object", "required": ["cat"], "properties": {"cat": {"const": true}},
                 "additionalProperties": false},
                {"type": "object", "required": ["dog"], "properties": {"dog": {"type": "string"}},
                 "additionalProperties": false},
                {"type": "object", "required": ["pet"], "additionalProperties": false,
                 "properties": {"pet": {"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 2}]}}}
            ]
        });
        let out = assert_all_valid(&schema);
        assert!(out.contains(&json!({"cat": true})));
        assert!(out.contains(&json!({"dog": "example"})));
        // Only reachable by switching the top-level choice, so the nested
        // `anyOf` stays on its first branch there.
        assert!(out.contains(&json!({"pet": 1})));

        let nested = json!({
            "type": "object",
            "properties": {
                "shape": {"anyOf": [
                    {"type": "object", "required": ["r"], "properties": {"r": {"type": "number"}}},
                    {"type": "object", "required": ["w", "h"], "properties": {"w": {"type": "integer"}, "h": {"type": "integer"}}}
                ]}
            }
        });
        let out = assert_all_valid(&nested);
        assert!(out.contains(&json!({"shape": {"r": 1}})), "{out:?}");
        assert!(out.contains(&json!({"shape": {"w": 1, "h": 1}})), "{out:?}");
    }

    #[test]
    fn nullable_unions_pick_the_non_null_type() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": ["null", "string"], "minLength": 2},
            "b": {"type": ["integer", "null"]},
            "c": {"type": "null"},
            "d": {"anyOf": [{"type": "null"}, {"type": "boolean"}]}
        }});
        let out = assert_all_valid(&schema);
        assert_eq!(
            out[0],
            json!({"a": "example", "b": 1, "c": null, "d": null})
        );
        assert!(out.contains(&json!({"a": "example", "b": 1, "c": null, "d": true})));
    }

    #[test]
    fn all_of_branches_are_merged() {
        let schema = json!({
            "allOf": [
                {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer", "minimum": 5}}},
                {"required": ["name"], "properties": {"name": {"type": "string", "maxLength": 4}, "id": {"maximum": 9}}},
                {"properties": {"extra": {"type": "boolean"}}}
            ]
        });
        let out = assert_all_valid(&schema);
        assert_eq!(out[0], json!({"id": 5, "name": "exam", "extra": true}));
        assert_eq!(out[1], json!({"id": 5, "name": "exam"}));
    }

    #[test]
    fn local_refs_are_followed_and_cycles_terminate() {
        let schema = json!({
            "$defs": {"node": {"type": "object", "required": ["next"], "properties": {
                "value": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node"
        });
        // An infinitely required chain cannot be valid; it must still end.
        let out = instances(&schema);
        assert!(!out.is_empty());
        let looped = json!({"$ref": "#"});
        assert_eq!(instances(&looped), vec![Value::Null]);
    }

    #[test]
    fn output_is_deduplicated_and_capped() {
        let branches: Vec<Value> = (0..40).map(|i| json!({"const": i})).collect();
        let schema = json!({"oneOf": branches});
        let out = assert_all_valid(&schema);
        assert_eq!(out.len(), MAX_INSTANCES);
        let simple = instances(&json!({"type": "integer"}));
        assert_eq!(simple, vec![json!(1)]);
    }

    #[test]
    fn invalid_examples_are_ignored() {
        let schema = json!({"type": "object", "properties": {
            "m": {"type": "object", "example": "{\"a\": 1}", "properties": {"a": {"type": "integer"}}},
            "e": {"type": "string", "enum": ["x", "y"], "example": "z", "default": "y"}
        }});
        let out = assert_all_valid(&schema);
        assert_eq!(out[0], json!({"m": {"a": 1}, "e": "y"}));
    }

    #[test]
    fn overlapping_or_unsatisfiable_branches_fall_back_to_a_valid_one() {
        let schema = json!({"type": "object", "properties": {
            "v": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "number"}]},
            "d": {"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "string", "pattern": ".^"}]},
            "n": {"allOf": [{"type": "object"}, {"anyOf": [{}, {"type": "null"}]}]}
        }});
        assert_all_valid(&schema);
    }

    #[test]
    fn unique_items_and_min_properties_are_met() {
        let schema = json!({"type": "object", "properties": {
            "ids": {"type": "array", "minItems": 3, "uniqueItems": true,
                    "items": {"type": "string", "pattern": "^(0|[1-9][0-9]*)$"}},
            "labels": {"type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}}
        }});
        let out = assert_all_valid(&schema);
        assert_eq!(out[0]["labels"].as_object().map(Map::len), Some(2));
    }

    #[test]
    fn deep_required_content_is_still_generated() {
        let mut schema = json!({"type": "object", "required": ["leaf"], "properties": {"leaf": {"type": "string"}}});
        for _ in 0..(MAX_DEPTH + 5) {
            schema = json!({"type": "object", "required": ["x"], "properties": {"x": schema, "opt": {"type": "integer"}}});
        }
        assert_all_valid(&schema);
    }

    #[test]
    fn huge_counts_are_clamped() {
        let schema = json!({"type": "array", "minItems": 1_000_000_000u64,
            "items": {"type": "array", "minItems": 1000, "items": {"type": "string", "minLength": 1e12}}});
        let out = instances(&schema);
        assert!(out[0].to_string().len() < 50_000_000);
    }

    fn arb_schema() -> impl Strategy<Value = Value> {
        let keys = prop::sample::select(vec![
            "type",
            "properties",
            "required",
            "items",
            "oneOf",
            "anyOf",
            "allOf",
            "enum",
            "const",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "multipleOf",
            "minLength",
            "maxLength",
            "pattern",
            "format",
            "minItems",
            "$ref",
            "prefixItems",
            "a",
            "0",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            "[a-z(\\[\\]{}|*+?^$\\\\#/0-9-]{0,8}".prop_map(Value::String),
            prop::sample::select(vec![
                "object",
                "array",
                "string",
                "integer",
                "number",
                "null",
                "#",
                "#/properties"
            ])
            .prop_map(|s| Value::String(s.to_string())),
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|kv| Value::Object(
                    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                )),
            ]
        })
    }

    proptest! {
        #[test]
        fn never_panics_and_stays_small(schema in arb_schema()) {
            let out = instances(&schema);
            prop_assert!(!out.is_empty() && out.len() <= MAX_INSTANCES);
        }
    }
}
