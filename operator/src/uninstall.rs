//! `toolgate-operator uninstall`: what has to happen before the operator's
//! objects go, so nothing is left behind and no deletion hangs. The chart
//! runs it as a `pre-delete` hook Job; kustomize users run
//! `deploy/uninstall` (ADR: docs/0009-uninstall.md).
//!
//! Three steps, in this order, each idempotent (a second run finds nothing
//! to do and writes nothing):
//!
//! 1. **Stop the operator.** While one runs, kube-runtime's finalizer
//!    helper puts `toolgate.dev/unpublish` back on every McpUpstream it
//!    reconciles, so removing it under a running operator is a race. The
//!    operator's Deployment is scaled to 0 through its `scale` subresource,
//!    then this waits until none of its pods exists (terminating ones
//!    included: a pod object goes only once its containers have stopped),
//!    and until the leader Lease is free — released (a stopping operator
//!    releases it) or not renewed for its whole duration, timed on this
//!    process's clock as `leader` does — which also catches an operator
//!    running outside that Deployment. Then the Lease is deleted, with the
//!    resourceVersion seen free as a precondition.
//! 2. **Unpublish.** The catalog index, then the chunks (the reverse of
//!    publishing, so a gateway that still runs never reads an index naming
//!    deleted chunks), then the credentials Secret; chosen by the labels the
//!    operator puts on them (`crds::publish`), in the publish namespace only.
//! 3. **Release the McpUpstreams.** `toolgate.dev/unpublish` is removed from
//!    every McpUpstream in scope by a JSON patch that tests and removes that
//!    one list element, so finalizers others set are kept and a concurrent
//!    change makes the patch fail (422/409) and be retried on a fresh read.
//!    McpOverlays carry no finalizer.
//!
//! Every failure names the object it concerns.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use crds::publish as names;
use crds::McpUpstream;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::ResourceExt;

use crate::leader::LEASE_DURATION;
use crate::upstream::FINALIZER;

/// How often the waits look again.
const POLL: Duration = Duration::from_secs(1);
/// Attempts at one object's patch or delete when others keep changing it.
const ATTEMPTS: usize = 10;

/// What to clean up (see `toolgate-operator uninstall --help`).
#[derive(Debug, Clone)]
pub struct Options {
    /// The operator's `--namespace`: McpUpstreams are released there only;
    /// `None`: in every namespace.
    pub namespace: Option<String>,
    /// The operator's `--publish-namespace`: its Deployment, pods, Lease and
    /// published objects are there.
    pub publish_namespace: String,
    /// The operator's `--lease-name`.
    pub lease_name: String,
    /// The operator's Deployment, scaled to 0 first. `None`: the operator
    /// must already be stopped (the Lease is still checked).
    pub operator_deployment: Option<String>,
    /// How long to wait for the operator to stop.
    pub wait_timeout: Duration,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The Deployment's replicas before (`None`: no Deployment named or found).
    pub scaled_from: Option<i32>,
    /// The leader Lease was there and is deleted.
    pub lease_deleted: bool,
    /// Catalog ConfigMaps deleted (index and chunks).
    pub configmaps_deleted: usize,
    /// The credentials Secret was there and is deleted.
    pub secret_deleted: bool,
    /// McpUpstreams looked at.
    pub upstreams: usize,
    /// Of those, the ones whose finalizer was removed.
    pub finalizers_removed: usize,
}

impl Report {
    /// Whether the run changed anything.
    pub fn changed(&self) -> bool {
        self.scaled_from.is_some_and(|r| r != 0)
            || self.lease_deleted
            || self.configmaps_deleted > 0
            || self.secret_deleted
            || self.finalizers_removed > 0
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scaled_from {
            Some(r) => write!(f, "operator scaled from {r} to 0 replicas; ")?,
            None => write!(f, "no operator Deployment scaled; ")?,
        }
        write!(
            f,
            "leader Lease deleted: {}; catalog ConfigMaps deleted: {}; credentials Secret deleted: {}; finalizer removed from {} of {} McpUpstreams",
            yes_no(self.lease_deleted),
            self.configmaps_deleted,
            yes_no(self.secret_deleted),
            self.finalizers_removed,
            self.upstreams
        )
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Why a run failed; each names the object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action} {object}")]
    Api {
        action: &'static str,
        /// `Kind namespace/name`, or the namespace and selector of a list.
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("gave up after {waited:?} waiting for {what}")]
    Timeout { waited: Duration, what: String },
    #[error("Deployment {0} reports no pod selector, so its pods cannot be found")]
    NoSelector(String),
    #[error("{object}: still changing after {ATTEMPTS} attempts")]
    Contended {
        object: String,
        #[source]
        last: kube::Error,
    },
}

