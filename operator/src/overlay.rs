//! The McpOverlay controller: the overlay's own validity (its document
//! parses, its JSONPath targets compile) plus what the upstream controller
//! found when applying it to each upstream it targets. Where a sibling
//! overlay failed first, this one was never applied: `Ready` is then
//! `Unknown` (`UpstreamNotReady`, naming the sibling), never `Applied`.
//!
//! It writes only McpOverlay status; the upstream controller wakes it
//! whenever an overlay's outcome on some upstream changes.

use std::sync::Arc;
use std::time::Duration;

use crds::conditions::{types, Reason};
use crds::{McpOverlay, McpOverlayStatus, UnmatchedTarget, MAX_STATUS_UNMATCHED};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use crate::context::{Applied, Context};
use crate::error::Error;
use crate::metrics::Kind;
use crate::observe;
use crate::status::{self, Cond};
use crate::sync::lock;

pub async fn reconcile(o: Arc<McpOverlay>, ctx: Arc<Context>) -> Result<Action, Error> {
    observe::reconcile(&ctx.metrics, Kind::McpOverlay, o.as_ref(), run(&o, &ctx)).await
}

async fn run(o: &McpOverlay, ctx: &Context) -> Result<Action, Error> {
    let ns = o.namespace().unwrap_or_default();
    let name = o.name_any();
    let okey = o.key();
    tracing::debug!(overlay = %okey, "reconciling overlay");

    let own = match ctx.sources.overlay(&ns, o).await {
        Ok(src) => catalog::Overlay::parse(&okey, &src.bytes, src.strict)
            .map(drop)
            .map_err(|e| (Reason::OverlayInvalid, format!("McpOverlay {okey}: {e}"))),
        Err(f) if f.transient => return Err(f.into()),
        Err(f) => Err((f.reason, f.message)),
    };

    // Upstreams it targets now, by the upstream cache — once that cache
    // has its first list: before, every overlay would look orphaned.
    let (Some(upstreams), Some(listed)) = (ctx.upstreams.get(), ctx.upstreams_listed.get()) else {
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    if listed.clone().wait_for(|listed| *listed).await.is_err() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let targeted: Vec<String> = upstreams
        .state()
        .into_iter()
        .filter(|u| u.namespace().as_deref() == Some(ns.as_str()))
        .filter(|u| crate::sources::targets(o, u) || u.spec.overlays.contains(&name))
        .map(|u| u.name_any())
        .collect();
    let outcomes = lock(&ctx.overlay_outcomes)
        .get(&okey)
        .cloned()
        .unwrap_or_default();
    if own.is_ok() && targeted.iter().any(|u| !outcomes.contains_key(u)) {
        // An upstream has not reported yet (just created, or just after a
        // restart). Writing now would flap the status through partial
        // lists; its report also wakes this overlay, this is the fallback.
        return Ok(Action::requeue(Duration::from_secs(2)));
    }

    let mut applied_to = Vec::new();
    let mut failed = Vec::new();
    let mut not_tried = Vec::new();
    let mut not_evaluated = Vec::new();
    let mut unmatched = Vec::new();
    for upstream in &targeted {
        let Some(out) = outcomes.get(upstream) else {
            continue;
        };
        match &out.result {
            Applied::Yes => applied_to.push(upstream.clone()),
            Applied::Failed(m) => failed.push(format!("{upstream}: {m}")),
            Applied::NotTried(m) => not_tried.push(format!("{upstream}: {m}")),
            Applied::NotEvaluated(m) => not_evaluated.push(format!("{upstream}: {m}")),
        }
        for (action, target) in &out.unmatched {
            unmatched.push(UnmatchedTarget {
                upstream: upstream.clone(),
                action: *action,
                target: target.clone(),
            });
        }
    }
    let unmatched_count = unmatched.len();
    unmatched.truncate(MAX_STATUS_UNMATCHED);

    let ready = match (&own, targeted.is_empty(), failed.first()) {
        (Err((reason, message)), _, _) => Cond::fail(types::READY, *reason, message),
        (Ok(()), true, _) => Cond::fail(
            types::READY,
            Reason::NoUpstream,
            format!("no McpUpstream in namespace {ns} matches spec.upstreamRef / spec.upstreamSelector or lists it in spec.overlays"),
        ),
        (Ok(()), false, Some(_)) => Cond::fail(
            types::READY,
            Reason::OverlayInvalid,
            format!("failed on {} upstream(s): {}", failed.len(), failed.join("; ")),
        ),
        // Unknown, not True: on these upstreams it was never applied.
        (Ok(()), false, None) if !not_evaluated.is_empty() => {
            let mut message = not_evaluated.join("; ");
            if !applied_to.is_empty() {
                message = format!("applied to {}; {message}", applied_to.join(", "));
            }
            Cond::unknown(types::READY, Reason::UpstreamNotReady, message)
        }
        (Ok(()), false, None) if applied_to.is_empty() => Cond::fail(
            types::READY,
            Reason::UpstreamNotReady,
            not_tried.join("; "),
        ),
        (Ok(()), false, None) => {
            let mut message = format!("applied to {}", applied_to.join(", "));
            if !not_tried.is_empty() {
                message.push_str(&format!("; {}", not_tried.join("; ")));
            }
            if unmatched_count > 0 {
                message.push_str(&format!(
                    "; {unmatched_count} action target(s) matched nothing (see status.unmatchedTargets)"
                ));
            }
            Cond::ok(types::READY, Reason::Applied, message)
        }
    };
    let old = o.status.clone().unwrap_or_default();
    let new = McpOverlayStatus {
        observed_generation: o.metadata.generation,
        conditions: status::merge(&old.conditions, &[ready], o.metadata.generation),
        applied_to,
        unmatched_targets: unmatched,
    };
    if new != old {
        let api: Api<McpOverlay> = Api::namespaced(ctx.client.clone(), &ns);
        status::apply(&api, &name, &new).await?;
        ctx.metrics.status_written();
    }
    Ok(Action::requeue(Duration::from_secs(600)))
}

pub fn error_policy(o: Arc<McpOverlay>, e: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_failed(e);
    tracing::warn!(overlay = %o.name_any(), error = %e, kind = %e.metric_label(), "overlay reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}
