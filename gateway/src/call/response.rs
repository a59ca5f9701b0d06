//! Upstream response → MCP tool result.
//!
//! **Success path** (status in `successStatus`):
//! 1. Empty body (204 or zero bytes): success with an empty text.
//! 2. The response format (`x-mcp-response-format`; `auto` decides by
//!    `Content-Type`) picks the content kind: JSON, text, image, audio or
//!    binary (an embedded resource blob).
//! 3. JSON bodies are validated against the operation's response schema:
//!    `warn` logs, counts and returns the data, `fail` returns isError
//!    naming the violations, `off` skips it.
//! 4. The jq response transform runs, if any.
//! 5. A tool that lists its `outputSchema` (only under `fail`, see
//!    [`crate::call::output_schema`]) keeps the promise that every success
//!    result carries `structuredContent` matching it: a result that would
//!    not (no body, not JSON, not matching the outputSchema, whichever
//!    schema its status has) is isError saying why. Other tools with an
//!    output wrap send `structuredContent` whenever the (wrapped) data is
//!    an object, matching or not: no schema is listed for it to break.
//!
//! **Error path** (status in `errorStatus`): the body is parsed
//! (`application/problem+json` per RFC 9457, else JSON, else text) and
//! handed to the jq error transform as
//! `{"status": n, "contentType": "...", "problem": {...} | null, "body": <json or text>}`
//! (the shape the compiler dry-runs error transforms on). Without
//! a transform the result is `{error: title, detail, status}` for problem
//! details and `{error: "upstream error: HTTP n", body}` otherwise. Always
//! isError.
//!
//! **Anything else**: isError `unexpected HTTP {status}` with a short
//! excerpt of the body; no transform runs.
//!
//! **Memory.** A body is never turned into a `serde_json::Value` unless a
//! jq transform needs one: it is checked, validated and measured as text
//! ([`crate::call::rawjson`]) and leaves as a [`Payload`], the upstream's bytes
//! sent by reference with its share of the response budget
//! ([`crate::call::upstream::ResponseBudget`]). Text and `structuredContent` are
//! the same bytes, rendered twice as the message streams out. A transform
//! is charged `TREES_PER_JQ_INPUT` times the estimated tree of its input
//! before the tree is built, and fails naming the budget if that is more
//! than the budget holds; what the filter builds while it runs is reserved
//! from the same budget as it goes ([`crate::call::transform`]).
//!
//! What the client receives is the upstream's JSON without insignificant
//! whitespace, numbers and escapes as the upstream wrote them (serde_json
//! would re-print `1E2` as `100.0` and round integers beyond 64 bits).

use bytes::Bytes;
use catalog::ResponseFormat;
use jsonschema::json::{JsonNumber, Node, Object};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{json, Value};

use crate::call::payload::Payload;
use crate::call::rawjson::{Document, RawNode};
use crate::call::tool::{ResponseCheck, ToolEntry};
use crate::call::upstream::{excerpt, BudgetPermit, UpstreamResponse};
use crate::call::validate;
use crate::config::ResponseValidation;
use crate::outcome::{CallReport, ErrorType};

/// Characters of body shown with an unexpected status.
const EXCERPT_CHARS: usize = 200;
/// Characters of a non-JSON error body passed on.
const ERROR_EXCERPT_CHARS: usize = 2_000;
/// Trees a jq run holds per tree of its input: the `serde_json::Value` and
/// jaq's own copy (built from it as it is taken apart).
const TREES_PER_JQ_INPUT: u64 = 2;

/// A text-only error result.
pub(crate) fn error_text(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Json,
    Text,
    Image,
    Audio,
    Binary,
}

fn kind(format: ResponseFormat, media: Option<&str>, body: &[u8]) -> Kind {
    match format {
        ResponseFormat::Json => Kind::Json,
        ResponseFormat::Text => Kind::Text,
        ResponseFormat::Image => Kind::Image,
        ResponseFormat::Audio => Kind::Audio,
        ResponseFormat::Binary => Kind::Binary,
        ResponseFormat::Auto => match media {
            Some(m) if is_json(m) => Kind::Json,
            Some(m) if m.starts_with("image/") => Kind::Image,
            Some(m) if m.starts_with("audio/") => Kind::Audio,
            Some(m) if is_text(m) => Kind::Text,
            Some(_) => Kind::Binary,
            None if std::str::from_utf8(body).is_ok() => Kind::Text,
            None => Kind::Binary,
        },
    }
}

