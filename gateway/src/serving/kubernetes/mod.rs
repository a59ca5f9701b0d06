//! Kubernetes mode (`toolgate serve --kube`): the catalog and the upstream
//! settings come from what the operator publishes in the gateway's
//! namespace (see `crds::publish` for the objects, `catalog::publish` for
//! their content), and are hot-swapped as they change.
//!
//! Three parts: `watch` follows the published ConfigMaps and decides when
//! to load, `loader` decodes, checks and installs what they publish into
//! the live snapshot, and `served` writes back, for the operator, what this
//! replica serves ([`report_served`]).
//!
//! **What is served** is reported by `/status`: the hash of the index
//! entries actually served
//! ([`Index::hash`](catalog::publish::Index::hash)), which equals the
//! published index's hash once everything loaded.

mod loader;
mod served;
mod watch;

pub use served::{report_served, REPORT_TTL_SECONDS};
pub use watch::{watch_published, KubeOptions};
