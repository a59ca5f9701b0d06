//! Create, read, update, patch, apply and delete of built-in kinds.

use super::*;

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

#[tokio::test]
async fn a_namespace_stays_terminating_while_a_finalizer_holds_an_object_in_it() {
    let (_s, client) = server().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("team".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let mut held = cm("held", &[], &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    api.create(&PostParams::default(), &cm("free", &[], &[]))
        .await
        .unwrap();

    nss.delete("team", &DeleteParams::default()).await.unwrap();
    let team = nss.get("team").await.unwrap();
    assert!(team.metadata.deletion_timestamp.is_some());
    assert_eq!(team.status.unwrap().phase.as_deref(), Some("Terminating"));
    let (code, _, _) = api_status(api.get("free").await.unwrap_err());
    assert_eq!(code, 404, "objects without finalizers go at once");
    assert!(api
        .get("held")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some());
    let (code, reason, message) = api_status(
        api.create(&PostParams::default(), &cm("late", &[], &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (403, "Forbidden"), "{message}");
    assert!(message.contains("being terminated"), "{message}");

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers/0"}]))
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    let (code, _, _) = api_status(api.get("held").await.unwrap_err());
    assert_eq!(code, 404);
    let (code, _, _) = api_status(nss.get("team").await.unwrap_err());
    assert_eq!(code, 404, "the namespace goes with its last object");
}

#[tokio::test]
async fn removing_the_last_finalizer_leaves_no_finalizers_field() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut held = cm("held", &[], &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let json_patch =
        |ops: serde_json::Value| Patch::Json::<()>(serde_json::from_value(ops).unwrap());
    api.patch(
        "held",
        &PatchParams::default(),
        &json_patch(json!([{"op": "remove", "path": "/metadata/finalizers/0"}])),
    )
    .await
    .unwrap();
    assert_eq!(api.get("held").await.unwrap().metadata.finalizers, None);
    // What kube-runtime's finalizer helper sends to add the first one.
    api.patch(
        "held",
        &PatchParams::default(),
        &json_patch(json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/again"]},
        ])),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_deployments_scale_subresource_reads_and_writes_its_replicas() {
    let (s, client) = server().await;
    let api: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), "default");
    let d: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
        "metadata": {"name": "op"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "op", "tier": "ctl"}},
            "template": {"metadata": {"labels": {"app": "op", "tier": "ctl"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();
    let scale = api.get_scale("op").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    assert_eq!(
        scale.status.unwrap().selector.as_deref(),
        Some("app=op,tier=ctl")
    );
    let scaled = api
        .patch_scale(
            "op",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(0));
    assert_eq!(api.get("op").await.unwrap().spec.replicas, Some(0));
    assert_eq!(
        s.count(|r| r.verb == "patch" && r.subresource == "scale"),
        1,
        "recorded as the scale subresource"
    );
    let (code, _, _) = api_status(
        api.patch_scale(
            "op",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
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

#[tokio::test]
async fn events_recorded_through_events_k8s_io_are_core_events_too() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let target = api
        .create(&PostParams::default(), &cm("spec", &[], &[]))
        .await
        .unwrap();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "toolgate-operator".into(),
            instance: Some("pod-1".into()),
        },
    );
    let ev = Event {
        type_: EventType::Warning,
        reason: "SpecInvalid".into(),
        note: Some("openapi.json: not an OpenAPI document".into()),
        action: "Compile".into(),
        secondary: None,
    };
    let reference = kube::Resource::object_ref(&target, &());
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();

    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let found = core
        .list(&ListParams::default().fields(&format!(
            "involvedObject.name=spec,involvedObject.uid={}",
            target.uid().unwrap()
        )))
        .await
        .unwrap();
    assert_eq!(
        found.items.len(),
        1,
        "the repeat became a series, not a new event"
    );
    let e = &found.items[0];
    assert_eq!(
        e.message.as_deref(),
        Some("openapi.json: not an OpenAPI document")
    );
    assert_eq!(e.reporting_component.as_deref(), Some("toolgate-operator"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    let new: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, "default");
    let same = new.get(&e.name_any()).await.unwrap();
    assert_eq!(same.regarding.unwrap().name.as_deref(), Some("spec"));
    assert_eq!(same.series.map(|s| s.count), Some(2));
}

#[tokio::test]
async fn object_validation_matches_the_real_limits() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let long_value = "a".repeat(64);
    let (code, _, message) = api_status(
        api.create(
            &PostParams::default(),
            &cm("l", &[("toolgate.dev/hash", &long_value)], &[]),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        message.contains("must be no more than 63 characters"),
        "{message}"
    );
    let (code, _, _) = api_status(
        api.create(&PostParams::default(), &cm("k", &[("bad key!", "x")], &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);

    // A 900 KiB chunk fits; 1 MiB + 1 byte of payload does not.
    let chunk = "A".repeat(900 * 1024 / 3 * 4);
    let ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "binaryData": {"chunk": chunk}});
    api.patch("chunk", &PatchParams::apply("op"), &Patch::Apply(ok))
        .await
        .unwrap();
    let too_big = "x".repeat((1 << 20) + 1);
    let (code, _, message) = api_status(
        api.create(&PostParams::default(), &cm("big", &[], &[("k", &too_big)]))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        message.contains("Too long: must have at most 1048576 bytes"),
        "{message}"
    );
}

#[tokio::test]
async fn a_resource_version_in_an_applied_configuration_is_a_precondition() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = api
        .patch(
            "p",
            &PatchParams::apply("m"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}})),
        )
        .await
        .unwrap();
    let rv = first.resource_version().unwrap();
    api.patch(
        "p",
        &PatchParams::apply("m"),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "2"}})),
    )
    .await
    .unwrap();
    let stale = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"resourceVersion": rv}, "data": {"a": "3"}});
    let (code, reason, _) = api_status(
        api.patch("p", &PatchParams::apply("m"), &Patch::Apply(stale))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
}

#[tokio::test]
async fn a_kube_client_from_kubeconfig_as_a_user_is_counted_as_that_user() {
    let (s, _) = server().await;
    let kubeconfig: kube::config::Kubeconfig =
        yaml_serde::from_str(&s.kubeconfig_as("replica-b")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.list(&ListParams::default()).await.unwrap();
    assert_eq!(s.count(|r| r.user == "replica-b" && r.verb == "list"), 1);
}