fn is_json(m: &str) -> bool {
    m == "application/json" || m.ends_with("+json") || m == "text/json"
}

fn is_text(m: &str) -> bool {
    m.starts_with("text/")
        || m.ends_with("+xml")
        || matches!(
            m,
            "application/xml"
                | "application/javascript"
                | "application/x-www-form-urlencoded"
                | "application/yaml"
                | "application/x-yaml"
                | "application/x-ndjson"
                | "application/graphql"
        )
}

/// The success path. Every body leaves by reference ([`Payload`]), with
/// its share of the response budget.
/// Notes in `report` what made a result isError, and schema violations.
pub(crate) async fn success(
    tool: &ToolEntry,
    resp: UpstreamResponse,
    report: &mut CallReport,
) -> CallToolResult {
    if resp.body.is_empty() {
        if tool.lists_output() {
            return unkept(
                tool,
                format!("upstream answered HTTP {} with no body", resp.status),
            );
        }
        return CallToolResult::success(vec![ContentBlock::text("")]);
    }
    let media = resp.media_type.clone();
    let media = media.as_deref();
    let kind = kind(tool.def.response_format, media, &resp.body);
    if kind != Kind::Json && tool.lists_output() {
        let media = media.unwrap_or("no Content-Type");
        return unkept(tool, format!("upstream answered with {media}, not JSON"));
    }
    match kind {
        Kind::Text => text_result(resp.body, resp.permit, false),
        Kind::Image => {
            let data = Payload::binary(resp.body, Some(resp.permit)).register(1);
            CallToolResult::success(vec![ContentBlock::image(
                data.string(),
                media
                    .filter(|m| m.starts_with("image/"))
                    .unwrap_or("image/png"),
            )])
        }
        Kind::Audio => {
            let data = Payload::binary(resp.body, Some(resp.permit)).register(1);
            CallToolResult::success(vec![ContentBlock::audio(
                data.string(),
                media
                    .filter(|m| m.starts_with("audio/"))
                    .unwrap_or("audio/wav"),
            )])
        }
        Kind::Binary => {
            let uri = format!("toolgate://{}/response", tool.def.name);
            let data = Payload::binary(resp.body, Some(resp.permit)).register(1);
            let mut rc = ResourceContents::blob(data.string(), uri);
            rc = rc.with_mime_type(media.unwrap_or("application/octet-stream"));
            CallToolResult::success(vec![ContentBlock::resource(rc)])
        }
        Kind::Json => json_success(tool, resp, report).await,
    }
}

/// One text block holding `body`.
fn text_result(body: Bytes, permit: BudgetPermit, is_error: bool) -> CallToolResult {
    let text = Payload::text(body, Some(permit)).register(1);
    let content = vec![ContentBlock::text(text.string())];
    if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// Runs a check of the response in its `validate response` span.
fn traced_check<E>(check: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
    let span = crate::observe::trace::step("validate response");
    let result = span.in_scope(check);
    if result.is_err() {
        // NB: only the step: a response that does not match fails the
        // call only under `responseValidation: fail` (the caller records
        // that).
        span.record("error.type", ErrorType::ResponseValidation.as_str());
    }
    result
}

/// isError for a success response that cannot keep the promise of the
/// tool's listed outputSchema.
fn unkept(tool: &ToolEntry, why: String) -> CallToolResult {
    error_text(format!(
        "{why}; {} lists an outputSchema, so it returns only results that match it (responseValidation: fail)",
        tool.def.name
    ))
}

/// The output wrap of `doc` as the outputSchema sees it.
fn wrapped<'a>(tool: &ToolEntry, doc: &Document<'a>) -> RawNode<'a> {
    match tool.def.output_wrap {
        Some(catalog::OutputWrap::Result) => doc.wrapped(),
        _ => doc.root(),
    }
}

