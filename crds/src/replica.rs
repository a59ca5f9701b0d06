//! `McpGatewayReplica`: what one gateway replica serves, reported by the
//! replica itself in the release namespace so the operator can count the
//! replicas serving each published upstream (`Published`/`Ready` wait for
//! every live replica).
//!
//! A kind of its own rather than a `coordination.k8s.io` Lease: the
//! gateway's ServiceAccount may then write these reports and nothing else,
//! in particular not the operator's leader-election Lease
//! (docs/0010-least-privilege.md).
//!
//! Written by the gateway (one object per replica, named after its Pod and
//! owned by it, so the garbage collector removes a crashed replica's
//! report), read by the operator. Not meant to be edited by hand.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// What one gateway replica serves.
// NB: clippy reads the repeated `type_ = "string"` of the printer columns
// inside `#[kube(...)]` as duplicated attributes; they are separate columns.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "toolgate.dev",
    version = "v1alpha1",
    kind = "McpGatewayReplica",
    plural = "mcpgatewayreplicas",
    namespaced,
    derive = "PartialEq",
    doc = "What one toolgate gateway replica serves, written by the replica for the operator (which counts the replicas serving each McpUpstream). Not edited by hand.",
    printcolumn(name = "Catalog", type_ = "string", json_path = ".spec.catalogHash"),
    printcolumn(name = "Renewed", type_ = "date", json_path = ".spec.renewTime")
)]
#[serde(rename_all = "camelCase")]
pub struct McpGatewayReplicaSpec {
    /// Hash of the catalog index the replica serves (the published index's
    /// `hash`); empty before it has read one.
    #[serde(default)]
    pub catalog_hash: String,

    /// Tool prefix → hash of the version of that upstream the replica
    /// serves (the index entry's `hash`). Omitted when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub upstreams: BTreeMap<String, String>,

    /// When the replica last wrote this report. It rewrites it when what it
    /// serves changes and at least every few seconds otherwise.
    pub renew_time: Time,

    /// Seconds after `renewTime` during which the operator counts the
    /// replica as live; a report not renewed in time is ignored (the
    /// replica is gone or cut off).
    #[schemars(range(min = 1))]
    pub ttl_seconds: i32,
}

impl McpGatewayReplicaSpec {
    /// The report as the catalog crate's [`catalog::publish::Served`].
    pub fn served(&self) -> catalog::publish::Served {
        catalog::publish::Served {
            catalog_hash: self.catalog_hash.clone(),
            upstreams: self.upstreams.clone(),
        }
    }
}
