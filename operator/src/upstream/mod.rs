//! The McpUpstream controller.
//!
//! Level-triggered: every reconcile recomputes the upstream's whole outcome
//! from the cluster as it is now (spec source, overlays, Secrets, Service,
//! the other upstreams' prefix claims) and then makes the published catalog
//! and the status match it. Nothing it does depends on which event woke it.
//!
//! - Compiling is the only expensive step, so results are cached per
//!   upstream by a hash of every input ([`crate::compile`]).
//! - A failed new version never replaces a published one: the index keeps
//!   the last good entry and `Published` says it is stale and why.
//! - The oldest claimant of a prefix holds it (`catalog::resolve_prefixes`);
//!   the others are not published and say who holds it. Deleting the holder
//!   wakes the others, and the next oldest publishes.
//!
//! Modules, in the order a reconcile reaches them: [`controller`] (what
//! wakes a reconcile), [`reconcile`] (read → compile → publish → report),
//! [`overlays`], [`conditions`] (the pure condition table) and [`report`]
//! (status and events).

pub mod conditions;
pub mod controller;
pub mod overlays;
pub mod reconcile;
pub mod report;

pub use controller::run;
pub use reconcile::FINALIZER;
