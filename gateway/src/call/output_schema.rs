//! The outputSchema a tool lists, and the promise that comes with it.
//!
//! MCP: a tool that lists an `outputSchema` must return `structuredContent`
//! matching it, and clients check: the official Python and TypeScript SDKs
//! throw on a success result without `structuredContent` or with one that
//! does not match. So a tool lists its schema only where the gateway checks
//! every success result against it and turns a mismatch into an error:
//! responseValidation `fail` ([`catalog::runtime::ResponseValidation::
//! advertises_output_schemas`], per tool [`catalog::listing::
//! lists_output_schema`]). `warn` and `off` list none and return the data
//! as a success, with `structuredContent` when it is an object (see
//! [`crate::call::response`]).
//!
//! **No `format`.** JSON Schema 2020-12 treats `format` as an annotation,
//! and so does the gateway's validator; the TypeScript SDK asserts it
//! (ajv-formats: `date-time` with a time zone, `int32` in range, ...). A
//! listed schema must not be stricter at the client than at the gateway,
//! so the listed (and checked) outputSchema has its `format` keywords
//! removed.

use serde_json::Value;

/// `schema` as a tool lists it: without `format` keywords. Only schema
/// positions are walked, so a property *named* `format` stays.
pub(crate) fn listed(mut schema: Value) -> Value {
    strip_formats(&mut schema);
    schema
}

fn strip_formats(schema: &mut Value) {
    if let Value::Object(map) = schema {
        if map.get("format").is_some_and(Value::is_string) {
            map.remove("format");
        }
    }
    catalog::slim::for_each_subschema_mut(schema, strip_formats);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn formats_go_from_every_schema_position_and_properties_named_format_stay() {
        let schema = json!({
            "type": "object",
            "properties": {
                "at": {"type": "string", "format": "date-time"},
                "format": {"type": "string", "format": "uri", "enum": ["a"]},
                "n": {"anyOf": [{"type": "integer", "format": "int32"}, {"type": "null"}]},
                "list": {"type": "array", "items": {"$ref": "#/$defs/d"}},
            },
            "additionalProperties": {"format": "email"},
            "$defs": {"d": {"type": "string", "format": "uuid", "default": "x"}},
            "required": ["format"],
        });
        assert_eq!(
            listed(schema),
            json!({
                "type": "object",
                "properties": {
                    "at": {"type": "string"},
                    "format": {"type": "string", "enum": ["a"]},
                    "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                    "list": {"type": "array", "items": {"$ref": "#/$defs/d"}},
                },
                "additionalProperties": {},
                "$defs": {"d": {"type": "string", "default": "x"}},
                "required": ["format"],
            })
        );
    }

    /// `const`, `enum`, `default` and `examples` hold data, not schemas.
    #[test]
    fn data_keywords_are_left_alone() {
        let schema = json!({"const": {"format": "x"}, "examples": [{"format": "y"}],
                            "default": {"format": "z"}});
        assert_eq!(listed(schema.clone()), schema);
    }
}
