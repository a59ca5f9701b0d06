//! Arguments → HTTP request, following a tool's [`RequestPlan`].
//!
//! The contract is safety first: whatever the arguments, the request goes to
//! the upstream base URL and below it, never elsewhere.
//!
//! - Path parameters are percent-encoded as one path segment (`/`, `?`, `#`
//!   and `%` included) and a parameter that would form a `.` or `..`
//!   segment, or an empty one, is refused. The final URL is checked to still
//!   be under the base URL's path.
//! - Header values containing CR, LF or other control characters are
//!   refused, as are framing headers (`Host`, `Content-Length`, ...).
//! - Query parameters follow the OpenAPI 3 styles (`form`, `spaceDelimited`,
//!   `pipeDelimited`, `deepObject`, with `explode`).
//! - Bodies are JSON, `x-www-form-urlencoded`, `multipart/form-data` (base64
//!   arguments decoded for binary fields) or raw (text or base64 bytes).
//!
//! The result is a [`PreparedRequest`], plain data, so all of this is tested
//! without a network; [`crate::call::upstream`] turns it into a `reqwest` request.
//! Parameter styles are written in `style`, bodies encoded in `body`.

use catalog::{BodyPlan, ParamLocation, ParamStyle, RequestPlan};
use http::{HeaderName, HeaderValue, Method};
use percent_encoding::percent_decode_str;
use reqwest::Url;
use serde_json::{Map, Value};

mod body;
mod style;

use body::{body_value, encode_body};
use style::{encode, join_query, path_style, serialize_query, simple_style, STRICT};

/// Headers a caller must not set: they frame the HTTP message itself.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-connection",
];

