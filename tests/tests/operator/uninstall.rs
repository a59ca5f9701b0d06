//! Uninstalling: `toolgate-operator uninstall`, as the chart's pre-delete
//! hook Job runs it, against the real operator. No kubelet runs here, so
//! the test plays the Deployment controller and the kubelet ([`kubelet`]):
//! once the operator's Deployment is scaled to 0 it stops each pod's
//! operator (as SIGTERM does, killing it after a grace period) and then
//! deletes the pod — but only after the uninstall has been seen waiting for
//! the pods, so a real pod's time to stop is always part of the run.

use std::collections::BTreeSet;

use crds::McpUpstream;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::ResourceExt;
use operator::uninstall::{Options, Report};
use operator::upstream::FINALIZER;
use serde_json::json;
use toolgate_tests::uninstall::{Scope, CALLS};

use crate::support::*;

const DEPLOYMENT: &str = "toolgate-operator";
const LEASE: &str = "toolgate-operator";
/// Who the uninstall Job is in the request log.
const JOB: &str = "uninstall-job";
const UPSTREAMS: [(&str, &str); 3] = [(NS, "pets"), (NS, "more"), ("team-b", "other")];

fn pod_labels() -> serde_json::Value {
    json!({
        "app.kubernetes.io/name": "toolgate",
        "app.kubernetes.io/instance": "toolgate",
        "app.kubernetes.io/component": "operator",
    })
}

fn options(deployment: Option<&str>) -> Options {
    Options {
        namespace: None,
        publish_namespace: PUBLISH_NS.into(),
        lease_name: LEASE.into(),
        operator_deployment: deployment.map(String::from),
        wait_timeout: WAIT,
    }
}

/// `toolgate-operator uninstall` with the arguments the chart passes
/// (`--operator-deployment` only when given), started in the background.
fn start_uninstall(
    w: &World,
    deployment: Option<&str>,
) -> tokio::task::JoinHandle<Result<Report, operator::uninstall::Error>> {
    let client = w.server.client_as(JOB).expect("client");
    let options = options(deployment);
    tokio::spawn(async move { operator::uninstall::run(client, &options).await })
}

/// [`start_uninstall`] and its outcome, for runs with no pod to stop.
async fn uninstall(w: &World, deployment: Option<&str>) -> Report {
    finished(start_uninstall(w, deployment)).await
}

async fn finished(
    job: tokio::task::JoinHandle<Result<Report, operator::uninstall::Error>>,
) -> Report {
    job.await
        .expect("the uninstall task")
        .unwrap_or_else(|e| panic!("uninstall failed: {e:?}"))
}

/// The operator as the chart deploys it: a Deployment of `replicas` pods,
/// each running the real operator (leader election on, identity = pod
/// name). Returns the pods and their operators.
async fn deploy_operator(w: &World, replicas: usize) -> Vec<(String, Operator)> {
    let deployments: Api<Deployment> = Api::namespaced(w.client.clone(), PUBLISH_NS);
    let container = json!({"name": "operator", "image": "toolgate-operator", "args": ["run"]});
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": DEPLOYMENT, "namespace": PUBLISH_NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": pod_labels()},
            "template": {"metadata": {"labels": pod_labels()}, "spec": {"containers": [container]}},
        },
    }))
    .expect("a Deployment");
    deployments
        .create(&PostParams::default(), &d)
        .await
        .expect("create the Deployment");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), PUBLISH_NS);
    let mut running = Vec::new();
    for i in 0..replicas {
        let name = format!("{DEPLOYMENT}-{i}");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": PUBLISH_NS, "labels": pod_labels()},
            "spec": {"containers": [container]},
        }))
        .expect("a Pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create a Pod");
        running.push((name.clone(), w.operator(&name, true)));
    }
    running
}

/// The Deployment controller and the kubelet: once the Deployment is
/// scaled to 0 and the uninstall has been seen waiting for its pods, stops
/// each pod's operator and deletes the pod.
async fn kubelet(w: &World, pods: Vec<(String, Operator)>) {
    let deployments: Api<Deployment> = Api::namespaced(w.client.clone(), PUBLISH_NS);
    eventually(
        "the Deployment scaled to 0 and the uninstall waiting for its pods",
        WAIT,
        || async {
            let waiting = w
                .server
                .count(|r| r.user == JOB && r.verb == "list" && r.resource == "pods")
                >= 2;
            let scale = deployments.get_scale(DEPLOYMENT).await.ok()?;
            (waiting && scale.spec?.replicas == Some(0)).then_some(())
        },
    )
    .await;
    let api: Api<Pod> = Api::namespaced(w.client.clone(), PUBLISH_NS);
    for (name, op) in pods {
        op.stop().await;
        api.delete(&name, &DeleteParams::default())
            .await
            .expect("delete the Pod");
    }
}

