//! The request body of one operation: which media type is sent, how its
//! schema becomes arguments (merged, renamed or nested under `body`), and
//! how files and binary strings are passed (base64).

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::Value;

use super::Invalid;
use crate::compile::node::{object, Node, Object};
use crate::compile::schema::{
    flat_property_names, is_object_schema, take_flat, Dir, SchemaConverter,
};
use crate::model::{BodyEncoding, BodyPlan, BodySource, FieldBinding, Warning, WarningCode};
use crate::options::{BodyMode, CompileOptions};
use crate::spec::{resolve, Document, OperationSite};

fn encoding_of(media: &str) -> BodyEncoding {
    let m = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if m == "application/json" || m.ends_with("+json") || m == "*/*" || m == "text/json" {
        BodyEncoding::Json
    } else if m == "application/x-www-form-urlencoded" {
        BodyEncoding::Form
    } else if m == "multipart/form-data" || m.starts_with("multipart/") {
        BodyEncoding::Multipart
    } else {
        BodyEncoding::Raw
    }
}

fn is_binary_string(s: &Node<'_>) -> bool {
    s.get("type").and_then(Node::as_str) == Some("string")
        && matches!(
            s.get("format").and_then(Node::as_str),
            Some("binary") | Some("byte")
        )
        || s.get("contentMediaType").is_some()
            && s.get("type").and_then(Node::as_str) == Some("string")
}

fn base64_string<'d>(mut s: Object<'d>, what: &str) -> Node<'d> {
    s.insert("type".into(), Node::string("string"));
    s.insert("contentEncoding".into(), Node::string("base64"));
    s.swap_remove("format");
    let desc = match s.get("description").and_then(Node::as_str) {
        Some(d) => format!("{d} ({what}, base64-encoded)"),
        None => format!("{what}, base64-encoded"),
    };
    s.insert("description".into(), Node::string(desc));
    Node::Object(s)
}

/// Where a body's arguments go: the tool's top-level properties and
/// required list.
pub(super) struct BodyTarget<'a, 'd> {
    pub(super) properties: &'a mut Object<'d>,
    pub(super) required: &'a mut Vec<String>,
}

/// The media type an overlay or the document chose with the operation
/// extension `x-mcp-request-content-type`, and where it is written.
pub(super) struct ChosenMediaType<'d> {
    media: &'d str,
    pointer: String,
}

pub(super) fn chosen_media_type<'d>(
    site: &OperationSite<'d>,
) -> Result<Option<ChosenMediaType<'d>>, Invalid> {
    let pointer = format!("{}/x-mcp-request-content-type", site.pointer);
    match site.operation.get("x-mcp-request-content-type") {
        None => Ok(None),
        Some(Value::String(media)) => Ok(Some(ChosenMediaType { media, pointer })),
        Some(v) => Err(Invalid(format!(
            "{pointer} is {v}; expected a media type of the operation's requestBody.content"
        ))),
    }
}

/// The JSON shape a request body schema declares, as far as its top level
/// (after `$ref`s) tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Object,
    Array,
    Other,
    Unknown,
}

fn shape(doc: &Document, schema: Option<&Value>, at: &str) -> Shape {
    let Some(schema) = schema else {
        return Shape::Unknown;
    };
    let Ok((s, _)) = resolve(doc, schema, at) else {
        return Shape::Unknown;
    };
    match s.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "object" => Shape::Object,
            "array" => Shape::Array,
            _ => Shape::Other,
        },
        Some(_) => Shape::Unknown,
        None if s.get("properties").is_some() => Shape::Object,
        None if s.get("items").is_some() => Shape::Array,
        None => Shape::Unknown,
    }
}

/// Rank of a media type for a body (lower is preferred): JSON, then form,
/// then multipart, then anything else; among JSON types `application/json`,
/// then `application/merge-patch+json`, then the others. A type whose shape
/// the schema cannot have comes after every type it can: a JSON Patch
/// (`application/json-patch+json`, RFC 6902) is always an array, so an
/// object body is never sent as one.
fn media_rank(media: &str, shape: Shape) -> (bool, u8, u8) {
    let base = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json_patch = base == "application/json-patch+json";
    let misfit = json_patch && !matches!(shape, Shape::Array | Shape::Unknown);
    let encoding = match encoding_of(media) {
        BodyEncoding::Json => 0,
        BodyEncoding::Form => 1,
        BodyEncoding::Multipart => 2,
        BodyEncoding::Raw => 3,
    };
    let within = match base.as_str() {
        "application/json" => 0,
        "application/merge-patch+json" => 1,
        _ if json_patch => 3,
        _ => 2,
    };
    (misfit, encoding, within)
}