/// A request ready to send, still plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedRequest {
    pub method: Method,
    pub url: Url,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: RequestBody,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RequestBody {
    Empty,
    Bytes { content_type: String, data: Vec<u8> },
    Multipart(Vec<MultipartField>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct MultipartField {
    pub name: String,
    pub data: Vec<u8>,
    /// Set for binary fields, so servers treat the part as a file.
    pub filename: Option<String>,
    pub content_type: Option<String>,
}

/// Why arguments could not become a request. Shown to the caller (isError),
/// so it names the argument and never the upstream's address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("argument '{arg}': {message}")]
    Argument { arg: String, message: String },
    /// The plan itself is inconsistent (a catalog defect).
    #[error("request plan: {0}")]
    Plan(String),
}

fn arg_err(arg: &str, message: impl Into<String>) -> RequestError {
    RequestError::Argument {
        arg: arg.to_string(),
        message: message.into(),
    }
}

/// Builds the request for a tool with a plan (not the raw request tool).
pub fn build(
    plan: &RequestPlan,
    args: &Map<String, Value>,
    base: &Url,
) -> Result<PreparedRequest, RequestError> {
    if plan.raw {
        return build_raw(args, base);
    }
    let method = parse_method(&plan.method).map_err(RequestError::Plan)?;
    let path = expand_path(plan, args)?;
    let mut query = Vec::new();
    let mut headers = Vec::new();
    let mut cookies = Vec::new();
    for p in &plan.params {
        let Some(value) = args.get(&p.arg).filter(|v| !v.is_null()) else {
            continue;
        };
        match p.location {
            ParamLocation::Path => {}
            ParamLocation::Query => serialize_query(
                &p.name,
                value,
                p.style,
                p.explode,
                p.allow_reserved,
                &mut query,
            ),
            ParamLocation::Header => {
                let text = simple_style(value, p.explode);
                headers.push(header(&p.arg, &p.name, &text)?);
            }
            ParamLocation::Cookie => {
                let text = simple_style(value, p.explode);
                cookies.push(format!("{}={}", p.name, encode(&text, STRICT)));
            }
        }
    }
    // Constants are not arguments, so an argument error cannot name one:
    // a value the document itself gives that fails here is the plan's.
    for c in &plan.constants {
        match c.location {
            ParamLocation::Path => {}
            ParamLocation::Query => {
                serialize_query(&c.name, &c.value, c.style, c.explode, false, &mut query)
            }
            ParamLocation::Header => {
                let text = simple_style(&c.value, c.explode);
                let h = header(&c.name, &c.name, &text).map_err(|e| match e {
                    RequestError::Argument { message, .. } => {
                        RequestError::Plan(format!("constant header {}: {message}", c.name))
                    }
                    plan => plan,
                })?;
                headers.push(h);
            }
            ParamLocation::Cookie => {
                let text = simple_style(&c.value, c.explode);
                cookies.push(format!("{}={}", c.name, encode(&text, STRICT)));
            }
        }
    }
    if !cookies.is_empty() {
        headers.push(header("cookie", "cookie", &cookies.join("; "))?);
    }
    let body = match &plan.body {
        None => RequestBody::Empty,
        Some(bp) => match body_value(bp, args) {
            None => RequestBody::Empty,
            Some(v) => encode_body(bp, &v)?,
        },
    };
    let url = join_under_base(base, &path, join_query(&query))?;
    Ok(PreparedRequest {
        method,
        url,
        headers,
        body,
    })
}

/// The raw request tool: `{method, path, query, headers, body}` confined to
/// the base URL.
pub fn build_raw(args: &Map<String, Value>, base: &Url) -> Result<PreparedRequest, RequestError> {
    from_parts(args, base, None)
}

/// The output of a jq request transform: `{method, path, query, headers,
/// cookies, body}`. `path` is relative to the base URL and is held to the
/// same rules as the raw tool's; the body is encoded per the tool's body
/// plan when it has one, else as JSON.
pub fn from_transform(
    output: &Value,
    plan: &RequestPlan,
    base: &Url,
) -> Result<PreparedRequest, RequestError> {
    let Value::Object(parts) = output else {
        return Err(arg_err(
            "(request transform)",
            "must produce an object {method, path, query, headers, body}",
        ));
    };
    let mut parts = parts.clone();
    if !parts.contains_key("method") {
        parts.insert("method".into(), Value::String(plan.method.clone()));
    }
    from_parts(&parts, base, plan.body.as_ref())
}

fn from_parts(
    parts: &Map<String, Value>,
    base: &Url,
    body_plan: Option<&BodyPlan>,
) -> Result<PreparedRequest, RequestError> {
    let method = match parts.get("method") {
        Some(Value::String(m)) => {
            parse_method(&m.to_ascii_uppercase()).map_err(|e| arg_err("method", e))?
        }
        None => Method::GET,
        Some(_) => return Err(arg_err("method", "must be a string")),
    };
    let path = match parts.get("path") {
        Some(Value::String(p)) => checked_raw_path(p)?,
        _ => return Err(arg_err("path", "must be a string starting with '/'")),
    };
    let mut query = Vec::new();
    match parts.get("query") {
        None | Some(Value::Null) => {}
        Some(Value::Object(q)) => {
            for (k, v) in q {
                if !v.is_null() {
                    serialize_query(k, v, ParamStyle::Form, true, false, &mut query);
                }
            }
        }
        Some(_) => return Err(arg_err("query", "must be an object")),
    }
    let mut headers = Vec::new();
    let mut content_type = None;
    match parts.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (k, v) in h {
                if v.is_null() {
                    continue;
                }
                let text = simple_style(v, false);
                let arg = format!("headers.{k}");
                let (name, value) = header(&arg, k, &text)?;
                if name == http::header::CONTENT_TYPE {
                    content_type = Some(text);
                    continue;
                }
                headers.push((name, value));
            }
        }
        Some(_) => return Err(arg_err("headers", "must be an object")),
    }
    if let Some(Value::Object(c)) = parts.get("cookies") {
        let cookie: Vec<String> = c
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    encode(k, STRICT),
                    encode(&simple_style(v, false), STRICT)
                )
            })
            .collect();
        if !cookie.is_empty() {
            headers.push(header("cookies", "cookie", &cookie.join("; "))?);
        }
    }
    let body = match parts.get("body") {
        None | Some(Value::Null) => RequestBody::Empty,
        Some(v) => match body_plan {
            Some(bp) => encode_body(bp, v)?,
            None => match v {
                Value::String(s) => RequestBody::Bytes {
                    content_type: content_type
                        .clone()
                        .unwrap_or_else(|| "text/plain; charset=utf-8".into()),
                    data: s.clone().into_bytes(),
                },
                other => RequestBody::Bytes {
                    content_type: content_type
                        .clone()
                        .unwrap_or_else(|| "application/json".into()),
                    data: serde_json::to_vec(other).unwrap_or_default(),
                },
            },
        },
    };
    let url = join_under_base(base, &path, join_query(&query))?;
    Ok(PreparedRequest {
        method,
        url,
        headers,
        body,
    })
}

fn parse_method(m: &str) -> Result<Method, String> {
    Method::from_bytes(m.as_bytes()).map_err(|_| format!("'{m}' is not an HTTP method"))
}

/// A caller-written path: relative, no query or fragment, no dot segments
/// (also when percent-encoded), no backslashes or control characters.
fn checked_raw_path(p: &str) -> Result<String, RequestError> {
    if !p.starts_with('/') || p.starts_with("//") {
        return Err(arg_err("path", "must start with a single '/'"));
    }
    if p.chars()
        .any(|c| c.is_control() || c == '\\' || c == '?' || c == '#' || c == ' ')
    {
        return Err(arg_err(
            "path",
            "must not contain '?', '#', '\\', spaces or control characters (use query)",
        ));
    }
    for seg in p.split('/').skip(1) {
        let decoded = percent_decode_str(seg).decode_utf8_lossy();
        if is_dot_segment(&decoded) {
            return Err(arg_err(
                "path",
                "must not contain '.' or '..' segments (also not as '..;...')",
            ));
        }
        if decoded.contains('/') || decoded.contains('\\') {
            return Err(arg_err("path", "must not contain encoded slashes"));
        }
    }
    Ok(p.to_string())
}

