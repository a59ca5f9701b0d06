//! What a tool costs in a `tools/list` result, estimated from the catalog:
//! the JSON of the fields MCP clients receive (`name`, `title`,
//! `description`, `inputSchema`, `outputSchema` when advertised,
//! `annotations`). The operator reports it per upstream and per toolset,
//! `toolgate lint` per document, so size is visible where it is decided.
//!
//! Tokens are estimated as bytes ÷ 4 (rounded up): the usual rule of thumb
//! for English and JSON with common tokenizers; no tokenizer is shipped.

use serde::{Deserialize, Serialize};

use crate::model::Tool;

/// How an MCP endpoint lists its tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ListMode {
    /// `tools/list` returns every tool the endpoint serves.
    #[default]
    All,
    /// `tools/list` returns a few meta-tools (search, describe, call) and
    /// the pinned tools; the rest are found through search.
    Search,
}

/// Estimated size of a `tools/list` listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListingSize {
    /// JSON bytes of the listed tools (without the JSON-RPC envelope).
    pub bytes: u64,
    /// `bytes / 4`, rounded up.
    pub tokens: u64,
}

impl ListingSize {
    /// The size of `bytes` of listing.
    pub fn of_bytes(bytes: u64) -> ListingSize {
        ListingSize {
            bytes,
            tokens: bytes.div_ceil(4),
        }
    }
}

impl std::ops::Add for ListingSize {
    type Output = ListingSize;
    fn add(self, other: ListingSize) -> ListingSize {
        ListingSize::of_bytes(self.bytes + other.bytes)
    }
}

impl std::iter::Sum for ListingSize {
    fn sum<I: Iterator<Item = ListingSize>>(iter: I) -> ListingSize {
        iter.fold(ListingSize::default(), |a, b| a + b)
    }
}

/// JSON bytes of `tool` as `tools/list` lists it, with its output schema
/// when `advertise_output` (whether a tool advertises it depends on the
/// upstream's runtime settings, not on the catalog).
pub fn tool_bytes(tool: &Tool, advertise_output: bool) -> u64 {
    // NB: counted, not built: a large catalog must not be serialised
    // again just to be measured.
    let mut n = 2u64; // {}
    let mut field = |key: &str, value_len: usize| {
        if n > 2 {
            n += 1; // ,
        }
        n += key.len() as u64 + 3 + value_len as u64; // "key":
    };
    field("name", json_string_len(&tool.name));
    if let Some(t) = &tool.title {
        field("title", json_string_len(t));
    }
    if let Some(d) = &tool.description {
        field("description", json_string_len(d));
    }
    field("inputSchema", tool.input_schema.as_str().len());
    if advertise_output {
        if let Some(o) = &tool.output_schema {
            field("outputSchema", o.as_str().len());
        }
    }
    let a = &tool.annotations;
    let annotations = serde_json::to_string(a).map_or(0, |s| s.len());
    if annotations > 2 {
        field("annotations", annotations);
    }
    n
}

/// The estimated listing of `tools`.
pub fn size_of<'a>(
    tools: impl IntoIterator<Item = &'a Tool>,
    advertise_output: bool,
) -> ListingSize {
    ListingSize::of_bytes(
        tools
            .into_iter()
            .map(|t| tool_bytes(t, advertise_output))
            .sum(),
    )
}

/// Length of `s` as a JSON string literal, quotes included.
fn json_string_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> Tool {
        let spec = br#"{"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
          "paths": {"/pets/{id}": {"get": {"operationId": "getPet", "summary": "Get a \"pet\"\n",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
            "responses": {"200": {"description": "ok", "content": {"application/json":
              {"schema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}}}}}"#;
        let options = crate::CompileOptions::default();
        let mut u = crate::compile_upstream(&crate::UpstreamSource {
            prefix: "pets",
            document: "t.json",
            spec,
            overlays: &[],
            options: &options,
        })
        .unwrap();
        u.tools.remove(0)
    }

    /// The count matches the JSON it stands for.
    #[test]
    fn counts_the_bytes_of_the_listed_fields() {
        let t = tool();
        let mut listed = serde_json::Map::new();
        listed.insert("name".into(), t.name.clone().into());
        if let Some(title) = &t.title {
            listed.insert("title".into(), title.clone().into());
        }
        if let Some(d) = &t.description {
            listed.insert("description".into(), d.clone().into());
        }
        listed.insert("inputSchema".into(), t.input_schema.to_value());
        let without = serde_json::to_string(&listed).unwrap().len() as u64;
        let output = t
            .output_schema
            .as_ref()
            .expect("an output schema")
            .to_value();
        listed.insert("outputSchema".into(), output);
        let annotations = serde_json::to_value(&t.annotations).unwrap();
        let with_annotations = annotations.as_object().is_some_and(|a| !a.is_empty());
        if with_annotations {
            listed.insert("annotations".into(), annotations);
        }
        let with = serde_json::to_string(&listed).unwrap().len() as u64;
        assert_eq!(tool_bytes(&t, true), with);
        if !with_annotations {
            assert_eq!(tool_bytes(&t, false), without);
        }
        let size = size_of([&t, &t], true);
        assert_eq!(size.bytes, 2 * with);
        assert_eq!(size.tokens, (2 * with).div_ceil(4));
    }
}