/// Picks the body's media type: the one `x-mcp-request-content-type` names,
/// else the best ranked ([`media_rank`]), the first listed among equals.
fn pick_media_type<'d>(
    doc: &Document,
    content: &'d serde_json::Map<String, Value>,
    at: &str,
    chosen: Option<ChosenMediaType<'_>>,
) -> Result<Option<(&'d String, &'d Value)>, Invalid> {
    if let Some(ChosenMediaType { media, pointer }) = chosen {
        return match content.iter().find(|(m, _)| m.as_str() == media) {
            Some(pick) => Ok(Some(pick)),
            None => {
                let offered: Vec<&str> = content.keys().map(String::as_str).collect();
                Err(Invalid(format!(
                    "{pointer} is {media:?}, which is not a media type of {at}/content (it has {offered:?})"
                )))
            }
        };
    }
    Ok(content.iter().min_by_key(|(m, obj)| {
        let ptr = format!("{at}/content/{}/schema", crate::spec::escape_pointer(m));
        media_rank(m, shape(doc, obj.get("schema"), &ptr))
    }))
}

/// Whether a converted schema requires properties at its top level
/// (`required`, or in an `allOf` part).
fn requires_properties(s: &Node<'_>) -> bool {
    let s = s.resolved();
    let listed = match s.get("required").map(Node::resolved) {
        Some(Node::Leaf(v)) => v.as_array().is_some_and(|a| !a.is_empty()),
        Some(Node::Array(a)) => !a.is_empty(),
        _ => false,
    };
    listed
        || matches!(s.get("allOf").map(Node::resolved),
            Some(Node::Array(parts)) if parts.iter().any(requires_properties))
}

