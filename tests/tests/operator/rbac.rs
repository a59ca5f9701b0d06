//! What the operator asks of the API server, as RBAC sees it: one
//! representative run per way the chart configures it, recorded in
//! `tests/fixtures/rbac/` (`toolgate_tests::rbac`) for the deploy tests to
//! check the chart's and the kustomize base's RBAC against. And Secret
//! access confined to the namespaces that granted it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use operator::sources::SecretAccess;
use serde_json::{json, Value};
use toolgate_tests::rbac::{calls_of, check_or_record, Recording};

use crate::support::*;

/// The operator's identity in the chart (release `toolgate`).
const SERVICE_ACCOUNT: &str = "toolgate-operator";
const USER: &str = "system:serviceaccount:toolgate-system:toolgate-operator";

/// Names the operator's settings fix, which rules may pin: its Lease and
/// the credentials Secret it publishes.
const PINNED: &[(&str, &str)] = &[
    ("leases", "toolgate-operator"),
    ("secrets", crds::publish::CREDENTIALS_SECRET),
];

async fn create<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).expect("a valid object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("created");
}

fn secrets(w: &World, ns: &str) -> Api<Secret> {
    Api::namespaced(w.client.clone(), ns)
}

async fn put_token(w: &World, ns: &str, token: &str) {
    create(
        &secrets(w, ns),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "pets-token", "namespace": ns},
               "stringData": {"token": token}}),
    )
    .await;
}

/// The copied credential of upstream `pets`, as the gateway would read it.
async fn published_token(w: &World, ns: &str) -> Option<String> {
    let s = secrets(w, PUBLISH_NS)
        .get_opt(crds::publish::CREDENTIALS_SECRET)
        .await
        .ok()??;
    let key = crds::publish::credentials_key(ns, "pets-token", "token");
    let v = s.data?.get(&key)?.0.clone();
    String::from_utf8(v).ok()
}

/// Everything the operator does for users, once: an upstream reading its
/// document from a ConfigMap, its address from a Service and a token from a
/// Secret, with an overlay from a ConfigMap; the token rotated, removed and
/// restored (status, events and their series); the document edited
/// (republished, old chunks deleted); a toolset over it published and
/// deleted; the upstream deleted (the finalizer unpublishes); the operator
/// stopped (it releases its Lease).
async fn scenario(w: &World, ns: &str) {
    let cms = w.configmaps(ns);
    create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "pets-openapi", "namespace": ns},
               "data": {"openapi.yaml": PETSTORE}}),
    )
    .await;
    create(
        &cms,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "hide-writes", "namespace": ns},
               "data": {"overlay.yaml": "overlay: 1.0.0\ninfo: {title: hide, version: '1'}\nactions:\n  - target: $.paths['/pets'].post\n    update: {x-mcp-enabled: false}\n"}}),
    )
    .await;
    create(
        &Api::<Service>::namespaced(w.client.clone(), ns),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "pets", "namespace": ns},
               "spec": {"ports": [{"port": 8080}]}}),
    )
    .await;
    put_token(w, ns, "one").await;
    w.apply_upstream(
        ns,
        "pets",
        json!({
            "toolPrefix": "pets",
            "serviceRef": {"name": "pets", "port": 8080},
            "openapi": {"configMapRef": {"name": "pets-openapi", "key": "openapi.yaml"}},
            "auth": {"type": "bearer", "secretRef": {"name": "pets-token"}},
        }),
    )
    .await;
    w.apply_overlay(
        ns,
        "hide-writes",
        json!({"upstreamRef": {"name": "pets"},
               "configMapRef": {"name": "hide-writes", "key": "overlay.yaml"}}),
    )
    .await;
    eventually("the overlay's status", WAIT, || async {
        let o = w.overlays(ns).get("hide-writes").await.ok()?;
        (overlay_cond(&o, "Ready")?.0 == "True").then_some(())
    })
    .await;
    wait_ready(w, ns, "pets", "True", "Published").await;
    eventually("the token published", WAIT, || async {
        (published_token(w, ns).await? == "one").then_some(())
    })
    .await;

    // Rotated: the Secret watch has it copied again.
    secrets(w, ns)
        .patch(
            "pets-token",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"token": "two"}})),
        )
        .await
        .expect("rotate");
    eventually("the rotated token published", WAIT, || async {
        (published_token(w, ns).await? == "two").then_some(())
    })
    .await;

    // Removed, then restored: Ready goes False and back, and the second
    // Published event continues the first one's series.
    secrets(w, ns)
        .delete("pets-token", &DeleteParams::default())
        .await
        .expect("delete");
    wait_ready(w, ns, "pets", "False", "SecretNotFound").await;
    put_token(w, ns, "three").await;
    wait_ready(w, ns, "pets", "True", "Published").await;
    let events: Api<Event> = Api::namespaced(w.client.clone(), ns);
    eventually("a Published event series", WAIT, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Published")
                    && e.series.as_ref().is_some_and(|s| s.count >= 2)
            })
            .then_some(())
    })
    .await;

    // The document changes: a new version, the old chunks deleted.
    let before = w.index().await.entry("pets").cloned().expect("published");
    cms.patch(
        "pets-openapi",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"openapi.yaml": PETSTORE.replace(
            "operationId: fetchPet",
            "operationId: fetchPet\n      x-mcp-enabled: false",
        )}})),
    )
    .await
    .expect("edit");
    eventually("the old chunks deleted", WAIT, || async {
        let e = w.index().await.entry("pets").cloned()?;
        if e.hash == before.hash {
            return None;
        }
        for c in &before.chunks {
            if w.configmaps(PUBLISH_NS)
                .get_opt(&c.name)
                .await
                .ok()?
                .is_some()
            {
                return None;
            }
        }
        Some(())
    })
    .await;

    // A toolset over it: resolved (its status applied, the upstream's
    // published chunks read), published, then deleted and unpublished.
    w.apply_toolset(ns, "readers", json!({"upstreams": [{"name": "pets"}]}))
        .await;
    wait_toolset(w, ns, "readers", "True", "Resolved").await;
    let readers = catalog::toolset::ToolsetName::new(ns, "readers");
    w.toolsets(ns)
        .delete("readers", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the toolset unpublished", WAIT, || async {
        w.index().await.toolset(&readers).is_none().then_some(())
    })
    .await;

    // Deleted: unpublished before it goes.
    w.upstreams(ns)
        .delete("pets", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the upstream unpublished and gone", WAIT, || async {
        let gone = w.upstreams(ns).get_opt("pets").await.ok()?.is_none();
        (gone && w.index().await.entry("pets").is_none()).then_some(())
    })
    .await;
}

