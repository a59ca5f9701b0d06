//! Arguments: parameters and request body → `inputSchema` + [`RequestPlan`].
//!
//! Naming of arguments (documented for users in the README):
//! - a parameter's argument is its name; when two parameters in different
//!   locations share a name (`id` in path and query), the later one (order:
//!   path, query, header, cookie) becomes `{name}_{in}` (`id_query`);
//! - an object body is merged into the top level when none of its property
//!   names collides with a parameter argument (`bodyMode: auto`); in `merge`
//!   mode colliding body properties are renamed `body_{name}`; otherwise the
//!   body is nested under `body` (`request_body` if a parameter is itself
//!   called `body`).
//!
//! The plan records every such mapping, so the gateway puts each argument
//! back under its wire name.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::node::{object, Node, Object};
use super::schema::{flat_property_names, is_object_schema, take_flat, Dir, SchemaConverter};
use crate::model::{
    BodyEncoding, BodyPlan, BodySource, ConstantParam, FieldBinding, ParamBinding, ParamLocation,
    ParamStyle, RequestPlan, Warning, WarningCode,
};
use crate::options::{BodyMode, CompileOptions};
use crate::spec::{resolve, Document, OperationSite};

/// An operation-level problem: the operation is rejected with this message.
pub struct Invalid(pub String);

pub struct Arguments<'d> {
    pub input_schema: Node<'d>,
    pub plan: RequestPlan,
}

struct Param<'d> {
    name: String,
    location: ParamLocation,
    required: bool,
    schema: Node<'d>,
    style: ParamStyle,
    explode: bool,
    allow_reserved: bool,
}

fn location(s: &str) -> Option<ParamLocation> {
    Some(match s {
        "path" => ParamLocation::Path,
        "query" => ParamLocation::Query,
        "header" => ParamLocation::Header,
        "cookie" => ParamLocation::Cookie,
        _ => return None,
    })
}

fn style(s: &str) -> Option<ParamStyle> {
    Some(match s {
        "simple" => ParamStyle::Simple,
        "label" => ParamStyle::Label,
        "matrix" => ParamStyle::Matrix,
        "form" => ParamStyle::Form,
        "spaceDelimited" => ParamStyle::SpaceDelimited,
        "pipeDelimited" => ParamStyle::PipeDelimited,
        "deepObject" => ParamStyle::DeepObject,
        _ => return None,
    })
}

fn loc_str(l: ParamLocation) -> &'static str {
    match l {
        ParamLocation::Path => "path",
        ParamLocation::Query => "query",
        ParamLocation::Header => "header",
        ParamLocation::Cookie => "cookie",
    }
}

