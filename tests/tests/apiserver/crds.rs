//! CustomResourceDefinitions: registration, status subresource, schemas and CEL.

use super::*;

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
async fn a_crd_stays_terminating_while_finalizers_hold_its_objects() {
    let (_s, client) = server().await;
    install_widget(&client).await;
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let mut w = Widget::new(
        "held",
        WidgetSpec {
            size: 1,
            color: None,
        },
    );
    w.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &w).await.unwrap();

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.example.toolgate.dev", &DeleteParams::default())
        .await
        .unwrap();
    let crd = crds.get("widgets.example.toolgate.dev").await.unwrap();
    assert!(crd.metadata.deletion_timestamp.is_some());
    let conds = crd.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Terminating" && c.status == "True"),
        "{conds:?}"
    );
    let held = api.get("held").await.expect("still served while held");
    assert!(held.metadata.deletion_timestamp.is_some());
    let mut late = w.clone();
    late.metadata.name = Some("late".into());
    late.metadata.finalizers = None;
    let (code, _, _) = api_status(api.create(&PostParams::default(), &late).await.unwrap_err());
    assert_eq!(code, 405);

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let (code, _, _) = api_status(crds.get("widgets.example.toolgate.dev").await.unwrap_err());
    assert_eq!(code, 404, "the CRD goes with its last object");
    let (code, _, _) = api_status(api.get("held").await.unwrap_err());
    assert_eq!(code, 404, "and its kind with it");
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