async fn json_success(
    tool: &ToolEntry,
    resp: UpstreamResponse,
    report: &mut CallReport,
) -> CallToolResult {
    let UpstreamResponse {
        status,
        body,
        mut permit,
        deadline,
        ..
    } = resp;
    // The validator a listed outputSchema holds every result to.
    let promised = tool.output().filter(|_| tool.lists_output());
    // Checked, validated and measured in place: no tree of the body.
    let tree_bytes = {
        let Ok(doc) = Document::parse(&body) else {
            if promised.is_some() {
                return unkept(tool, "upstream sent a body that is not JSON".into());
            }
            tracing::warn!(tool = %tool.def.name, "upstream sent a body that is not JSON; returning it as text");
            return text_result(body, permit, false);
        };
        let mut output_checked = false;
        let mode = tool.upstream.response_validation;
        if let Some(check) = tool
            .response_check(status)
            .filter(|_| mode != ResponseValidation::Off)
        {
            let result = traced_check(|| match check {
                ResponseCheck::Schema(v) => validate::check_raw(v, &doc, doc.root()),
                ResponseCheck::Output(v) => {
                    output_checked = true;
                    validate::check_raw(v, &doc, wrapped(tool, &doc))
                }
            });
            if let Err(errors) = result {
                report.invalid_response = true;
                match mode {
                    ResponseValidation::Fail => return does_not_match("its schema", &errors),
                    _ => {
                        tool.upstream.count_response_violation();
                        tracing::warn!(
                            tool = %tool.def.name,
                            status,
                            errors = %errors.join("; "),
                            "upstream response does not match its schema; returning it (responseValidation: warn)"
                        )
                    }
                }
            }
        }
        // A status with a schema of its own was checked against that one;
        // the listed outputSchema holds for every status.
        if let Some(out) = promised.filter(|_| !output_checked && tool.response_jq.is_none()) {
            if let Err(errors) =
                traced_check(|| validate::check_raw(out, &doc, wrapped(tool, &doc)))
            {
                report.invalid_response = true;
                return does_not_match("the tool's outputSchema", &errors);
            }
        }
        match tool.response_jq {
            Some(_) => doc.tree_bytes() as u64,
            None => 0,
        }
    };
    let body = match &tool.response_jq {
        None => body,
        Some(p) => {
            // jq needs the body as trees: budget them before building.
            let trees = TREES_PER_JQ_INPUT.saturating_mul(tree_bytes);
            if let Err(e) = permit.grow("the response transform", trees, deadline).await {
                report.error = Some(ErrorType::Overloaded);
                return error_text(e.to_string());
            }
            let value: Value = match serde_json::from_slice(&body) {
                Ok(v) => v,
                Err(e) => {
                    report.error = Some(ErrorType::Transform);
                    return error_text(format!("response transform failed: {e}"));
                }
            };
            drop(body);
            let out = match crate::call::transform::run("response", p, value).await {
                Ok(v) => v,
                Err(e) => {
                    report.error = Some(ErrorType::Transform);
                    return error_text(e.to_string());
                }
            };
            let bytes = Bytes::from(serde_json::to_vec(&out).unwrap_or_default());
            drop(out);
            permit.shrink_to(bytes.len() as u64);
            // The outputSchema describes what the transform gives.
            if let Some(out) = promised {
                let checked = match Document::parse(&bytes) {
                    Ok(doc) => validate::check_raw(out, &doc, wrapped(tool, &doc)),
                    Err(_) => Err(vec!["the transform's output is not JSON".into()]),
                };
                if let Err(errors) = checked {
                    report.invalid_response = true;
                    return does_not_match("the tool's outputSchema", &errors);
                }
            }
            bytes
        }
    };
    // `structuredContent` is an object: a body that is not one goes
    // wrapped (`result`) or as text only.
    let structured = match tool.def.output_wrap {
        Some(catalog::OutputWrap::Result) => true,
        Some(catalog::OutputWrap::Body) => is_object(&body),
        None => promised.is_some() && is_object(&body),
    };
    if promised.is_some() && !structured {
        return unkept(tool, "upstream sent JSON that is not an object".into());
    }
    structured_or_text(tool, body, permit, structured)
}