/// Collects path-level and operation-level parameters (operation wins on
/// the same name and location), resolving `$ref`s.
fn collect_params<'d>(
    doc: &'d Document,
    site: &OperationSite<'d>,
    conv: &mut SchemaConverter<'d>,
) -> Result<Vec<Param<'d>>, Invalid> {
    let mut raw: Vec<(&Value, String)> = Vec::new();
    let lists = [
        (
            site.path_params,
            format!("{}/parameters", site.path_item_pointer),
        ),
        (
            site.operation.get("parameters"),
            format!("{}/parameters", site.pointer),
        ),
    ];
    for (list, ptr) in lists {
        let Some(list) = list else { continue };
        let Some(items) = list.as_array() else {
            return Err(Invalid(format!("{ptr} is not an array")));
        };
        for (i, p) in items.iter().enumerate() {
            let at = format!("{ptr}/{i}");
            let (p, at) = resolve(doc, p, &at).map_err(|e| Invalid(e.to_string()))?;
            raw.push((p, at));
        }
    }
    let mut params: Vec<Param> = Vec::new();
    // Index by (name, location): an operation may declare tens of
    // thousands of parameters, and a scan per parameter was quadratic.
    let mut index: HashMap<(String, ParamLocation), usize> = HashMap::new();
    for (p, at) in raw {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Invalid(format!("parameter at {at} has no `name`")))?;
        let loc_s = p.get("in").and_then(Value::as_str).unwrap_or("");
        let location = location(loc_s).ok_or_else(|| {
            Invalid(format!(
                "parameter {name:?} at {at} has unsupported `in: {loc_s}`"
            ))
        })?;
        // OpenAPI: these header parameters "SHALL be ignored"; the gateway
        // sets them itself.
        if location == ParamLocation::Header
            && ["accept", "content-type", "authorization"]
                .contains(&name.to_ascii_lowercase().as_str())
        {
            continue;
        }
        let (default_style, default_explode) = match location {
            ParamLocation::Query | ParamLocation::Cookie => (ParamStyle::Form, true),
            _ => (ParamStyle::Simple, false),
        };
        let style_v = match p.get("style").and_then(Value::as_str) {
            Some(s) => style(s).ok_or_else(|| {
                Invalid(format!(
                    "parameter {name:?} at {at} has unknown style {s:?}"
                ))
            })?,
            None => default_style,
        };
        let explode =
            p.get("explode")
                .and_then(Value::as_bool)
                .unwrap_or(if p.get("style").is_some() {
                    style_v == ParamStyle::Form
                } else {
                    default_explode
                });
        let schema_src = p.get("schema").or_else(|| {
            p.get("content")
                .and_then(Value::as_object)
                .and_then(|c| c.values().next())
                .and_then(|m| m.get("schema"))
        });
        let mut schema = match schema_src {
            Some(s) => conv.convert(s, &format!("{at}/schema"), Dir::Request),
            None => Node::default(),
        };
        // Edits copy a shared expansion (one level), so ask before editing.
        if let Some(desc) = p
            .get("description")
            .filter(|d| d.as_str().is_some_and(|d| !d.is_empty()))
        {
            if schema.get("description").is_none() {
                if let Some(m) = schema.object_mut() {
                    m.insert("description".into(), Node::borrowed(desc));
                }
            }
        }
        if p.get("deprecated") == Some(&Value::Bool(true)) {
            if let Some(m) = schema.object_mut() {
                m.insert("deprecated".into(), Node::owned(Value::Bool(true)));
            }
        }
        if let Some(ex) = p.get("example") {
            if schema.get("examples").is_none() {
                if let Some(m) = schema.object_mut() {
                    m.insert(
                        "examples".into(),
                        Node::owned(Value::Array(vec![ex.clone()])),
                    );
                }
            }
        }
        let required = location == ParamLocation::Path
            || p.get("required").and_then(Value::as_bool).unwrap_or(false);
        let param = Param {
            name: name.to_string(),
            location,
            required,
            schema,
            style: style_v,
            explode,
            allow_reserved: p
                .get("allowReserved")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        match index.entry((param.name.clone(), param.location)) {
            Entry::Occupied(e) => params[*e.get()] = param,
            Entry::Vacant(e) => {
                e.insert(params.len());
                params.push(param);
            }
        }
    }
    // Every `{name}` in the path template needs a path parameter.
    let template = site.path.split('#').next().unwrap_or(site.path);
    let mut in_template = HashSet::new();
    for seg in template.split('{').skip(1) {
        let Some(name) = seg.split('}').next() else {
            continue;
        };
        if !index.contains_key(&(name.to_string(), ParamLocation::Path)) {
            return Err(Invalid(format!(
                "path template {template:?} uses {{{name}}} but no path parameter {name:?} is declared"
            )));
        }
        // Only a `{name}` closed by `}` is a use of it.
        if seg.contains('}') {
            in_template.insert(name);
        }
    }
    // A declared path parameter missing from the template cannot be sent:
    // leave it out of the arguments, and say so (Prowlarr's `GET /`).
    params.retain(|p| {
        let used = p.location != ParamLocation::Path || in_template.contains(p.name.as_str());
        if !used {
            conv.warnings.push(crate::model::Warning {
                code: crate::model::WarningCode::PathParameterUnused,
                message: format!(
                    "path parameter {:?} is not in the path template {template:?}; left out of the arguments",
                    p.name
                ),
                at: Some(crate::model::Location::Document {
                    pointer: site.pointer.clone(),
                }),
            });
        }
        used
    });
    // Stable order: path, query, header, cookie; declaration order within.
    params.sort_by_key(|p| match p.location {
        ParamLocation::Path => 0,
        ParamLocation::Query => 1,
        ParamLocation::Header => 2,
        ParamLocation::Cookie => 3,
    });
    Ok(params)
}

/// The one value a parameter's schema allows (`const`, or an `enum` of one
/// value), for a required header or query parameter; such a parameter is
/// sent by the plan, not asked of the agent.
fn constant_value(p: &Param<'_>) -> Option<Value> {
    if !p.required || !matches!(p.location, ParamLocation::Header | ParamLocation::Query) {
        return None;
    }
    let s = p.schema.resolved();
    let value = match s.get("const") {
        Some(c) => c.to_value(),
        None => match s.get("enum").map(Node::to_value) {
            Some(Value::Array(mut values)) if values.len() == 1 => values.pop()?,
            _ => return None,
        },
    };
    // A null is how an argument says "not sent"; a parameter whose only
    // value is null stays an argument rather than becoming an empty one.
    (!value.is_null()).then_some(value)
}

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

