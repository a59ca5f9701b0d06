//! Reporting a reconcile: the McpUpstream's status and an Event when
//! readiness changes.

use crds::conditions::types;
use crds::{McpUpstream, McpUpstreamStatus};
use kube::api::Api;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::{Resource, ResourceExt};

use super::conditions::{conditions, Outcome, Published};
use crate::compile::Summary;
use crate::context::Context;
use crate::error::Error;
use crate::status;

fn record(status: &mut McpUpstreamStatus, c: &Summary, u: &McpUpstream) {
    let validation = u.spec.validation.clone().unwrap_or_default();
    let listed_output = validation.response_validation().advertises_output_schemas();
    status.listing = Some(c.listing[usize::from(listed_output)].into());
    let r = &c.recorded;
    status.tool_count = r.tool_count;
    status.warnings = r.warnings.clone();
    status.warning_count = r.warning_count;
    status.rejected_operations = r.rejected_operations.clone();
    status.rejected_count = r.rejected_count;
    status.catalog_hash = r.catalog_hash.clone();
}

/// Writes the status the outcome calls for, unless it is what is there.
pub async fn write_status(ctx: &Context, u: &McpUpstream, o: &Outcome) -> Result<(), Error> {
    let old = u.status.clone().unwrap_or_default();
    let concluded = conditions(o);
    if let Some(ready) = concluded.iter().find(|c| c.type_ == types::READY) {
        ctx.metrics
            .upstream_reported(&u.key(), ready.reason, o.prefix.is_err());
    }
    let mut new = McpUpstreamStatus {
        observed_generation: u.metadata.generation,
        conditions: status::merge(&old.conditions, &concluded, u.metadata.generation),
        served_replicas: o.served.map(|s| s.serving as i32),
        ..Default::default()
    };
    match (&o.compiled, &o.published) {
        (Some(Ok(c)), Published::Current(_)) => record(&mut new, c, u),
        (_, Published::Stale(e, _)) => {
            // Describe what serves, not what failed.
            new.tool_count = Some(e.tool_count as u32);
            new.catalog_hash = Some(e.catalog_hash.clone());
            new.warnings = old.warnings.clone();
            new.warning_count = old.warning_count;
            new.rejected_operations = old.rejected_operations.clone();
            new.rejected_count = old.rejected_count;
            new.listing = old.listing;
        }
        (Some(Ok(c)), Published::Not(_)) => {
            record(&mut new, c, u);
            new.tool_count = Some(0);
        }
        _ => new.tool_count = Some(0),
    }
    emit_transition_event(ctx, u, &old, &new).await;
    if new == old {
        return Ok(());
    }
    let api: Api<McpUpstream> =
        Api::namespaced(ctx.client.clone(), &u.namespace().unwrap_or_default());
    status::apply(&api, &u.name_any(), &new).await?;
    ctx.metrics.status_written();
    Ok(())
}

async fn emit_transition_event(
    ctx: &Context,
    u: &McpUpstream,
    old: &McpUpstreamStatus,
    new: &McpUpstreamStatus,
) {
    let (Some(n), o) = (
        status::ready(&new.conditions),
        status::ready(&old.conditions),
    ) else {
        return;
    };
    if o.is_some_and(|o| o.status == n.status && o.reason == n.reason) {
        return;
    }
    let ev = KubeEvent {
        type_: if n.status == "True" {
            EventType::Normal
        } else {
            EventType::Warning
        },
        reason: n.reason.clone(),
        note: Some(status::truncate(&n.message, 1000)),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &u.object_ref(&())).await {
        tracing::warn!(upstream = %u.key(), error = %e, "recording an event");
    }
}
