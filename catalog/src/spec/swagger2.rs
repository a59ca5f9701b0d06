//! Swagger 2.0 → OpenAPI 3.0.3 conversion on the raw JSON value.
//!
//! What [`convert`] guarantees to its caller, `spec::load`:
//!
//! - [`convert`] takes a document already identified as Swagger 2.0 and
//!   returns an OpenAPI 3.0.3 document with the same operations under
//!   `paths`, in the same order, following swagger2openapi's mapping:
//!   `servers` from `host`/`basePath`/`schemes`; `definitions`, non-body
//!   `parameters`, `responses` and `securityDefinitions` under `components`;
//!   `body`/`formData` parameters as `requestBody`; response `schema` as
//!   `content` per `produces` media type; `type: file` as binary strings.
//! - Every string `$ref` in the output (vendor extensions included, so an
//!   overlay written against the 2.0 shape keeps resolving) is rewritten to
//!   the 3.0 location. The part after the section prefix is copied
//!   verbatim, so JSON-pointer and percent escaping survive. A `$ref` to a
//!   global `body`/`formData` parameter is inlined instead, because 3.0 has
//!   no parameter object it could point to.
//! - Vendor extensions (`x-*`) are carried over unchanged, except
//!   `x-nullable`, which becomes `nullable`.
//! - Errors are returned only for document-level problems (the root or a
//!   global section having the wrong type). A malformed parameter,
//!   operation or path item is left as written, so the compiler rejects
//!   that one operation with a reason and keeps the rest.
//! - Never panics; recursion into schemas is capped at [`MAX_DEPTH`].

use serde_json::{Map, Value};

use super::{escape_pointer, ref_pointer, Origins};
use crate::error::{SpecError, SpecErrorKind};

const JSON: &str = "application/json";
const FORM_URLENCODED: &str = "application/x-www-form-urlencoded";
const MULTIPART: &str = "multipart/form-data";
const OCTET_STREAM: &str = "application/octet-stream";

/// The operation keys of a Swagger 2.0 path item (2.0 has no `trace`).
const OPERATION_KEYS: [&str; 7] = ["get", "put", "post", "delete", "options", "head", "patch"];

/// Keywords of a 2.0 non-body parameter, items or header object that belong
/// to its schema in 3.0.
const SCHEMA_KEYS: [&str; 16] = [
    "type",
    "format",
    "items",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
];

/// Schemas nested deeper than this are copied without conversion, bounding
/// recursion. The JSON and YAML parsers already cap input nesting at about
/// this depth, so only hand-built values reach it.
const MAX_DEPTH: usize = 128;

/// `$ref` chains between global parameters longer than this are treated as
/// loops (left as refs; the compiler reports them).
const MAX_REF_CHAIN: usize = 16;

/// Converts a Swagger 2.0 document into an equivalent OpenAPI 3.0.3 document.
#[cfg(test)]
pub fn convert(document: &str, doc: Value) -> Result<Value, SpecError> {
    convert_with_origins(document, doc).map(|(v, _)| v)
}

/// [`convert`], with where the moved parts were written.
pub fn convert_with_origins(document: &str, doc: Value) -> Result<(Value, Origins), SpecError> {
    let mut origins = Origins::swagger2();
    let Value::Object(mut root) = doc else {
        return Err(wrong_type(document, "", "an object at the document root"));
    };
    let consumes = global_media_types(document, &root, "consumes")?;
    let produces = global_media_types(document, &root, "produces")?;
    let definitions = take_section(document, &mut root, "definitions")?;
    let parameters = take_section(document, &mut root, "parameters")?;
    let responses = take_section(document, &mut root, "responses")?;
    let security = take_section(document, &mut root, "securityDefinitions")?;
    let host = optional_str(document, &root, "host")?;
    let base_path = optional_str(document, &root, "basePath")?;
    let schemes = match root.get("schemes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(_) => return Err(wrong_type(document, "/schemes", "an array of strings")),
    };

    let cx = Converter {
        consumes: non_empty_or_json(consumes),
        produces: non_empty_or_json(produces),
        parameters: parameters.clone().unwrap_or_default(),
        responses: responses.clone().unwrap_or_default(),
        host,
        base_path,
    };

    let mut out = Map::new();
    out.insert("openapi".into(), Value::from("3.0.3"));
    if let Some(info) = root.remove("info") {
        out.insert("info".into(), info);
    }
    let servers = cx.servers(&schemes);
    if !servers.is_empty() {
        out.insert("servers".into(), Value::Array(servers));
    }
    let mut components = match root.remove("components") {
        Some(Value::Object(c)) => c,
        _ => Map::new(),
    };
    for (key, value) in root {
        match key.as_str() {
            "swagger" | "host" | "basePath" | "schemes" | "consumes" | "produces" => {}
            "paths" => {
                out.insert(key, cx.convert_paths(value, &mut origins));
            }
            _ => {
                out.insert(key, value);
            }
        }
    }

    if let Some(defs) = definitions {
        let schemas = defs
            .into_iter()
            .map(|(k, v)| (k, convert_schema(v, 0)))
            .collect();
        components.insert("schemas".into(), Value::Object(schemas));
    }
    if let Some(resps) = responses {
        let converted = resps
            .into_iter()
            .map(|(k, v)| {
                let v = cx.convert_response(v, &cx.produces);
                (k, v)
            })
            .collect();
        components.insert("responses".into(), Value::Object(converted));
    }
    if let Some(params) = parameters {
        let mut converted = Map::new();
        for (k, v) in params {
            // Body and formData parameters are inlined into each operation
            // that references them; 3.0 has no parameter they could become.
            if is_inlinable(&v) {
                continue;
            }
            converted.insert(k, convert_param_value(v));
        }
        if !converted.is_empty() {
            components.insert("parameters".into(), Value::Object(converted));
        }
    }
    if let Some(defs) = security {
        let schemes = defs
            .into_iter()
            .map(|(k, v)| (k, convert_security_scheme(v)))
            .collect();
        components.insert("securitySchemes".into(), Value::Object(schemes));
    }
    if !components.is_empty() {
        out.insert("components".into(), Value::Object(components));
    }

    let mut out = Value::Object(out);
    rewrite_refs(&mut out);
    Ok((out, origins))
}

fn wrong_type(document: &str, pointer: &str, expected: &'static str) -> SpecError {
    SpecError::new(document, pointer, SpecErrorKind::WrongType { expected })
}

/// Removes a global section that must be an object; `null` (an empty YAML
/// key) counts as absent.
fn take_section(
    document: &str,
    root: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<Map<String, Value>>, SpecError> {
    match root.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(wrong_type(
            document,
            &format!("/{}", escape_pointer(key)),
            "an object",
        )),
    }
}

fn optional_str(
    document: &str,
    root: &Map<String, Value>,
    key: &str,
) -> Result<Option<String>, SpecError> {
    match root.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(wrong_type(document, &format!("/{key}"), "a string")),
    }
}

fn global_media_types(
    document: &str,
    root: &Map<String, Value>,
    key: &str,
) -> Result<Option<Vec<String>>, SpecError> {
    media_types(root.get(key))
        .map_err(|()| wrong_type(document, &format!("/{key}"), "an array of media types"))
}

/// Reads `consumes`/`produces`: `Ok(None)` when absent, `Err` when not an
/// array of strings.
fn media_types(v: Option<&Value>) -> Result<Option<Vec<String>>, ()> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|m| m.as_str().map(str::to_string).ok_or(()))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(()),
    }
}

fn non_empty_or_json(v: Option<Vec<String>>) -> Vec<String> {
    match v {
        Some(v) if !v.is_empty() => v,
        _ => vec![JSON.to_string()],
    }
}

fn param_in(v: &Value) -> Option<&str> {
    v.get("in").and_then(Value::as_str)
}

/// A body parameter with a schema, or a named formData parameter: what
/// [`Converter::classify`] turns into a request body. Malformed ones stay
/// parameters so the compiler can name the problem.
fn is_inlinable(v: &Value) -> bool {
    match param_in(v) {
        Some("body") => v.get("schema").is_some_and(Value::is_object),
        Some("formData") => v.get("name").is_some_and(Value::is_string),
        _ => false,
    }
}

fn is_extension(key: &str) -> bool {
    key.starts_with("x-")
}

/// The name in `#/<section>/<name>` (unescaped), if `r` points exactly at
/// an entry of that global section.
fn global_name(r: &str, section: &str) -> Option<String> {
    let pointer = ref_pointer(r)?;
    let rest = pointer.strip_prefix('/')?.strip_prefix(section)?;
    let token = rest.strip_prefix('/')?;
    if token.contains('/') {
        return None;
    }
    Some(token.replace("~1", "/").replace("~0", "~"))
}

