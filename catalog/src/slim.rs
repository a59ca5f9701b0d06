//! Smaller listed schemas, no constraint lost: what `schema.descriptionBudget`,
//! `schema.nestedExamples`, `schema.titleCopies` and `schema.refs` do to a
//! tool's `inputSchema` and `outputSchema` (see [`SchemaOptions`]).
//!
//! Only annotations go (`description`, `examples`, `title`): every
//! validation keyword stays, so a slimmed schema accepts exactly the
//! instances the full one does. `refs: defs` moves sub-schemas repeated
//! within one schema under `$defs` and points at them with `$ref`; expanded
//! again, the result is the inline schema.
//!
//! Positions: the root is depth 0, a top-level argument (`properties/x` of
//! the root) depth 1, and every schema below it deeper. Top-level argument
//! descriptions and examples are what an agent reads to call a tool; they
//! are never cut.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::options::{SchemaOptions, SchemaRefs};

/// How a keyword holds sub-schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    One,
    List,
    /// By name; `properties` names are property names.
    Named,
}

/// The sub-schema positions of JSON Schema 2020-12 (and `items` as a list,
/// from older drafts). `const`, `enum`, `default` and `examples` hold data.
pub(crate) fn holds(key: &str) -> Option<Holds> {
    match key {
        "additionalProperties"
        | "unevaluatedProperties"
        | "additionalItems"
        | "unevaluatedItems"
        | "contains"
        | "propertyNames"
        | "not"
        | "if"
        | "then"
        | "else"
        | "items" => Some(Holds::One),
        "allOf" | "anyOf" | "oneOf" | "prefixItems" => Some(Holds::List),
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
            Some(Holds::Named)
        }
        _ => None,
    }
}

/// Calls `f` on each sub-schema directly below `schema` (not on `schema`
/// itself, nor on data such as `const` or `examples`), for walks that
/// must reach every schema position: the one list of those positions.
pub fn for_each_subschema_mut(schema: &mut Value, mut f: impl FnMut(&mut Value)) {
    let Value::Object(map) = schema else {
        return;
    };
    for (key, v) in map.iter_mut() {
        match (holds(key), v) {
            (Some(Holds::One | Holds::List), Value::Array(list)) => {
                list.iter_mut().for_each(&mut f)
            }
            (Some(Holds::One), s) => f(s),
            (Some(Holds::Named), Value::Object(named)) => named.values_mut().for_each(&mut f),
            _ => {}
        }
    }
}

/// Calls `f(schema, depth, property name)` for `schema` and every
/// sub-schema below it, parents first.
pub(crate) fn visit<'a>(
    schema: &'a Value,
    depth: usize,
    name: Option<&'a str>,
    f: &mut impl FnMut(&'a Value, usize, Option<&'a str>),
) {
    f(schema, depth, name);
    let Value::Object(map) = schema else { return };
    for (key, v) in map {
        match (holds(key), v) {
            (Some(Holds::One), Value::Array(list)) | (Some(Holds::List), Value::Array(list)) => {
                list.iter().for_each(|s| visit(s, depth + 1, None, f))
            }
            (Some(Holds::One), s) => visit(s, depth + 1, None, f),
            (Some(Holds::Named), Value::Object(named)) => {
                let props = key == "properties";
                for (n, s) in named {
                    visit(s, depth + 1, props.then_some(n.as_str()), f);
                }
            }
            _ => {}
        }
    }
}

/// [`visit`], mutably. `f` runs before the children are visited, so it
/// may change which children there are.
fn visit_mut(
    schema: &mut Value,
    depth: usize,
    name: Option<&str>,
    f: &mut impl FnMut(&mut Map<String, Value>, usize, Option<&str>),
) {
    let Value::Object(map) = schema else { return };
    f(map, depth, name);
    for (key, v) in map.iter_mut() {
        match (holds(key), v) {
            (Some(Holds::One), Value::Array(list)) | (Some(Holds::List), Value::Array(list)) => {
                list.iter_mut()
                    .for_each(|s| visit_mut(s, depth + 1, None, f))
            }
            (Some(Holds::One), s) => visit_mut(s, depth + 1, None, f),
            (Some(Holds::Named), Value::Object(named)) => {
                let props = key == "properties";
                for (n, s) in named.iter_mut() {
                    visit_mut(s, depth + 1, props.then_some(n.as_str()), f);
                }
            }
            _ => {}
        }
    }
}

/// Bytes `"key":value,` takes in compact JSON (the comma counted with it).
pub(crate) fn entry_len(key: &str, value: &Value) -> u64 {
    (json_len(key) + 1 + json_len(value) + 1) as u64
}