/// isError for a response that fails `what` under `fail`.
fn does_not_match(what: &str, errors: &[String]) -> CallToolResult {
    error_text(format!(
        "upstream response does not match {what}:\n- {}",
        errors.join("\n- ")
    ))
}

/// Whether JSON text is an object (the text is known to be JSON).
fn is_object(json: &[u8]) -> bool {
    json.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Text, plus the same data (wrapped) as `structuredContent` when
/// `structured`.
fn structured_or_text(
    tool: &ToolEntry,
    body: Bytes,
    permit: BudgetPermit,
    structured: bool,
) -> CallToolResult {
    if !structured {
        let data = Payload::json(body, Some(permit)).register(1);
        return CallToolResult::success(vec![ContentBlock::text(data.string())]);
    }
    let (prefix, suffix) = match tool.def.output_wrap {
        Some(catalog::OutputWrap::Result) => ("{\"result\":", "}"),
        _ => ("", ""),
    };
    let data = Payload::wrapped_json(body, prefix, suffix, Some(permit)).register(2);
    let mut r = CallToolResult::success(vec![ContentBlock::text(data.string())]);
    r.structured_content = Some(data.value());
    r
}

/// The error path.
pub(crate) async fn error(tool: &ToolEntry, resp: UpstreamResponse) -> CallToolResult {
    let UpstreamResponse {
        status,
        media_type,
        body,
        mut permit,
        deadline,
    } = resp;
    let media = media_type.as_deref().unwrap_or("");
    let Some(p) = &tool.error_jq else {
        return match default_error(status, media, &body) {
            ErrorText::Small(text) => error_text(text),
            ErrorText::Json {
                prefix,
                json,
                suffix,
            } => {
                let data = Payload::wrapped_json(json, &prefix, &suffix, Some(permit)).register(1);
                CallToolResult::error(vec![ContentBlock::text(data.string())])
            }
        };
    };
    // The transform's input is a tree, twice over for problem details
    // (`problem` and `body`): budget it before building it.
    let (is_json, problem) = match Document::parse(&body) {
        Ok(doc) => {
            let problem = media == "application/problem+json" && doc.root().as_object().is_some();
            let copies = if problem { 2 } else { 1 };
            let trees = TREES_PER_JQ_INPUT * copies * doc.tree_bytes() as u64;
            if let Err(e) = permit.grow("the error transform", trees, deadline).await {
                return error_text(format!("upstream error: HTTP {status} ({e})"));
            }
            (true, problem)
        }
        Err(_) => (false, false),
    };
    let parsed: Value = if is_json {
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    } else if body.is_empty() {
        Value::Null
    } else {
        Value::String(excerpt(&body, ERROR_EXCERPT_CHARS))
    };
    drop(body);
    let problem = problem.then(|| parsed.clone());
    let input = json!({"status": status, "contentType": media, "problem": problem, "body": parsed});
    let value = match crate::call::transform::run("error", p, input).await {
        Ok(v) => v,
        Err(e) => return error_text(format!("upstream error: HTTP {status} ({e})")),
    };
    let text = match value {
        Value::String(s) => s,
        other => other.to_string(),
    };
    permit.shrink_to(text.len() as u64);
    text_result(Bytes::from(text.into_bytes()), permit, true)
}

/// The error text without a transform.
enum ErrorText {
    Small(String),
    /// `prefix`, then `json` (checked JSON text, part of the body), then
    /// `suffix`: sent by reference, as the body may be large.
    Json {
        prefix: String,
        json: Bytes,
        suffix: String,
    },
}

/// `{error: title, detail, status}` for problem details, else
/// `{error: "upstream error: HTTP n", body}`; read from the body's text,
/// which is passed on as it is rather than parsed.
fn default_error(status: u16, media: &str, body: &Bytes) -> ErrorText {
    let fallback = format!("upstream error: HTTP {status}");
    let Ok(doc) = Document::parse(body) else {
        let body = if body.is_empty() {
            Value::Null
        } else {
            Value::String(excerpt(body, ERROR_EXCERPT_CHARS))
        };
        return ErrorText::Small(json!({"error": fallback, "body": body}).to_string());
    };
    // A slice of `body` holding `text` (a part of it).
    let slice = |text: &[u8]| {
        let start = text.as_ptr() as usize - body.as_ptr() as usize;
        body.slice(start..start + text.len())
    };
    let problem = match doc.root().as_object() {
        Some(p) if media == "application/problem+json" => p,
        _ => {
            return ErrorText::Json {
                prefix: format!("{{\"error\":{},\"body\":", json!(fallback)),
                json: slice(doc.text()),
                suffix: "}".into(),
            }
        }
    };
    let get = |k: &str| problem.get(&Box::from(k));
    let title = get("title")
        .and_then(|t| t.as_string().map(|s| s.into_owned()))
        .unwrap_or(fallback);
    let status = get("status")
        .and_then(|s| s.as_number().and_then(|n| n.as_u64()))
        .unwrap_or(u64::from(status));
    let head = format!("{{\"error\":{}", json!(title));
    let tail = format!(",\"status\":{status}}}");
    match get("detail") {
        Some(RawNode::Text(d)) if !matches!(d, b"null") => ErrorText::Json {
            prefix: format!("{head},\"detail\":"),
            json: slice(d),
            suffix: tail,
        },
        _ => ErrorText::Small(format!("{head}{tail}")),
    }
}

/// Neither success nor error status.
pub(crate) fn unexpected(resp: &UpstreamResponse) -> CallToolResult {
    let ex = excerpt(&resp.body, EXCERPT_CHARS);
    if ex.is_empty() {
        error_text(format!("unexpected HTTP {}", resp.status))
    } else {
        error_text(format!("unexpected HTTP {}: {ex}", resp.status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_format_follows_content_type() {
        let f = ResponseFormat::Auto;
        assert_eq!(kind(f, Some("application/vnd.api+json"), b"{}"), Kind::Json);
        assert_eq!(kind(f, Some("image/png"), b"\x89PNG"), Kind::Image);
        assert_eq!(kind(f, Some("audio/mpeg"), b""), Kind::Audio);
        assert_eq!(kind(f, Some("text/csv"), b"a,b"), Kind::Text);
        assert_eq!(kind(f, Some("application/pdf"), b"%PDF"), Kind::Binary);
        assert_eq!(kind(f, None, b"plain"), Kind::Text);
        assert_eq!(kind(f, None, b"\xff\xfe"), Kind::Binary);
    }

    #[test]
    fn explicit_format_wins_over_content_type() {
        assert_eq!(
            kind(ResponseFormat::Text, Some("application/json"), b"{}"),
            Kind::Text
        );
    }

    /// The default error text, assembled as the payload would send it.
    fn default_error_value(status: u16, media: &str, body: &[u8]) -> Value {
        let text = match default_error(status, media, &Bytes::copy_from_slice(body)) {
            ErrorText::Small(t) => t,
            ErrorText::Json {
                prefix,
                json,
                suffix,
            } => format!("{prefix}{}{suffix}", String::from_utf8_lossy(&json)),
        };
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn problem_details_become_title_detail_status() {
        let body = br#"{"type": "about:blank", "title": "Pet not found", "detail": "no pet 7", "status": 404}"#;
        assert_eq!(
            default_error_value(404, "application/problem+json", body),
            json!({"error": "Pet not found", "detail": "no pet 7", "status": 404})
        );
        // No title, a null detail, a status that is not a number.
        let body = br#"{"detail": null, "status": "bad"}"#;
        assert_eq!(
            default_error_value(503, "application/problem+json", body),
            json!({"error": "upstream error: HTTP 503", "status": 503})
        );
    }

    #[test]
    fn other_errors_carry_the_body() {
        assert_eq!(
            default_error_value(500, "application/json", br#" {"msg": "boom"} "#),
            json!({"error": "upstream error: HTTP 500", "body": {"msg": "boom"}})
        );
        assert_eq!(
            default_error_value(500, "text/plain", b"it broke"),
            json!({"error": "upstream error: HTTP 500", "body": "it broke"})
        );
        assert_eq!(
            default_error_value(502, "", b""),
            json!({"error": "upstream error: HTTP 502", "body": null})
        );
    }
}
