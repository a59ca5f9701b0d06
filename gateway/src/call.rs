//! The call pipeline of one tool: validate → build the request (plan or jq
//! request transform) → call the upstream → route by status → render.
//!
//! Every step's failure becomes `CallToolResult{isError: true}` with a
//! message meant for the caller (see [`crate::error`] for the whole table);
//! invalid arguments stop the call before the upstream is contacted.

use std::time::Instant;

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

use crate::inbound::CallContext;
use crate::request;
use crate::response::{self, error_text};
use crate::snapshot::ToolEntry;
use crate::upstream::StatusClass;
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
        return error_text(e.to_string());
    }
    let instance = Value::Object(arguments.unwrap_or_default());
    let Some(input) = tool.input() else {
        tracing::error!(tool = name, "input schema does not compile");
        return error_text(format!("cannot call {name}: its input schema is invalid"));
    };
    if let Err(errors) = validate::check(input, &instance) {
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
        Some(p) => match crate::transform::run("request", p, Value::Object(args)).await {
            Ok(out) => request::from_transform(&out, &tool.def.plan, base),
            Err(e) => return error_text(e.to_string()),
        },
        None => request::build(&tool.def.plan, &args, base),
    };
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            if matches!(e, request::RequestError::Plan(_)) {
                tracing::error!(tool = name, error = %e, "catalog defect");
            }
            return error_text(format!("cannot call {name}: {e}"));
        }
    };
    let method = prepared.method.clone();
    let resp = match tool
        .upstream
        .send(prepared, tool.def.auth_required, ctx)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(tool = name, error = %e, "upstream call failed");
            return error_text(e.to_string());
        }
    };
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
        StatusClass::Error => response::error(tool, resp).await,
        StatusClass::Unexpected => response::unexpected(&resp),
    }
}