/// Counts the bytes serde_json writes, without keeping them.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Length of `v`'s compact JSON text, counted (this runs for every
/// description of every tool).
pub(crate) fn json_len<T: serde::Serialize + ?Sized>(v: &T) -> usize {
    let mut n = ByteCount(0);
    // Writing JSON values with string keys into a counter cannot fail.
    let _ = serde_json::to_writer(&mut n, v);
    n.0
}

/// Whether a `title` only repeats its property's name: equal once case
/// and everything but letters and digits are ignored (`Account SID` for
/// `account_sid`).
pub(crate) fn title_repeats_name(title: &str, name: &str) -> bool {
    fn norm(s: &str) -> impl Iterator<Item = u8> + '_ {
        s.bytes()
            .filter(u8::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
    }
    norm(title).next().is_some() && norm(title).eq(norm(name))
}

/// Whether [`slim`] would leave every schema as it is.
pub(crate) fn is_noop(o: &SchemaOptions) -> bool {
    o.description_budget == 0 && o.nested_examples && o.title_copies && o.refs == SchemaRefs::Inline
}

/// Which listed schema of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// `inputSchema`: its top-level arguments keep their descriptions and
    /// examples.
    Input,
    /// `outputSchema`: no arguments, so every description and example below
    /// the root counts as nested.
    Output,
}

impl Listed {
    /// The depth from which descriptions and examples are nested.
    pub(crate) fn nested_from(self) -> usize {
        match self {
            Listed::Input => 2,
            Listed::Output => 1,
        }
    }
}

/// A listed schema as `options` want it.
pub fn slim(mut schema: Value, listed: Listed, options: &SchemaOptions) -> Value {
    let nested = listed.nested_from();
    if !options.nested_examples || !options.title_copies {
        visit_mut(&mut schema, 0, None, &mut |map, depth, name| {
            if depth >= nested && !options.nested_examples {
                map.shift_remove("examples");
            }
            if !options.title_copies {
                let copy = match (map.get("title"), name) {
                    (Some(Value::String(t)), Some(n)) => title_repeats_name(t, n),
                    _ => false,
                };
                if copy {
                    map.shift_remove("title");
                }
            }
        });
    }
    if options.description_budget > 0 {
        cut_descriptions(&mut schema, nested, options.description_budget as u64);
    }
    match options.refs {
        SchemaRefs::Inline => schema,
        SchemaRefs::Defs => {
            let factored = defs::factor(&schema, nested);
            // `$ref`s cost bytes too: never list a larger schema.
            if json_len(&factored) < json_len(&schema) {
                factored
            } else {
                schema
            }
        }
    }
}

