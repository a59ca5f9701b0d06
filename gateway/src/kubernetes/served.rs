//! The served report: what this replica serves, written back for the
//! operator.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crds::publish::PART_OF;
use kube::Api;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::reload::CatalogStore;

/// How often a replica renews its report while nothing changes, and how
/// long the operator trusts a report that is not renewed.
pub const REPORT_RENEW: Duration = Duration::from_secs(10);
pub const REPORT_TTL_SECONDS: i32 = 30;

/// Reports what this replica serves in a Lease of its own
/// (`crds::publish::gateway_lease_name`), so the operator can say how many
/// replicas serve each published upstream. Written when what is served
/// changes (checked every 250 ms) and renewed every [`REPORT_RENEW`];
/// deleted on shutdown so the operator stops counting this replica at once.
/// With `pod_uid` (the replica is Pod `replica`), the Lease is owned by the
/// Pod, so a replica that crashes leaves no report behind either: the
/// garbage collector deletes it with the Pod.
pub async fn report_served(
    client: kube::Client,
    store: Arc<CatalogStore>,
    namespace: String,
    replica: String,
    pod_uid: Option<String>,
    shutdown: CancellationToken,
) {
    use catalog::publish::Served;
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
    use kube::api::{DeleteParams, PostParams};

    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let name = crds::publish::gateway_lease_name(&replica);
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
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.clone()),
                    labels: Some(BTreeMap::from([
                        (PART_OF.0.to_string(), PART_OF.1.to_string()),
                        (
                            crds::publish::COMPONENT.to_string(),
                            crds::publish::COMPONENT_GATEWAY.to_string(),
                        ),
                    ])),
                    annotations: Some(BTreeMap::from([(
                        crds::publish::SERVED_ANNOTATION.to_string(),
                        serde_json::to_string(&served).unwrap_or_default(),
                    )])),
                    owner_references: owner.clone(),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(replica.clone()),
                    lease_duration_seconds: Some(REPORT_TTL_SECONDS),
                    renew_time: Some(MicroTime(jiff::Timestamp::now())),
                    ..Default::default()
                }),
            };
            let pp = PostParams {
                field_manager: Some("toolgate-gateway".into()),
                ..Default::default()
            };
            let written = match api.get_opt(&name).await {
                Ok(Some(old)) => {
                    let mut l = lease;
                    l.metadata.resource_version = old.metadata.resource_version;
                    api.replace(&name, &pp, &l).await.map(drop)
                }
                Ok(None) => api.create(&pp, &lease).await.map(drop),
                Err(e) => Err(e),
            };
            match written {
                Ok(()) => last = Some((served, Instant::now())),
                Err(e) => {
                    tracing::warn!(lease = %name, error = %e, "reporting what this replica serves")
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
    if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
        tracing::debug!(lease = %name, error = %e, "removing the served report");
    }
}