/// A parameter as the operation conversion sees it.
enum Param {
    /// A well-formed body parameter (resolved if it was a `$ref`).
    Body(Map<String, Value>, Written),
    /// A well-formed formData parameter (resolved if it was a `$ref`).
    Form(Map<String, Value>, Written),
    /// Anything else: converted in place, or kept as written when malformed.
    Other(Value),
}

/// How a body or formData parameter was written, to keep it as written when
/// it cannot become (part of) a request body.
enum Written {
    /// Inline: as the parameter map itself.
    Inline,
    /// A `$ref` to a global parameter.
    Ref(Value),
}

impl Param {
    /// The parameter as written in the document.
    fn written(self) -> Value {
        match self {
            Param::Body(m, Written::Inline) | Param::Form(m, Written::Inline) => Value::Object(m),
            Param::Body(_, Written::Ref(r)) | Param::Form(_, Written::Ref(r)) => r,
            Param::Other(v) => v,
        }
    }
}

struct Converter {
    /// Effective global `consumes` (defaults to JSON).
    consumes: Vec<String>,
    /// Effective global `produces` (defaults to JSON).
    produces: Vec<String>,
    /// The original (2.0) global parameters, for inlining body/formData refs.
    parameters: Map<String, Value>,
    /// The original (2.0) global responses, for re-converting a referenced
    /// response under an operation's own `produces`.
    responses: Map<String, Value>,
    host: Option<String>,
    base_path: Option<String>,
}

impl Converter {
    /// One server per scheme when a host is known (https first, as the
    /// safer default for a gateway); a relative `basePath` server otherwise.
    fn servers(&self, schemes: &[String]) -> Vec<Value> {
        let base = self
            .base_path
            .as_deref()
            .unwrap_or("")
            .trim_end_matches('/');
        match &self.host {
            Some(host) => self
                .scheme_urls(host, base, schemes)
                .into_iter()
                .map(|url| server(&url))
                .collect(),
            None if self.base_path.is_some() => {
                let url = if base.is_empty() { "/" } else { base };
                vec![server(url)]
            }
            None => Vec::new(),
        }
    }

    fn scheme_urls(&self, host: &str, base: &str, schemes: &[String]) -> Vec<String> {
        let mut ordered: Vec<&str> = Vec::new();
        for preferred in ["https", "http"] {
            if schemes.iter().any(|s| s.eq_ignore_ascii_case(preferred)) {
                ordered.push(preferred);
            }
        }
        for s in schemes {
            let s = s.as_str();
            if !ordered.iter().any(|o| o.eq_ignore_ascii_case(s)) {
                ordered.push(s);
            }
        }
        if ordered.is_empty() {
            ordered.push("https");
        }
        ordered
            .into_iter()
            .map(|s| format!("{s}://{host}{base}"))
            .collect()
    }

    fn convert_paths(&self, paths: Value, origins: &mut Origins) -> Value {
        let Value::Object(paths) = paths else {
            return paths;
        };
        let converted = paths
            .into_iter()
            .map(|(path, item)| {
                let at = format!("/paths/{}", escape_pointer(&path));
                let item = match item {
                    Value::Object(m) => Value::Object(self.convert_path_item(m, &at, origins)),
                    other => other,
                };
                (path, item)
            })
            .collect();
        Value::Object(converted)
    }

    /// `at`: the path item's pointer, for [`Origins`].
    fn convert_path_item(
        &self,
        item: Map<String, Value>,
        at: &str,
        origins: &mut Origins,
    ) -> Map<String, Value> {
        // Body/formData parameters cannot stay at path level in 3.0; they
        // join each operation's request body instead.
        let mut inherited: Vec<(String, Param)> = Vec::new();
        let mut out = Map::new();
        let mut item = item;
        if let Some(Value::Array(params)) = item.get_mut("parameters") {
            let mut kept = Vec::new();
            for (i, p) in std::mem::take(params).into_iter().enumerate() {
                match self.classify(p) {
                    Param::Other(v) => {
                        renumbered(origins, &format!("{at}/parameters"), kept.len(), i);
                        kept.push(v);
                    }
                    body_or_form => inherited.push((format!("{at}/parameters/{i}"), body_or_form)),
                }
            }
            *params = kept;
        }
        for (key, value) in item {
            if key == "parameters" && value.as_array().is_some_and(Vec::is_empty) {
                continue;
            }
            let value = match (OPERATION_KEYS.contains(&key.as_str()), value) {
                (true, Value::Object(op)) => {
                    let op_at = format!("{at}/{key}");
                    self.convert_operation(op, &inherited, &op_at, origins)
                }
                (_, other) => other,
            };
            out.insert(key, value);
        }
        out
    }

