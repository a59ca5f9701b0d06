//! McpToolsets: what the operator resolves, reports and publishes for
//! them, read back through the Kubernetes API as users and the gateway
//! read it.

use std::time::Duration;

use catalog::toolset::ToolsetName;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::support::*;

/// `pets` in team-a and `other` in team-b (both labelled `team: a`), the
/// pet store under two prefixes: three tools each, two of them read-only.
async fn two_upstreams(w: &World) {
    w.apply_upstream(
        NS,
        "pets",
        json!({"toolPrefix": "pets", "baseUrl": "http://pets:8080",
               "openapi": {"inline": PETSTORE}}),
    )
    .await;
    let mut other = inline(PETSTORE, "other");
    other["baseUrl"] = json!("http://other:8080");
    w.apply_upstream("team-b", "other", other).await;
    for (ns, name) in [(NS, "pets"), ("team-b", "other")] {
        label(w, ns, name, json!({"team": "a"})).await;
        wait_ready(w, ns, name, "True", "Published").await;
    }
}

async fn label(w: &World, ns: &str, name: &str, labels: serde_json::Value) {
    w.upstreams(ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .expect("label the upstream");
}

/// The published listing size of the read-only tools of `prefixes`,
/// computed from the published catalogs.
async fn read_only_size(w: &World, prefixes: &[&str]) -> (u32, u64) {
    let index = w.index().await;
    let (mut tools, mut bytes) = (0, 0);
    for p in prefixes {
        let published = w.read_published(index.entry(p).expect("published")).await;
        // Output schemas count where the upstream lists them.
        let advertise = published
            .runtime
            .response_validation
            .advertises_output_schemas();
        for t in &published.catalog.tools {
            if t.annotations.read_only_hint == Some(true) {
                tools += 1;
                bytes += catalog::listing::tool_bytes(t, advertise);
            }
        }
    }
    (tools, bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toolset_resolves_upstreams_by_name_and_label_and_reports_its_size() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    two_upstreams(&w).await;
    // Selected too, but a newer claimant of `pets`: it serves nothing.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    w.apply_upstream("team-b", "dup", inline(PETSTORE, "pets"))
        .await;
    label(&w, "team-b", "dup", json!({"team": "a"})).await;
    wait_ready(&w, "team-b", "dup", "False", "PrefixConflict").await;

    w.apply_toolset(
        NS,
        "readers",
        json!({
            "upstreams": [
                {"name": "pets"},
                {"selector": {"matchLabels": {"team": "a"}}, "namespaces": ["team-b"]},
            ],
            "tools": {"readOnly": true},
            "mode": "search",
            "pinned": ["pets__fetch_pet", "pets__create_pet"],
        }),
    )
    .await;
    let t = wait_toolset(&w, NS, "readers", "True", "Resolved").await;
    let status = t.status.clone().expect("status");
    let (tools, bytes) = read_only_size(&w, &["pets", "other"]).await;
    assert_eq!(tools, 4);
    assert_eq!(status.tool_count, Some(tools));
    let listing = status.listing.expect("status.listing");
    assert_eq!(listing.bytes, bytes);
    assert_eq!(listing.tokens, bytes.div_ceil(4));
    let resolved: Vec<(&str, &str, &str, u32)> = status
        .upstreams
        .iter()
        .map(|u| {
            (
                u.namespace.as_str(),
                u.name.as_str(),
                u.prefix.as_str(),
                u.tools,
            )
        })
        .collect();
    assert_eq!(
        resolved,
        [
            ("team-a", "pets", "pets", 2),
            ("team-b", "other", "other", 2)
        ]
    );
    let message = toolset_message(&t);
    assert!(
        message.contains("team-b/dup (Ready=False, PrefixConflict"),
        "{message}"
    );
    // A pinned tool outside the toolset (a write) is named, not served.
    assert!(message.contains("ignored: pets__create_pet"), "{message}");

    // Published beside the catalog, in the format the gateway reads.
    let index = w.index().await;
    let entry = index
        .toolset(&ToolsetName::new(NS, "readers"))
        .expect("the index names the toolset");
    let published = w.read_published_toolset(entry).await;
    assert_eq!(
        published.upstreams.iter().collect::<Vec<_>>(),
        ["other", "pets"]
    );
    assert!(published.tools.read_only);
    assert_eq!(published.mode, catalog::listing::ListMode::Search);
    assert_eq!(published.pinned, ["pets__fetch_pet", "pets__create_pet"]);
    let chunk = w
        .configmaps(PUBLISH_NS)
        .get(&entry.chunks[0].name)
        .await
        .expect("chunk");
    assert_eq!(
        chunk
            .metadata
            .labels
            .unwrap_or_default()
            .get("toolgate.dev/component")
            .map(String::as_str),
        Some("catalog-chunk")
    );
    assert_eq!(chunk.immutable, Some(true));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_matching_nothing_is_not_ready_until_labels_make_it_match() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    two_upstreams(&w).await;
    w.apply_toolset(
        NS,
        "gold",
        json!({"upstreams": [{"selector": {"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gold"]}]}}]}),
    )
    .await;
    let t = wait_toolset(&w, NS, "gold", "False", "NoUpstreamsMatched").await;
    assert!(
        toolset_message(&t).contains("spec.upstreams matches no McpUpstream"),
        "{}",
        toolset_message(&t)
    );
    assert_eq!(t.status.as_ref().and_then(|s| s.tool_count), Some(0));
    // Published all the same: the endpoint answers, with no tools.
    let id = ToolsetName::new(NS, "gold");
    let index = w.index().await;
    let published = w
        .read_published_toolset(index.toolset(&id).expect("published"))
        .await;
    assert!(published.upstreams.is_empty());

    // Labelling an upstream brings it in...
    label(&w, NS, "pets", json!({"tier": "gold"})).await;
    let t = wait_toolset(&w, NS, "gold", "True", "Resolved").await;
    let status = t.status.expect("status");
    assert_eq!(status.tool_count, Some(3));
    assert_eq!(status.upstreams.len(), 1);
    assert_eq!(status.upstreams[0].prefix, "pets");
    let index = w.index().await;
    let published = w.read_published_toolset(index.toolset(&id).unwrap()).await;
    assert_eq!(published.upstreams.iter().collect::<Vec<_>>(), ["pets"]);

    // ...and relabelling takes it out again.
    label(&w, NS, "pets", json!({"tier": "silver"})).await;
    wait_toolset(&w, NS, "gold", "False", "NoUpstreamsMatched").await;
    let index = w.index().await;
    let published = w.read_published_toolset(index.toolset(&id).unwrap()).await;
    assert!(published.upstreams.is_empty());
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_that_let_no_tool_through_and_unpublished_upstreams_say_why() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    two_upstreams(&w).await;
    w.apply_toolset(
        NS,
        "none",
        json!({"upstreams": [{"name": "pets"}], "tools": {"include": ["delete_*"]}}),
    )
    .await;
    let t = wait_toolset(&w, NS, "none", "False", "NoToolsMatched").await;
    assert!(
        toolset_message(&t).contains("no tool of team-a/pets passes spec.tools"),
        "{}",
        toolset_message(&t)
    );
    // An upstream whose document is missing has nothing published.
    w.apply_upstream(
        NS,
        "broken",
        json!({"toolPrefix": "broken", "baseUrl": "http://b:8080",
               "openapi": {"configMapRef": {"name": "absent", "key": "openapi.yaml"}}}),
    )
    .await;
    wait_ready(&w, NS, "broken", "False", "SpecNotFound").await;
    w.apply_toolset(
        NS,
        "broken",
        json!({"upstreams": [{"name": "broken"}, {"name": "pets", "namespaces": ["elsewhere"]}]}),
    )
    .await;
    let t = wait_toolset(&w, NS, "broken", "False", "NoUpstreamsMatched").await;
    let message = toolset_message(&t);
    assert!(
        message.contains(
            "no McpUpstream it selects is published: team-a/broken (Ready=False, SpecNotFound"
        ),
        "{message}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_the_schema_lets_through_but_that_cannot_match_names_its_field() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    two_upstreams(&w).await;
    w.apply_toolset(
        NS,
        "odd",
        json!({"upstreams": [{"name": "pets"}, {"selector": {"matchExpressions": [
            {"key": "tier", "operator": "Sometimes"}]}}]}),
    )
    .await;
    let t = wait_toolset(&w, NS, "odd", "False", "InvalidSettings").await;
    let message = toolset_message(&t);
    assert!(
        message.starts_with("spec.upstreams[1].selector: "),
        "{message}"
    );
    // Nothing was published for it.
    assert!(w
        .index()
        .await
        .toolset(&ToolsetName::new(NS, "odd"))
        .is_none());
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_toolset_is_unpublished_even_while_no_operator_runs() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    two_upstreams(&w).await;
    for name in ["one", "two"] {
        w.apply_toolset(NS, name, json!({"upstreams": [{"name": "pets"}]}))
            .await;
        wait_toolset(&w, NS, name, "True", "Resolved").await;
    }
    let one = ToolsetName::new(NS, "one");
    let chunk = w.index().await.toolset(&one).expect("published").chunks[0]
        .name
        .clone();
    // Deleting it takes it out of the index, and its chunk goes.
    w.toolsets(NS)
        .delete("one", &DeleteParams::default())
        .await
        .expect("delete");
    // (The index is written first, then unreferenced chunks go.)
    eventually("toolset one and its chunk unpublished", WAIT, || async {
        let gone = w
            .configmaps(PUBLISH_NS)
            .get_opt(&chunk)
            .await
            .ok()?
            .is_none();
        (gone && w.index().await.toolset(&one).is_none()).then_some(())
    })
    .await;

    // Deleted while no operator runs: the next one unpublishes it.
    op.stop().await;
    w.toolsets(NS)
        .delete("two", &DeleteParams::default())
        .await
        .expect("delete");
    let two = ToolsetName::new(NS, "two");
    assert!(w.index().await.toolset(&two).is_some());
    let op = w.operator("operator", false);
    eventually("toolset two unpublished", WAIT, || async {
        w.index().await.toolset(&two).is_none().then_some(())
    })
    .await;
    // The upstreams are untouched.
    assert!(w.index().await.entry("pets").is_some());
    op.stop().await;
}
