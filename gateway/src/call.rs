//! The call pipeline of one tool: validate → build the request (plan or jq
//! request transform) → call the upstream → route by status → render.
//!
//! Every step's failure becomes `CallToolResult{isError: true}` with a
//! message meant for the caller (see [`crate::error`] for the whole table);
//! invalid arguments stop the call before the upstream is contacted.

use std::time::Instant;

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;
use tracing::Instrument;

use crate::inbound::CallContext;
use crate::request;
use crate::response::{self, error_text};
use crate::snapshot::ToolEntry;
use crate::trace::{self, record_error, ErrorType};
use crate::upstream::{StatusClass, UpstreamError};
use crate::validate;

/// Runs `tool` with `arguments` for the caller `ctx` describes.
pub async fn call(
    tool: &ToolEntry,
    arguments: Option<JsonObject>,
    ctx: &CallContext,
) -> CallToolResult {
    let started = Instant::now();
    let name = tool.def.name.as_str();
    if let Err(e) = tool.upstream.admit(ctx) {
        tracing::debug!(
            tool = name,
            retry_after_s = e.retry_after_seconds,
            "rate limited"
        );
        record_error(ErrorType::RateLimited);
        return error_text(e.to_string());
    }
    let instance = Value::Object(arguments.unwrap_or_default());
    let Some(input) = tool.input() else {
        tracing::error!(tool = name, "input schema does not compile");
        return error_text(format!("cannot call {name}: its input schema is invalid"));
    };
    let step = trace::step("validate arguments");
    if let Err(errors) = step.in_scope(|| validate::check(input, &instance)) {
        trace::step_failed(&step, ErrorType::InvalidArguments);
        tracing::debug!(tool = name, errors = errors.len(), "invalid arguments");
        return error_text(format!(
            "invalid arguments for {name}:\n- {}",
            errors.join("\n- ")
        ));
    }
    let Value::Object(args) = instance else {
        return error_text("arguments must be an object");
    };
    let base = &tool.upstream.base_url;
    let prepared = match &tool.request_jq {
        Some(p) => {
            let step = trace::step("transform request");
            let out = crate::transform::run("request", p, Value::Object(args))
                .instrument(step.clone())
                .await;
            match out {
                Ok(out) => step.in_scope(|| request::from_transform(&out, &tool.def.plan, base)),
                Err(e) => {
                    trace::step_failed(&step, ErrorType::RequestBuild);
                    return error_text(e.to_string());
                }
            }
        }
        None => {
            trace::step("build request").in_scope(|| request::build(&tool.def.plan, &args, base))
        }
    };
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            record_error(ErrorType::RequestBuild);
            if matches!(e, request::RequestError::Plan(_)) {
                tracing::error!(tool = name, error = %e, "catalog defect");
            }
            return error_text(format!("cannot call {name}: {e}"));
        }
    };
    let method = prepared.method.clone();
    let client = trace::http_client(&method, &tool.def.plan.path, &prepared.url);
    let resp = match tool
        .upstream
        .send(prepared, tool.def.auth_required, ctx)
        .instrument(client.clone())
        .await
    {
        Ok(r) => r,
        Err(e) => {
            let kind = match e {
                UpstreamError::Timeout(_) => ErrorType::UpstreamTimeout,
                _ => ErrorType::UpstreamUnreachable,
            };
            client.record("error.type", kind.as_str());
            record_error(kind);
            tracing::warn!(tool = name, error = %e, "upstream call failed");
            return error_text(e.to_string());
        }
    };
    client.record("http.response.status_code", i64::from(resp.status));
    if resp.status >= 400 && !client.is_disabled() {
        // HTTP client conventions: the status code is the error type.
        client.record("error.type", resp.status.to_string());
    }
    drop(client);
    let class = tool.upstream.classify(resp.status);
    tracing::debug!(
        tool = name,
        %method,
        status = resp.status,
        bytes = resp.body.len(),
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        "upstream responded"
    );
    match class {
        StatusClass::Success => response::success(tool, resp).await,
        StatusClass::Error => {
            record_error(ErrorType::UpstreamStatus);
            response::error(tool, resp).await
        }
        StatusClass::Unexpected => {
            record_error(ErrorType::UpstreamStatus);
            response::unexpected(&resp)
        }
    }
}