    /// Sorts a parameter into body / formData / other, resolving `$ref`s to
    /// global body/formData parameters (3.0 cannot reference those).
    fn classify(&self, p: Value) -> Param {
        // The global parameter `p` refers to, if it is a `$ref`.
        let mut target: Option<&Value> = None;
        for _ in 0..MAX_REF_CHAIN {
            let cur = target.unwrap_or(&p);
            let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
                break;
            };
            match global_name(r, "parameters").and_then(|n| self.parameters.get(&n)) {
                Some(t) => target = Some(t),
                None => return Param::Other(p),
            }
        }
        let body_or_form = |v: &Value| match param_in(v) {
            Some("body") if is_inlinable(v) => Some(true),
            Some("formData") if is_inlinable(v) => Some(false),
            _ => None,
        };
        match target {
            // Globals are shared by every operation referring to them.
            Some(t @ Value::Object(m)) => match body_or_form(t) {
                Some(true) => Param::Body(m.clone(), Written::Ref(p)),
                Some(false) => Param::Form(m.clone(), Written::Ref(p)),
                None => Param::Other(convert_param_value(p)),
            },
            Some(_) => Param::Other(convert_param_value(p)),
            None => match (body_or_form(&p), p) {
                (Some(true), Value::Object(m)) => Param::Body(m, Written::Inline),
                (Some(false), Value::Object(m)) => Param::Form(m, Written::Inline),
                (_, p) => Param::Other(convert_param_value(p)),
            },
        }
    }

    /// `inherited`: path-level body and formData parameters, each with
    /// its pointer; `at`: the operation's pointer.
    fn convert_operation(
        &self,
        op: Map<String, Value>,
        inherited: &[(String, Param)],
        at: &str,
        origins: &mut Origins,
    ) -> Value {
        // Without usable media types the body and responses cannot be
        // converted faithfully; leave the operation for the compiler to
        // reject rather than guess.
        let (Ok(consumes), Ok(produces)) = (
            media_types(op.get("consumes")),
            media_types(op.get("produces")),
        ) else {
            return Value::Object(op);
        };
        let consumes =
            consumes.map_or_else(|| self.consumes.clone(), |c| non_empty_or_json(Some(c)));
        let produces =
            produces.map_or_else(|| self.produces.clone(), |p| non_empty_or_json(Some(p)));

        let mut op = op;
        let mut body: Option<Map<String, Value>> = None;
        let mut form: Vec<Map<String, Value>> = Vec::new();
        let mut params: Option<Vec<Value>> = None;
        // Where the body, and each form field, were written.
        let mut body_at: Option<String> = None;
        let mut form_at: Vec<String> = Vec::new();
        if let Some(Value::Array(list)) = op.get_mut("parameters") {
            let mut kept = Vec::new();
            for (i, p) in std::mem::take(list).into_iter().enumerate() {
                match self.classify(p) {
                    Param::Body(b, w) if body.is_none() && form.is_empty() => {
                        body_at = Some(self.written_at(&w, format!("{at}/parameters/{i}")));
                        body = Some(b);
                    }
                    Param::Form(f, w) if body.is_none() => {
                        form_at.push(self.written_at(&w, format!("{at}/parameters/{i}")));
                        form.push(f);
                    }
                    // A second body, or body mixed with formData, is invalid
                    // 2.0: keep it as written so the operation is rejected.
                    other => {
                        renumbered(origins, &format!("{at}/parameters"), kept.len(), i);
                        kept.push(other.written());
                    }
                }
            }
            params = Some(kept);
        }
        // Names the operation's own formData parameters take (a set: an
        // operation may have tens of thousands).
        let name =
            |f: &Map<String, Value>| f.get("name").and_then(Value::as_str).map(str::to_string);
        let mut form_names: std::collections::HashSet<Option<String>> =
            form.iter().map(name).collect();
        for (p_at, p) in inherited {
            match p {
                Param::Body(b, w) if body.is_none() && form.is_empty() => {
                    body = Some(b.clone());
                    body_at = Some(self.written_at(w, p_at.clone()));
                }
                Param::Form(f, w) if body.is_none() && form_names.insert(name(f)) => {
                    form.push(f.clone());
                    form_at.push(self.written_at(w, p_at.clone()));
                }
                _ => {}
            }
        }
        let rb_at = format!("{at}/requestBody");
        if let Some(b_at) = &body_at {
            origins.record(format!("{rb_at}/schema"), format!("{b_at}/schema"));
            origins.record(rb_at.clone(), b_at.clone());
        } else if let Some(first) = form_at.first() {
            origins.record(rb_at.clone(), first.clone());
            for (f, f_at) in form.iter().zip(&form_at) {
                if let Some(n) = name(f) {
                    let field = format!("{rb_at}/schema/properties/{}", escape_pointer(&n));
                    origins.record(field, f_at.clone());
                }
            }
        }
        let request_body = match body {
            Some(b) => Some(request_body_from_body(b, &consumes)),
            None if !form.is_empty() => Some(request_body_from_form(&form, &consumes)),
            None => None,
        };

        let mut out = Map::new();
        let mut request_body = request_body;
        for (key, value) in op {
            match key.as_str() {
                "consumes" | "produces" => {}
                "schemes" => {
                    if let Some(servers) = self.operation_servers(&value) {
                        out.insert("servers".into(), servers);
                    }
                }
                "parameters" => {
                    match params.take() {
                        Some(kept) if !kept.is_empty() => {
                            out.insert(key, Value::Array(kept));
                        }
                        Some(_) => {}
                        None => {
                            out.insert(key, value);
                        }
                    }
                    if let Some(rb) = request_body.take() {
                        out.insert("requestBody".into(), rb);
                    }
                }
                "responses" => {
                    out.insert(key, self.convert_responses(value, &produces));
                }
                _ => {
                    out.insert(key, value);
                }
            }
        }
        if let Some(rb) = request_body {
            out.insert("requestBody".into(), rb);
        }
        Value::Object(out)
    }

    /// Where a body or formData parameter's content was written: the
    /// global parameter a `$ref` names directly, else `here`.
    fn written_at(&self, written: &Written, here: String) -> String {
        let Written::Ref(r) = written else {
            return here;
        };
        match r
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| global_name(r, "parameters"))
        {
            Some(n)
                if self
                    .parameters
                    .get(&n)
                    .is_some_and(|t| t.get("$ref").is_none()) =>
            {
                format!("/parameters/{}", escape_pointer(&n))
            }
            _ => here,
        }
    }

    fn operation_servers(&self, schemes: &Value) -> Option<Value> {
        let host = self.host.as_deref()?;
        let schemes: Vec<String> = schemes
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        if schemes.is_empty() {
            return None;
        }
        let base = self
            .base_path
            .as_deref()
            .unwrap_or("")
            .trim_end_matches('/');
        let urls = self.scheme_urls(host, base, &schemes);
        Some(Value::Array(urls.iter().map(|u| server(u)).collect()))
    }

    fn convert_responses(&self, responses: Value, produces: &[String]) -> Value {
        let Value::Object(m) = responses else {
            return responses;
        };
        let converted = m
            .into_iter()
            .map(|(code, r)| {
                if is_extension(&code) {
                    return (code, r);
                }
                let r = self.convert_response_or_ref(r, produces);
                (code, r)
            })
            .collect();
        Value::Object(converted)
    }

    /// A `$ref` to a global response stays a ref, unless the operation's
    /// `produces` differs from the global one that the component was
    /// converted with; then the response is inlined with the right media
    /// types.
    fn convert_response_or_ref(&self, r: Value, produces: &[String]) -> Value {
        let Some(reference) = r.get("$ref").and_then(Value::as_str) else {
            return self.convert_response(r, produces);
        };
        if produces == self.produces.as_slice() {
            return r;
        }
        let Some(target) = global_name(reference, "responses").and_then(|n| self.responses.get(&n))
        else {
            return r;
        };
        let has_content = target.get("schema").is_some() || target.get("examples").is_some();
        if has_content && target.get("$ref").is_none() {
            self.convert_response(target.clone(), produces)
        } else {
            r
        }
    }

    fn convert_response(&self, response: Value, produces: &[String]) -> Value {
        let Value::Object(m) = response else {
            return response;
        };
        if m.contains_key("$ref") {
            return Value::Object(m);
        }
        let examples = match m.get("examples") {
            Some(Value::Object(e)) => Some(e.clone()),
            _ => None,
        };
        let mut out = Map::new();
        let mut content_done = false;
        for (key, value) in m {
            match key.as_str() {
                "schema" => {
                    out.insert(
                        "content".into(),
                        Value::Object(response_content(value, produces, examples.as_ref())),
                    );
                    content_done = true;
                }
                "examples" if examples.is_some() => {}
                "headers" => {
                    out.insert(key, convert_headers(value));
                }
                _ => {
                    out.insert(key, value);
                }
            }
        }
        if !content_done {
            if let Some(examples) = examples {
                let content = examples
                    .into_iter()
                    .map(|(mt, ex)| (mt, Value::Object(one("example", ex))))
                    .collect();
                out.insert("content".into(), Value::Object(content));
            }
        }
        Value::Object(out)
    }
}

/// Records that parameter `i` as written is `j` after the body and form
/// parameters left the list (`list`: the list's pointer); its schema
/// keywords are the parameter's own in 2.0.
fn renumbered(origins: &mut Origins, list: &str, j: usize, i: usize) {
    if i != j {
        origins.record(format!("{list}/{j}/schema"), format!("{list}/{i}"));
        origins.record(format!("{list}/{j}"), format!("{list}/{i}"));
    }
}

fn server(url: &str) -> Value {
    Value::Object(one("url", Value::from(url)))
}

fn one(key: &str, value: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(key.into(), value);
    m
}

fn is_file_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("file")
}

/// The `content` map of a response: the schema under every produced media
/// type. A file response is binary, so JSON media types do not describe it;
/// it goes under the non-JSON types the operation names, or octet-stream.
fn response_content(
    schema: Value,
    produces: &[String],
    examples: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let media: Vec<String> = if is_file_schema(&schema) {
        let binary: Vec<String> = produces
            .iter()
            .filter(|m| !m.to_ascii_lowercase().contains("json"))
            .cloned()
            .collect();
        if binary.is_empty() {
            vec![OCTET_STREAM.to_string()]
        } else {
            binary
        }
    } else {
        produces.to_vec()
    };
    let schema = convert_schema(schema, 0);
    let mut content: Map<String, Value> = media
        .into_iter()
        .map(|mt| (mt, Value::Object(one("schema", schema.clone()))))
        .collect();
    if let Some(examples) = examples {
        for (mt, example) in examples {
            let entry = content
                .entry(mt.clone())
                .or_insert_with(|| Value::Object(one("schema", schema.clone())));
            if let Value::Object(e) = entry {
                e.insert("example".into(), example.clone());
            }
        }
    }
    content
}

fn convert_headers(headers: Value) -> Value {
    let Value::Object(m) = headers else {
        return headers;
    };
    let converted = m
        .into_iter()
        .map(|(name, h)| {
            let h = match h {
                Value::Object(h) if !h.contains_key("$ref") => Value::Object(convert_header(h)),
                other => other,
            };
            (name, h)
        })
        .collect();
    Value::Object(converted)
}

fn convert_header(h: Map<String, Value>) -> Map<String, Value> {
    let schema = simple_schema(&h, 0);
    let mut out = Map::new();
    for (key, value) in h {
        if SCHEMA_KEYS.contains(&key.as_str()) || key == "collectionFormat" || key == "x-nullable" {
            continue;
        }
        out.insert(key, value);
    }
    out.insert("schema".into(), schema);
    out
}

/// Builds a 3.0 schema from the schema keywords of a 2.0 non-body
/// parameter, items or header object.
fn simple_schema(m: &Map<String, Value>, depth: usize) -> Value {
    let mut keywords = SchemaKeywords::default();
    for (key, v) in m {
        if key == "x-nullable" {
            keywords.nullable = v.as_bool();
        } else if let Some(i) = SCHEMA_KEYS.iter().position(|s| s == key) {
            keywords.values[i] = Some(v.clone());
        }
    }
    keywords.into_schema(depth)
}

