//! What a tool costs in a `tools/list` result, estimated from the catalog:
//! the JSON of the fields MCP clients receive (`name`, `title`,
//! `description`, `inputSchema`, `outputSchema` when advertised,
//! `annotations`). The operator reports it per upstream and per toolset,
//! `toolgate lint` per document, so size is visible where it is decided.
//!
//! Tokens are estimated as bytes ÷ 4 (rounded up): the usual rule of thumb
//! for English and JSON with common tokenizers; no tokenizer is shipped.

use serde::{Deserialize, Serialize};

use crate::model::{ResponseFormat, Tool};

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

/// How an endpoint in [`ListMode::Search`] presents itself: the same for
/// `/mcp`, `/mcp/{prefix}` (the gateway config's `listing:` section) and
/// a toolset (its own).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SearchSettings {
    /// Tools listed directly beside the meta-tools, by full name, in this
    /// order. A name the endpoint does not serve (or the caller may not
    /// call) is left out of the listing, not an error. At most
    /// [`MAX_PINNED`].
    pub pinned: Vec<String>,
    /// The meta-tools' descriptions; unset ones keep the built-in text.
    pub descriptions: MetaToolDescriptions,
}

/// Descriptions of the search-mode meta-tools (of `/mcp` and
/// `/mcp/{prefix}`, or of a toolset), each at most
/// [`MAX_DESCRIPTION_BYTES`] and replacing the built-in text when set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct MetaToolDescriptions {
    /// Description of `search_tools`. Optional; omitted when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(min = 1, max = MAX_DESCRIPTION_BYTES))
    )]
    pub search_tools: Option<String>,
    /// Description of `describe_tool`. Optional; omitted when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(min = 1, max = MAX_DESCRIPTION_BYTES))
    )]
    pub describe_tool: Option<String>,
    /// Description of `call_tool`. Optional; omitted when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(min = 1, max = MAX_DESCRIPTION_BYTES))
    )]
    pub call_tool: Option<String>,
}

/// Most pinned tools of one endpoint: pinning is for the few tools every
/// conversation needs; the rest are what search is for.
pub const MAX_PINNED: usize = 64;
/// Longest meta-tool description: every client reads it in every
/// `tools/list`.
pub const MAX_DESCRIPTION_BYTES: usize = 4096;

impl SearchSettings {
    /// Checks the bounds, naming the field (relative to the settings,
    /// e.g. `pinned` or `descriptions.searchTools`).
    pub fn check(&self) -> Result<(), String> {
        if self.pinned.len() > MAX_PINNED {
            return Err(format!(
                "pinned: {} tools; at most {MAX_PINNED} are allowed",
                self.pinned.len()
            ));
        }
        let d = &self.descriptions;
        for (field, text) in [
            ("searchTools", &d.search_tools),
            ("describeTool", &d.describe_tool),
            ("callTool", &d.call_tool),
        ] {
            if let Some(t) = text {
                if t.len() > MAX_DESCRIPTION_BYTES {
                    return Err(format!(
                        "descriptions.{field}: {} bytes; at most {MAX_DESCRIPTION_BYTES} are allowed",
                        t.len()
                    ));
                }
            }
        }
        Ok(())
    }
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

/// Whether `tool` lists its outputSchema on an upstream that advertises
/// output schemas (`advertise_output`, from
/// [`crate::runtime::ResponseValidation::advertises_output_schemas`]):
/// only a tool whose results are JSON can carry the `structuredContent`
/// the schema promises.
pub fn lists_output_schema(tool: &Tool, advertise_output: bool) -> bool {
    advertise_output
        && tool.output_schema.is_some()
        && matches!(
            tool.response_format,
            ResponseFormat::Auto | ResponseFormat::Json
        )
}

/// JSON bytes of `tool` as `tools/list` lists it, with its output schema
/// when `advertise_output` (whether a tool advertises it depends on the
/// upstream's runtime settings, not on the catalog; see
/// [`lists_output_schema`]). The listed outputSchema has no `format`
/// keywords (see the gateway's `output_schema` module), counted here: a
/// slight overestimate with output schemas.
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
    if let Some(o) = tool
        .output_schema
        .as_ref()
        .filter(|_| lists_output_schema(tool, advertise_output))
    {
        field("outputSchema", o.as_str().len());
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

    #[test]
    fn search_settings_parse_and_are_bounded() {
        let s: SearchSettings = serde_json::from_str(
            r#"{"pinned": ["a__b"], "descriptions": {"callTool": "Run a tool."}}"#,
        )
        .unwrap();
        assert_eq!(s.pinned, ["a__b"]);
        assert_eq!(s.descriptions.call_tool.as_deref(), Some("Run a tool."));
        assert!(s.check().is_ok());
        assert!(serde_json::from_str::<SearchSettings>(r#"{"pin": []}"#).is_err());
        let many = SearchSettings {
            pinned: vec!["x".into(); MAX_PINNED + 1],
            ..Default::default()
        };
        assert!(many.check().unwrap_err().starts_with("pinned:"));
        let mut long = SearchSettings::default();
        long.descriptions.describe_tool = Some("x".repeat(MAX_DESCRIPTION_BYTES + 1));
        assert!(long
            .check()
            .unwrap_err()
            .starts_with("descriptions.describeTool:"));
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
