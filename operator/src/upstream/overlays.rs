//! The upstream's overlays: read and parse them in order, then tell each
//! overlay (through the overlay controller) what it did to this upstream.

use std::collections::BTreeMap;
use std::sync::Arc;

use crds::conditions::Reason;
use crds::{McpOverlay, McpUpstream};
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;

use crate::compile::{LoadedOverlay, Summary};
use crate::context::{Applied, Context, OverlayOutcome};
use crate::error::{Error, Failure};
use crate::sources;
use crate::sync::lock;

/// Reads and parses the upstream's overlays, in order; the first that
/// cannot be used fails them all (and each says why in `outcomes`).
pub async fn load(
    ctx: &Context,
    u: &McpUpstream,
    outcomes: &mut BTreeMap<String, OverlayOutcome>,
) -> Result<Result<Vec<LoadedOverlay>, Failure>, Error> {
    let ns = u.namespace().unwrap_or_default();
    // Listed rather than read from the overlay controller's cache: that
    // cache may lag the event that woke this reconcile.
    let api: Api<McpOverlay> = Api::namespaced(ctx.client.clone(), &ns);
    let all: Vec<Arc<McpOverlay>> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(Arc::new)
        .collect();
    let order = sources::overlay_order(u, &all);
    let mut loaded = Vec::new();
    let mut first_failure = None;
    for name in order {
        let okey = format!("{ns}/{name}");
        let Some(o) = all.iter().find(|o| o.name_any() == name) else {
            first_failure.get_or_insert(Failure::new(
                Reason::OverlayNotFound,
                format!("spec.overlays: McpOverlay {okey} not found"),
            ));
            continue;
        };
        let src = match ctx.sources.overlay(&ns, o).await {
            Ok(s) => s,
            Err(f) if f.transient => return Err(f.into()),
            Err(f) => {
                outcomes.insert(
                    okey.clone(),
                    OverlayOutcome {
                        result: Applied::Failed(f.message.clone()),
                        unmatched: vec![],
                    },
                );
                first_failure.get_or_insert(f);
                continue;
            }
        };
        match catalog::Overlay::parse(&okey, &src.bytes, src.strict) {
            Ok(parsed) => {
                outcomes.insert(
                    okey.clone(),
                    OverlayOutcome {
                        result: Applied::Yes,
                        unmatched: vec![],
                    },
                );
                loaded.push(LoadedOverlay::new(okey, src.bytes, src.strict, parsed));
            }
            Err(e) => {
                let f = Failure::new(Reason::OverlayInvalid, format!("McpOverlay {okey}: {e}"));
                outcomes.insert(
                    okey,
                    OverlayOutcome {
                        result: Applied::Failed(f.message.clone()),
                        unmatched: vec![],
                    },
                );
                first_failure.get_or_insert(f);
            }
        }
    }
    Ok(match first_failure {
        Some(f) => {
            // Parsed, but the compile that would apply them never runs:
            // "applied" would claim what nobody checked.
            for o in &loaded {
                if let Some(out) = outcomes.get_mut(&o.name) {
                    out.result = Applied::NotEvaluated(format!(
                        "not evaluated: another overlay of this upstream failed ({})",
                        f.message
                    ));
                }
            }
            Err(f)
        }
        None => Ok(loaded),
    })
}

/// Fills in what each overlay did: a compile failure it caused, the targets
/// it left unmatched.
pub fn attribute(
    result: &Result<Arc<Summary>, Failure>,
    overlays: &[LoadedOverlay],
    outcomes: &mut BTreeMap<String, OverlayOutcome>,
) {
    // The overlay the compile failed on, if one: those after it in the
    // order were never applied.
    let mut failed_before: Option<&str> = None;
    for o in overlays {
        let Some(out) = outcomes.get_mut(&o.name) else {
            continue;
        };
        match result {
            Err(f) if f.overlay.as_deref() == Some(o.name.as_str()) => {
                out.result = Applied::Failed(f.message.clone());
                failed_before = Some(o.name.as_str());
            }
            Err(_) if failed_before.is_some() => {
                out.result = Applied::NotEvaluated(format!(
                    "not evaluated: McpOverlay {} failed before it",
                    failed_before.unwrap_or_default()
                ));
            }
            Ok(summary) => {
                for (_, i) in summary.unmatched.iter().filter(|(n, _)| *n == o.name) {
                    let target = o.targets.get(*i as usize).cloned().unwrap_or_default();
                    out.unmatched.push((*i, target));
                }
            }
            _ => {}
        }
    }
}

/// Stores what each overlay did to this upstream, waking those whose
/// report changed.
pub fn record(ctx: &Context, u: &McpUpstream, outcomes: BTreeMap<String, OverlayOutcome>) {
    let name = u.name_any();
    let ns = u.namespace().unwrap_or_default();
    let mut changed = Vec::new();
    {
        let mut all = lock(&ctx.overlay_outcomes);
        // Overlays that no longer apply to this upstream.
        for (okey, per) in all.iter_mut() {
            if okey.starts_with(&format!("{ns}/"))
                && !outcomes.contains_key(okey)
                && per.remove(&name).is_some()
            {
                changed.push(okey.clone());
            }
        }
        for (okey, out) in outcomes {
            let per = all.entry(okey.clone()).or_default();
            if per.get(&name) != Some(&out) {
                per.insert(name.clone(), out);
                changed.push(okey);
            }
        }
    }
    wake(ctx, changed);
}

/// Without a document no overlay was tried. An overlay that has a report
/// from this upstream keeps it (what it did to the last document); the
/// others learn why nothing was applied, rather than waiting for a report
/// that will not come.
pub fn record_not_tried(ctx: &Context, u: &McpUpstream, spec: &Failure) {
    let Some(store) = ctx.overlays.get() else {
        return;
    };
    let all = store.state();
    let ns = u.namespace().unwrap_or_default();
    let name = u.name_any();
    let why = format!(
        "not applied: no OpenAPI document ({}: {})",
        spec.reason, spec.message
    );
    let mut changed = Vec::new();
    {
        let mut outcomes = lock(&ctx.overlay_outcomes);
        for oname in sources::overlay_order(u, &all) {
            if !all.iter().any(|o| o.name_any() == oname) {
                continue;
            }
            let okey = format!("{ns}/{oname}");
            let per = outcomes.entry(okey.clone()).or_default();
            let stale = match per.get(&name).map(|o| &o.result) {
                None => true,
                Some(Applied::NotTried(old)) => *old != why,
                Some(_) => false,
            };
            if stale {
                per.insert(
                    name.clone(),
                    OverlayOutcome {
                        result: Applied::NotTried(why.clone()),
                        unmatched: vec![],
                    },
                );
                changed.push(okey);
            }
        }
    }
    wake(ctx, changed);
}

fn wake(ctx: &Context, overlays: Vec<String>) {
    for okey in overlays {
        if let Some((ons, oname)) = okey.split_once('/') {
            let _ = ctx.overlay_trigger.send(ObjectRef::new(oname).within(ons));
        }
    }
}