/// The [`SCHEMA_KEYS`] values of a 2.0 non-body parameter, items or header
/// object (collected in one pass: a lookup per keyword was a large share of
/// converting a 2.0 document), and its `x-nullable`.
#[derive(Default)]
struct SchemaKeywords {
    values: [Option<Value>; SCHEMA_KEYS.len()],
    nullable: Option<bool>,
}

impl SchemaKeywords {
    fn into_schema(self, depth: usize) -> Value {
        let mut schema = Map::new();
        for (key, v) in SCHEMA_KEYS.iter().zip(self.values) {
            let Some(v) = v else { continue };
            let v = match (*key, v) {
                ("items", v @ Value::Object(_)) if v.get("$ref").is_some() || depth > MAX_DEPTH => {
                    convert_schema(v, depth + 1)
                }
                ("items", Value::Object(items)) => simple_schema(&items, depth + 1),
                (_, v) => v,
            };
            schema.insert((*key).into(), v);
        }
        if schema.get("type").and_then(Value::as_str) == Some("file") {
            make_binary(&mut schema);
        }
        if let Some(b) = self.nullable {
            schema.insert("nullable".into(), Value::Bool(b));
        }
        Value::Object(schema)
    }
}

fn make_binary(schema: &mut Map<String, Value>) {
    schema.insert("type".into(), Value::from("string"));
    schema.insert("format".into(), Value::from("binary"));
}

/// `collectionFormat` → `(style, explode, note)`; `note` is the original
/// format when 3.0 has no equivalent (tsv).
fn collection_style(location: &str, format: Option<&str>) -> (&'static str, bool, Option<String>) {
    let simple = matches!(location, "path" | "header");
    match format.unwrap_or("csv") {
        "csv" if simple => ("simple", false, None),
        "csv" => ("form", false, None),
        "multi" => ("form", true, None),
        "ssv" => ("spaceDelimited", false, None),
        "pipes" => ("pipeDelimited", false, None),
        other => ("form", false, Some(other.to_string())),
    }
}

/// Converts a non-body parameter; anything else (a `$ref`, a malformed
/// parameter, a body parameter without schema) is kept as written.
fn convert_param_value(p: Value) -> Value {
    match p {
        Value::Object(m)
            if !m.contains_key("$ref")
                && matches!(
                    m.get("in").and_then(Value::as_str),
                    Some("query" | "path" | "header")
                ) =>
        {
            Value::Object(convert_param(m))
        }
        other => other,
    }
}

fn convert_param(m: Map<String, Value>) -> Map<String, Value> {
    let location = m
        .get("in")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // One pass, moving values: parameters are most of a 2.0 document.
    let mut keywords = SchemaKeywords::default();
    let mut schema = None;
    let mut format = None;
    let mut out = Map::with_capacity(m.len());
    for (key, value) in m {
        match key.as_str() {
            "schema" => schema = Some(value),
            "collectionFormat" => format = value.as_str().map(str::to_string),
            "x-nullable" => keywords.nullable = value.as_bool(),
            "x-example" => {
                out.insert("example".into(), value);
            }
            k => match SCHEMA_KEYS.iter().position(|s| *s == k) {
                Some(i) => keywords.values[i] = Some(value),
                None => {
                    out.insert(key, value);
                }
            },
        }
    }
    let schema = match schema {
        Some(s @ Value::Object(_)) => convert_schema(s, 0),
        _ => keywords.into_schema(0),
    };
    let is_array = schema.get("type").and_then(Value::as_str) == Some("array");
    if is_array {
        let (style, explode, note) = collection_style(&location, format.as_deref());
        out.insert("style".into(), Value::from(style));
        out.insert("explode".into(), Value::Bool(explode));
        if let Some(note) = note {
            out.insert("x-collectionFormat".into(), Value::from(note));
        }
    }
    out.insert("schema".into(), schema);
    out
}

fn request_body_from_body(b: Map<String, Value>, consumes: &[String]) -> Value {
    let schema = convert_schema(b.get("schema").cloned().unwrap_or_default(), 0);
    let mut rb = Map::new();
    if let Some(d) = b.get("description") {
        rb.insert("description".into(), d.clone());
    }
    let content = consumes
        .iter()
        .map(|mt| (mt.clone(), Value::Object(one("schema", schema.clone()))))
        .collect();
    rb.insert("content".into(), Value::Object(content));
    if let Some(r @ Value::Bool(_)) = b.get("required") {
        rb.insert("required".into(), r.clone());
    }
    if let Some(name) = b.get("name") {
        // swagger2openapi's name for the 2.0 body parameter's name, which
        // 3.0 has no place for.
        rb.insert("x-codegen-request-body-name".into(), name.clone());
    }
    for (key, value) in b {
        if is_extension(&key) {
            rb.insert(key, value);
        }
    }
    Value::Object(rb)
}

