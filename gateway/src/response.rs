//! Upstream response → MCP tool result.
//!
//! **Success path** (status in `successStatus`):
//! 1. Empty body (204 or zero bytes): success with an empty text.
//! 2. The response format (`x-mcp-response-format`; `auto` decides by
//!    `Content-Type`) picks the content kind: JSON, text, image, audio or
//!    binary (an embedded resource blob).
//! 3. JSON bodies are validated against the operation's response schema:
//!    `warn` logs and returns the data, `fail` returns isError naming the
//!    violations, `off` skips it.
//! 4. The jq response transform runs, if any.
//! 5. `structuredContent` is sent only when the (wrapped) result validates
//!    against the advertised `outputSchema`: clients reject a result that
//!    does not, so such a result goes out as text only.
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

use base64::Engine;
use catalog::ResponseFormat;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{json, Value};

use crate::config::ResponseValidation;
use crate::snapshot::{ResponseCheck, ToolEntry};
use crate::upstream::{excerpt, UpstreamResponse};
use crate::validate;

/// Characters of body shown with an unexpected status.
const EXCERPT_CHARS: usize = 200;

/// A text-only error result.
pub fn error_text(message: impl Into<String>) -> CallToolResult {
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

/// The success path.
pub async fn success(tool: &ToolEntry, resp: UpstreamResponse) -> CallToolResult {
    if resp.body.is_empty() {
        return CallToolResult::success(vec![ContentBlock::text("")]);
    }
    let media = resp.media_type.as_deref();
    match kind(tool.def.response_format, media, &resp.body) {
        Kind::Text => CallToolResult::success(vec![ContentBlock::text(
            String::from_utf8_lossy(&resp.body).into_owned(),
        )]),
        Kind::Image => CallToolResult::success(vec![ContentBlock::image(
            b64(&resp.body),
            media
                .filter(|m| m.starts_with("image/"))
                .unwrap_or("image/png"),
        )]),
        Kind::Audio => CallToolResult::success(vec![ContentBlock::audio(
            b64(&resp.body),
            media
                .filter(|m| m.starts_with("audio/"))
                .unwrap_or("audio/wav"),
        )]),
        Kind::Binary => {
            let uri = format!("toolgate://{}/response", tool.def.name);
            let mut rc = ResourceContents::blob(b64(&resp.body), uri);
            rc = rc.with_mime_type(media.unwrap_or("application/octet-stream"));
            CallToolResult::success(vec![ContentBlock::resource(rc)])
        }
        Kind::Json => json_success(tool, resp).await,
    }
}

async fn json_success(tool: &ToolEntry, resp: UpstreamResponse) -> CallToolResult {
    let body: Value = match serde_json::from_slice(&resp.body) {
        Ok(v) => v,
        Err(_) => {
            tracing::warn!(tool = %tool.def.name, "upstream sent a body that is not JSON; returning it as text");
            return CallToolResult::success(vec![ContentBlock::text(
                String::from_utf8_lossy(&resp.body).into_owned(),
            )]);
        }
    };
    let mode = tool.upstream.response_validation;
    if mode != ResponseValidation::Off {
        if let Some(errors) = response_errors(tool, resp.status, &body) {
            match mode {
                ResponseValidation::Fail => {
                    return error_text(format!(
                        "upstream response does not match its schema:\n- {}",
                        errors.join("\n- ")
                    ))
                }
                _ => tracing::warn!(
                    tool = %tool.def.name,
                    status = resp.status,
                    errors = %errors.join("; "),
                    "upstream response does not match its schema"
                ),
            }
        }
    }
    let value = match &tool.response_jq {
        Some(p) => match crate::transform::run("response", p, body).await {
            Ok(v) => v,
            Err(e) => return error_text(e.to_string()),
        },
        None => body,
    };
    structured_or_text(tool, value)
}

fn response_errors(tool: &ToolEntry, status: u16, body: &Value) -> Option<Vec<String>> {
    let result = match tool.response_check(status)? {
        ResponseCheck::Schema(v) => validate::check(v, body),
        ResponseCheck::Output(v) => validate::check(v, &tool.wrap(body.clone())),
    };
    result.err()
}

/// Text plus `structuredContent` when the value fits the outputSchema;
/// text alone otherwise.
fn structured_or_text(tool: &ToolEntry, value: Value) -> CallToolResult {
    if let Some(out) = tool.output() {
        let wrapped = tool.wrap(value);
        if out.is_valid(&wrapped) {
            return CallToolResult::structured(wrapped);
        }
        tracing::debug!(tool = %tool.def.name, "result does not match outputSchema; sending text only");
        return CallToolResult::success(vec![ContentBlock::text(unwrap_text(tool, wrapped))]);
    }
    CallToolResult::success(vec![ContentBlock::text(value.to_string())])
}

fn unwrap_text(tool: &ToolEntry, wrapped: Value) -> String {
    match (tool.def.output_wrap, wrapped) {
        (Some(catalog::OutputWrap::Result), Value::Object(mut m)) => {
            m.remove("result").unwrap_or(Value::Null).to_string()
        }
        (_, v) => v.to_string(),
    }
}

/// The error path.
pub async fn error(tool: &ToolEntry, resp: UpstreamResponse) -> CallToolResult {
    let media = resp.media_type.as_deref().unwrap_or("");
    let parsed: Option<Value> = serde_json::from_slice(&resp.body).ok();
    let problem = if media == "application/problem+json" {
        parsed.clone().filter(Value::is_object)
    } else {
        None
    };
    let body = match parsed {
        Some(v) => v,
        None if resp.body.is_empty() => Value::Null,
        None => Value::String(excerpt(&resp.body, 2_000)),
    };
    let value = match &tool.error_jq {
        Some(p) => {
            let input = json!({"status": resp.status, "contentType": media, "problem": problem, "body": body});
            match crate::transform::run("error", p, input).await {
                Ok(v) => v,
                Err(e) => return error_text(format!("upstream error: HTTP {} ({e})", resp.status)),
            }
        }
        None => default_error(resp.status, problem, body),
    };
    let text = match value {
        Value::String(s) => s,
        other => other.to_string(),
    };
    error_text(text)
}

/// `{error: title, detail, status}` for problem details, else
/// `{error: "upstream error: HTTP n", body}`.
pub fn default_error(status: u16, problem: Option<Value>, body: Value) -> Value {
    match problem {
        Some(p) => {
            let title = p
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("upstream error: HTTP {status}"));
            let mut out = json!({"error": title});
            if let Some(d) = p.get("detail").filter(|d| !d.is_null()) {
                out["detail"] = d.clone();
            }
            out["status"] = p
                .get("status")
                .filter(|s| s.is_u64())
                .cloned()
                .unwrap_or(json!(status));
            out
        }
        None => json!({"error": format!("upstream error: HTTP {status}"), "body": body}),
    }
}

/// Neither success nor error status.
pub fn unexpected(resp: &UpstreamResponse) -> CallToolResult {
    let ex = excerpt(&resp.body, EXCERPT_CHARS);
    if ex.is_empty() {
        error_text(format!("unexpected HTTP {}", resp.status))
    } else {
        error_text(format!("unexpected HTTP {}: {ex}", resp.status))
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
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

    #[test]
    fn problem_details_become_title_detail_status() {
        let v = default_error(
            404,
            Some(
                json!({"type": "about:blank", "title": "Pet not found", "detail": "no pet 7", "status": 404}),
            ),
            Value::Null,
        );
        assert_eq!(
            v,
            json!({"error": "Pet not found", "detail": "no pet 7", "status": 404})
        );
    }

    #[test]
    fn other_errors_carry_the_body() {
        let v = default_error(500, None, json!({"msg": "boom"}));
        assert_eq!(
            v,
            json!({"error": "upstream error: HTTP 500", "body": {"msg": "boom"}})
        );
    }
}