fn api_err(action: &'static str, object: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let object = object.into();
    move |source| Error::Api {
        action,
        object,
        source,
    }
}

fn is_status(e: &kube::Error, codes: &[u16]) -> bool {
    matches!(e, kube::Error::Api(s) if codes.contains(&s.code))
}

/// Runs the three steps; see the module docs.
pub async fn run(client: kube::Client, options: &Options) -> Result<Report, Error> {
    let mut report = Report::default();
    let deadline = Instant::now() + options.wait_timeout;
    stop_operator(&client, options, deadline, &mut report).await?;
    unpublish(&client, &options.publish_namespace, &mut report).await?;
    release_upstreams(&client, options.namespace.as_deref(), &mut report).await?;
    Ok(report)
}

async fn stop_operator(
    client: &kube::Client,
    options: &Options,
    deadline: Instant,
    report: &mut Report,
) -> Result<(), Error> {
    let ns = &options.publish_namespace;
    if let Some(name) = &options.operator_deployment {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
        let object = format!("Deployment {ns}/{name}");
        match deployments.get_scale(name).await {
            Ok(scale) => {
                let replicas = scale.spec.and_then(|s| s.replicas).unwrap_or(0);
                report.scaled_from = Some(replicas);
                if replicas != 0 {
                    let zero = serde_json::json!({"spec": {"replicas": 0}});
                    deployments
                        .patch_scale(name, &PatchParams::default(), &Patch::Merge(&zero))
                        .await
                        .map_err(api_err("scaling to 0", &object))?;
                    tracing::info!(deployment = %name, from = replicas, "scaled the operator to 0");
                }
                // The apps API always reports a Deployment's selector here.
                let selector = scale.status.and_then(|s| s.selector).unwrap_or_default();
                wait_for_no_pods(client, ns, name, &selector, options.wait_timeout, deadline)
                    .await?;
            }
            Err(e) if is_status(&e, &[404]) => {
                tracing::info!(deployment = %name, "no operator Deployment: nothing to scale");
            }
            Err(e) => return Err(api_err("reading the scale of", object)(e)),
        }
    }
    report.lease_deleted = delete_free_lease(client, options, deadline).await?;
    Ok(())
}

async fn wait_for_no_pods(
    client: &kube::Client,
    ns: &str,
    deployment: &str,
    selector: &str,
    waited: Duration,
    deadline: Instant,
) -> Result<(), Error> {
    if selector.is_empty() {
        // Listing with an empty selector would wait for every pod.
        return Err(Error::NoSelector(format!("{ns}/{deployment}")));
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(selector);
    loop {
        let left: Vec<String> = pods
            .list_metadata(&lp)
            .await
            .map_err(api_err("listing pods", format!("{ns} ({selector})")))?
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                waited,
                what: format!(
                    "the pods of Deployment {ns}/{deployment} to stop: {} still there",
                    left.join(", ")
                ),
            });
        }
        tracing::info!(pods = ?left, "waiting for the operator's pods to stop");
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the Lease is free, then deletes it. False when there was none.
async fn delete_free_lease(
    client: &kube::Client,
    options: &Options,
    deadline: Instant,
) -> Result<bool, Error> {
    let ns = &options.publish_namespace;
    let name = &options.lease_name;
    let object = format!("Lease {ns}/{name}");
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    // (holder, renewTime) as last seen, and since when (this clock).
    let mut seen: Option<((String, String), Instant)> = None;
    loop {
        let Some(lease) = leases
            .get_opt(name)
            .await
            .map_err(api_err("reading", &object))?
        else {
            return Ok(false);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let free = holder.is_empty() || {
            let record = (
                holder.clone(),
                spec.renew_time
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
            );
            let since = match &seen {
                Some((r, at)) if *r == record => *at,
                _ => {
                    seen = Some((record, Instant::now()));
                    Instant::now()
                }
            };
            let duration = spec
                .lease_duration_seconds
                .map(|s| Duration::from_secs(s.max(0) as u64))
                .unwrap_or(LEASE_DURATION);
            since.elapsed() > duration
        };
        if free {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: lease.resource_version(),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match leases.delete(name, &dp).await {
                Ok(_) => {
                    tracing::info!(lease = %name, "deleted the leader Lease");
                    return Ok(true);
                }
                Err(e) if is_status(&e, &[404]) => return Ok(false),
                // Taken or renewed since it was read: look again.
                Err(e) if is_status(&e, &[409]) => continue,
                Err(e) => return Err(api_err("deleting", object)(e)),
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                waited: options.wait_timeout,
                what: format!(
                    "{object} to be released or to expire: {holder:?} holds it, so an operator still runs{}",
                    if options.operator_deployment.is_some() {
                        " outside that Deployment"
                    } else {
                        " (stop it, or pass --operator-deployment)"
                    }
                ),
            });
        }
        tracing::info!(lease = %name, holder = %holder, "waiting for the leader Lease to be released or to expire");
        tokio::time::sleep(POLL).await;
    }
}

