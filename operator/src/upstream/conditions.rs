//! The McpUpstream condition table: what one reconcile concluded in, the
//! full condition set out. Pure, so the table is tested on its own.

use catalog::publish::IndexEntry;
use crds::conditions::{types, Reason};

use crate::compile::Summary;
use crate::error::Failure;
use crate::served::ServedBy;
use crate::status::Cond;
use std::sync::Arc;

/// Everything one reconcile concluded.
pub struct Outcome {
    pub spec: Result<(), Failure>,
    pub overlays: Option<Result<Vec<String>, Failure>>,
    pub compiled: Option<Result<Arc<Summary>, Failure>>,
    pub prefix: Result<(), Failure>,
    /// The gateway settings and credentials ([`crate::settings`]).
    pub settings: Result<(), Failure>,
    pub published: Published,
    /// Gateway replicas serving the published (or stale) version.
    pub served: Option<ServedBy>,
}

pub enum Published {
    Current(IndexEntry),
    Stale(IndexEntry, Failure),
    Not(Failure),
}

/// Conditions from the outcome, in a fixed order, Ready first.
pub fn conditions(o: &Outcome) -> Vec<Cond> {
    let mut conds = Vec::new();
    conds.push(match &o.spec {
        Ok(()) => Cond::ok(
            types::SPEC_RESOLVED,
            Reason::Resolved,
            "the OpenAPI document was read",
        ),
        Err(f) => Cond::fail(types::SPEC_RESOLVED, f.reason, &f.message),
    });
    conds.push(match &o.overlays {
        None => Cond::unknown(
            types::OVERLAYS_APPLIED,
            Reason::Reconciling,
            "waiting for the OpenAPI document",
        ),
        Some(Ok(names)) if names.is_empty() => {
            Cond::ok(types::OVERLAYS_APPLIED, Reason::Applied, "no overlays")
        }
        Some(Ok(names)) => Cond::ok(
            types::OVERLAYS_APPLIED,
            Reason::Applied,
            format!("applied in order: {}", names.join(", ")),
        ),
        Some(Err(f)) => Cond::fail(types::OVERLAYS_APPLIED, f.reason, &f.message),
    });
    conds.push(match &o.compiled {
        None => Cond::unknown(
            types::COMPILED,
            Reason::Reconciling,
            "not compiled: an earlier stage failed",
        ),
        Some(Ok(c)) => Cond::ok(
            types::COMPILED,
            Reason::Compiled,
            format!(
                "{} tools from {} operations ({} rejected, {} warnings)",
                c.tools, c.operations, c.rejected, c.warnings
            ),
        ),
        Some(Err(f)) => Cond::fail(types::COMPILED, f.reason, &f.message),
    });
    conds.push(match &o.prefix {
        Ok(()) => Cond::ok(
            types::PREFIX_ACCEPTED,
            Reason::PrefixHeld,
            "this upstream holds its tool prefix",
        ),
        Err(f) => Cond::fail(types::PREFIX_ACCEPTED, f.reason, &f.message),
    });
    let served_note = match o.served {
        Some(ServedBy { live: 0, .. }) | None => {
            "no gateway replica reports what it serves".to_string()
        }
        Some(ServedBy { serving, live }) => {
            format!("served by {serving} of {live} gateway replicas")
        }
    };
    let not_served =
        matches!(o.served, Some(ServedBy { serving, live }) if live > 0 && serving < live);
    let published = match &o.published {
        Published::Current(e) if not_served => Cond::fail(
            types::PUBLISHED,
            Reason::NotServed,
            format!(
                "catalog {} is published; {served_note} so far",
                short(&e.catalog_hash)
            ),
        ),
        Published::Current(e) => Cond::ok(
            types::PUBLISHED,
            Reason::Published,
            format!(
                "{} tools published (catalog {}, {} chunk(s)); {served_note}",
                e.tool_count,
                short(&e.catalog_hash),
                e.chunks.len()
            ),
        ),
        Published::Stale(e, f) => Cond::ok(
            types::PUBLISHED,
            Reason::Stale,
            format!(
                "the current spec is not published ({}); the last good catalog {} with {} tools keeps serving",
                f.reason,
                short(&e.catalog_hash),
                e.tool_count
            ),
        ),
        Published::Not(f) => Cond::fail(types::PUBLISHED, f.reason, &f.message),
    };
    // Ready: the first failure in pipeline order, else published.
    let first_failure = [
        &o.spec.clone().err(),
        &o.overlays.clone().and_then(Result::err),
        &o.compiled.clone().and_then(Result::err),
        &o.prefix.clone().err(),
        &o.settings.clone().err(),
    ]
    .into_iter()
    .flatten()
    .next()
    .cloned();
    let ready = match (&first_failure, &o.published) {
        (None, Published::Current(e)) if not_served => Cond::fail(
            types::READY,
            Reason::NotServed,
            format!(
                "{} tools published under prefix {:?}; {served_note} so far",
                e.tool_count, e.prefix
            ),
        ),
        (None, Published::Current(e)) => Cond::ok(
            types::READY,
            Reason::Published,
            format!(
                "{} tools published under prefix {:?}",
                e.tool_count, e.prefix
            ),
        ),
        (Some(f), Published::Stale(e, _)) => Cond::fail(
            types::READY,
            f.reason,
            format!(
                "{}; still serving the last good catalog {} ({} tools)",
                f.message,
                short(&e.catalog_hash),
                e.tool_count
            ),
        ),
        (Some(f), _) => Cond::fail(types::READY, f.reason, &f.message),
        (None, Published::Stale(_, f) | Published::Not(f)) => {
            Cond::fail(types::READY, f.reason, &f.message)
        }
    };
    conds.insert(0, ready);
    conds.push(published);
    conds
}

pub fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests;
