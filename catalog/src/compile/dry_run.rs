//! Dry runs: each transform of a tool is compiled and run on synthetic
//! inputs ([`crate::synth`]) made from the tool's schemas, so that a
//! transform that cannot work rejects its tool at compile time instead of
//! failing every call at the gateway. Bounded per run and per compile.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::node::Node;
use super::reject;
use crate::model::{OutputWrap, RejectReason, Rejected, Transforms};
use crate::spec::OperationSite;
use crate::transform::JqProgram;

/// Bounds for dry runs at compile time: generous for real transforms (the
/// samples are small), short enough that a runaway filter cannot stall a
/// reconcile, small enough that one cannot take the operator's memory.
const DRY_RUN_LIMITS: crate::transform::JqLimits = crate::transform::JqLimits {
    timeout: std::time::Duration::from_millis(500),
    max_output_bytes: 1 << 20,
    max_alloc_bytes: 16 << 20,
};

/// Wall-clock time one compile may spend dry-running transforms. NB: one
/// overlay can set a transform on every operation (`$.paths.*.*`); without
/// a bound, a filter that never finishes would cost its timeout per tool —
/// minutes of one reconcile for a large API.
const DRY_RUN_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// Dry-run bookkeeping of one compile.
#[derive(Default)]
pub(super) struct DryRuns {
    /// Programs that ran out of time, by extension and source, with the tool
    /// they timed out on: not run again.
    timed_out: HashMap<(&'static str, String), String>,
    spent: std::time::Duration,
}

/// The body schema behind the output schema (for dry runs).
pub(super) fn body_schema(output: Option<&Node<'_>>, wrap: Option<OutputWrap>) -> Option<Value> {
    let out = output?;
    match wrap? {
        OutputWrap::Body => Some(out.to_value()),
        OutputWrap::Result => out.get("properties")?.get("result").map(Node::to_value),
    }
}

/// What a tool's transforms are dry-run on.
pub(super) struct DryRunInputs<'a> {
    pub(super) tool: &'a str,
    pub(super) input: &'a Value,
    pub(super) body: Option<&'a Value>,
}

/// Compiles each transform and dry-runs it on synthetic inputs; a transform
/// that fails on every input rejects the tool with the jq error. A run that
/// times out ends the transform's dry run (and every later tool's with the
/// same program); so does a compile's spent [`DRY_RUN_BUDGET`].
pub(super) fn check_transforms(
    site: &OperationSite<'_>,
    method: &str,
    t: &Transforms,
    on: &DryRunInputs<'_>,
    dry_runs: &mut DryRuns,
) -> Result<(), Box<Rejected>> {
    let fail = |key: &str, msg: String| {
        reject(
            site,
            method,
            RejectReason::TransformInvalid,
            format!("{}/{key}: {msg}", site.pointer),
        )
    };
    let any = Value::Object(Map::new());
    // Samples are made only for the transforms there are.
    let samples = |key: &str| match key {
        "x-mcp-request-transform" => crate::synth::instances(on.input),
        "x-mcp-response-transform" => crate::synth::instances(on.body.unwrap_or(&any)),
        _ => error_samples(),
    };
    let checks = [
        ("x-mcp-request-transform", &t.request),
        ("x-mcp-response-transform", &t.response),
        ("x-mcp-error-transform", &t.error),
    ];
    for (key, src) in checks {
        let Some(src) = src else { continue };
        let program = JqProgram::compile(src).map_err(|e| fail(key, e.to_string()))?;
        let id = (key, src.clone());
        if let Some(tool) = dry_runs.timed_out.get(&id) {
            return Err(fail(
                key,
                format!(
                    "timed out on a synthetic input of {tool} (the same program); not run again"
                ),
            ));
        }
        let mut first_err = None;
        let mut ok = false;
        for input in samples(key) {
            if dry_runs.spent >= DRY_RUN_BUDGET {
                return Err(fail(
                    key,
                    format!(
                        "not dry-run: this compile spent its {DRY_RUN_BUDGET:?} for dry runs on \
                         transforms that ran long"
                    ),
                ));
            }
            let started = std::time::Instant::now();
            let result = program.run_bounded(input, &DRY_RUN_LIMITS);
            dry_runs.spent += started.elapsed();
            match result {
                Ok(_) => {
                    ok = true;
                    break;
                }
                Err(e @ crate::transform::JqRunError::Timeout(_)) => {
                    dry_runs.timed_out.insert(id, on.tool.to_string());
                    return Err(fail(key, format!("fails on a synthetic input: {e}")));
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if !ok {
            let e = first_err
                .map(|e| e.to_string())
                .unwrap_or_else(|| "no synthetic input".into());
            return Err(fail(key, format!("fails on every synthetic input: {e}")));
        }
    }
    Ok(())
}

/// What an error transform sees at runtime (the gateway builds the same
/// shape): `{status, contentType, problem, body}`, `problem` being the
/// RFC 9457 object for `application/problem+json` and `null` otherwise.
fn error_samples() -> Vec<Value> {
    let problem = serde_json::json!({"type": "about:blank", "title": "Not Found", "status": 404, "detail": "no such item"});
    vec![
        serde_json::json!({"status": 404, "contentType": "application/problem+json",
            "problem": problem.clone(), "body": problem}),
        serde_json::json!({"status": 500, "contentType": "text/plain", "problem": null, "body": "internal error"}),
    ]
}
