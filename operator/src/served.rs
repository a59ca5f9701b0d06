//! What the gateway replicas serve, from the `McpGatewayReplica` each
//! replica keeps in the publish namespace (see
//! `gateway::serving::kubernetes::report_served`).
//!
//! `Published`/`Ready` on an McpUpstream turn true only once every live
//! replica serves the upstream's published version, so `kubectl get mcpu`
//! says what agents can call. A replica is live while its report is renewed
//! within its `ttlSeconds`; a replica that shuts down deletes its report.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use catalog::publish::Served;
use crds::{McpGatewayReplica, McpUpstream};
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The gateway replicas' reports.
#[derive(Clone)]
pub struct Gateways {
    store: Store<McpGatewayReplica>,
}

/// How many live replicas serve a version, of how many live replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedBy {
    pub serving: usize,
    pub live: usize,
}

impl Gateways {
    /// Starts watching; returns once the first list is in, so the first
    /// reconciles already see every replica (no status flapping on restart).
    pub async fn start(client: kube::Client, namespace: &str, stop: CancellationToken) -> Gateways {
        let api: Api<McpGatewayReplica> = Api::namespaced(client, namespace);
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    ev = stream.next() => match ev {
                        None => return,
                        Some(Err(e)) => tracing::debug!(error = %e, "watching gateway reports"),
                        Some(Ok(_)) => {}
                    }
                }
            }
        });
        if tokio::time::timeout(Duration::from_secs(30), store.wait_until_ready())
            .await
            .is_err()
        {
            tracing::warn!(
                "gateway reports (McpGatewayReplicas) not listed after 30s; starting without them \
                 (after an upgrade, is their CRD installed? kubectl apply --server-side -f crds/)"
            );
        }
        Gateways { store }
    }

    /// Live replicas and what each serves.
    pub fn live(&self) -> BTreeMap<String, Served> {
        let now = k8s_openapi::jiff::Timestamp::now();
        self.store
            .state()
            .iter()
            .filter_map(|r| {
                let spec = &r.spec;
                let ttl = i64::from(spec.ttl_seconds.max(1));
                // Renewal times are the replicas' clocks; a skew of a few
                // seconds only shifts when a dead replica stops counting.
                if now.as_second() - spec.renew_time.0.as_second() > ttl {
                    return None;
                }
                Some((r.metadata.name.clone().unwrap_or_default(), spec.served()))
            })
            .collect()
    }

    pub fn served_by(&self, prefix: &str, hash: &str) -> ServedBy {
        let live = self.live();
        ServedBy {
            serving: live
                .values()
                .filter(|s| s.upstreams.get(prefix).map(String::as_str) == Some(hash))
                .count(),
            live: live.len(),
        }
    }

    /// Wakes the upstreams whose served state changed: polls the reports
    /// (they change on renewals too, and expiry is a matter of time, not of
    /// events) and compares a per-prefix fingerprint.
    pub fn spawn_trigger(
        &self,
        upstreams: Store<McpUpstream>,
        tx: mpsc::UnboundedSender<ObjectRef<McpUpstream>>,
        stop: CancellationToken,
    ) {
        let this = self.clone();
        tokio::spawn(async move {
            // (live replicas, prefix → hashes served), as last seen.
            type Seen = (BTreeSet<String>, BTreeMap<String, Vec<String>>);
            let mut last: Option<Seen> = None;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
                let live = this.live();
                let names: BTreeSet<String> = live.keys().cloned().collect();
                let mut per_prefix: BTreeMap<String, Vec<String>> = BTreeMap::new();
                for s in live.values() {
                    for (prefix, hash) in &s.upstreams {
                        per_prefix
                            .entry(prefix.clone())
                            .or_default()
                            .push(hash.clone());
                    }
                }
                per_prefix.values_mut().for_each(|v| v.sort());
                let changed: Option<BTreeSet<String>> = match &last {
                    None => None,
                    Some((old_names, _)) if *old_names != names => {
                        // Replicas came or went: everyone's count changed.
                        Some(
                            upstreams
                                .state()
                                .iter()
                                .map(|u| u.spec.tool_prefix.clone())
                                .collect(),
                        )
                    }
                    Some((_, old)) => Some(
                        old.keys()
                            .chain(per_prefix.keys())
                            .filter(|p| old.get(*p) != per_prefix.get(*p))
                            .cloned()
                            .collect(),
                    ),
                };
                if let Some(prefixes) = changed {
                    for u in upstreams.state() {
                        if prefixes.contains(&u.spec.tool_prefix) {
                            let _ = tx.send(ObjectRef::from_obj(u.as_ref()));
                        }
                    }
                }
                last = Some((names, per_prefix));
            }
        });
    }
}
