//! The in-memory API server driven by the real `kube` client and
//! kube-runtime, over HTTP.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, ObjectMeta};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgate_tests::apiserver::{ApiServer, ApiServerHandle};

async fn server() -> (ApiServerHandle, Client) {
    let s = ApiServer::builder()
        .bookmark_interval(Duration::from_millis(200))
        .serve()
        .await
        .expect("server starts");
    let c = s.client().expect("client");
    (s, c)
}

fn cm(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn api_status(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn create_sets_system_metadata_and_get_list_filter_by_selectors() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let a = api
        .create(
            &PostParams::default(),
            &cm("a", &[("app", "web"), ("tier", "front")], &[("k", "v")]),
        )
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", &[("app", "db")], &[]))
        .await
        .unwrap();
    let mut gen = cm("", &[("app", "web")], &[]);
    gen.metadata.name = None;
    gen.metadata.generate_name = Some("gen-".into());
    let g = api.create(&PostParams::default(), &gen).await.unwrap();
    assert!(
        g.name_any().starts_with("gen-") && g.name_any().len() == 9,
        "{}",
        g.name_any()
    );

    let uid = a.metadata.uid.clone().unwrap();
    assert_eq!(uid.len(), 36);
    let ts = serde_json::to_value(&a.metadata.creation_timestamp).unwrap();
    assert!(
        ts.as_str().unwrap().ends_with('Z') && !ts.as_str().unwrap().contains('.'),
        "{ts}"
    );
    let rv_a: u64 = a.resource_version().unwrap().parse().unwrap();
    let rv_g: u64 = g.resource_version().unwrap().parse().unwrap();
    assert!(rv_g > rv_a);
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "v");

    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items.iter().map(|o| o.name_any()).collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app=web,tier"))
                .await
                .unwrap()
        ),
        vec!["a"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app in (db)"))
                .await
                .unwrap()
        ),
        vec!["b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app!=web"))
                .await
                .unwrap()
        ),
        vec!["b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("!tier,app notin (db)"))
                .await
                .unwrap()
        ),
        vec![g.name_any()]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .unwrap()
        ),
        vec!["b"]
    );
    let all: Api<ConfigMap> = Api::all(client.clone());
    assert_eq!(
        all.list(&ListParams::default().fields("metadata.namespace=default"))
            .await
            .unwrap()
            .items
            .len(),
        3
    );

    let paged = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(paged.items.len(), 2);
    let token = paged.metadata.continue_.clone().expect("continue token");
    let rest = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(
        paged.metadata.resource_version,
        rest.metadata.resource_version
    );

    let (code, reason, message) = api_status(api.get("missing").await.unwrap_err());
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (404, "NotFound", "configmaps \"missing\" not found")
    );
    let (code, reason, _) = api_status(
        api.create(&PostParams::default(), &cm("a", &[], &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));
    let nowhere: Api<ConfigMap> = Api::namespaced(client, "nowhere");
    let (code, _, message) = api_status(
        nowhere
            .create(&PostParams::default(), &cm("a", &[], &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_a_409_conflict() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let v1 = api
        .create(&PostParams::default(), &cm("c", &[], &[("x", "1")]))
        .await
        .unwrap();
    let mut first = v1.clone();
    first.data = Some(BTreeMap::from([("x".into(), "2".into())]));
    let v2 = api
        .replace("c", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_ne!(v2.resource_version(), v1.resource_version());
    let mut stale = v1.clone();
    stale.data = Some(BTreeMap::from([("x".into(), "3".into())]));
    let (code, reason, message) = api_status(
        api.replace("c", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(
        message.contains("the object has been modified"),
        "{message}"
    );
    assert_eq!(api.get("c").await.unwrap().data.unwrap()["x"], "2");
    // An identical write changes nothing, not even the resourceVersion.
    let same = api.replace("c", &PostParams::default(), &v2).await.unwrap();
    assert_eq!(same.resource_version(), v2.resource_version());
}

#[tokio::test]
async fn merge_patch_and_json_patch_edit_the_stored_object() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(
        &PostParams::default(),
        &cm("p", &[("a", "1")], &[("x", "1"), ("y", "2")]),
    )
    .await
    .unwrap();
    let pp = PatchParams::default();
    let merged = api
        .patch(
            "p",
            &pp,
            &Patch::Merge(
                json!({"data": {"x": null, "z": "3"}, "metadata": {"labels": {"b": "2"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.data.unwrap(),
        BTreeMap::from([("y".into(), "2".into()), ("z".into(), "3".into())])
    );
    assert_eq!(merged.metadata.labels.unwrap().len(), 2);
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/y", "value": "2"},
        {"op": "replace", "path": "/data/y", "value": "20"},
        {"op": "remove", "path": "/data/z"}]))
    .unwrap();
    let patched = api.patch("p", &pp, &Patch::Json::<()>(ops)).await.unwrap();
    assert_eq!(
        patched.data.unwrap(),
        BTreeMap::from([("y".into(), "20".into())])
    );
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/y", "value": "nope"}]))
            .unwrap();
    let (code, _, _) = api_status(
        api.patch("p", &pp, &Patch::Json::<()>(failing))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    let (code, _, _) = api_status(
        api.patch("absent", &pp, &Patch::Merge(json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 404);
}

#[tokio::test]
async fn server_side_apply_creates_merges_owns_fields_and_conflicts() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let apply = |data: serde_json::Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": data}),
        )
    };
    let created = api
        .patch(
            "s",
            &PatchParams::apply("alice"),
            &apply(json!({"a": "1", "b": "2"})),
        )
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap().len(), 2);
    let mf = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(
        (mf[0].manager.as_deref(), mf[0].operation.as_deref()),
        (Some("alice"), Some("Apply"))
    );

    let err = api
        .patch("s", &PatchParams::apply("bob"), &apply(json!({"a": "9"})))
        .await
        .unwrap_err();
    let (code, reason, message) = api_status(err);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(
        message.contains("conflict with \"alice\"") && message.contains(".data.a"),
        "{message}"
    );
    let forced = api
        .patch(
            "s",
            &PatchParams::apply("bob").force(),
            &apply(json!({"a": "9"})),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["a"], "9");

    // alice stops applying b: it goes; a now belongs to bob and stays.
    let after = api
        .patch("s", &PatchParams::apply("alice"), &apply(json!({})))
        .await
        .unwrap();
    assert_eq!(
        after.data.clone().unwrap(),
        BTreeMap::from([("a".into(), "9".into())])
    );
    // Re-applying the same configuration is a no-op.
    let again = api
        .patch("s", &PatchParams::apply("bob"), &apply(json!({"a": "9"})))
        .await
        .unwrap();
    assert_eq!(again.resource_version(), after.resource_version());
}

#[tokio::test]
async fn delete_with_a_finalizer_marks_the_object_until_finalizers_are_gone() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut o = cm("f", &[], &[]);
    o.metadata.finalizers = Some(vec!["toolgate.dev/cleanup".into()]);
    api.create(&PostParams::default(), &o).await.unwrap();
    let res = api.delete("f", &DeleteParams::default()).await.unwrap();
    let marked = res
        .left()
        .expect("object returned while finalizers hold it");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(api
        .get("f")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some());
    let (code, _, _) = api_status(
        api.patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["a", "toolgate.dev/cleanup"]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422, "no new finalizers on a deleting object");
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_status(api.get("f").await.unwrap_err()).0, 404);

    api.create(&PostParams::default(), &cm("plain", &[], &[]))
        .await
        .unwrap();
    api.delete("plain", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_status(api.get("plain").await.unwrap_err()).0, 404);
}

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.toolgate.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wdg",
    category = "mcp"
)]
#[kube(printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"))]
pub struct WidgetSpec {
    size: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    color: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    observed_generation: Option<i64>,
    ready: bool,
}

async fn install_widget(client: &Client) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Widget::crd())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_crd_registers_its_kind_in_discovery_and_serves_crud() {
    let (_s, client) = server().await;
    let crd = install_widget(&client).await;
    let conds = crd.status.unwrap().conditions.unwrap();
    for t in ["Established", "NamesAccepted"] {
        assert!(
            conds.iter().any(|c| c.type_ == t && c.status == "True"),
            "{t} in {conds:?}"
        );
    }
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget discovered");
    assert_eq!(
        (ar.plural.as_str(), ar.group.as_str()),
        ("widgets", "example.toolgate.dev")
    );
    assert!(
        caps.subresources.iter().any(|(s, _)| s.plural == "status"),
        "status subresource listed"
    );

    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let w = api
        .create(
            &PostParams::default(),
            &Widget::new(
                "w1",
                WidgetSpec {
                    size: 3,
                    color: None,
                },
            ),
        )
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    assert_eq!(dynamic.get("w1").await.unwrap().data["spec"]["size"], 3);
    let (code, _, message) = api_status(
        api.patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": "big"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422, "{message}");
    assert!(message.contains("spec.size"), "{message}");

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.example.toolgate.dev", &DeleteParams::default())
        .await
        .unwrap();
    let (code, _, _) = api_status(api.get("w1").await.unwrap_err());
    assert_eq!(code, 404, "the kind is gone with its CRD");
}

#[tokio::test]
async fn status_subresource_isolates_spec_from_status_and_generation_tracks_spec() {
    let (_s, client) = server().await;
    install_widget(&client).await;
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let mut w = Widget::new(
        "w",
        WidgetSpec {
            size: 1,
            color: None,
        },
    );
    w.status = Some(WidgetStatus {
        observed_generation: Some(7),
        ready: true,
    });
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert!(created.status.is_none(), "create drops status");

    let st = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"ready": true, "observedGeneration": 1}, "spec": {"size": 99}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(st.spec.size, 1, "status writes ignore spec");
    assert!(st.status.as_ref().unwrap().ready);
    assert_eq!(
        st.metadata.generation,
        Some(1),
        "status writes keep generation"
    );

    let sp = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"ready": false}})),
        )
        .await
        .unwrap();
    assert_eq!(sp.spec.size, 2);
    assert!(sp.status.unwrap().ready, "main writes ignore status");
    assert_eq!(sp.metadata.generation, Some(2));

    let labelled = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        labelled.metadata.generation,
        Some(2),
        "metadata changes do not bump generation"
    );

    let applied = api
        .patch_status("w", &PatchParams::apply("op").force(), &Patch::Apply(json!({"apiVersion": "example.toolgate.dev/v1", "kind": "Widget", "status": {"ready": false, "observedGeneration": 2}})))
        .await
        .unwrap();
    assert_eq!(applied.status.unwrap().observed_generation, Some(2));
    assert_eq!(applied.metadata.generation, Some(2));
}

