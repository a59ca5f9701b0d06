//! The served report: what this replica serves, written back for the
//! operator.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crds::publish::PART_OF;
use crds::{McpGatewayReplica, McpGatewayReplicaSpec};
use kube::Api;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::serving::reload::CatalogStore;

/// How often a replica renews its report while nothing changes, and how
/// long the operator trusts a report that is not renewed.
pub(crate) const REPORT_RENEW: Duration = Duration::from_secs(10);
pub const REPORT_TTL_SECONDS: i32 = 30;

/// Reports what this replica serves in an `McpGatewayReplica` of its own
/// (named by `crds::publish::gateway_replica_name`), so the operator can
/// say how many replicas serve each published upstream. Written when what
/// is served changes (checked every 250 ms) and renewed every
/// [`REPORT_RENEW`]; deleted on shutdown so the operator stops counting
/// this replica at once. With `pod_uid` (the replica is Pod `replica`), the
/// report is owned by the Pod, so a replica that crashes leaves no report
/// behind either: the garbage collector deletes it with the Pod.
pub async fn report_served(
    client: kube::Client,
    store: Arc<CatalogStore>,
    namespace: String,
    replica: String,
    pod_uid: Option<String>,
    shutdown: CancellationToken,
) {
    use catalog::publish::Served;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use kube::api::{DeleteParams, PostParams};

    let api: Api<McpGatewayReplica> = Api::namespaced(client, &namespace);
    let name = crds::publish::gateway_replica_name(&replica);
    // NB: no `blockOwnerDeletion`: with it, the OwnerReferencesPermissionEnforcement
    // admission plugin would require `update` on pods/finalizers, a right
    // the gateway has no other use for.
    let owner = pod_uid.map(|uid| {
        vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: replica.clone(),
            uid,
            ..Default::default()
        }]
    });
    let mut last: Option<(Served, Instant)> = None;
    loop {
        let p = store.load().provenance.clone();
        let served = Served {
            catalog_hash: p.catalog_hash.clone(),
            upstreams: p
                .upstreams
                .iter()
                .map(|u| (u.prefix.clone(), u.hash.clone()))
                .collect(),
        };
        let due = match &last {
            Some((s, at)) => *s != served || at.elapsed() >= REPORT_RENEW,
            None => true,
        };
        if due {
            let mut report = McpGatewayReplica::new(
                &name,
                McpGatewayReplicaSpec {
                    catalog_hash: served.catalog_hash.clone(),
                    upstreams: served.upstreams.clone(),
                    renew_time: Time(jiff::Timestamp::now()),
                    ttl_seconds: REPORT_TTL_SECONDS,
                },
            );
            report.metadata = ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                labels: Some(BTreeMap::from([(
                    PART_OF.0.to_string(),
                    PART_OF.1.to_string(),
                )])),
                owner_references: owner.clone(),
                ..Default::default()
            };
            let pp = PostParams {
                field_manager: Some("toolgate-gateway".into()),
                ..Default::default()
            };
            let written = match api.get_opt(&name).await {
                Ok(Some(old)) => {
                    report.metadata.resource_version = old.metadata.resource_version;
                    api.replace(&name, &pp, &report).await.map(drop)
                }
                Ok(None) => api.create(&pp, &report).await.map(drop),
                Err(e) => Err(e),
            };
            match written {
                Ok(()) => last = Some((served, Instant::now())),
                Err(e) => {
                    tracing::warn!(report = %name, error = %e, "reporting what this replica serves (is the McpGatewayReplica CRD installed?)")
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
    if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
        tracing::debug!(report = %name, error = %e, "removing the served report");
    }
}
