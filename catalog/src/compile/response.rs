//! The success responses of an operation: which one gives the tool's
//! `outputSchema` (and how the body is wrapped into `structuredContent`),
//! and the schemas of the others, kept for validation.

use serde_json::Value;

use super::node::{object, Node};
use super::schema::{self, Dir, SchemaConverter};
use crate::model::OutputWrap;
use crate::spec::{self, Document, OperationSite};

/// A tool's success responses, converted.
pub(super) struct Success<'d> {
    /// The output schema (from the first 2xx JSON response).
    pub(super) output: Option<Node<'d>>,
    pub(super) wrap: Option<OutputWrap>,
    /// `(status, content type, schema)`; the first one's schema is the one
    /// behind `output`, not stored twice.
    pub(super) responses: Vec<(String, String, Option<Node<'d>>)>,
}

/// The output schema from the first 2xx JSON response, and every 2xx JSON
/// response schema for validation (the first one stored only once).
pub(super) fn success_responses<'d>(
    doc: &'d Document,
    site: &OperationSite<'d>,
    conv: &mut SchemaConverter<'d>,
) -> Success<'d> {
    let mut out = Success {
        output: None,
        wrap: None,
        responses: Vec::new(),
    };
    let Some(all) = site.operation.get("responses").and_then(Value::as_object) else {
        return out;
    };
    // Exact 2xx codes first (sorted), then the `2XX` range the model
    // documents.
    let mut codes: Vec<&String> = all
        .keys()
        .filter(|k| k.len() == 3 && k.starts_with('2'))
        .filter(|k| k[1..].bytes().all(|b| b.is_ascii_digit()) || k[1..].eq_ignore_ascii_case("xx"))
        .collect();
    codes.sort_by_key(|k| (k[1..].eq_ignore_ascii_case("xx"), k.to_string()));
    for code in codes {
        let at = format!("{}/responses/{code}", site.pointer);
        let Ok((resp, at)) = spec::resolve(doc, &all[code.as_str()], &at) else {
            continue;
        };
        let Some(content) = resp.get("content").and_then(Value::as_object) else {
            continue;
        };
        let json = content.iter().find(|(m, v)| {
            let m = m.split(';').next().unwrap_or("").trim();
            (m == "application/json" || m.ends_with("+json") || m == "*/*")
                && v.get("schema").is_some()
        });
        let Some((media, media_obj)) = json else {
            continue;
        };
        let Some(raw) = media_obj.get("schema") else {
            continue;
        };
        let schema = conv.convert(
            raw,
            &format!("{at}/content/{}/schema", spec::escape_pointer(media)),
            Dir::Response,
        );
        if out.output.is_none() {
            if schema::is_object_schema(&schema) {
                let mut schema = schema;
                // An allOf-of-objects without `type`: MCP wants an
                // explicit object root (`is_object_schema` refuses any
                // other `type`).
                if schema.get("type").is_none() {
                    if let Some(m) = schema.object_mut() {
                        m.insert("type".into(), Node::string("object"));
                    }
                }
                out.output = Some(schema);
                out.wrap = Some(OutputWrap::Body);
            } else {
                let mut props = object(1);
                props.insert("result".into(), schema);
                let mut m = object(3);
                m.insert("type".into(), Node::string("object"));
                m.insert("properties".into(), Node::Object(props));
                m.insert(
                    "required".into(),
                    Node::owned(Value::Array(vec![Value::String("result".into())])),
                );
                out.output = Some(Node::Object(m));
                out.wrap = Some(OutputWrap::Result);
            }
            out.responses.push((code.clone(), media.clone(), None));
        } else {
            out.responses
                .push((code.clone(), media.clone(), Some(schema)));
        }
    }
    out
}