fn gadget_api(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.toolgate.dev", "v1", "Gadget");
    Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "gadgets"),
    )
}

async fn install_gadget(client: &Client) {
    let crd: CustomResourceDefinition =
        yaml_serde::from_str(include_str!("fixtures/gadget-crd.yaml")).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

#[tokio::test]
async fn crd_schema_and_cel_rules_reject_invalid_objects_with_422() {
    let (_s, client) = server().await;
    install_gadget(&client).await;
    let api = gadget_api(&client);
    let mk = |name: &str, spec: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.toolgate.dev/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let both = mk(
        "both",
        json!({"toolPrefix": "p", "baseUrl": "http://x", "serviceRef": {"name": "svc"}}),
    );
    let (code, reason, message) =
        api_status(api.create(&PostParams::default(), &both).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(message, "Gadget.example.toolgate.dev \"both\" is invalid: spec: Invalid value: \"object\": exactly one of baseUrl or serviceRef");

    let two_specs = mk(
        "two",
        json!({"toolPrefix": "p", "baseUrl": "http://x", "openapi": {"inline": "{}", "url": "http://x"}}),
    );
    let (_, _, message) = api_status(
        api.create(&PostParams::default(), &two_specs)
            .await
            .unwrap_err(),
    );
    assert!(
        message.contains(
            "spec.openapi: Invalid value: \"object\": exactly one of inline, configMapRef or url"
        ),
        "{message}"
    );

    let bad_prefix = mk(
        "bad",
        json!({"toolPrefix": "Bad-Prefix", "baseUrl": "http://x"}),
    );
    let (_, _, message) = api_status(
        api.create(&PostParams::default(), &bad_prefix)
            .await
            .unwrap_err(),
    );
    assert!(message.contains("spec.toolPrefix"), "{message}");

    let ok = mk(
        "ok",
        json!({"toolPrefix": "pets", "serviceRef": {"name": "svc"}, "unknown": 1}),
    );
    let created = api.create(&PostParams::default(), &ok).await.unwrap();
    assert_eq!(
        created.data["spec"]["serviceRef"]["port"], 80,
        "defaults applied"
    );
    assert!(
        created.data["spec"].get("unknown").is_none(),
        "unknown fields pruned"
    );
}

#[tokio::test]
async fn watch_replays_history_from_a_resource_version_and_sends_bookmarks() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = api
        .create(&PostParams::default(), &cm("w1", &[("app", "x")], &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("w2", &[("app", "y")], &[]))
        .await
        .unwrap();
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    api.delete("w1", &DeleteParams::default()).await.unwrap();

    let rv = first.resource_version().unwrap();
    let wp = WatchParams::default().labels("app=x").timeout(5);
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    let mut seen = Vec::new();
    while let Some(ev) = stream.try_next().await.unwrap() {
        match ev {
            WatchEvent::Modified(o) => seen.push(format!("MODIFIED {}", o.name_any())),
            WatchEvent::Deleted(o) => seen.push(format!("DELETED {}", o.name_any())),
            WatchEvent::Added(o) => seen.push(format!("ADDED {}", o.name_any())),
            WatchEvent::Bookmark(b) => {
                seen.push("BOOKMARK".into());
                assert!(
                    b.metadata.resource_version.parse::<u64>().unwrap()
                        >= rv.parse::<u64>().unwrap()
                );
                break;
            }
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(seen, vec!["MODIFIED w1", "DELETED w1", "BOOKMARK"]);
}

#[tokio::test]
async fn a_compacted_resource_version_gets_410_gone_and_the_watcher_relists() {
    let (s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let old = api
        .create(&PostParams::default(), &cm("g1", &[], &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("g2", &[], &[]))
        .await
        .unwrap();
    s.compact();
    let mut raw = api
        .watch(&WatchParams::default(), &old.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    match raw.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }

    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut inits = 0;
    let mut saw_g3 = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < deadline && !(inits >= 2 && saw_g3) {
        let Ok(next) = tokio::time::timeout(Duration::from_secs(10), events.next()).await else {
            break;
        };
        match next.expect("stream continues") {
            Ok(watcher::Event::InitDone) => {
                inits += 1;
                if inits == 1 {
                    // Make the watcher's resourceVersion stale, then cut it.
                    api.create(&PostParams::default(), &cm("g3", &[], &[]))
                        .await
                        .unwrap();
                    s.compact();
                    s.cut_watches();
                }
            }
            Ok(watcher::Event::InitApply(o)) if inits == 1 && o.name_any() == "g3" => saw_g3 = true,
            Ok(watcher::Event::Apply(o)) if o.name_any() == "g3" => saw_g3 = true,
            Ok(_) => {}
            Err(e) => eprintln!("watcher error (expected once): {e}"),
        }
    }
    assert!(inits >= 2, "watcher relisted after 410 Gone");
    assert!(saw_g3, "watcher recovered the object created meanwhile");
}

#[tokio::test]
async fn a_reflector_stays_in_sync_across_cut_watches() {
    let (s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .default_backoff()
        .touched_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.unwrap();
    let watches = || s.count(|r| r.verb == "watch" && r.resource == "configmaps");
    for round in 0..5 {
        let before = watches();
        api.create(&PostParams::default(), &cm(&format!("r{round}"), &[], &[]))
            .await
            .unwrap();
        s.cut_watches();
        if round > 0 {
            api.delete(&format!("r{}", round - 1), &DeleteParams::default())
                .await
                .unwrap();
        }
        api.patch(
            &format!("r{round}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"round": round.to_string()}})),
        )
        .await
        .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while watches() <= before {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the watcher re-watches after a cut"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let want = api.list(&ListParams::default()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let mut have: Vec<(String, Option<String>)> = reader
            .state()
            .iter()
            .map(|o| (o.name_any(), o.resource_version()))
            .collect();
        have.sort();
        let mut expected: Vec<(String, Option<String>)> = want
            .items
            .iter()
            .map(|o| (o.name_any(), o.resource_version()))
            .collect();
        expected.sort();
        if have == expected {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "reflector out of sync: {have:?} vs {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    task.abort();
}

/// One round of the client-go leader election protocol on a Lease:
/// take it if free or expired, renew it if held, else stand by.
async fn try_acquire(api: &Api<Lease>, me: &str) -> Result<bool, kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let spec = |transitions: i32| LeaseSpec {
        holder_identity: Some(me.into()),
        lease_duration_seconds: Some(15),
        acquire_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            now,
        )),
        renew_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            now,
        )),
        lease_transitions: Some(transitions),
        ..Default::default()
    };
    match api.get_opt("leader").await? {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some("leader".into()),
                    ..Default::default()
                },
                spec: Some(spec(0)),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
        Some(mut lease) => {
            let held_by = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
            if held_by.as_deref().is_some_and(|h| h != me) {
                return Ok(false);
            }
            lease.spec = Some(spec(
                lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.lease_transitions)
                    .unwrap_or(0),
            ));
            match api.replace("leader", &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

#[tokio::test]
async fn two_clients_racing_for_a_lease_elect_exactly_one_leader() {
    let (s, _) = server().await;
    let a: Api<Lease> = Api::namespaced(s.client().unwrap(), "default");
    let b: Api<Lease> = Api::namespaced(s.client().unwrap(), "default");
    for _ in 0..10 {
        let (ra, rb) = tokio::join!(try_acquire(&a, "replica-a"), try_acquire(&b, "replica-b"));
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert!(ra ^ rb, "exactly one leader per round: a={ra} b={rb}");
    }
    let holder = a
        .get("leader")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity
        .unwrap();
    assert!(holder == "replica-a" || holder == "replica-b");
    // A stale write from the loser is refused with 409.
    let mut stale = a.get("leader").await.unwrap();
    b.patch(
        "leader",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"leaseTransitions": 5}})),
    )
    .await
    .unwrap();
    stale.spec.as_mut().unwrap().holder_identity = Some("usurper".into());
    assert_eq!(
        api_status(
            a.replace("leader", &PostParams::default(), &stale)
                .await
                .unwrap_err()
        )
        .0,
        409
    );
}

#[tokio::test]
async fn request_counts_tell_who_wrote_what() {
    let (s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(
        &PostParams {
            field_manager: Some("leader".into()),
            ..Default::default()
        },
        &cm("x", &[], &[]),
    )
    .await
    .unwrap();
    api.patch(
        "x",
        &PatchParams::apply("leader"),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}})),
    )
    .await
    .unwrap();
    api.get("x").await.unwrap();
    assert_eq!(
        s.count(|r| r.field_manager == "leader" && r.resource == "configmaps"),
        2
    );
    assert_eq!(s.count(|r| r.verb == "patch"), 1);
    assert_eq!(
        s.count(|r| r.verb == "get" && r.field_manager.is_empty()),
        1
    );
    assert_eq!(s.count(|r| r.field_manager == "follower"), 0);
    s.reset_requests();
    assert!(s.requests().is_empty());
}

#[tokio::test]
async fn deleting_a_namespace_removes_its_objects() {
    let (_s, client) = server().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &Namespace {
            metadata: ObjectMeta {
                name: Some("team".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    api.create(&PostParams::default(), &cm("c", &[], &[]))
        .await
        .unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    assert!(api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    let (code, _, _) = api_status(nss.get("team").await.unwrap_err());
    assert_eq!(code, 404);
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed: {0}")]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(
    w: std::sync::Arc<Widget>,
    client: std::sync::Arc<Client>,
) -> Result<kube::runtime::controller::Action, ReconcileError> {
    let api: Api<Widget> = Api::namespaced((*client).clone(), &w.namespace().unwrap_or_default());
    let status = json!({"apiVersion": "example.toolgate.dev/v1", "kind": "Widget",
        "status": {"ready": true, "observedGeneration": w.metadata.generation}});
    api.patch_status(
        &w.name_any(),
        &PatchParams::apply("widget-controller").force(),
        &Patch::Apply(status),
    )
    .await?;
    Ok(kube::runtime::controller::Action::await_change())
}

fn error_policy(
    _: std::sync::Arc<Widget>,
    _: &ReconcileError,
    _: std::sync::Arc<Client>,
) -> kube::runtime::controller::Action {
    kube::runtime::controller::Action::requeue(Duration::from_millis(100))
}

async fn wait_for<F: Fn() -> Fut, Fut: std::future::Future<Output = bool>>(what: &str, f: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_controller_reconciles_and_keeps_reconciling_across_cut_watches() {
    let (s, client) = server().await;
    install_widget(&client).await;
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let controller = kube::runtime::Controller::new(api.clone(), watcher::Config::default())
        .run(reconcile, error_policy, std::sync::Arc::new(client.clone()))
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    api.create(
        &PostParams::default(),
        &Widget::new(
            "c",
            WidgetSpec {
                size: 1,
                color: None,
            },
        ),
    )
    .await
    .unwrap();
    let observed = |g: i64| {
        let api = api.clone();
        async move {
            api.get("c")
                .await
                .ok()
                .and_then(|w| w.status)
                .and_then(|st| st.observed_generation)
                == Some(g)
        }
    };
    wait_for("observedGeneration 1", || observed(1)).await;
    let status_rv = api.get("c").await.unwrap().resource_version();
    s.cut_watches();
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();
    wait_for("observedGeneration 2 after the watch was cut", || {
        observed(2)
    })
    .await;
    assert_ne!(api.get("c").await.unwrap().resource_version(), status_rv);
    // The controller's own status write must not retrigger endless writes.
    let writes = s.count(|r| r.field_manager == "widget-controller");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        s.count(|r| r.field_manager == "widget-controller"),
        writes,
        "a steady state writes nothing"
    );
    task.abort();
}

#[tokio::test]
async fn a_streaming_list_watcher_gets_initial_events_then_changes() {
    let (s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &cm("before", &[], &[]))
        .await
        .unwrap();
    let mut events = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .expect("event")
            .unwrap()
        {
            Some(watcher::Event::InitApply(o)) => initial.push(o.name_any()),
            Some(watcher::Event::InitDone) => break,
            Some(_) => {}
            None => panic!("stream ended"),
        }
    }
    assert_eq!(initial, vec!["before"]);
    api.create(&PostParams::default(), &cm("after", &[], &[]))
        .await
        .unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .expect("event")
            .unwrap()
        {
            Some(watcher::Event::Apply(o)) if o.name_any() == "after" => break,
            Some(_) => {}
            None => panic!("stream ended"),
        }
    }
    assert!(
        s.count(|r| r.verb == "list") == 0,
        "streaming lists need no LIST request"
    );
}

#[tokio::test]
async fn metadata_requests_return_partial_object_metadata() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &cm("m", &[("app", "x")], &[("big", "payload")]),
    )
    .await
    .unwrap();
    let meta = api.get_metadata("m").await.unwrap();
    assert_eq!(meta.metadata.labels.unwrap()["app"], "x");
    let listed = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(client.clone(), "default");
    let mut events = watcher(meta_api, watcher::Config::default()).boxed();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .expect("event")
            .unwrap()
        {
            Some(watcher::Event::InitApply(o)) => assert_eq!(o.name_any(), "m"),
            Some(watcher::Event::InitDone) => break,
            Some(_) => {}
            None => panic!("stream ended"),
        }
    }
}

#[tokio::test]
async fn a_watch_ends_after_timeout_seconds() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let started = std::time::Instant::now();
    let stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .expect("stream ends");
    assert!(
        events
            .iter()
            .all(|e| matches!(e, Ok(WatchEvent::Bookmark(_)))),
        "{events:?}"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[tokio::test]
async fn delete_collection_removes_only_matching_objects() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for (n, l) in [("a", "chunk"), ("b", "chunk"), ("c", "index")] {
        api.create(&PostParams::default(), &cm(n, &[("role", l)], &[]))
            .await
            .unwrap();
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("role=chunk"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| o.name_any())
        .collect();
    assert_eq!(left, vec!["c"]);
}