fn media_base(mt: &str) -> String {
    mt.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

fn request_body_from_form(fields: &[Map<String, Value>], consumes: &[String]) -> Value {
    let has_file = fields
        .iter()
        .any(|f| f.get("type").and_then(Value::as_str) == Some("file"));
    let mut media: Vec<String> = consumes
        .iter()
        .filter(|mt| {
            let base = media_base(mt);
            base == MULTIPART || (base == FORM_URLENCODED && !has_file)
        })
        .cloned()
        .collect();
    if media.is_empty() {
        media.push(if has_file { MULTIPART } else { FORM_URLENCODED }.to_string());
    }

    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut encoding = Map::new();
    for f in fields {
        let Some(name) = f.get("name").and_then(Value::as_str) else {
            continue;
        };
        let mut prop = match simple_schema(f, 0) {
            Value::Object(s) => s,
            _ => Map::new(),
        };
        if let Some(d) = f.get("description") {
            prop.insert("description".into(), d.clone());
        }
        for (key, value) in f {
            if is_extension(key) && key != "x-nullable" {
                prop.insert(key.clone(), value.clone());
            }
        }
        if prop.get("type").and_then(Value::as_str) == Some("array") {
            let format = f.get("collectionFormat").and_then(Value::as_str);
            let (style, explode, note) = collection_style("formData", format);
            let mut enc = Map::new();
            enc.insert("style".into(), Value::from(style));
            enc.insert("explode".into(), Value::Bool(explode));
            if let Some(note) = note {
                enc.insert("x-collectionFormat".into(), Value::from(note));
            }
            encoding.insert(name.to_string(), Value::Object(enc));
        }
        if f.get("required") == Some(&Value::Bool(true)) {
            required.push(Value::from(name));
        }
        properties.insert(name.to_string(), Value::Object(prop));
    }
    let mut schema = Map::new();
    schema.insert("type".into(), Value::from("object"));
    schema.insert("properties".into(), Value::Object(properties));
    let any_required = !required.is_empty();
    if any_required {
        schema.insert("required".into(), Value::Array(required));
    }
    let schema = Value::Object(schema);
    let content = media
        .into_iter()
        .map(|mt| {
            let mut entry = one("schema", schema.clone());
            if !encoding.is_empty() {
                entry.insert("encoding".into(), Value::Object(encoding.clone()));
            }
            (mt, Value::Object(entry))
        })
        .collect();
    let mut rb = one("content", Value::Object(content));
    if any_required {
        rb.insert("required".into(), Value::Bool(true));
    }
    Value::Object(rb)
}

/// Converts a 2.0 schema: `type: file` → binary string, `x-nullable` →
/// `nullable`, string `discriminator` → object; recurses into subschemas
/// (never into `example`, `default`, `enum` or extensions, which are data).
fn convert_schema(schema: Value, depth: usize) -> Value {
    let Value::Object(mut m) = schema else {
        return schema;
    };
    if depth > MAX_DEPTH {
        return Value::Object(m);
    }
    if m.get("type").and_then(Value::as_str) == Some("file") {
        make_binary(&mut m);
    }
    if let Some(Value::Bool(b)) = m.get("x-nullable") {
        let b = *b;
        m.remove("x-nullable");
        m.insert("nullable".into(), Value::Bool(b));
    }
    if let Some(Value::String(name)) = m.get("discriminator") {
        let d = one("propertyName", Value::String(name.clone()));
        m.insert("discriminator".into(), Value::Object(d));
    }
    for key in ["properties", "patternProperties", "definitions"] {
        if let Some(Value::Object(props)) = m.get_mut(key) {
            for v in props.values_mut() {
                *v = convert_schema(std::mem::take(v), depth + 1);
            }
        }
    }
    for key in ["additionalProperties", "not", "items"] {
        if let Some(v @ Value::Object(_)) = m.get_mut(key) {
            *v = convert_schema(std::mem::take(v), depth + 1);
        }
    }
    for key in ["allOf", "anyOf", "oneOf", "items"] {
        if let Some(Value::Array(list)) = m.get_mut(key) {
            for v in list.iter_mut() {
                *v = convert_schema(std::mem::take(v), depth + 1);
            }
        }
    }
    Value::Object(m)
}

fn convert_security_scheme(scheme: Value) -> Value {
    let Value::Object(m) = scheme else {
        return scheme;
    };
    match m.get("type").and_then(Value::as_str) {
        Some("basic") => {
            let mut out = Map::new();
            for (key, value) in m {
                match key.as_str() {
                    "type" => {
                        out.insert("type".into(), Value::from("http"));
                        out.insert("scheme".into(), Value::from("basic"));
                    }
                    _ => {
                        out.insert(key, value);
                    }
                }
            }
            Value::Object(out)
        }
        Some("oauth2") => {
            let flow_name = match m.get("flow").and_then(Value::as_str) {
                Some("implicit") => "implicit",
                Some("password") => "password",
                Some("application") => "clientCredentials",
                Some("accessCode") => "authorizationCode",
                // Unknown flow: keep as written; the compiler reports it.
                _ => return Value::Object(m),
            };
            let mut flow = Map::new();
            for key in ["authorizationUrl", "tokenUrl"] {
                if let Some(v) = m.get(key) {
                    flow.insert(key.into(), v.clone());
                }
            }
            let scopes = match m.get("scopes") {
                Some(s @ Value::Object(_)) => s.clone(),
                _ => Value::Object(Map::new()),
            };
            flow.insert("scopes".into(), scopes);
            let mut out = Map::new();
            for (key, value) in m {
                match key.as_str() {
                    "flow" | "authorizationUrl" | "tokenUrl" | "scopes" => {}
                    "type" => {
                        out.insert(key, value);
                        let flows = one(flow_name, Value::Object(flow.clone()));
                        out.insert("flows".into(), Value::Object(flows));
                    }
                    _ => {
                        out.insert(key, value);
                    }
                }
            }
            Value::Object(out)
        }
        _ => Value::Object(m),
    }
}

/// Rewrites every string `$ref` from a 2.0 section to its 3.0 component.
/// Iterative so a deeply nested document cannot overflow the stack.
fn rewrite_refs(root: &mut Value) {
    const MOVES: [(&str, &str); 3] = [
        ("#/definitions/", "#/components/schemas/"),
        ("#/parameters/", "#/components/parameters/"),
        ("#/responses/", "#/components/responses/"),
    ];
    let mut stack: Vec<&mut Value> = vec![root];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                for (key, child) in m.iter_mut() {
                    match child {
                        Value::String(r) if key == "$ref" => {
                            for (from, to) in MOVES {
                                if let Some(rest) = r.strip_prefix(from) {
                                    *r = format!("{to}{rest}");
                                    break;
                                }
                            }
                        }
                        Value::Object(_) | Value::Array(_) => stack.push(child),
                        _ => {}
                    }
                }
            }
            Value::Array(a) => stack.extend(a.iter_mut()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conv(doc: Value) -> Value {
        convert("test.json", doc).expect("conversion succeeds")
    }

    /// A minimal 2.0 document around `paths`, plus extra root keys.
    fn doc(paths: Value, extra: Value) -> Value {
        let mut d =
            json!({"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": paths});
        if let (Value::Object(d), Value::Object(extra)) = (&mut d, extra) {
            d.extend(extra);
        }
        d
    }

    fn op(parameters: Value) -> Value {
        json!({"/x": {"post": {"parameters": parameters, "responses": {"200": {"description": "ok"}}}}})
    }

    fn all_refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    match c {
                        Value::String(s) if k == "$ref" => out.push(s.clone()),
                        _ => all_refs(c, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|c| all_refs(c, out)),
            _ => {}
        }
    }

    fn unresolved_refs(root: &Value) -> Vec<String> {
        let mut refs = Vec::new();
        all_refs(root, &mut refs);
        refs.into_iter()
            .filter(|r| ref_pointer(r).and_then(|p| root.pointer(&p)).is_none())
            .collect()
    }

    #[test]
    fn swagger_field_becomes_openapi_3_0_3() {
        let out = conv(doc(json!({}), json!({})));
        assert_eq!(out["openapi"], "3.0.3");
        assert!(out.get("swagger").is_none());
        assert_eq!(out["info"]["title"], "t");
    }

    #[test]
    fn host_base_path_and_schemes_become_one_server_per_scheme_https_first() {
        let out = conv(doc(
            json!({}),
            json!({"host": "api.example.com:8443", "basePath": "/v2/", "schemes": ["http", "https"]}),
        ));
        assert_eq!(
            out["servers"],
            json!([{"url": "https://api.example.com:8443/v2"}, {"url": "http://api.example.com:8443/v2"}])
        );
        for key in ["host", "basePath", "schemes"] {
            assert!(out.get(key).is_none(), "{key} left over");
        }
    }

    #[test]
    fn host_without_schemes_defaults_to_https() {
        let out = conv(doc(json!({}), json!({"host": "h.example"})));
        assert_eq!(out["servers"], json!([{"url": "https://h.example"}]));
    }

    #[test]
    fn missing_host_gives_a_relative_base_path_server() {
        let out = conv(doc(
            json!({}),
            json!({"basePath": "/api/v1", "schemes": ["https", "http"]}),
        ));
        assert_eq!(out["servers"], json!([{"url": "/api/v1"}]));
        let none = conv(doc(json!({}), json!({})));
        assert!(none.get("servers").is_none());
    }

    #[test]
    fn definitions_move_to_components_schemas_and_escaped_refs_still_resolve() {
        let out = conv(doc(
            json!({"/x": {"get": {"responses": {"200": {"description": "ok",
                "schema": {"$ref": "#/definitions/a~1b"}}}}}}),
            json!({"definitions": {
                "a/b": {"type": "object", "properties": {
                    "c": {"$ref": "#/definitions/io.k8s.Thing"},
                    "d": {"$ref": "#/definitions/t~0ilde"}}},
                "io.k8s.Thing": {"type": "string"},
                "t~ilde": {"type": "integer"}}}),
        ));
        assert!(out.get("definitions").is_none());
        let schemas = &out["components"]["schemas"];
        assert_eq!(
            schemas["a/b"]["properties"]["c"]["$ref"],
            "#/components/schemas/io.k8s.Thing"
        );
        assert_eq!(
            schemas["a/b"]["properties"]["d"]["$ref"],
            "#/components/schemas/t~0ilde"
        );
        assert_eq!(
            out["paths"]["/x"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
                ["$ref"],
            "#/components/schemas/a~1b"
        );
        assert_eq!(unresolved_refs(&out), Vec::<String>::new());
    }

    #[test]
    fn global_non_body_parameters_move_to_components_and_refs_follow() {
        let out = conv(doc(
            op(json!([{"$ref": "#/parameters/limit"}])),
            json!({"parameters": {"limit": {"name": "limit", "in": "query", "type": "integer", "maximum": 50}}}),
        ));
        assert_eq!(
            out["components"]["parameters"]["limit"],
            json!({"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 50}})
        );
        assert_eq!(
            out["paths"]["/x"]["post"]["parameters"][0]["$ref"],
            "#/components/parameters/limit"
        );
        assert_eq!(unresolved_refs(&out), Vec::<String>::new());
    }

    #[test]
    fn ref_to_global_body_parameter_is_inlined_as_request_body() {
        let out = conv(doc(
            op(json!([{"$ref": "#/parameters/pet"}])),
            json!({"parameters": {"pet": {"name": "pet", "in": "body", "required": true,
                "description": "the pet", "schema": {"$ref": "#/definitions/Pet"}}},
                "definitions": {"Pet": {"type": "object"}}}),
        ));
        let o = &out["paths"]["/x"]["post"];
        assert!(o.get("parameters").is_none());
        assert_eq!(o["requestBody"]["required"], true);
        assert_eq!(o["requestBody"]["description"], "the pet");
        assert_eq!(
            o["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Pet"
        );
        assert!(out["components"].get("parameters").is_none());
        assert_eq!(unresolved_refs(&out), Vec::<String>::new());
    }

    #[test]
    fn ref_to_global_form_data_parameter_is_inlined_as_form_field() {
        let out = conv(doc(
            op(
                json!([{"$ref": "#/parameters/upload"}, {"name": "q", "in": "query", "type": "string"}]),
            ),
            json!({"parameters": {"upload": {"name": "file", "in": "formData", "type": "file", "required": true}}}),
        ));
        let o = &out["paths"]["/x"]["post"];
        assert_eq!(o["parameters"].as_array().map(Vec::len), Some(1));
        let schema = &o["requestBody"]["content"]["multipart/form-data"]["schema"];
        assert_eq!(
            schema["properties"]["file"],
            json!({"type": "string", "format": "binary"})
        );
        assert_eq!(schema["required"], json!(["file"]));
    }

    #[test]
    fn global_responses_move_to_components_with_global_produces() {
        let out = conv(doc(
            json!({"/x": {"get": {"responses": {"404": {"$ref": "#/responses/NotFound"}}}}}),
            json!({"produces": ["application/json", "application/xml"],
                "responses": {"NotFound": {"description": "nf", "schema": {"type": "string"}}}}),
        ));
        let nf = &out["components"]["responses"]["NotFound"];
        assert_eq!(nf["content"]["application/xml"]["schema"]["type"], "string");
        assert_eq!(
            nf["content"]["application/json"]["schema"]["type"],
            "string"
        );
        assert_eq!(
            out["paths"]["/x"]["get"]["responses"]["404"]["$ref"],
            "#/components/responses/NotFound"
        );
    }

    #[test]
    fn response_ref_is_inlined_when_operation_produces_differs_from_global() {
        let out = conv(doc(
            json!({"/x": {"get": {"produces": ["text/plain"],
                "responses": {"200": {"$ref": "#/responses/Str"}}}}}),
            json!({"responses": {"Str": {"description": "s", "schema": {"type": "string"}}}}),
        ));
        let r = &out["paths"]["/x"]["get"]["responses"]["200"];
        assert_eq!(
            r["content"],
            json!({"text/plain": {"schema": {"type": "string"}}})
        );
        assert_eq!(r["description"], "s");
    }

    #[test]
    fn security_definitions_become_security_schemes() {
        let out = conv(doc(
            json!({}),
            json!({"securityDefinitions": {
                "basic": {"type": "basic", "description": "b"},
                "key": {"type": "apiKey", "name": "X-Key", "in": "header", "x-vendor": 1},
                "imp": {"type": "oauth2", "flow": "implicit", "authorizationUrl": "https://a", "scopes": {"r": "read"}},
                "pw": {"type": "oauth2", "flow": "password", "tokenUrl": "https://t"},
                "app": {"type": "oauth2", "flow": "application", "tokenUrl": "https://t", "scopes": {}},
                "code": {"type": "oauth2", "flow": "accessCode", "authorizationUrl": "https://a",
                         "tokenUrl": "https://t", "scopes": {"w": "write"}}},
                "security": [{"basic": []}]}),
        ));
        let s = &out["components"]["securitySchemes"];
        assert_eq!(
            s["basic"],
            json!({"type": "http", "scheme": "basic", "description": "b"})
        );
        assert_eq!(
            s["key"],
            json!({"type": "apiKey", "name": "X-Key", "in": "header", "x-vendor": 1})
        );
        assert_eq!(
            s["imp"]["flows"],
            json!({"implicit": {"authorizationUrl": "https://a", "scopes": {"r": "read"}}})
        );
        assert_eq!(
            s["pw"]["flows"],
            json!({"password": {"tokenUrl": "https://t", "scopes": {}}})
        );
        assert_eq!(
            s["app"]["flows"],
            json!({"clientCredentials": {"tokenUrl": "https://t", "scopes": {}}})
        );
        assert_eq!(
            s["code"]["flows"]["authorizationCode"],
            json!({"authorizationUrl": "https://a", "tokenUrl": "https://t", "scopes": {"w": "write"}})
        );
        assert!(s["code"].get("flow").is_none());
        assert_eq!(out["security"], json!([{"basic": []}]));
        assert!(out.get("securityDefinitions").is_none());
    }

    #[test]
    fn non_body_parameter_gets_schema_from_its_keywords() {
        let out = conv(doc(
            op(
                json!([{"name": "n", "in": "query", "description": "d", "required": true,
                "allowEmptyValue": true, "type": "array", "minItems": 1, "maxItems": 3, "uniqueItems": true,
                "items": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 9,
                          "exclusiveMinimum": true, "exclusiveMaximum": false, "multipleOf": 3,
                          "enum": [0, 3], "default": 3},
                "x-example": [3]},
                {"name": "s", "in": "header", "type": "string", "minLength": 1, "maxLength": 5,
                 "pattern": "^a", "default": "a", "x-nullable": true}]),
            ),
            json!({}),
        ));
        let p = &out["paths"]["/x"]["post"]["parameters"];
        assert_eq!(
            p[0],
            json!({"name": "n", "in": "query", "description": "d", "required": true,
                "allowEmptyValue": true, "example": [3], "style": "form", "explode": false,
                "schema": {"type": "array", "minItems": 1, "maxItems": 3, "uniqueItems": true,
                    "items": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 9,
                        "exclusiveMinimum": true, "exclusiveMaximum": false, "multipleOf": 3,
                        "enum": [0, 3], "default": 3}}})
        );
        assert_eq!(
            p[1]["schema"],
            json!({"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^a", "default": "a", "nullable": true})
        );
    }

    #[test]
    fn collection_formats_map_to_style_and_explode() {
        let cases = [
            ("query", Some("csv"), "form", false),
            ("query", None, "form", false),
            ("path", Some("csv"), "simple", false),
            ("header", None, "simple", false),
            ("query", Some("multi"), "form", true),
            ("query", Some("ssv"), "spaceDelimited", false),
            ("query", Some("pipes"), "pipeDelimited", false),
            ("query", Some("tsv"), "form", false),
        ];
        for (location, format, style, explode) in cases {
            let mut p =
                json!({"name": "a", "in": location, "type": "array", "items": {"type": "string"}});
            if let Some(f) = format {
                p["collectionFormat"] = json!(f);
            }
            let out = conv(doc(op(json!([p])), json!({})));
            let p = &out["paths"]["/x"]["post"]["parameters"][0];
            assert_eq!(p["style"], style, "{location} {format:?}");
            assert_eq!(p["explode"], explode, "{location} {format:?}");
            assert!(p.get("collectionFormat").is_none());
            let note = if format == Some("tsv") {
                json!("tsv")
            } else {
                Value::Null
            };
            assert_eq!(
                p.get("x-collectionFormat").cloned().unwrap_or(Value::Null),
                note
            );
        }
    }

    #[test]
    fn body_parameter_becomes_request_body_per_consumes_media_type() {
        let body = json!([{"name": "b", "in": "body", "required": false, "x-v": true,
            "schema": {"type": "object", "x-nullable": true}}]);
        // operation consumes wins over global
        let out = conv(doc(
            json!({"/x": {"post": {"consumes": ["application/json", "application/yaml"],
                "parameters": body.clone(), "responses": {}}}}),
            json!({"consumes": ["text/plain"]}),
        ));
        let rb = &out["paths"]["/x"]["post"]["requestBody"];
        assert_eq!(rb["required"], false);
        assert_eq!(rb["x-v"], true);
        assert_eq!(rb["x-codegen-request-body-name"], "b");
        let keys: Vec<&String> = rb["content"]
            .as_object()
            .map(|c| c.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["application/json", "application/yaml"]);
        assert_eq!(
            rb["content"]["application/yaml"]["schema"],
            json!({"type": "object", "nullable": true})
        );
        // global consumes
        let out = conv(doc(op(body.clone()), json!({"consumes": ["text/plain"]})));
        assert!(out["paths"]["/x"]["post"]["requestBody"]["content"]["text/plain"].is_object());
        // default
        let out = conv(doc(op(body), json!({})));
        let content = &out["paths"]["/x"]["post"]["requestBody"]["content"];
        assert_eq!(content.as_object().map(Map::len), Some(1));
        assert!(content["application/json"].is_object());
    }

    #[test]
    fn form_data_becomes_urlencoded_object_schema() {
        let out = conv(doc(
            op(json!([
                {"name": "a", "in": "formData", "type": "string", "required": true, "description": "A"},
                {"name": "b", "in": "formData", "type": "array", "items": {"type": "integer"},
                 "collectionFormat": "multi"}])),
            json!({}),
        ));
        let rb = &out["paths"]["/x"]["post"]["requestBody"];
        assert_eq!(rb["required"], true);
        let entry = &rb["content"][FORM_URLENCODED];
        assert_eq!(
            entry["schema"],
            json!({"type": "object", "properties": {
                "a": {"type": "string", "description": "A"},
                "b": {"type": "array", "items": {"type": "integer"}}},
                "required": ["a"]})
        );
        assert_eq!(
            entry["encoding"]["b"],
            json!({"style": "form", "explode": true})
        );
        assert!(out["paths"]["/x"]["post"].get("parameters").is_none());
    }

    #[test]
    fn form_data_is_multipart_when_consumes_says_so_or_a_field_is_a_file() {
        let fields = json!([{"name": "a", "in": "formData", "type": "string"}]);
        let out = conv(doc(
            json!({"/x": {"post": {"consumes": ["multipart/form-data"], "parameters": fields, "responses": {}}}}),
            json!({}),
        ));
        let content = &out["paths"]["/x"]["post"]["requestBody"]["content"];
        assert_eq!(
            content
                .as_object()
                .map(|c| c.keys().cloned().collect::<Vec<_>>()),
            Some(vec![MULTIPART.to_string()])
        );

        let out = conv(doc(
            op(json!([{"name": "f", "in": "formData", "type": "file"}])),
            json!({"consumes": [FORM_URLENCODED]}),
        ));
        let content = &out["paths"]["/x"]["post"]["requestBody"]["content"];
        assert_eq!(content.as_object().map(Map::len), Some(1));
        assert_eq!(
            content[MULTIPART]["schema"]["properties"]["f"],
            json!({"type": "string", "format": "binary"})
        );
    }

    #[test]
    fn response_schema_becomes_content_per_produces_media_type() {
        let out = conv(doc(
            json!({"/x": {"get": {"produces": ["application/json", "application/xml"],
                "responses": {"200": {"description": "ok", "schema": {"type": "array", "items": {"$ref": "#/definitions/P"}}},
                              "204": {"description": "none"}}}}}),
            json!({"definitions": {"P": {}}}),
        ));
        let r = &out["paths"]["/x"]["get"]["responses"];
        for mt in ["application/json", "application/xml"] {
            assert_eq!(
                r["200"]["content"][mt]["schema"]["items"]["$ref"],
                "#/components/schemas/P"
            );
        }
        assert!(r["200"].get("schema").is_none());
        assert_eq!(r["204"], json!({"description": "none"}));
        assert!(out["paths"]["/x"]["get"].get("produces").is_none());
    }

    #[test]
    fn file_response_is_binary_under_octet_stream_unless_produces_names_a_binary_type() {
        let file = json!({"200": {"description": "f", "schema": {"type": "file"}}});
        let out = conv(doc(
            json!({"/x": {"get": {"responses": file.clone()}}}),
            json!({}),
        ));
        assert_eq!(
            out["paths"]["/x"]["get"]["responses"]["200"]["content"],
            json!({"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}})
        );
        let out = conv(doc(
            json!({"/x": {"get": {"produces": ["text/csv"], "responses": file}}}),
            json!({}),
        ));
        assert_eq!(
            out["paths"]["/x"]["get"]["responses"]["200"]["content"],
            json!({"text/csv": {"schema": {"type": "string", "format": "binary"}}})
        );
    }

    #[test]
    fn response_headers_become_header_objects_with_schema() {
        let out = conv(doc(
            json!({"/x": {"get": {"responses": {"200": {"description": "ok", "headers": {
                "X-Rate": {"type": "integer", "format": "int32", "description": "rate", "x-h": 1},
                "X-List": {"type": "array", "items": {"type": "string"}, "collectionFormat": "csv"}}}}}}}),
            json!({}),
        ));
        let h = &out["paths"]["/x"]["get"]["responses"]["200"]["headers"];
        assert_eq!(
            h["X-Rate"],
            json!({"description": "rate", "x-h": 1, "schema": {"type": "integer", "format": "int32"}})
        );
        assert_eq!(
            h["X-List"],
            json!({"schema": {"type": "array", "items": {"type": "string"}}})
        );
    }

    #[test]
    fn response_examples_become_content_examples() {
        let out = conv(doc(
            json!({"/x": {"get": {"responses": {"200": {"description": "ok", "schema": {"type": "object"},
                "examples": {"application/json": {"id": 1}}}}}}}),
            json!({}),
        ));
        let r = &out["paths"]["/x"]["get"]["responses"]["200"];
        assert_eq!(
            r["content"]["application/json"]["example"],
            json!({"id": 1})
        );
        assert!(r.get("examples").is_none());
    }

    #[test]
    fn path_level_parameters_convert_and_path_level_body_joins_each_operation() {
        let out = conv(doc(
            json!({"/x/{id}": {
                "parameters": [
                    {"name": "id", "in": "path", "required": true, "type": "string"},
                    {"name": "b", "in": "body", "schema": {"type": "object"}}],
                "put": {"responses": {}},
                "post": {"parameters": [{"name": "other", "in": "body", "schema": {"type": "string"}}],
                         "responses": {}}}}),
            json!({}),
        ));
        let item = &out["paths"]["/x/{id}"];
        assert_eq!(
            item["parameters"],
            json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}])
        );
        assert_eq!(
            item["put"]["requestBody"]["content"]["application/json"]["schema"]["type"],
            "object"
        );
        // the operation's own body overrides the path-level one
        assert_eq!(
            item["post"]["requestBody"]["content"]["application/json"]["schema"]["type"],
            "string"
        );
    }

    #[test]
    fn vendor_extensions_and_operation_metadata_are_carried_over() {
        let out = conv(doc(
            json!({"/x": {"x-path": 1, "get": {
                "tags": ["t"], "summary": "s", "description": "d", "operationId": "o",
                "deprecated": true, "security": [{"k": []}], "x-mcp-tool-name": "tool",
                "parameters": [{"name": "q", "in": "query", "type": "string", "x-mcp-hidden": true}],
                "responses": {"x-r": 2, "200": {"description": "ok", "x-resp": 3}}}}}),
            json!({"x-root": {"$ref": "#/definitions/A"}, "definitions": {"A": {"x-s": 4}}, "tags": [{"name": "t"}]}),
        ));
        let o = &out["paths"]["/x"]["get"];
        for (k, v) in [
            ("tags", json!(["t"])),
            ("summary", json!("s")),
            ("description", json!("d")),
            ("operationId", json!("o")),
            ("deprecated", json!(true)),
            ("security", json!([{"k": []}])),
            ("x-mcp-tool-name", json!("tool")),
        ] {
            assert_eq!(o[k], v, "{k}");
        }
        assert_eq!(o["parameters"][0]["x-mcp-hidden"], true);
        assert_eq!(o["responses"]["x-r"], 2);
        assert_eq!(o["responses"]["200"]["x-resp"], 3);
        assert_eq!(out["paths"]["/x"]["x-path"], 1);
        assert_eq!(out["tags"], json!([{"name": "t"}]));
        assert_eq!(out["components"]["schemas"]["A"]["x-s"], 4);
        // refs inside extensions follow the move so they keep resolving
        assert_eq!(out["x-root"]["$ref"], "#/components/schemas/A");
    }

    #[test]
    fn schema_rules_file_nullable_and_discriminator() {
        let out = conv(doc(
            json!({}),
            json!({"definitions": {
                "Pet": {"type": "object", "discriminator": "kind", "properties": {
                    "blob": {"type": "file"},
                    "name": {"type": "string", "x-nullable": true},
                    "tags": {"type": "array", "items": {"type": "file"}},
                    "m": {"additionalProperties": {"type": "file"}}}},
                "Cat": {"allOf": [{"$ref": "#/definitions/Pet"}, {"properties": {"f": {"type": "file"}}}]}}}),
        ));
        let s = &out["components"]["schemas"];
        assert_eq!(s["Pet"]["discriminator"], json!({"propertyName": "kind"}));
        let p = &s["Pet"]["properties"];
        assert_eq!(p["blob"], json!({"type": "string", "format": "binary"}));
        assert_eq!(p["name"], json!({"type": "string", "nullable": true}));
        assert_eq!(p["tags"]["items"]["format"], "binary");
        assert_eq!(p["m"]["additionalProperties"]["format"], "binary");
        assert_eq!(s["Cat"]["allOf"][1]["properties"]["f"]["format"], "binary");
        assert_eq!(s["Cat"]["allOf"][0]["$ref"], "#/components/schemas/Pet");
    }

    #[test]
    fn malformed_parameters_are_kept_for_the_compiler_and_other_operations_convert() {
        let out = conv(doc(
            json!({"/bad": {"get": {"parameters": ["oops", {"name": "n"}, {"name": "b", "in": "body"}],
                                    "responses": {}}},
                   "/badmedia": {"post": {"consumes": "application/json",
                       "parameters": [{"name": "b", "in": "body", "schema": {}}], "responses": {}}},
                   "/good": {"get": {"parameters": [{"name": "q", "in": "query", "type": "string"}],
                                     "responses": {}}}}),
            json!({}),
        ));
        assert_eq!(
            out["paths"]["/bad"]["get"]["parameters"],
            json!(["oops", {"name": "n"}, {"name": "b", "in": "body"}])
        );
        assert_eq!(
            out["paths"]["/badmedia"]["post"]["parameters"][0]["in"],
            "body"
        );
        assert_eq!(
            out["paths"]["/good"]["get"]["parameters"][0]["schema"]["type"],
            "string"
        );
    }

    #[test]
    fn document_level_problems_are_errors_naming_the_pointer() {
        for (extra, pointer) in [
            (json!({"definitions": []}), "/definitions"),
            (json!({"parameters": "x"}), "/parameters"),
            (json!({"responses": 1}), "/responses"),
            (json!({"securityDefinitions": []}), "/securityDefinitions"),
            (json!({"consumes": "application/json"}), "/consumes"),
            (json!({"host": 5}), "/host"),
        ] {
            let err = convert("doc.yaml", doc(json!({}), extra)).expect_err("document-level error");
            assert_eq!(err.pointer, pointer);
            assert_eq!(err.document, "doc.yaml");
        }
        assert!(convert("doc.yaml", json!([])).is_err());
    }

    #[test]
    fn malformed_global_body_parameter_stays_a_component_so_refs_resolve() {
        let out = conv(doc(
            op(json!([{"$ref": "#/parameters/b"}])),
            json!({"parameters": {"b": {"name": "b", "in": "body"}}}),
        ));
        assert_eq!(
            out["components"]["parameters"]["b"],
            json!({"name": "b", "in": "body"})
        );
        assert_eq!(
            out["paths"]["/x"]["post"]["parameters"][0]["$ref"],
            "#/components/parameters/b"
        );
        assert_eq!(unresolved_refs(&out), Vec::<String>::new());
    }

    #[test]
    fn deeply_nested_schemas_and_items_do_not_overflow() {
        let mut schema = json!({"type": "file"});
        let mut items = json!({"type": "string"});
        for _ in 0..200 {
            schema = json!({"type": "array", "items": schema});
            items = json!({"type": "array", "items": items});
        }
        let mut p = items;
        p["name"] = json!("q");
        p["in"] = json!("query");
        let out = conv(doc(
            op(json!([p])),
            json!({"definitions": {"Deep": schema}}),
        ));
        assert_eq!(
            out["components"]["schemas"]["Deep"]["items"]["type"],
            "array"
        );
        assert_eq!(
            out["paths"]["/x"]["post"]["parameters"][0]["schema"]["type"],
            "array"
        );
    }

    // ---- corpus ----

    fn load_corpus(file: &str) -> crate::spec::Document {
        let bytes = toolgate_corpus::read(file);
        let raw = crate::spec::parse_value(file, &bytes).expect("parses");
        crate::spec::load(file, raw, false).expect("loads and converts")
    }

    fn leftovers(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if m.get("type").and_then(Value::as_str) == Some("file") {
                    out.push(format!("{at}: type file"));
                }
                if matches!(
                    m.get("in").and_then(Value::as_str),
                    Some("body" | "formData")
                ) {
                    out.push(format!("{at}: in body/formData"));
                }
                for key in [
                    "definitions",
                    "swagger",
                    "consumes",
                    "produces",
                    "collectionFormat",
                ] {
                    if m.contains_key(key) && !at.contains("/properties") {
                        out.push(format!("{at}: {key}"));
                    }
                }
                for (k, c) in m {
                    leftovers(c, &format!("{at}/{}", escape_pointer(k)), out);
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    leftovers(c, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    fn check_corpus(file: &str, ops: usize) -> crate::spec::Document {
        let doc = load_corpus(file);
        assert_eq!(doc.root["openapi"], "3.0.3", "{file}");
        assert_eq!(crate::spec::operation_count(&doc), ops, "{file}");
        assert_eq!(unresolved_refs(&doc.root), Vec::<String>::new(), "{file}");
        let mut left = Vec::new();
        leftovers(&doc.root, "", &mut left);
        assert_eq!(left, Vec::<String>::new(), "{file}");
        doc
    }

    #[test]
    fn corpus_gitea_converts_completely() {
        let doc = check_corpus("gitea-v1.26.3-swagger.json", 471);
        assert_eq!(doc.root["servers"], json!([{"url": "/api/v1"}]));
        let mut multipart = 0;
        for site in crate::spec::operations(&doc).into_iter().flatten() {
            let Some(entry) = site
                .operation
                .pointer("/requestBody/content/multipart~1form-data")
            else {
                continue;
            };
            multipart += 1;
            let props = entry["schema"]["properties"]
                .as_object()
                .expect("form fields");
            assert!(
                props
                    .values()
                    .any(|p| p["type"] == "string" && p["format"] == "binary"),
                "{} {} has no binary field",
                site.method,
                site.path
            );
        }
        assert_eq!(multipart, 3);
        let raw = doc
            .root
            .pointer("/paths/~1repos~1{owner}~1{repo}~1raw~1{filepath}/get/responses/200/content");
        assert_eq!(
            raw,
            Some(
                &json!({"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}})
            )
        );
    }

    #[test]
    fn corpus_argo_converts_completely() {
        let doc = check_corpus("argo-workflows-swagger.json", 73);
        assert_eq!(doc.root["servers"][0]["url"], "https://localhost:2746");
    }

    #[test]
    fn corpus_harbor_converts_completely() {
        let doc = check_corpus("harbor-swagger.yaml", 203);
        assert_eq!(doc.root["servers"][0]["url"], "https://localhost/api/v2.0");
        assert_eq!(
            doc.root["components"]["securitySchemes"]["basic"]["scheme"],
            "basic"
        );
    }

    #[test]
    fn corpus_petstore_expanded_converts_completely() {
        let doc = check_corpus("oai-petstore-expanded-v2.json", 4);
        assert_eq!(
            doc.root["servers"],
            json!([{"url": "http://petstore.swagger.io/api"}])
        );
        let post = &doc.root["paths"]["/pets"]["post"];
        assert_eq!(post["requestBody"]["required"], true);
        assert_eq!(
            post["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/NewPet"
        );
    }
}

#[cfg(test)]
mod fuzz {
    use super::convert;
    use proptest::prelude::*;
    use serde_json::{json, Map, Value};

    /// Values built from the keys and strings the converter reacts to, so
    /// random trees hit its branches rather than only unknown keys.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-2i64..3).prop_map(Value::from),
            prop::sample::select(vec![
                "body",
                "formData",
                "query",
                "path",
                "header",
                "file",
                "array",
                "object",
                "multi",
                "tsv",
                "#/definitions/A",
                "#/parameters/p",
                "#/responses/r",
                "multipart/form-data",
                "text/csv",
                "oauth2",
                "basic",
                "accessCode",
                "x",
            ])
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        prop::sample::select(vec![
                            "in",
                            "name",
                            "type",
                            "schema",
                            "items",
                            "$ref",
                            "parameters",
                            "responses",
                            "200",
                            "headers",
                            "examples",
                            "consumes",
                            "produces",
                            "collectionFormat",
                            "required",
                            "properties",
                            "allOf",
                            "discriminator",
                            "x-nullable",
                            "flow",
                            "scopes",
                            "get",
                            "post",
                            "schemes",
                            "additionalProperties",
                        ]),
                        inner,
                    ),
                    0..5,
                )
                .prop_map(|kv| {
                    Value::Object(
                        kv.into_iter()
                            .map(|(k, v)| (k.to_string(), v))
                            .collect::<Map<String, Value>>(),
                    )
                }),
            ]
        })
    }

    proptest! {
        #[test]
        fn conversion_never_panics_on_arbitrary_structures(
            op in value(), item_params in value(), global in value(), defs in value(),
            resp in value(), sec in value(), consumes in value(),
        ) {
            let doc = json!({
                "swagger": "2.0", "host": "h", "schemes": ["http"], "consumes": consumes,
                "paths": {"/x": {"parameters": item_params, "get": op.clone(), "post": op}},
                "parameters": {"p": global}, "definitions": {"A": defs},
                "responses": {"r": resp}, "securityDefinitions": {"s": sec},
            });
            let _ = convert("fuzz.json", doc);
        }
    }
}
