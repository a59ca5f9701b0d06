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
//! back under its wire name. Parameters are read here; the request body
//! (media type, merging, files) in `body`.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::node::{object, Node};
use super::schema::{Dir, SchemaConverter};
use crate::model::{ConstantParam, ParamBinding, ParamLocation, ParamStyle, RequestPlan};
use crate::options::CompileOptions;
use crate::spec::{resolve, Document, OperationSite};

mod body;

use body::{chosen_media_type, request_body, BodyTarget};

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