/// `app.kubernetes.io/part-of=toolgate,toolgate.dev/component=<component>`.
fn published(component: &str) -> String {
    format!(
        "{}={},{}={component}",
        names::PART_OF.0,
        names::PART_OF.1,
        names::COMPONENT
    )
}

async fn unpublish(client: &kube::Client, ns: &str, report: &mut Report) -> Result<(), Error> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for component in [names::COMPONENT_INDEX, names::COMPONENT_CHUNK] {
        let selector = published(component);
        let listed = configmaps
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(api_err("listing ConfigMaps", format!("{ns} ({selector})")))?;
        for cm in listed.items {
            let name = cm.name_any();
            match configmaps.delete(&name, &DeleteParams::default()).await {
                Ok(_) => report.configmaps_deleted += 1,
                Err(e) if is_status(&e, &[404]) => {}
                Err(e) => return Err(api_err("deleting", format!("ConfigMap {ns}/{name}"))(e)),
            }
        }
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let object = format!("Secret {ns}/{}", names::CREDENTIALS_SECRET);
    let Some(secret) = secrets
        .get_metadata_opt(names::CREDENTIALS_SECRET)
        .await
        .map_err(api_err("reading", &object))?
    else {
        return Ok(());
    };
    let labels: &BTreeMap<String, String> = secret.labels();
    let ours = labels.get(names::PART_OF.0).map(String::as_str) == Some(names::PART_OF.1)
        && labels.get(names::COMPONENT).map(String::as_str) == Some(names::COMPONENT_CREDENTIALS);
    if !ours {
        tracing::warn!(secret = %object, "not deleted: it lacks the labels the operator puts on the credentials it copies");
        return Ok(());
    }
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: secret.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match secrets.delete(names::CREDENTIALS_SECRET, &dp).await {
        Ok(_) => report.secret_deleted = true,
        Err(e) if is_status(&e, &[404]) => {}
        Err(e) => return Err(api_err("deleting", object)(e)),
    }
    Ok(())
}

async fn release_upstreams(
    client: &kube::Client,
    namespace: Option<&str>,
    report: &mut Report,
) -> Result<(), Error> {
    let all: Api<McpUpstream> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut lp = ListParams::default().limit(500);
    loop {
        let page = all.list_metadata(&lp).await.map_err(api_err(
            "listing McpUpstreams in",
            namespace.unwrap_or("all namespaces"),
        ))?;
        for u in &page.items {
            report.upstreams += 1;
            if !u.finalizers().iter().any(|f| f == FINALIZER) {
                continue;
            }
            let ns = u.namespace().unwrap_or_default();
            let api: Api<McpUpstream> = Api::namespaced(client.clone(), &ns);
            if remove_finalizer(&api, &ns, &u.name_any(), u.finalizers().to_vec()).await? {
                report.finalizers_removed += 1;
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// Removes [`FINALIZER`] and nothing else. True if this call removed it.
async fn remove_finalizer(
    api: &Api<McpUpstream>,
    ns: &str,
    name: &str,
    mut finalizers: Vec<String>,
) -> Result<bool, Error> {
    let object = format!("McpUpstream {ns}/{name}");
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let Some(i) = finalizers.iter().position(|f| f == FINALIZER) else {
            return Ok(false);
        };
        let path = format!("/metadata/finalizers/{i}");
        let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
            {"op": "test", "path": path, "value": FINALIZER},
            {"op": "remove", "path": path},
        ]))
        .expect("a constant JSON patch shape");
        match api
            .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(upstream = %object, "removed the finalizer");
                return Ok(true);
            }
            Err(e) if is_status(&e, &[404]) => return Ok(false),
            // The list changed since it was read (422: the test failed).
            Err(e) if is_status(&e, &[409, 422]) => last = Some(e),
            Err(e) => return Err(api_err("removing the finalizer of", object)(e)),
        }
        // Read back by listing, not `get`: the hook's RBAC needs one verb
        // fewer.
        let lp = ListParams::default().fields(&format!("metadata.name={name}"));
        match api
            .list_metadata(&lp)
            .await
            .map_err(api_err("reading", &object))?
            .items
            .first()
        {
            Some(u) => finalizers = u.finalizers().to_vec(),
            None => return Ok(false),
        }
    }
    Err(Error::Contended {
        object,
        last: last.expect("set by every retried attempt"),
    })
}