/// `.` or `..`, also with a path parameter (`..;x`): servlet containers
/// (Tomcat, Jetty) and Spring drop the `;...` part before resolving dot
/// segments, so `/api/..;/admin` reaches `/admin` there.
fn is_dot_segment(decoded: &str) -> bool {
    let name = decoded.split(';').next().unwrap_or_default();
    name == "." || name == ".."
}

/// Substitutes `{name}` placeholders, each value encoded as (part of) one
/// segment.
fn expand_path(plan: &RequestPlan, args: &Map<String, Value>) -> Result<String, RequestError> {
    let mut out = String::with_capacity(plan.path.len() + 16);
    for (i, seg) in plan.path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if !seg.contains('{') {
            out.push_str(seg);
            continue;
        }
        let mut expanded = String::new();
        let mut rest = seg;
        while let Some(open) = rest.find('{') {
            expanded.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else {
                return Err(RequestError::Plan(format!(
                    "unclosed '{{' in path {}",
                    plan.path
                )));
            };
            let name = &rest[open + 1..open + close];
            let binding = plan
                .params
                .iter()
                .find(|p| p.location == ParamLocation::Path && p.name == name)
                .ok_or_else(|| {
                    RequestError::Plan(format!("path parameter {{{name}}} has no binding"))
                })?;
            let value = args
                .get(&binding.arg)
                .filter(|v| !v.is_null())
                .ok_or_else(|| arg_err(&binding.arg, "is required (path parameter)"))?;
            let text = path_style(&binding.name, value, binding.style, binding.explode);
            if text.is_empty() {
                return Err(arg_err(&binding.arg, "must not be empty (path parameter)"));
            }
            expanded.push_str(&text);
            rest = &rest[open + close + 1..];
        }
        expanded.push_str(rest);
        if is_dot_segment(&percent_decode_str(&expanded).decode_utf8_lossy()) {
            return Err(arg_err(
                &first_path_arg(plan, seg),
                "must not be '.' or '..' (path parameter)",
            ));
        }
        out.push_str(&expanded);
    }
    Ok(out)
}

fn first_path_arg(plan: &RequestPlan, seg: &str) -> String {
    plan.params
        .iter()
        .find(|p| p.location == ParamLocation::Path && seg.contains(&format!("{{{}}}", p.name)))
        .map(|p| p.arg.clone())
        .unwrap_or_else(|| "path".into())
}

/// Validates a caller-supplied header.
fn header(arg: &str, name: &str, value: &str) -> Result<(HeaderName, HeaderValue), RequestError> {
    if value.contains(['\r', '\n', '\0']) {
        return Err(arg_err(arg, "header value must not contain CR, LF or NUL"));
    }
    let hn = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| arg_err(arg, format!("'{name}' is not a valid header name")))?;
    if FORBIDDEN_HEADERS.contains(&hn.as_str()) {
        return Err(arg_err(arg, format!("header '{name}' cannot be set")));
    }
    let hv = HeaderValue::from_str(value).map_err(|_| {
        arg_err(
            arg,
            "header value must be visible ASCII (no control characters)",
        )
    })?;
    Ok((hn, hv))
}

/// Appends `path` to the base URL's path and checks the result stayed
/// below it. A plan path without its leading `/` (a sloppy spec) is taken
/// as relative to the base, as its author meant: `no-slash` under `/api`
/// is `/api/no-slash`, never `/apino-slash`.
fn join_under_base(base: &Url, path: &str, query: Option<String>) -> Result<Url, RequestError> {
    let base_path = base.path().trim_end_matches('/');
    let sep = if path.is_empty() || path.starts_with('/') {
        ""
    } else {
        "/"
    };
    let full = format!("{base_path}{sep}{path}");
    let mut url = base.clone();
    url.set_path(&full);
    url.set_query(query.as_deref());
    url.set_fragment(None);
    // NB: defence in depth — the checks above already refuse dot segments,
    // but the URL parser normalises `..`, so a miss there would show here.
    // Whole segments are compared: `/apiX` is not below `/api`.
    let under = {
        let mut want = base_path.split('/');
        let mut got = url.path().split('/');
        want.all(|w| got.next() == Some(w))
    };
    let segments = |p: &str| p.matches('/').count();
    if !under || segments(url.path()) != segments(&full) {
        return Err(arg_err("path", "must stay below the upstream base path"));
    }
    Ok(url)
}

#[cfg(test)]
mod tests;
