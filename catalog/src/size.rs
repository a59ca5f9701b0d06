//! Where a `tools/list` listing's bytes go: the tool fields, and inside the
//! listed schemas, descriptions (of top-level arguments and below),
//! examples, titles, defaults, and sub-schemas repeated within one schema.
//! `toolgate lint` prints it per document (docs/measurements.md records
//! the corpus); [`crate::slim`] cuts what it finds.
//!
//! Each keyword counts as `"key":value,` in compact JSON. The categories do
//! not overlap, except [`SchemaBytes::repeated`], which counts whole
//! sub-schemas (whatever they hold) written again after their first
//! occurrence in the same schema: what `schema.refs: defs` could save,
//! before the cost of its `$ref`s.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::listing::{lists_output_schema, tool_bytes};
use crate::model::Tool;
use crate::slim::{entry_len, title_repeats_name, visit};

/// Bytes of some listed schemas, by what they hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchemaBytes {
    /// The whole compact text.
    pub total: u64,
    /// `description` of the root and of top-level arguments (depth ≤ 1).
    pub top_descriptions: u64,
    /// `description` deeper down.
    pub nested_descriptions: u64,
    /// `examples` of the root and top-level arguments.
    pub top_examples: u64,
    /// `examples` deeper down.
    pub nested_examples: u64,
    /// `title` equal to its property's name (letters and digits, any case).
    pub title_copies: u64,
    /// Any other `title`.
    pub titles: u64,
    pub defaults: u64,
    /// Sub-schemas (objects of at least 64 bytes) written again after
    /// their first occurrence within one schema; overlaps the rest.
    pub repeated: u64,
}

impl SchemaBytes {
    /// Measures one schema. Descriptions and examples of the root and its
    /// properties count as top-level.
    pub fn of(schema: &Value) -> SchemaBytes {
        let mut b = SchemaBytes {
            total: crate::slim::json_len(schema) as u64,
            ..SchemaBytes::default()
        };
        let mut texts: HashMap<String, u64> = HashMap::new();
        visit(schema, 0, None, &mut |s, depth, name| {
            let Value::Object(m) = s else { return };
            for (k, v) in m {
                let n = entry_len(k, v);
                match k.as_str() {
                    "description" if depth <= 1 => b.top_descriptions += n,
                    "description" => b.nested_descriptions += n,
                    "examples" | "example" if depth <= 1 => b.top_examples += n,
                    "examples" | "example" => b.nested_examples += n,
                    "title" => match (v.as_str(), name) {
                        (Some(t), Some(name)) if title_repeats_name(t, name) => b.title_copies += n,
                        _ => b.titles += n,
                    },
                    "default" => b.defaults += n,
                    _ => {}
                }
            }
            if depth >= 1 {
                let text = s.to_string();
                if text.len() >= 64 {
                    *texts.entry(text).or_default() += 1;
                }
            }
        });
        texts.retain(|_, n| *n >= 2);
        b.repeated = repeated_bytes(schema, &texts);
        b
    }

    /// Each category with a label, in the order `toolgate lint` prints
    /// them: the whole text first.
    pub fn rows(&self) -> [(&'static str, u64); 10] {
        [
            ("total", self.total),
            ("descriptions, top-level", self.top_descriptions),
            ("descriptions, nested", self.nested_descriptions),
            ("examples, top-level", self.top_examples),
            ("examples, nested", self.nested_examples),
            ("titles repeating the name", self.title_copies),
            ("other titles", self.titles),
            ("defaults", self.defaults),
            ("the rest (types, validation)", self.rest()),
            ("repeated sub-schemas", self.repeated),
        ]
    }

    /// Bytes not in any category above but `repeated`: types, properties'
    /// names, validation keywords, punctuation.
    pub fn rest(&self) -> u64 {
        self.total.saturating_sub(
            self.top_descriptions
                + self.nested_descriptions
                + self.top_examples
                + self.nested_examples
                + self.title_copies
                + self.titles
                + self.defaults,
        )
    }
}

/// Bytes of the outermost repeats after their first occurrence: a copy
/// inside a copy already counted is not counted again.
fn repeated_bytes(schema: &Value, repeated: &HashMap<String, u64>) -> u64 {
    fn walk(
        s: &Value,
        top: bool,
        repeated: &HashMap<String, u64>,
        seen: &mut HashSet<String>,
    ) -> u64 {
        if !top {
            if let Value::Object(_) = s {
                let text = s.to_string();
                if repeated.contains_key(&text) && !seen.insert(text.clone()) {
                    return text.len() as u64;
                }
            }
        }
        let mut n = 0;
        let Value::Object(m) = s else { return 0 };
        for (k, v) in m {
            match (crate::slim::holds(k), v) {
                (Some(_), Value::Array(list)) => {
                    n += list
                        .iter()
                        .map(|s| walk(s, false, repeated, seen))
                        .sum::<u64>()
                }
                (Some(crate::slim::Holds::Named), Value::Object(named)) => {
                    n += named
                        .values()
                        .map(|s| walk(s, false, repeated, seen))
                        .sum::<u64>()
                }
                (Some(_), s) => n += walk(s, false, repeated, seen),
                _ => {}
            }
        }
        n
    }
    walk(schema, true, repeated, &mut HashSet::new())
}

impl std::ops::AddAssign for SchemaBytes {
    fn add_assign(&mut self, o: SchemaBytes) {
        self.total += o.total;
        self.top_descriptions += o.top_descriptions;
        self.nested_descriptions += o.nested_descriptions;
        self.top_examples += o.top_examples;
        self.nested_examples += o.nested_examples;
        self.title_copies += o.title_copies;
        self.titles += o.titles;
        self.defaults += o.defaults;
        self.repeated += o.repeated;
    }
}

/// Where the bytes of a listing of some tools go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListingBreakdown {
    /// The whole listing, as [`crate::listing::size_of`] counts it.
    pub total: u64,
    /// Everything but the schemas: names, titles, descriptions,
    /// annotations, punctuation.
    pub tool_fields: u64,
    pub input: SchemaBytes,
    /// Only the output schemas listed (with `advertise_output`).
    pub output: SchemaBytes,
}

/// Measures the listing of `tools` (with their output schemas when
/// `advertise_output`, as [`crate::listing::tool_bytes`]).
pub fn breakdown<'a>(
    tools: impl IntoIterator<Item = &'a Tool>,
    advertise_output: bool,
) -> ListingBreakdown {
    let mut b = ListingBreakdown::default();
    for t in tools {
        let total = tool_bytes(t, advertise_output);
        b.total += total;
        let input = SchemaBytes::of(&t.input_schema.to_value());
        let mut schemas = input.total;
        b.input += input;
        if let Some(o) = t
            .output_schema
            .as_ref()
            .filter(|_| lists_output_schema(t, advertise_output))
        {
            let output = SchemaBytes::of(&o.to_value());
            schemas += output.total;
            b.output += output;
        }
        b.tool_fields += total.saturating_sub(schemas);
    }
    b
}