/// Three upstreams in two namespaces, one with credentials, all published.
async fn publish_upstreams(w: &World) {
    let secrets: Api<Secret> = Api::namespaced(w.client.clone(), NS);
    let token: Secret = serde_json::from_value(json!({
        "metadata": {"name": "pets-token"},
        "stringData": {"token": "s3cret"},
    }))
    .expect("a Secret");
    secrets
        .create(&PostParams::default(), &token)
        .await
        .expect("create the Secret");
    let mut pets = inline(PETSTORE, "pets");
    pets["auth"] = json!({"type": "bearer", "secretRef": {"name": "pets-token"}});
    w.apply_upstream(NS, "pets", pets).await;
    w.apply_upstream(NS, "more", inline(PETSTORE, "more")).await;
    w.apply_upstream("team-b", "other", inline(PETSTORE, "other"))
        .await;
    for (ns, name) in UPSTREAMS {
        wait_ready(w, ns, name, "True", "Published").await;
    }
}

fn finalized(u: &McpUpstream) -> bool {
    u.finalizers().iter().any(|f| f == FINALIZER)
}

/// Names of the catalog ConfigMaps (index and chunks) in the publish namespace.
async fn published_configmaps(w: &World) -> Vec<String> {
    w.configmaps(PUBLISH_NS)
        .list_metadata(&ListParams::default().labels("app.kubernetes.io/part-of=toolgate"))
        .await
        .expect("list ConfigMaps")
        .items
        .iter()
        .map(|c| c.name_any())
        .collect()
}

fn leases(w: &World) -> Api<Lease> {
    Api::namespaced(w.client.clone(), PUBLISH_NS)
}

fn credentials(w: &World) -> Api<Secret> {
    Api::namespaced(w.client.clone(), PUBLISH_NS)
}

/// `(verb, group, resource[/subresource], in the publish namespace)` of
/// every request `user` made.
fn calls_by(w: &World, user: &str) -> BTreeSet<(String, String, String, bool)> {
    w.server
        .requests()
        .keys()
        .filter(|r| r.user == user)
        .map(|r| {
            let resource = match r.subresource.as_str() {
                "" => r.resource.clone(),
                sub => format!("{}/{sub}", r.resource),
            };
            (
                r.verb.clone(),
                r.group.clone(),
                resource,
                r.namespace == PUBLISH_NS,
            )
        })
        .collect()
}