/// Runs the scenario with the operator configured by `tune` (leader
/// election on, as the chart runs it) and checks the calls it made against
/// recording `file`, which `values` (the chart's equivalent settings)
/// describe.
async fn record(
    file: &str,
    test: &str,
    values: Value,
    tune: impl FnOnce(&mut operator::Options),
    extra: impl AsyncFnOnce(&World),
) {
    let w = World::new().await;
    let op = w.operator_with(USER, true, tune);
    scenario(&w, NS).await;
    extra(&w).await;
    op.stop().await;
    let fresh = Recording {
        service_account: SERVICE_ACCOUNT.into(),
        values,
        calls: calls_of(&w.server, USER, PINNED),
    };
    check_or_record(
        file,
        &format!(
            "The Kubernetes API calls `toolgate-operator run` makes, as RBAC sees them.\n\
             Recorded by tests/tests/operator/rbac.rs:\n  {test}\n\
             Checked against the chart's and deploy/default's RBAC by\n\
             tests/tests/apiserver/deploy.rs. Refresh:\n  \
             TOOLGATE_RECORD_RBAC=1 cargo test -p toolgate-tests --test operator rbac::"
        ),
        &fresh,
        &format!("cargo test -p toolgate-tests --test operator {test}"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_calls_watching_every_namespace_are_the_recorded_ones() {
    record(
        "operator.yaml",
        "rbac::the_operators_calls_watching_every_namespace_are_the_recorded_ones",
        json!({}),
        |_| {},
        async |_| {},
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_calls_watching_one_namespace_are_the_recorded_ones() {
    record(
        "operator-watch-namespace.yaml",
        "rbac::the_operators_calls_watching_one_namespace_are_the_recorded_ones",
        json!({"operator": {"watchNamespace": NS}}),
        |o| o.namespace = Some(NS.into()),
        async |_| {},
    )
    .await;
}

/// Reading Secrets only where granted: the same run, plus an upstream in a
/// namespace that did not grant access, which says so and whose Secret the
/// operator never asks for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_calls_reading_granted_namespaces_only_are_the_recorded_ones() {
    record(
        "operator-secret-namespaces.yaml",
        "rbac::the_operators_calls_reading_granted_namespaces_only_are_the_recorded_ones",
        json!({"operator": {"secrets": {"access": "namespaces", "namespaces": [NS]}}}),
        |o| o.secret_access = SecretAccess::Namespaces([NS.to_string()].into()),
        async |w: &World| {
            put_token(w, "team-b", "elsewhere").await;
            w.apply_upstream(
                "team-b",
                "pets",
                json!({
                    "toolPrefix": "pets_b",
                    "baseUrl": "http://pets.team-b.svc:8080",
                    "openapi": {"inline": PETSTORE},
                    "auth": {"type": "bearer", "secretRef": {"name": "pets-token"}},
                }),
            )
            .await;
            let u = wait_ready(w, "team-b", "pets", "False", "SecretAccessDenied").await;
            let (_, _, msg) = cond(&u, "Published").expect("Published");
            assert!(msg.starts_with("spec.auth.secretRef: "), "{msg}");
            assert!(
                msg.contains("namespace team-b has not granted the operator access"),
                "{msg}"
            );
            assert!(msg.contains("team-a"), "names the granted ones: {msg}");
            let outside = w.server.count(|k| {
                k.user == USER
                    && k.resource == "secrets"
                    && k.namespace != NS
                    && k.namespace != PUBLISH_NS
            });
            assert_eq!(outside, 0, "{:#?}", w.server.requests());
        },
    )
    .await;
}

/// The API server refusing a Secret (RBAC without the namespace's grant)
/// is the upstream's condition, not an endless retry; once the namespace
/// grants access the upstream recovers without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_the_api_server_forbids_is_secret_access_denied_until_granted() {
    let w = World::new().await;
    let granted = Arc::new(AtomicBool::new(false));
    let g = granted.clone();
    w.server.forbid(move |k| {
        k.user == USER
            && k.resource == "secrets"
            && k.namespace == "team-b"
            && !g.load(Ordering::SeqCst)
    });
    let op = w.operator_with(USER, false, |o| {
        o.secret_access =
            SecretAccess::Namespaces(["team-a".to_string(), "team-b".to_string()].into());
    });
    put_token(&w, "team-b", "b").await;
    w.apply_upstream(
        "team-b",
        "pets",
        json!({
            "toolPrefix": "pets",
            "baseUrl": "http://pets.team-b.svc:8080",
            "openapi": {"inline": PETSTORE},
            "auth": {"type": "bearer", "secretRef": {"name": "pets-token"}},
        }),
    )
    .await;
    let u = wait_ready(&w, "team-b", "pets", "False", "SecretAccessDenied").await;
    let (_, _, msg) = cond(&u, "Ready").expect("Ready");
    assert!(msg.starts_with("spec.auth.secretRef: "), "{msg}");
    assert!(
        msg.contains(
            "namespace team-b has not granted the operator access to Secret team-b/pets-token"
        ),
        "{msg}"
    );
    assert!(msg.contains("403 Forbidden"), "{msg}");

    // The namespace grants access: the Secret watch there, refused until
    // now, lists them and brings the upstream back (nothing else would
    // before the ten-minute resync: the operator is idle by then).
    settle(&w, USER, Duration::from_millis(500)).await;
    let watch_lists = || {
        w.server.count(|k| {
            k.user == USER && k.resource == "secrets" && k.namespace == "team-b" && k.verb == "list"
        })
    };
    let refused = watch_lists();
    assert!(refused > 0, "the operator watches Secrets in team-b");
    granted.store(true, Ordering::SeqCst);
    wait_ready(&w, "team-b", "pets", "True", "Published").await;
    assert!(watch_lists() > refused);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_namespaces_keep_configmaps_and_services_readable_everywhere() {
    // Only Secrets are confined: a document in a ConfigMap of a namespace
    // that granted nothing still publishes.
    let w = World::new().await;
    let op = w.operator_with(USER, false, |o| {
        o.secret_access = SecretAccess::Namespaces(Default::default());
    });
    w.apply_pets_from_configmap("team-b").await;
    wait_ready(&w, "team-b", "pets", "True", "Published").await;
    let secret_reads = w
        .server
        .count(|k| k.user == USER && k.resource == "secrets" && k.namespace != PUBLISH_NS);
    assert_eq!(secret_reads, 0, "{:#?}", w.server.requests());
    op.stop().await;
}
