//! The call pipeline of one tool: validate → build the request (plan or jq
//! request transform) → call the upstream → route by status → render.
//!
//! Every step's failure becomes `CallToolResult{isError: true}` with a
//! message meant for the caller (see [`crate::mcp::error`] for the whole table);
//! invalid arguments stop the call before the upstream is contacted.

use std::time::Instant;

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;
use tracing::Instrument;

use crate::call::credentials::AuthError;
use crate::call::request;
use crate::call::response::{self, error_text};
use crate::call::tool::ToolEntry;
use crate::call::upstream::{StatusClass, UpstreamError, UpstreamResponse};
use crate::call::validate;
use crate::identity::inbound::CallContext;
use crate::observe::trace;
use crate::outcome::{CallReport, ErrorType, UpstreamCall};

/// Runs `tool` with `arguments` for the caller `ctx` describes.
pub async fn call(
    tool: &ToolEntry,
    arguments: Option<JsonObject>,
    ctx: &CallContext,
) -> CallToolResult {
    call_reported(tool, arguments, ctx).await.0
}

/// [`call`], with what happened on the way.
pub(crate) async fn call_reported(
    tool: &ToolEntry,
    arguments: Option<JsonObject>,
    ctx: &CallContext,
) -> (CallToolResult, CallReport) {
    let mut report = CallReport::default();
    let result = run(tool, arguments, ctx, &mut report).await;
    if result.is_error == Some(true) && report.error.is_none() {
        // Every failure before the response sets its type; what is left
        // is the success path refusing a response.
        report.error = Some(ErrorType::ResponseValidation);
    }
    (result, report)
}

async fn run(
    tool: &ToolEntry,
    arguments: Option<JsonObject>,
    ctx: &CallContext,
    report: &mut CallReport,
) -> CallToolResult {
    let started = Instant::now();
    let name = tool.def.name.as_str();
    if let Err(e) = tool.upstream.admit(ctx) {
        tracing::debug!(
            tool = name,
            retry_after_s = e.retry_after_seconds,
            "rate limited"
        );
        return failed(report, ErrorType::RateLimited, e.to_string());
    }
    let instance = Value::Object(arguments.unwrap_or_default());
    let Some(input) = tool.input() else {
        tracing::error!(tool = name, "input schema does not compile");
        return failed(
            report,
            ErrorType::Internal,
            format!("cannot call {name}: its input schema is invalid"),
        );
    };
    let step = trace::step("validate arguments");
    if let Err(errors) = step.in_scope(|| validate::check(input, &instance)) {
        trace::step_failed(&step, ErrorType::InvalidArguments);
        tracing::debug!(tool = name, errors = errors.len(), "invalid arguments");
        report.invalid_arguments = true;
        report.error = Some(ErrorType::InvalidArguments);
        return error_text(format!(
            "invalid arguments for {name}:\n- {}",
            errors.join("\n- ")
        ));
    }
    let Value::Object(args) = instance else {
        return failed(
            report,
            ErrorType::InvalidArguments,
            "arguments must be an object".into(),
        );
    };
    let base = &tool.upstream.base_url;
    let prepared = match &tool.request_jq {
        Some(p) => {
            let step = trace::step("transform request");
            let out = crate::call::transform::run("request", p, Value::Object(args))
                .instrument(step.clone())
                .await;
            match out {
                Ok(out) => step.in_scope(|| request::from_transform(&out, &tool.def.plan, base)),
                Err(e) => {
                    trace::step_failed(&step, ErrorType::Transform);
                    return failed(report, ErrorType::Transform, e.to_string());
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
            let error = match e {
                request::RequestError::Plan(_) => {
                    tracing::error!(tool = name, error = %e, "catalog defect");
                    ErrorType::Internal
                }
                request::RequestError::Argument { .. } => ErrorType::InvalidArguments,
            };
            return failed(report, error, format!("cannot call {name}: {e}"));
        }
    };
    let method = prepared.method.clone();
    let client = trace::http_client(&method, &tool.def.plan.path, &prepared.url);
    let sent_at = Instant::now();
    let sent = tool
        .upstream
        .send(prepared, tool.def.auth_required, ctx)
        .instrument(client.clone())
        .await;
    let status = sent.as_ref().ok().map(|r| r.status);
    if reached_upstream(&sent) {
        report.upstream = Some(UpstreamCall {
            method: method.clone(),
            status,
            elapsed: sent_at.elapsed(),
        });
    }
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            let error = error_type(&e);
            client.record("error.type", error.as_str());
            tracing::warn!(tool = name, error = %e, "upstream call failed");
            report.error = Some(error);
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
        StatusClass::Success => response::success(tool, resp, report).await,
        StatusClass::Error => {
            report.error = Some(ErrorType::UpstreamStatus);
            response::error(tool, resp).await
        }
        StatusClass::Unexpected => {
            report.error = Some(ErrorType::UpstreamStatus);
            response::unexpected(&resp)
        }
    }
}

/// Whether a send got as far as sending a request.
fn reached_upstream(sent: &Result<UpstreamResponse, UpstreamError>) -> bool {
    match sent {
        Ok(_) => true,
        Err(
            UpstreamError::Timeout(_)
            | UpstreamError::Unreachable(_)
            | UpstreamError::TooLarge { .. }
            | UpstreamError::OverBudget { .. }
            | UpstreamError::BudgetTimeout { .. },
        ) => true,
        // Refused before a request left: no slot, no token.
        Err(UpstreamError::Busy { .. } | UpstreamError::Auth(_) | UpstreamError::Identity(_)) => {
            false
        }
    }
}

/// An isError result of type `error`.
fn failed(report: &mut CallReport, error: ErrorType, message: String) -> CallToolResult {
    report.error = Some(error);
    error_text(message)
}

fn error_type(e: &UpstreamError) -> ErrorType {
    match e {
        UpstreamError::Timeout(_) => ErrorType::UpstreamTimeout,
        UpstreamError::Unreachable(_) => ErrorType::UpstreamUnreachable,
        UpstreamError::TooLarge { .. } => ErrorType::ResponseTooLarge,
        UpstreamError::Busy { .. }
        | UpstreamError::OverBudget { .. }
        | UpstreamError::BudgetTimeout { .. } => ErrorType::Overloaded,
        UpstreamError::Auth(AuthError::NeedsToken) => ErrorType::Forbidden,
        UpstreamError::Auth(_) => ErrorType::UpstreamAuth,
        UpstreamError::Identity(_) => ErrorType::Internal,
    }
}