/// Writes `user` made (create, update, patch, delete).
fn writes_of(w: &World, user: &str) -> u64 {
    w.server.count(|r| {
        r.user == user && matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_stops_the_operator_unpublishes_and_deletions_then_complete() {
    let w = World::new().await;
    let pods = deploy_operator(&w, 2).await;
    publish_upstreams(&w).await;
    for (ns, name) in UPSTREAMS {
        assert!(finalized(&w.upstream(ns, name).await), "{ns}/{name}");
    }
    let published = published_configmaps(&w).await;
    assert!(published.len() >= 4, "an index and chunks: {published:?}");
    credentials(&w)
        .get(crds::publish::CREDENTIALS_SECRET)
        .await
        .expect("the credentials Secret is published");
    let lease = leases(&w).get(LEASE).await.expect("the leader Lease");
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some());

    let job = start_uninstall(&w, Some(DEPLOYMENT));
    kubelet(&w, pods).await;
    let report = finished(job).await;
    assert_eq!(
        report,
        Report {
            scaled_from: Some(2),
            lease_deleted: true,
            configmaps_deleted: published.len(),
            secret_deleted: true,
            upstreams: 3,
            finalizers_removed: 3,
        }
    );

    // Through the API: nothing the operator made is left, and nothing
    // holds an upstream any more.
    for (ns, name) in UPSTREAMS {
        assert!(!finalized(&w.upstream(ns, name).await), "{ns}/{name}");
    }
    assert_eq!(published_configmaps(&w).await, Vec::<String>::new());
    assert!(credentials(&w)
        .get_opt(crds::publish::CREDENTIALS_SECRET)
        .await
        .expect("get")
        .is_none());
    assert!(leases(&w).get_opt(LEASE).await.expect("get").is_none());
    let secrets: Api<Secret> = Api::namespaced(w.client.clone(), NS);
    secrets
        .get("pets-token")
        .await
        .expect("the user's own Secret stays");

    // Exactly the calls the hook's RBAC grants (deploy.rs checks the chart).
    let expected: BTreeSet<(String, String, String, bool)> = CALLS
        .iter()
        .map(|c| {
            (
                c.verb.to_string(),
                c.group.to_string(),
                c.resource.to_string(),
                c.scope == Scope::Publish,
            )
        })
        .collect();
    assert_eq!(calls_by(&w, JOB), expected);

    // Deleting now completes: an upstream, a namespace holding one, the CRD
    // with the last one.
    w.upstreams(NS)
        .delete("pets", &DeleteParams::default())
        .await
        .expect("delete pets");
    assert!(w
        .upstreams(NS)
        .get_opt("pets")
        .await
        .expect("get")
        .is_none());
    let namespaces: Api<Namespace> = Api::all(w.client.clone());
    namespaces
        .delete("team-b", &DeleteParams::default())
        .await
        .expect("delete team-b");
    assert!(namespaces.get_opt("team-b").await.expect("get").is_none());
    let crds: Api<CustomResourceDefinition> = Api::all(w.client.clone());
    crds.delete("mcpupstreams.toolgate.dev", &DeleteParams::default())
        .await
        .expect("delete the CRD");
    assert!(crds
        .get_opt("mcpupstreams.toolgate.dev")
        .await
        .expect("get")
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_uninstall_deletions_hang_until_it_runs() {
    let w = World::new().await;
    let op = w.operator("operator", true);
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    w.apply_upstream("team-b", "other", inline(PETSTORE, "other"))
        .await;
    wait_ready(&w, NS, "pets", "True", "Published").await;
    wait_ready(&w, "team-b", "other", "True", "Published").await;
    // `helm uninstall --no-hooks`: the operator goes, its finalizers stay.
    op.stop().await;

    w.upstreams(NS)
        .delete("pets", &DeleteParams::default())
        .await
        .expect("delete pets");
    let namespaces: Api<Namespace> = Api::all(w.client.clone());
    namespaces
        .delete("team-b", &DeleteParams::default())
        .await
        .expect("delete team-b");
    let crds: Api<CustomResourceDefinition> = Api::all(w.client.clone());
    crds.delete("mcpupstreams.toolgate.dev", &DeleteParams::default())
        .await
        .expect("delete the CRD");
    // The server finishes what it can within each request, and no operator
    // runs: these stay as they are now for good.
    let pets = w.upstream(NS, "pets").await;
    assert!(pets.metadata.deletion_timestamp.is_some() && finalized(&pets));
    let team_b = namespaces.get("team-b").await.expect("team-b stays");
    assert_eq!(
        team_b.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let crd = crds
        .get("mcpupstreams.toolgate.dev")
        .await
        .expect("the CRD stays");
    assert!(crd.metadata.deletion_timestamp.is_some());

    // Run late (no Deployment any more), the uninstall lets them finish.
    let report = uninstall(&w, None).await;
    assert_eq!(report.finalizers_removed, 2, "{report}");
    assert!(report.lease_deleted, "the stopped operator released it");
    assert!(w
        .upstreams(NS)
        .get_opt("pets")
        .await
        .expect("get")
        .is_none());
    assert!(namespaces.get_opt("team-b").await.expect("get").is_none());
    assert!(crds
        .get_opt("mcpupstreams.toolgate.dev")
        .await
        .expect("get")
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_uninstall_writes_nothing_and_other_finalizers_stay() {
    let w = World::new().await;
    let pods = deploy_operator(&w, 1).await;
    let u: McpUpstream = serde_json::from_value(json!({
        "apiVersion": "toolgate.dev/v1alpha1",
        "kind": "McpUpstream",
        "metadata": {"name": "pets", "namespace": NS, "finalizers": ["example.com/keep"]},
        "spec": inline(PETSTORE, "pets"),
    }))
    .expect("an McpUpstream");
    w.upstreams(NS)
        .create(&PostParams::default(), &u)
        .await
        .expect("create pets");
    wait_ready(&w, NS, "pets", "True", "Published").await;
    assert_eq!(
        w.upstream(NS, "pets").await.finalizers(),
        ["example.com/keep", FINALIZER]
    );

    let job = start_uninstall(&w, Some(DEPLOYMENT));
    kubelet(&w, pods).await;
    let first = finished(job).await;
    assert!(first.changed() && first.finalizers_removed == 1, "{first}");
    assert_eq!(
        w.upstream(NS, "pets").await.finalizers(),
        ["example.com/keep"],
        "only the operator's finalizer is removed"
    );

    w.server.reset_requests();
    let second = uninstall(&w, Some(DEPLOYMENT)).await;
    assert_eq!(
        second,
        Report {
            scaled_from: Some(0),
            upstreams: 1,
            ..Report::default()
        }
    );
    assert!(!second.changed());
    assert_eq!(writes_of(&w, JOB), 0, "{:#?}", w.server.requests());
}