/// Removes nested descriptions (depth ≥ `nested`) until the ones left take at
/// most `budget` bytes: deepest first, then longest, then last in document
/// order, so the cut is deterministic and what stays is nearest the
/// arguments.
fn cut_descriptions(schema: &mut Value, nested: usize, budget: u64) {
    // (depth, bytes, visit order) of every nested description.
    let mut found: Vec<(usize, u64, usize)> = Vec::new();
    let mut order = 0;
    // Objects only, numbered as `visit_mut` meets them (it skips boolean
    // schemas).
    visit(schema, 0, None, &mut |s, depth, _| {
        let Value::Object(m) = s else { return };
        if let Some(d) = m.get("description").filter(|d| d.is_string()) {
            if depth >= nested {
                found.push((depth, entry_len("description", d), order));
            }
        }
        order += 1;
    });
    let mut total: u64 = found.iter().map(|f| f.1).sum();
    if total <= budget {
        return;
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
    let mut cut = std::collections::HashSet::new();
    for (_, bytes, at) in found {
        if total <= budget {
            break;
        }
        total -= bytes;
        cut.insert(at);
    }
    let mut order = 0;
    visit_mut(schema, 0, None, &mut |map, _, _| {
        if cut.contains(&order) {
            map.shift_remove("description");
        }
        order += 1;
    });
}

mod defs {
    //! Sub-schemas repeated within one schema, emitted once under `$defs`.
    //!
    //! Candidates are object sub-schemas below the top-level arguments
    //! (depth ≥ 2 of an `inputSchema`: an argument's own schema stays in
    //! place, where an agent and the tool search read its description;
    //! depth ≥ 1 of an `outputSchema`), compared by their
    //! compact JSON text. The outermost repeats are factored first; a
    //! repeat inside a factored schema is factored inside its definition.
    use super::*;

    /// Texts shorter than this are not worth a `$ref` (which is about 25
    /// bytes itself).
    const MIN_TEXT: usize = 64;

    pub(super) fn factor(schema: &Value, from: usize) -> Value {
        let mut counts: HashMap<String, usize> = HashMap::new();
        visit(schema, 0, None, &mut |s, depth, _| {
            if depth >= from && s.is_object() {
                let text = s.to_string();
                if text.len() >= MIN_TEXT {
                    *counts.entry(text).or_default() += 1;
                }
            }
        });
        counts.retain(|_, n| *n >= 2);
        let mut out = schema.clone();
        if counts.is_empty() {
            return out;
        }
        let mut f = Factor {
            from,
            counts,
            names: HashMap::new(),
            defs: Vec::new(),
            taken: std::collections::HashSet::new(),
        };
        // A schema that already has `$defs` keeps them; new names avoid
        // theirs.
        if let Some(Value::Object(existing)) = out.get("$defs") {
            f.taken.extend(existing.keys().cloned());
        }
        f.walk(&mut out, 0, None);
        // Definitions are walked in turn: each may hold further repeats
        // (and make new definitions, walked after it).
        let mut i = 0;
        while i < f.defs.len() {
            let mut body = std::mem::take(&mut f.defs[i].1);
            // Below a candidate depth, so every part may be one.
            f.walk_children(&mut body, f.from);
            f.defs[i].1 = body;
            i += 1;
        }
        if let Value::Object(root) = &mut out {
            let defs = root
                .entry("$defs")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(defs) = defs {
                for (name, body) in f.defs {
                    defs.insert(name, body);
                }
            }
        }
        out
    }

    struct Factor {
        /// The depth candidates start at.
        from: usize,
        /// Occurrences of each repeated text still in the tree.
        counts: HashMap<String, usize>,
        /// Definition name of each text factored so far.
        names: HashMap<String, String>,
        defs: Vec<(String, Value)>,
        taken: std::collections::HashSet<String>,
    }

    impl Factor {
        fn walk(&mut self, s: &mut Value, depth: usize, name: Option<&str>) {
            if depth >= self.from && s.is_object() {
                let text = s.to_string();
                if self.counts.get(&text).is_some_and(|n| *n >= 2) {
                    let def = match self.names.get(&text).cloned() {
                        Some(def) => {
                            // This copy goes: what it holds no longer
                            // repeats through it.
                            self.forget_inside(s);
                            def
                        }
                        None => {
                            let def = self.fresh_name(name);
                            self.names.insert(text, def.clone());
                            self.defs.push((def.clone(), std::mem::take(s)));
                            def
                        }
                    };
                    *s = serde_json::json!({ "$ref": format!("#/$defs/{def}") });
                    return;
                }
            }
            self.walk_children(s, depth);
        }

        fn walk_children(&mut self, s: &mut Value, depth: usize) {
            let Value::Object(map) = s else { return };
            for (key, v) in map.iter_mut() {
                match (holds(key), v) {
                    (Some(Holds::One | Holds::List), Value::Array(list)) => {
                        list.iter_mut().for_each(|s| self.walk(s, depth + 1, None))
                    }
                    (Some(Holds::One), s) => self.walk(s, depth + 1, None),
                    // Definitions already there are left as they are.
                    (Some(Holds::Named), Value::Object(named)) if key != "$defs" => {
                        let props = key == "properties";
                        for (n, s) in named.iter_mut() {
                            let n = n.clone();
                            self.walk(s, depth + 1, props.then_some(n.as_str()));
                        }
                    }
                    _ => {}
                }
            }
        }

        /// Lowers the counts of the repeats inside a copy being replaced.
        fn forget_inside(&mut self, s: &Value) {
            let counts = &mut self.counts;
            visit(s, 0, None, &mut |inner, depth, _| {
                if depth > 0 && inner.is_object() {
                    if let Some(n) = counts.get_mut(&inner.to_string()) {
                        *n = n.saturating_sub(1);
                    }
                }
            });
        }

        /// A definition name after the property the schema was first met
        /// under (`address`, `address_2`, ...), else `schema`.
        fn fresh_name(&mut self, name: Option<&str>) -> String {
            let base: String = name
                .unwrap_or("schema")
                .chars()
                .map(|c| match c {
                    c if c.is_ascii_alphanumeric() || c == '_' || c == '-' => c,
                    _ => '_',
                })
                .take(48)
                .collect();
            let base = if base.is_empty() {
                "schema".into()
            } else {
                base
            };
            let mut candidate = base.clone();
            let mut n = 1;
            while self.taken.contains(&candidate) {
                n += 1;
                candidate = format!("{base}_{n}");
            }
            self.taken.insert(candidate.clone());
            candidate
        }
    }
}