pub(super) fn request_body<'d>(
    doc: &'d Document,
    rb: &'d Value,
    at: &str,
    chosen: Option<ChosenMediaType<'_>>,
    conv: &mut SchemaConverter<'d>,
    options: &CompileOptions,
    target: BodyTarget<'_, 'd>,
) -> Result<Option<BodyPlan>, Invalid> {
    let BodyTarget {
        properties,
        required,
    } = target;
    let Some(content) = rb.get("content").and_then(Value::as_object) else {
        return Ok(None);
    };
    if content.is_empty() {
        return Ok(None);
    }
    let Some((media, media_obj)) = pick_media_type(doc, content, at, chosen)? else {
        return Ok(None);
    };
    let encoding = encoding_of(media);
    let media_ptr = format!("{at}/content/{}", crate::spec::escape_pointer(media));
    let mut schema = match media_obj.get("schema") {
        Some(s) => conv.convert(s, &format!("{media_ptr}/schema"), Dir::Request),
        None => Node::default(),
    };
    if let Some(d) = rb
        .get("description")
        .filter(|d| d.as_str().is_some_and(|d| !d.is_empty()))
    {
        if schema.get("description").is_none() {
            if let Some(m) = schema.object_mut() {
                m.insert("description".into(), Node::borrowed(d));
            }
        }
    }
    let content_type = if media == "*/*" {
        "application/json".to_string()
    } else {
        media.clone()
    };

    let mut binary_fields = Vec::new();
    let mut base64 = false;
    match encoding {
        BodyEncoding::Multipart if flat_property_names(&schema).is_some() => {
            let description = schema.get("description").cloned();
            let (mut props, req) = take_flat(schema);
            for (name, s) in props.iter_mut() {
                let file = is_binary_string(s) || s.get("items").is_some_and(is_binary_string);
                if file {
                    if let Some(m) = std::mem::take(s).into_object() {
                        *s = if m.get("type").and_then(Node::as_str) == Some("array") {
                            let mut m = m;
                            let item = m
                                .swap_remove("items")
                                .and_then(Node::into_object)
                                .map(|o| base64_string(o, "file content"))
                                .unwrap_or(Node::owned(Value::Null));
                            m.insert("items".into(), item);
                            Node::Object(m)
                        } else {
                            base64_string(m, "file content")
                        };
                    }
                    binary_fields.push(name.to_string());
                }
            }
            let mut m = object(4);
            m.insert("type".into(), Node::string("object"));
            if let Some(d) = description {
                m.insert("description".into(), d);
            }
            m.insert("properties".into(), Node::Object(props));
            if !req.is_empty() {
                m.insert(
                    "required".into(),
                    Node::owned(Value::Array(req.into_iter().map(Value::String).collect())),
                );
            }
            schema = Node::Object(m);
        }
        BodyEncoding::Raw => {
            let text = content_type.starts_with("text/")
                || content_type.ends_with("+xml")
                || content_type == "application/xml";
            let s = schema.into_object().unwrap_or_default();
            if text {
                let mut s = s;
                s.insert("type".into(), Node::string("string"));
                schema = Node::Object(s);
            } else {
                base64 = true;
                schema = base64_string(s, &format!("request body ({content_type})"));
            }
        }
        _ => {}
    }

    let body_required = body_required(rb, at, &schema, conv);

    let mergeable = matches!(
        encoding,
        BodyEncoding::Json | BodyEncoding::Form | BodyEncoding::Multipart
    ) && options.schema.body_mode != BodyMode::Nested;
    // (has properties, collides with a parameter argument)
    let flat = if mergeable && is_object_schema(&schema) {
        flat_property_names(&schema).map(|names| {
            (
                !names.is_empty(),
                names.iter().any(|k| properties.contains_key(*k)),
            )
        })
    } else {
        None
    };
    let source = match flat {
        Some((true, collides)) => {
            if collides && options.schema.body_mode == BodyMode::Auto {
                nest(schema, body_required, properties, required)
            } else {
                let (props, req) = take_flat(schema);
                let req: HashSet<&str> = req.iter().map(String::as_str).collect();
                let mut fields = Vec::new();
                for (name, s) in props {
                    let mut arg = name.to_string();
                    if properties.contains_key(arg.as_str()) {
                        arg = format!("body_{name}");
                        let mut n = 2;
                        while properties.contains_key(arg.as_str()) {
                            arg = format!("body_{name}_{n}");
                            n += 1;
                        }
                    }
                    // A body field is only required when the body is.
                    if body_required && req.contains(name.as_ref()) {
                        required.push(arg.clone());
                    }
                    properties.insert(Cow::Owned(arg.clone()), s);
                    fields.push(FieldBinding {
                        arg,
                        name: name.into_owned(),
                    });
                }
                BodySource::Merged { fields }
            }
        }
        _ => nest(schema, body_required, properties, required),
    };
    Ok(Some(BodyPlan {
        content_type,
        encoding,
        required: body_required,
        source,
        binary_fields,
        base64,
    }))
}

/// Whether the body is required. OpenAPI's default is `false`, but a
/// document that lists required properties and says nothing about the body
/// nearly always means them to be sent (an upstream answers 400 without
/// them), and an optional body would hide them from the agent. So only an
/// explicit `required: false` keeps such a body optional, with a warning:
/// its required properties then bind only when a body is sent.
fn body_required(rb: &Value, at: &str, schema: &Node<'_>, conv: &mut SchemaConverter<'_>) -> bool {
    let declared = rb.get("required").and_then(Value::as_bool);
    let requires = requires_properties(schema);
    if declared == Some(false) && requires {
        conv.warnings.push(Warning {
            code: WarningCode::OptionalBodyRequiredProperties,
            message: "the request body is declared `required: false` but its schema has required \
                      properties; a call may leave them out (they bind only when a body is sent)"
                .to_string(),
            at: Some(crate::model::Location::Document {
                pointer: format!("{at}/required"),
            }),
        });
    }
    declared.unwrap_or(requires)
}

fn nest<'d>(
    schema: Node<'d>,
    body_required: bool,
    properties: &mut Object<'d>,
    required: &mut Vec<String>,
) -> BodySource {
    let mut arg = "body".to_string();
    if properties.contains_key(arg.as_str()) {
        arg = "request_body".to_string();
        let mut n = 2;
        while properties.contains_key(arg.as_str()) {
            arg = format!("request_body_{n}");
            n += 1;
        }
    }
    properties.insert(Cow::Owned(arg.clone()), schema);
    if body_required {
        required.push(arg.clone());
    }
    BodySource::Nested { arg }
}