/// Builds the input schema and request plan of one operation.
pub fn arguments<'d>(
    doc: &'d Document,
    site: &OperationSite<'d>,
    method: &str,
    conv: &mut SchemaConverter<'d>,
    options: &CompileOptions,
) -> Result<Arguments<'d>, Invalid> {
    let params = collect_params(doc, site, conv)?;
    let mut properties = object(0);
    let mut required: Vec<String> = Vec::new();
    let mut bindings = Vec::new();
    let mut constants = Vec::new();
    for p in params {
        if let Some(value) = constant_value(&p) {
            constants.push(ConstantParam {
                name: p.name,
                location: p.location,
                style: p.style,
                explode: p.explode,
                value,
            });
            continue;
        }
        let mut arg = p.name.clone();
        if properties.contains_key(arg.as_str()) {
            arg = format!("{}_{}", p.name, loc_str(p.location));
        }
        if properties.contains_key(arg.as_str()) {
            return Err(Invalid(format!(
                "parameter {:?} in {} is declared twice",
                p.name,
                loc_str(p.location)
            )));
        }
        properties.insert(Cow::Owned(arg.clone()), p.schema);
        if p.required {
            required.push(arg.clone());
        }
        bindings.push(ParamBinding {
            arg,
            name: p.name,
            location: p.location,
            style: p.style,
            explode: p.explode,
            allow_reserved: p.allow_reserved,
            required: p.required,
        });
    }
    for extra in &options.tools.extra_parameters {
        let constant = constants
            .iter()
            .any(|c| c.name == extra.name && c.location == extra.location);
        if constant || properties.contains_key(extra.name.as_str()) {
            continue; // the operation declares it itself
        }
        let mut schema = Node::from(
            extra
                .schema
                .clone()
                .unwrap_or_else(|| serde_json::json!({"type": "string"})),
        );
        if let (Some(d), Some(m)) = (&extra.description, schema.object_mut()) {
            m.entry("description".into())
                .or_insert_with(|| Node::string(d.clone()));
        }
        properties.insert(Cow::Owned(extra.name.clone()), schema);
        if extra.required {
            required.push(extra.name.clone());
        }
        let (style, explode) = match extra.location {
            ParamLocation::Query | ParamLocation::Cookie => (ParamStyle::Form, true),
            _ => (ParamStyle::Simple, false),
        };
        bindings.push(ParamBinding {
            arg: extra.name.clone(),
            name: extra.name.clone(),
            location: extra.location,
            style,
            explode,
            allow_reserved: false,
            required: extra.required,
        });
    }

    let body = match site.operation.get("requestBody") {
        None => None,
        Some(rb) => {
            let (rb, at) = resolve(doc, rb, &format!("{}/requestBody", site.pointer))
                .map_err(|e| Invalid(e.to_string()))?;
            let chosen = chosen_media_type(site)?;
            let target = BodyTarget {
                properties: &mut properties,
                required: &mut required,
            };
            request_body(doc, rb, &at, chosen, conv, options, target)?
        }
    };

    let mut input = object(4);
    input.insert("type".into(), Node::string("object"));
    input.insert("properties".into(), Node::Object(properties));
    if !required.is_empty() {
        input.insert(
            "required".into(),
            Node::owned(Value::Array(
                required.into_iter().map(Value::String).collect(),
            )),
        );
    }
    input.insert(
        "additionalProperties".into(),
        Node::owned(Value::Bool(options.schema.additional_properties)),
    );
    Ok(Arguments {
        input_schema: Node::Object(input),
        plan: RequestPlan {
            method: method.to_string(),
            path: site.path.split('#').next().unwrap_or(site.path).to_string(),
            params: bindings,
            constants,
            body,
            raw: false,
        },
    })
}

/// Where a body's arguments go: the tool's top-level properties and
/// required list.
struct BodyTarget<'a, 'd> {
    properties: &'a mut Object<'d>,
    required: &'a mut Vec<String>,
}

/// The media type an overlay or the document chose with the operation
/// extension `x-mcp-request-content-type`, and where it is written.
struct ChosenMediaType<'d> {
    media: &'d str,
    pointer: String,
}

fn chosen_media_type<'d>(site: &OperationSite<'d>) -> Result<Option<ChosenMediaType<'d>>, Invalid> {
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

fn request_body<'d>(
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
