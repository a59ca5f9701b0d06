//! The serving catalog: what the gateway serves at one moment, and how it
//! changes. A [`snapshot`] is a catalog prepared whole (every tool ready
//! to call, every access policy compiled) or not at all; [`reload`] swaps
//! snapshots in and tells what changed; the catalog comes from a file or
//! the upstreams' documents ([`local`]) or from the operator
//! ([`kubernetes`], `serve --kube`). [`access`] decides which of a
//! snapshot's tools one caller may see and call; [`listing_version`] is
//! the content version `tools/list` cursors carry.

pub(crate) mod access;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub(crate) mod listing_version;
pub mod local;
pub mod reload;
pub mod snapshot;
