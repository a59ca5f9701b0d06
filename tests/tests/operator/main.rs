//! The real operator against the in-memory API server, over HTTP only: what
//! `kubectl apply` users see in status and what the gateway finds published.

mod compile_memory;
mod metrics;
mod rbac;
mod support;
mod toolsets;
mod uninstall;

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

fn tool_names(p: &catalog::publish::PublishedUpstream) -> Vec<String> {
    p.catalog.tools.iter().map(|t| t.name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_upstream_is_published_and_ready() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;

    let u = wait_ready(&w, NS, "pets", "True", "Published").await;
    let status = u.status.clone().expect("status");
    assert_eq!(status.tool_count, Some(3));
    assert_eq!(status.observed_generation, u.metadata.generation);
    for t in [
        "SpecResolved",
        "OverlaysApplied",
        "Compiled",
        "PrefixAccepted",
        "Published",
    ] {
        assert_eq!(cond(&u, t).map(|c| c.0), Some("True".into()), "{t}");
    }

    let index = w.index().await;
    let entry = index.entry("pets").expect("index names the upstream");
    assert_eq!(entry.source, "team-a/pets");
    assert_eq!(Some(&entry.catalog_hash), status.catalog_hash.as_ref());
    let published = w.read_published(entry).await;
    assert_eq!(
        tool_names(&published),
        ["pets__list_pets", "pets__create_pet", "pets__fetch_pet"]
    );
    assert_eq!(
        published.runtime.base_url.as_deref(),
        Some("http://pets.team-a.svc:8080")
    );
    // Chunks are labelled for the gateway's watch.
    let chunk = w
        .configmaps(PUBLISH_NS)
        .get(&entry.chunks[0].name)
        .await
        .expect("chunk");
    let labels = chunk.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("toolgate.dev/prefix").map(String::as_str),
        Some("pets")
    );
    assert_eq!(chunk.immutable, Some(true));

    // The transition is recorded as an event on the upstream.
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(w.client.clone(), NS);
    let listed = eventually("a Published event", WAIT, || async {
        let l = events.list(&Default::default()).await.ok()?;
        l.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("pets")
                && e.reason.as_deref() == Some("Published")
        })
    })
    .await;
    assert_eq!(listed.type_.as_deref(), Some("Normal"));
    op.stop().await;
}

/// `status.listing` estimates the upstream's share of `tools/list` as the
/// gateway will list it: output schemas count only once
/// `validation.responseFailure: fail` makes the gateway list them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_estimates_the_tools_list_size_as_the_validation_mode_lists_it() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    let u = wait_ready(&w, NS, "pets", "True", "Published").await;
    let plain = u.status.and_then(|s| s.listing).expect("status.listing");
    let published = w
        .read_published(w.index().await.entry("pets").unwrap())
        .await;
    let tools = &published.catalog.tools;
    assert!(tools.iter().any(|t| t.output_schema.is_some()));
    assert_eq!(plain, catalog::listing::size_of(tools, false).into());
    assert_eq!(plain.tokens, plain.bytes.div_ceil(4));

    w.upstreams(NS)
        .patch(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"validation": {"response": true, "responseFailure": "fail"}}}),
            ),
        )
        .await
        .unwrap();
    let u = wait_ready(&w, NS, "pets", "True", "Published").await;
    let listed = u.status.and_then(|s| s.listing).expect("status.listing");
    assert_eq!(listed, catalog::listing::size_of(tools, true).into());
    assert!(listed.bytes > plain.bytes, "{listed:?} vs {plain:?}");

    // `warn` lists no output schemas either.
    w.upstreams(NS)
        .patch(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"validation": {"responseFailure": "warn"}}})),
        )
        .await
        .unwrap();
    let u = wait_ready(&w, NS, "pets", "True", "Published").await;
    assert_eq!(u.status.and_then(|s| s.listing), Some(plain));
    op.stop().await;
}

/// The operator's `toolgate_operator_compiles_total`.
async fn compiles(addr: std::net::SocketAddr) -> u64 {
    metric(addr, "toolgate_operator_compiles_total").await
}

/// One unlabelled sample of the operator's `/metrics`.
async fn metric(addr: std::net::SocketAddr, name: &str) -> u64 {
    toolgate_tests::prometheus::scrape(&format!("http://{addr}/metrics"))
        .await
        .get(name, &[]) as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_one_upstream_recompiles_only_that_one() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    let port = op.health;
    w.apply_upstream(NS, "a", inline(PETSTORE, "a")).await;
    w.apply_upstream(NS, "b", inline(PETSTORE, "b")).await;
    wait_ready(&w, NS, "a", "True", "Published").await;
    wait_ready(&w, NS, "b", "True", "Published").await;
    settle(&w, "operator", Duration::from_millis(500)).await;
    let before = compiles(port).await;
    assert_eq!(before, 2);

    w.upstreams(NS)
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tools": {"disabled": ["a__fetch_pet"]}}})),
        )
        .await
        .expect("patch");
    eventually("a recompiled", WAIT, || async {
        (w.upstream(NS, "a").await.status?.tool_count == Some(2)).then_some(())
    })
    .await;
    settle(&w, "operator", Duration::from_millis(500)).await;
    assert_eq!(compiles(port).await, before + 1);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlays_change_the_catalog_and_a_bad_one_keeps_the_last_good() {
    let (w, op) = World::with_pets().await;
    let before = w.index().await.entry("pets").cloned().expect("published");

    // A good overlay hides createPet.
    w.apply_overlay(NS, "hide-writes", json!({
        "upstreamRef": {"name": "pets"},
        "inline": "overlay: 1.0.0\ninfo: {title: hide, version: '1'}\nactions:\n  - target: $.paths['/pets'].post\n    update: {x-mcp-enabled: false}\n  - target: $.paths['/nothing']\n    update: {x: 1}\n",
    }))
    .await;
    let entry = eventually("catalog without createPet", WAIT, || async {
        let e = w.index().await.entry("pets").cloned()?;
        (e.hash != before.hash).then_some(e)
    })
    .await;
    let published = w.read_published(&entry).await;
    assert_eq!(
        tool_names(&published),
        ["pets__list_pets", "pets__fetch_pet"]
    );
    let o = eventually("overlay status lists its upstream", WAIT, || async {
        let o = w.overlays(NS).get("hide-writes").await.ok()?;
        let s = o.status.clone()?;
        (s.applied_to == ["pets"]).then_some(o)
    })
    .await;
    let status = o.status.clone().expect("status");
    assert_eq!(overlay_cond(&o, "Ready").map(|c| c.0), Some("True".into()));
    assert_eq!(status.unmatched_targets.len(), 1, "{status:?}");
    assert_eq!(status.unmatched_targets[0].action, 1);
    assert_eq!(status.unmatched_targets[0].target, "$.paths['/nothing']");
    let good = entry;

    // A bad JSONPath: the overlay and the upstream say so, the last good
    // catalog stays published.
    w.apply_overlay(NS, "broken", json!({
        "upstreamRef": {"name": "pets"},
        "order": 5,
        "inline": "overlay: 1.0.0\ninfo: {title: bad, version: '1'}\nactions:\n  - target: $.paths[?(@.x ==\n    remove: true\n",
    }))
    .await;
    let u = wait_ready(&w, NS, "pets", "False", "OverlayInvalid").await;
    let (_, _, msg) = cond(&u, "Ready").expect("ready");
    assert!(msg.contains("McpOverlay team-a/broken"), "{msg}");
    assert!(msg.contains("/actions/0"), "{msg}");
    assert!(msg.contains("still serving the last good catalog"), "{msg}");
    let (s, r, _) = cond(&u, "Published").expect("published");
    assert_eq!((s.as_str(), r.as_str()), ("True", "Stale"));
    assert_eq!(u.status.as_ref().and_then(|s| s.tool_count), Some(2));
    let o = eventually("broken overlay is OverlayInvalid", WAIT, || async {
        let o = w.overlays(NS).get("broken").await.ok()?;
        let (s, r, _) = overlay_cond(&o, "Ready")?;
        (s == "False" && r == "OverlayInvalid").then_some(o)
    })
    .await;
    assert!(overlay_cond(&o, "Ready")
        .expect("ready")
        .2
        .contains("/actions/0"));
    assert_eq!(w.index().await.entry("pets"), Some(&good));
    // Its sibling was never applied to the new document: not `Applied`
    // (it said "applied to pets"), but Unknown, naming the failure.
    let (status, reason, message) = eventually("hide-writes not evaluated", WAIT, || async {
        let o = w.overlays(NS).get("hide-writes").await.ok()?;
        let c = overlay_cond(&o, "Ready")?;
        (c.0 == "Unknown").then_some(c)
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("Unknown", "UpstreamNotReady")
    );
    assert!(message.contains("not evaluated"), "{message}");
    assert!(message.contains("McpOverlay team-a/broken"), "{message}");

    // Deleting the broken overlay recovers.
    w.overlays(NS)
        .delete("broken", &DeleteParams::default())
        .await
        .expect("delete");
    wait_ready(&w, NS, "pets", "True", "Published").await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_upstream_holds_a_prefix_and_the_next_is_promoted() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    w.apply_upstream(NS, "first", inline(PETSTORE, "pets"))
        .await;
    wait_ready(&w, NS, "first", "True", "Published").await;
    // Creation timestamps have one-second resolution; make the order certain.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let first_status = w.upstream(NS, "first").await.status;
    w.apply_upstream("team-b", "second", inline(PETSTORE, "pets"))
        .await;

    let u = wait_ready(&w, "team-b", "second", "False", "PrefixConflict").await;
    let (_, _, msg) = cond(&u, "Ready").expect("ready");
    assert!(msg.contains("McpUpstream team-a/first"), "{msg}");
    assert_eq!(
        cond(&u, "PrefixAccepted").map(|c| (c.0, c.1)),
        Some(("False".into(), "PrefixConflict".into()))
    );
    assert_eq!(
        w.index()
            .await
            .entry("pets")
            .map(|e| e.source.clone())
            .as_deref(),
        Some("team-a/first")
    );
    // The holder is untouched.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.upstream(NS, "first").await.status, first_status);

    // Deleting the holder promotes the other.
    w.upstreams(NS)
        .delete("first", &DeleteParams::default())
        .await
        .expect("delete");
    wait_ready(&w, "team-b", "second", "True", "Published").await;
    let entry = w.index().await.entry("pets").cloned().expect("published");
    assert_eq!(entry.source, "team-b/second");
    eventually("the holder is gone", WAIT, || async {
        w.upstreams(NS)
            .get_opt("first")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_in_a_configmap_is_recompiled_when_edited() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    w.apply_pets_from_configmap(NS).await;
    wait_ready(&w, NS, "pets", "True", "Published").await;
    assert_eq!(w.index().await.entry("pets").map(|e| e.tool_count), Some(3));

    let edited = PETSTORE.replace(
        "operationId: fetchPet",
        "operationId: fetchPet\n      x-mcp-enabled: false",
    );
    w.configmaps(NS)
        .patch(
            "pets-openapi",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"openapi.yaml": edited}})),
        )
        .await
        .expect("edit");
    eventually("recompiled with 2 tools", WAIT, || async {
        let u = w.upstream(NS, "pets").await;
        (u.status?.tool_count == Some(2)).then_some(())
    })
    .await;
    assert_eq!(w.index().await.entry("pets").map(|e| e.tool_count), Some(2));

    // A missing key is SpecNotFound naming the ConfigMap and key.
    w.configmaps(NS)
        .patch(
            "pets-openapi",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"openapi.yaml": null, "other.yaml": "x"}})),
        )
        .await
        .expect("edit");
    let u = wait_ready(&w, NS, "pets", "False", "SpecNotFound").await;
    let (_, _, msg) = cond(&u, "Ready").expect("ready");
    assert!(msg.contains("spec.openapi.configMapRef"), "{msg}");
    assert!(msg.contains("team-a/pets-openapi"), "{msg}");
    op.stop().await;
}

/// A loopback HTTP server: `/openapi.yaml` with an ETag, `/missing` 404.
async fn spec_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicU32>) {
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/openapi.yaml",
        get(move |headers: HeaderMap| {
            let h = h.clone();
            async move {
                h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some("\"v1\"") {
                    return StatusCode::NOT_MODIFIED.into_response();
                }
                ([("etag", "\"v1\"")], PETSTORE).into_response()
            }
        }),
    );
    let addr = toolgate_tests::serve_loopback(app).await;
    (format!("http://{addr}"), hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specs_from_urls_are_fetched_and_failures_name_url_and_status() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    let (base, hits) = spec_server().await;
    w.apply_upstream(
        NS,
        "pets",
        json!({
            "toolPrefix": "pets",
            "baseUrl": "http://pets:8080",
            "openapi": {"url": format!("{base}/openapi.yaml"), "refreshInterval": "1s"},
        }),
    )
    .await;
    wait_ready(&w, NS, "pets", "True", "Published").await;
    // Refreshed with a conditional GET: 304s keep it published.
    eventually("refetched", WAIT, || async {
        (hits.load(std::sync::atomic::Ordering::SeqCst) >= 3).then_some(())
    })
    .await;
    let u = wait_ready(&w, NS, "pets", "True", "Published").await;
    assert_eq!(u.status.and_then(|s| s.tool_count), Some(3));

    w.apply_upstream(
        NS,
        "gone",
        json!({
            "toolPrefix": "gone",
            "baseUrl": "http://gone:8080",
            "openapi": {"url": format!("{base}/missing.yaml")},
        }),
    )
    .await;
    let u = wait_ready(&w, NS, "gone", "False", "SpecNotFound").await;
    let (_, _, msg) = cond(&u, "SpecResolved").expect("cond");
    assert!(msg.contains(&format!("{base}/missing.yaml")), "{msg}");
    assert!(msg.contains("404"), "{msg}");

    w.apply_upstream(
        NS,
        "unreachable",
        json!({
            "toolPrefix": "unreachable",
            "baseUrl": "http://x:8080",
            "openapi": {"url": "http://127.0.0.1:9/openapi.yaml"},
        }),
    )
    .await;
    let u = wait_ready(&w, NS, "unreachable", "False", "SpecNotFound").await;
    let (_, _, msg) = cond(&u, "Ready").expect("cond");
    assert!(msg.contains("http://127.0.0.1:9/openapi.yaml"), "{msg}");
    op.stop().await;
}

/// A loopback server that records the `x-api-key` each request carried.
async fn recording_server(
    app: impl FnOnce(std::sync::Arc<std::sync::Mutex<Vec<String>>>) -> axum::Router,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let addr = toolgate_tests::serve_loopback(app(seen.clone())).await;
    (format!("http://{addr}"), seen)
}

fn api_key(headers: &HeaderMap) -> String {
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string()
}

async fn apply_secret(w: &World, ns: &str, name: &str, data: serde_json::Value) {
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(w.client.clone(), ns);
    let s = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": data,
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &s)
        .await
        .expect("create secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_url_credentials_never_follow_a_redirect_to_another_origin() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    apply_secret(&w, NS, "spec-creds", json!({"x-api-key": "s3cret"})).await;
    // Another origin (another port) that would log what it receives.
    let (elsewhere, leaked) = recording_server(|seen| {
        axum::Router::new().route(
            "/openapi.yaml",
            get(move |headers: HeaderMap| {
                let seen = seen.clone();
                async move {
                    seen.lock().expect("lock").push(api_key(&headers));
                    PETSTORE
                }
            }),
        )
    })
    .await;
    let target = format!("{elsewhere}/openapi.yaml");
    let (origin, seen) = recording_server(move |seen| {
        axum::Router::new()
            .route(
                "/away",
                get(move || async move { axum::response::Redirect::temporary(&target) }),
            )
            // Within the origin, redirects are followed.
            .route(
                "/moved",
                get(|| async { axum::response::Redirect::permanent("/openapi.yaml") }),
            )
            .route(
                "/openapi.yaml",
                get(move |headers: HeaderMap| {
                    let seen = seen.clone();
                    async move {
                        seen.lock().expect("lock").push(api_key(&headers));
                        PETSTORE
                    }
                }),
            )
    })
    .await;
    let spec = |path: &str, prefix: &str| {
        json!({
            "toolPrefix": prefix,
            "baseUrl": "http://pets:8080",
            "openapi": {"url": format!("{origin}{path}"), "headersFrom": {"name": "spec-creds"}},
        })
    };
    w.apply_upstream(NS, "away", spec("/away", "away")).await;
    w.apply_upstream(NS, "moved", spec("/moved", "moved")).await;
    let u = wait_ready(&w, NS, "away", "False", "SpecNotFound").await;
    let (_, _, msg) = cond(&u, "SpecResolved").expect("cond");
    assert!(msg.contains("another origin"), "{msg}");
    assert!(
        msg.contains(&elsewhere),
        "the message names where it led: {msg}"
    );
    wait_ready(&w, NS, "moved", "True", "Published").await;
    // NB: not "exactly once": the upstream may reconcile again (its
    // finalizer, its status) and, without an ETag, fetch again.
    let seen = seen.lock().expect("lock").clone();
    assert!(
        !seen.is_empty() && seen.iter().all(|k| k == "s3cret"),
        "{seen:?}"
    );
    assert!(
        leaked.lock().expect("lock").is_empty(),
        "{:?}",
        leaked.lock()
    );
    op.stop().await;
}

/// A document fetched for one upstream is never the answer for another
/// (with other credentials), and goes away with its upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetched_documents_are_kept_per_upstream_and_forgotten_with_it() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    apply_secret(&w, NS, "spec-creds", json!({"x-api-key": "s3cret"})).await;
    // Checks the ETag before the credentials, as some caches in front of
    // an API do: a 304 to anybody who knows the ETag.
    let (base, _) = recording_server(|_| {
        axum::Router::new().route(
            "/openapi.yaml",
            get(|headers: HeaderMap| async move {
                if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some("\"v1\"") {
                    return StatusCode::NOT_MODIFIED.into_response();
                }
                if api_key(&headers) != "s3cret" {
                    return StatusCode::UNAUTHORIZED.into_response();
                }
                ([("etag", "\"v1\"")], PETSTORE).into_response()
            }),
        )
    })
    .await;
    let url = format!("{base}/openapi.yaml");
    w.apply_upstream(
        NS,
        "owner",
        json!({
            "toolPrefix": "owner",
            "baseUrl": "http://pets:8080",
            "openapi": {"url": url, "headersFrom": {"name": "spec-creds"}},
        }),
    )
    .await;
    wait_ready(&w, NS, "owner", "True", "Published").await;
    assert_eq!(
        metric(op.health, "toolgate_operator_document_cache_entries").await,
        1
    );
    assert!(
        metric(op.health, "toolgate_operator_document_cache_bytes").await >= PETSTORE.len() as u64
    );

    w.apply_upstream(
        "team-b",
        "other",
        json!({
            "toolPrefix": "other",
            "baseUrl": "http://pets:8080",
            "openapi": {"url": url},
        }),
    )
    .await;
    let u = wait_ready(&w, "team-b", "other", "False", "SpecNotFound").await;
    let (_, _, msg) = cond(&u, "SpecResolved").expect("cond");
    assert!(msg.contains("401"), "{msg}");

    w.upstreams(NS)
        .delete("owner", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the document forgotten", WAIT, || async {
        (metric(op.health, "toolgate_operator_document_cache_bytes").await == 0).then_some(())
    })
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_url_that_trickles_past_the_timeout_says_it_timed_out() {
    let w = World::new().await;
    let op = w.operator_with("operator", false, |o| {
        o.spec_fetch_timeout = Duration::from_secs(1);
        o.max_spec_bytes = 64 << 10;
    });
    let (base, _) = recording_server(|_| {
        axum::Router::new()
            .route(
                "/slow.yaml",
                get(|| async {
                    // One byte every 100 ms, for ever.
                    let s = futures::stream::unfold((), |()| async {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        Some((
                            Ok::<_, std::convert::Infallible>(axum::body::Bytes::from_static(b" ")),
                            (),
                        ))
                    });
                    axum::body::Body::from_stream(s)
                }),
            )
            .route(
                "/endless.yaml",
                get(|| async {
                    let s = futures::stream::repeat_with(|| {
                        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(vec![b' '; 8192]))
                    });
                    axum::body::Body::from_stream(s)
                }),
            )
    })
    .await;
    for (name, path) in [("slow", "/slow.yaml"), ("endless", "/endless.yaml")] {
        w.apply_upstream(
            NS,
            name,
            json!({
                "toolPrefix": name,
                "baseUrl": "http://pets:8080",
                "openapi": {"url": format!("{base}{path}")},
            }),
        )
        .await;
    }
    let u = wait_ready(&w, NS, "slow", "False", "SpecNotFound").await;
    let (_, _, msg) = cond(&u, "SpecResolved").expect("cond");
    assert!(msg.contains("timed out after 1 s"), "{msg}");
    let u = wait_ready(&w, NS, "endless", "False", "SpecTooLarge").await;
    let (_, _, msg) = cond(&u, "SpecResolved").expect("cond");
    assert!(msg.contains("larger than 65536 bytes"), "{msg}");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_rejects_both_base_url_and_service_ref() {
    let w = World::new().await;
    let u: crds::McpUpstream = serde_json::from_value(json!({
        "apiVersion": "toolgate.dev/v1alpha1",
        "kind": "McpUpstream",
        "metadata": {"name": "both", "namespace": NS},
        "spec": {
            "toolPrefix": "both",
            "baseUrl": "http://x",
            "serviceRef": {"name": "x", "port": 80},
            "openapi": {"inline": PETSTORE},
        },
    }))
    .expect("typed");
    let err = w
        .upstreams(NS)
        .create(&PostParams::default(), &u)
        .await
        .expect_err("rejected");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message
                    .contains("exactly one of spec.baseUrl or spec.serviceRef"),
                "{}",
                s.message
            );
        }
        other => panic!("unexpected {other}"),
    }
}

/// Prefix `a` with separator `b__` would name its tools like prefix `ab`
/// does: the API server refuses such settings, and the operator refuses
/// objects stored before the CRD did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_namespace_cannot_produce_another_namespaces_tool_names() {
    let w = World::new().await;
    let hijack = |prefix: &str, separator: &str| -> crds::McpUpstream {
        serde_json::from_value(json!({
            "apiVersion": "toolgate.dev/v1alpha1",
            "kind": "McpUpstream",
            "metadata": {"name": "attacker", "namespace": "team-b"},
            "spec": {
                "toolPrefix": prefix,
                "baseUrl": "http://attacker:8080",
                "naming": {"separator": separator},
                "openapi": {"inline": PETSTORE},
            },
        }))
        .expect("typed")
    };
    for (prefix, separator, says) in [
        ("pet", "s__", "spec.naming.separator"),
        ("pets_", "_", "spec.toolPrefix"),
        ("pe__ts", "__", "spec.toolPrefix"),
    ] {
        let err = w
            .upstreams("team-b")
            .create(&PostParams::default(), &hijack(prefix, separator))
            .await
            .expect_err("rejected");
        match err {
            kube::Error::Api(s) => {
                assert_eq!(s.code, 422);
                assert!(
                    s.message.contains(says),
                    "{prefix} {separator}: {}",
                    s.message
                );
            }
            other => panic!("unexpected {other}"),
        }
    }

    // An object stored under the old CRD (no separator rule).
    let crds_api: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube::Api::all(w.client.clone());
    let current = crds_api
        .get("mcpupstreams.toolgate.dev")
        .await
        .expect("crd");
    let mut old = serde_json::to_value(&current).expect("json");
    let spec_schema =
        &mut old["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec_schema["x-kubernetes-validations"]
        .as_array_mut()
        .expect("rules")
        .retain(|r| !r["rule"].as_str().unwrap_or_default().contains("separator"));
    crds_api
        .replace(
            "mcpupstreams.toolgate.dev",
            &PostParams::default(),
            &serde_json::from_value(old).expect("crd"),
        )
        .await
        .expect("old CRD");
    w.upstreams("team-b")
        .create(&PostParams::default(), &hijack("pet", "s__"))
        .await
        .expect("stored under the old CRD");
    let mut restored = current.clone();
    restored.metadata.resource_version = None;
    crds_api
        .replace(
            "mcpupstreams.toolgate.dev",
            &PostParams::default(),
            &restored,
        )
        .await
        .expect("current CRD");

    let op = w.operator("operator", false);
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    wait_ready(&w, NS, "pets", "True", "Published").await;
    let u = wait_ready(&w, "team-b", "attacker", "False", "InvalidSettings").await;
    let (_, _, msg) = cond(&u, "Compiled").expect("compiled");
    assert!(msg.contains("spec.naming.separator"), "{msg}");
    let index = w.index().await;
    assert!(
        index.upstreams.iter().all(|e| e.prefix != "pet"),
        "{index:?}"
    );
    op.stop().await;
}

/// A header the gateway could not send is refused where it is written,
/// naming the field, instead of surfacing as "served by 0 replicas".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsendable_http_header_is_refused_naming_the_field() {
    let w = World::new().await;
    let with_headers = |name: &str, headers: serde_json::Value| -> crds::McpUpstream {
        serde_json::from_value(json!({
            "apiVersion": "toolgate.dev/v1alpha1",
            "kind": "McpUpstream",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "toolPrefix": name,
                "baseUrl": "http://pets:8080",
                "http": {"headers": headers},
                "openapi": {"inline": PETSTORE},
            },
        }))
        .expect("typed")
    };
    let err = w
        .upstreams(NS)
        .create(
            &PostParams::default(),
            &with_headers("split", json!({"x-a": "a\nb"})),
        )
        .await
        .expect_err("a line break in a header value is refused");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(s.message.contains("spec.http.headers"), "{}", s.message);
        }
        other => panic!("unexpected {other}"),
    }
    // Header names are not constrained by the schema; the operator says.
    w.upstreams(NS)
        .create(
            &PostParams::default(),
            &with_headers("spaced", json!({"bad name": "x"})),
        )
        .await
        .expect("stored");
    let op = w.operator("operator", false);
    let u = wait_ready(&w, NS, "spaced", "False", "InvalidSettings").await;
    let (_, _, msg) = cond(&u, "Ready").expect("ready");
    assert!(msg.contains("spec.http.headers"), "{msg}");
    assert!(msg.contains("bad name"), "{msg}");
    op.stop().await;
}

/// An overlay that leaves the document invalid is named as the cause (not
/// the document), and only it: `fix` is not blamed for `fix-2`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlay_that_breaks_the_document_is_blamed_and_only_it() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    w.apply_overlay(NS, "fix", json!({
        "upstreamRef": {"name": "pets"},
        "order": 1,
        "inline": "overlay: 1.0.0\ninfo: {title: fix, version: '1'}\nactions:\n  - target: $.info\n    update: {description: x}\n",
    }))
    .await;
    w.apply_overlay(NS, "fix-2", json!({
        "upstreamRef": {"name": "pets"},
        "order": 2,
        "inline": "overlay: 1.0.0\ninfo: {title: fix-2, version: '1'}\nactions:\n  - target: $\n    update: {openapi: '9.9.9'}\n",
    }))
    .await;
    let u = wait_ready(&w, NS, "pets", "False", "OverlayInvalid").await;
    let (_, _, msg) = cond(&u, "OverlaysApplied").expect("overlays");
    assert!(msg.contains("team-a/fix-2"), "{msg}");
    assert!(!msg.contains("test.json") && msg.contains("9.9.9"), "{msg}");
    eventually("fix-2 blamed", WAIT, || async {
        let o = w.overlays(NS).get("fix-2").await.ok()?;
        let (status, reason, _) = overlay_cond(&o, "Ready")?;
        (status == "False" && reason == "OverlayInvalid").then_some(())
    })
    .await;
    let o = eventually("fix reported", WAIT, || async {
        let o = w.overlays(NS).get("fix").await.ok()?;
        overlay_cond(&o, "Ready").map(|c| (c, o))
    })
    .await;
    assert_eq!(
        (o.0 .0.as_str(), o.0 .1.as_str()),
        ("True", "Applied"),
        "{:?}",
        o.0
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_operator_writes_nothing_when_nothing_changed() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    w.apply_overlay(NS, "o", json!({
        "upstreamRef": {"name": "pets"},
        "inline": "overlay: 1.0.0\ninfo: {title: o, version: '1'}\nactions:\n  - target: $.info\n    update: {description: x}\n",
    }))
    .await;
    wait_ready(&w, NS, "pets", "True", "Published").await;
    eventually("overlay ready", WAIT, || async {
        let o = w.overlays(NS).get("o").await.ok()?;
        (overlay_cond(&o, "Ready")?.0 == "True").then_some(())
    })
    .await;
    settle(&w, "operator", Duration::from_millis(700)).await;
    let index_before = w.index().await;
    let pets_before = w.upstream(NS, "pets").await;
    let overlay_before = w.overlays(NS).get("o").await.expect("o");
    op.stop().await;

    w.server.reset_requests();
    let op = w.operator("operator-2", false);
    // Give it time to resync everything.
    eventually("the restarted operator reconciled", WAIT, || async {
        (w.server.count(|r| {
            r.user == "operator-2"
                && r.verb == "list"
                && r.resource == "mcpoverlays"
                && !r.namespace.is_empty()
        }) > 0)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(writes_by(&w, "operator-2"), 0, "{:#?}", w.server.requests());
    assert_eq!(w.index().await, index_before);
    assert_eq!(w.upstream(NS, "pets").await.status, pets_before.status);
    assert_eq!(
        w.overlays(NS).get("o").await.expect("o").status,
        overlay_before.status
    );
    op.stop().await;
}

/// An overlay can be reconciled before the upstream cache holds its first
/// list (the two caches fill from separate watches). Its reconcile then
/// waits for that list; it must be woken when the list arrives. Slowing the
/// operator's upstream LISTs forces the ordering that otherwise happens
/// only under load (it lost the overlay's status about once in six runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlay_reconciled_before_the_upstream_cache_is_listed_gets_its_status() {
    let w = World::new().await;
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    w.apply_overlay(NS, "o", json!({
        "upstreamRef": {"name": "pets"},
        "inline": "overlay: 1.0.0\ninfo: {title: o, version: '1'}\nactions:\n  - target: $.info\n    update: {description: x}\n",
    }))
    .await;
    w.server.delay(
        |r| r.user == "operator" && r.verb == "list" && r.resource == "mcpupstreams",
        Duration::from_millis(1500),
    );
    let op = w.operator("operator", false);
    wait_ready(&w, NS, "pets", "True", "Published").await;
    eventually("overlay ready", WAIT, || async {
        let o = w.overlays(NS).get("o").await.ok()?;
        (overlay_cond(&o, "Ready")?.0 == "True").then_some(())
    })
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_recovers_from_cut_watch_streams() {
    let (w, op) = World::with_pets().await;
    w.server.cut_watches();
    w.server.compact();
    w.apply_upstream(NS, "more", inline(PETSTORE, "more")).await;
    wait_ready(&w, NS, "more", "True", "Published").await;
    w.server.cut_watches();
    w.upstreams(NS)
        .delete("more", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("unpublished after the cut", WAIT, || async {
        w.index().await.entry("more").is_none().then_some(())
    })
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_replicas_only_the_leader_writes() {
    let w = World::new().await;
    let a = w.operator("replica-a", true);
    // Let replica-a take the lease first, so the roles are known.
    eventually("replica-a leads", WAIT, || async {
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(w.client.clone(), PUBLISH_NS);
        let l = leases.get_opt("toolgate-operator").await.ok()??;
        (l.spec?.holder_identity.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    let b = w.operator("replica-b", true);
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    wait_ready(&w, NS, "pets", "True", "Published").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(writes_by(&w, "replica-a") > 0);
    assert_eq!(writes_by(&w, "replica-b"), 0, "{:#?}", w.server.requests());
    // Only the leader says so, and only it counts upstreams.
    let (ma, mb) = (a.metrics().await, b.metrics().await);
    assert_eq!(ma.get("toolgate_operator_leader", &[]), 1.0);
    assert_eq!(mb.get("toolgate_operator_leader", &[]), 0.0);
    let published = [("reason", "Published")];
    assert_eq!(ma.get("toolgate_operator_upstreams", &published), 1.0);
    assert_eq!(mb.get("toolgate_operator_upstreams", &published), 0.0);

    // The leader goes away: the standby takes over and serves changes.
    a.stop().await;
    w.apply_upstream(NS, "more", inline(PETSTORE, "more")).await;
    eventually(
        "replica-b publishes after taking over",
        Duration::from_secs(40),
        || async {
            let u = w.upstreams(NS).get_opt("more").await.ok()??;
            (cond(&u, "Ready")?.0 == "True").then_some(())
        },
    )
    .await;
    assert!(writes_by(&w, "replica-b") > 0);
    assert_eq!(b.metrics().await.get("toolgate_operator_leader", &[]), 1.0);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlay_on_an_upstream_without_a_document_says_so_until_it_applies() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    let (base, _) = spec_server().await;
    w.apply_upstream(
        NS,
        "later",
        json!({
            "toolPrefix": "later",
            "baseUrl": "http://later:8080",
            "openapi": {"url": format!("{base}/missing.yaml")},
        }),
    )
    .await;
    wait_ready(&w, NS, "later", "False", "SpecNotFound").await;
    w.apply_overlay(NS, "hide-writes", json!({
        "upstreamRef": {"name": "later"},
        "inline": "overlay: 1.0.0\ninfo: {title: hide, version: '1'}\nactions:\n  - target: $.paths['/pets'].post\n    update: {x-mcp-enabled: false}\n",
    }))
    .await;
    // The upstream never applies it: the overlay's status says why instead
    // of waiting for a report that will not come.
    let o = eventually("overlay is UpstreamNotReady", WAIT, || async {
        let o = w.overlays(NS).get("hide-writes").await.ok()?;
        let (s, r, _) = overlay_cond(&o, "Ready")?;
        (s == "False" && r == "UpstreamNotReady").then_some(o)
    })
    .await;
    let (_, _, msg) = overlay_cond(&o, "Ready").expect("ready");
    assert!(
        msg.starts_with("later: not applied: no OpenAPI document (SpecNotFound: "),
        "{msg}"
    );
    assert!(msg.contains(&format!("{base}/missing.yaml")), "{msg}");
    assert!(o.status.expect("status").applied_to.is_empty());

    // Once the upstream has a document, the overlay applies.
    w.upstreams(NS)
        .patch(
            "later",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"openapi": {"url": format!("{base}/openapi.yaml")}}})),
        )
        .await
        .expect("patch");
    let u = wait_ready(&w, NS, "later", "True", "Published").await;
    assert_eq!(u.status.and_then(|s| s.tool_count), Some(2));
    eventually("overlay applied", WAIT, || async {
        let o = w.overlays(NS).get("hide-writes").await.ok()?;
        let (s, r, _) = overlay_cond(&o, "Ready")?;
        (s == "True" && r == "Applied" && o.status?.applied_to == ["later"]).then_some(())
    })
    .await;
    op.stop().await;
}

/// Status is written by server-side apply under the operator's field
/// manager: a field it stops setting goes (no nulls written by hand), and
/// a field someone else edits is taken back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_server_side_applied_and_edits_by_others_are_taken_back() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    w.apply_overlay(NS, "miss", json!({
        "upstreamRef": {"name": "pets"},
        "inline": "overlay: 1.0.0\ninfo: {title: miss, version: '1'}\nactions:\n  - target: $.paths['/nowhere']\n    update: {description: x}\n",
    }))
    .await;
    let u = eventually("a warning for the unmatched target", WAIT, || async {
        let u = w.upstream(NS, "pets").await;
        let s = u.status.as_ref()?;
        (cond(&u, "Ready")?.0 == "True" && s.warning_count == Some(1)).then_some(u)
    })
    .await;
    let entries = u.metadata.managed_fields.clone().unwrap_or_default();
    assert!(
        entries
            .iter()
            .any(|m| m.manager.as_deref() == Some("toolgate-operator")
                && m.operation.as_deref() == Some("Apply")
                && m.subresource.as_deref() == Some("status")),
        "{entries:#?}"
    );
    let o = eventually("the overlay's status", WAIT, || async {
        let o = w.overlays(NS).get("miss").await.ok()?;
        o.status
            .as_ref()
            .filter(|s| !s.unmatched_targets.is_empty())?;
        Some(o)
    })
    .await;
    assert!(o
        .metadata
        .managed_fields
        .unwrap_or_default()
        .iter()
        .any(|m| m.manager.as_deref() == Some("toolgate-operator")
            && m.operation.as_deref() == Some("Apply")));

    // The overlay goes: so does the warning, though nobody writes null.
    w.overlays(NS)
        .delete("miss", &DeleteParams::default())
        .await
        .expect("delete overlay");
    eventually("the warning is gone", WAIT, || async {
        let s = w.upstream(NS, "pets").await.status?;
        (s.warning_count == Some(0) && s.warnings.is_empty()).then_some(())
    })
    .await;

    // Someone else edits the status, changing a field the operator sets
    // and adding one it does not: the operator takes both back.
    let hash = w
        .upstream(NS, "pets")
        .await
        .status
        .and_then(|s| s.catalog_hash);
    assert!(hash.is_some());
    w.upstreams(NS)
        .patch_status(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"catalogHash": "edited", "warnings": ["edited"]}})),
        )
        .await
        .expect("edit status");
    eventually("the edit is undone", WAIT, || async {
        let s = w.upstream(NS, "pets").await.status?;
        (s.catalog_hash == hash && s.warnings.is_empty()).then_some(())
    })
    .await;
    op.stop().await;
}

/// Two operations that compile to one name: the condition tells the user
/// the extension that renames one (`x-mcp-tool-name`, not `x-mcp-name`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_conflict_names_the_extension_that_resolves_it() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    let doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "clash", "version": "1"},
        "paths": {
            "/a": {"get": {"operationId": "same", "responses": {"200": {"description": "ok"}}}},
            "/b": {"get": {"operationId": "same", "responses": {"200": {"description": "ok"}}}},
        },
    });
    w.apply_upstream(NS, "clash", inline(&doc.to_string(), "clash"))
        .await;
    let u = wait_ready(&w, NS, "clash", "False", "NameConflict").await;
    let (_, _, msg) = cond(&u, "Compiled").expect("Compiled");
    assert!(
        msg.contains("GET /a and GET /b") || msg.contains("get /a and get /b"),
        "{msg}"
    );
    assert!(msg.contains("rename one with x-mcp-tool-name"), "{msg}");
    assert!(msg.contains("conflictResolution: qualify"), "{msg}");

    // `qualify`, as the CRD schema takes it, keeps both operations and
    // says so in the status warnings.
    w.upstreams(NS)
        .patch(
            "clash",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"naming": {"conflictResolution": "qualify"}}})),
        )
        .await
        .expect("patch naming");
    let u = wait_ready(&w, NS, "clash", "True", "Published").await;
    let status = u.status.expect("status");
    assert_eq!(status.tool_count, Some(2));
    let qualified: Vec<&String> = status
        .warnings
        .iter()
        .filter(|m| m.starts_with("NameQualified: "))
        .collect();
    assert_eq!(qualified.len(), 2, "{:?}", status.warnings);
    op.stop().await;
}

/// `--max-upstream-bytes` bounds the catalog as the gateway holds it
/// (uncompressed JSON), not its gzipped size: a catalog that compresses
/// well but is large fails with CatalogTooLarge, and the last good version
/// keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_over_the_uncompressed_cap_fails_and_the_last_good_one_serves() {
    const CAP: usize = 64 * 1024;
    let w = World::new().await;
    let op = w.operator_with("operator", false, |o| o.max_upstream_bytes = CAP);
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    wait_ready(&w, NS, "pets", "True", "Published").await;
    let good = w.index().await.entry("pets").cloned().expect("published");
    assert!(good.tool_count > 0);

    // 400 near-identical operations: well over the cap as JSON, a few KiB
    // gzipped.
    let paths: serde_json::Map<String, serde_json::Value> = (0..400)
        .map(|i| {
            (
                format!("/things/{i}"),
                json!({"get": {"operationId": format!("getThing{i}"),
                    "description": "Returns the thing. ".repeat(8),
                    "responses": {"200": {"description": "ok"}}}}),
            )
        })
        .collect();
    let big = json!({"openapi": "3.0.3", "info": {"title": "big", "version": "1"},
        "paths": paths})
    .to_string();
    w.upstreams(NS)
        .patch(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"openapi": {"inline": big}}})),
        )
        .await
        .expect("patch");
    let u = wait_ready(&w, NS, "pets", "False", "CatalogTooLarge").await;
    let (_, _, msg) = cond(&u, "Ready").expect("Ready");
    assert!(
        msg.contains("bytes of JSON (400 tools)") && msg.contains(&format!("cap of {CAP} bytes")),
        "{msg}"
    );
    let size: usize = msg
        .split("catalog is ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a size in {msg}"));
    assert!(size > CAP, "{msg}");
    let still = w
        .index()
        .await
        .entry("pets")
        .cloned()
        .expect("still published");
    assert_eq!(still.hash, good.hash, "the last good version keeps serving");
    op.stop().await;
}

/// `spec.rateLimit`, `spec.forwardIdentity` and `spec.auth.type:
/// tokenExchange` reach the gateway in the published runtime settings,
/// credentials as references to the copied Secret keys; the API server
/// refuses limits that limit nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_identity_and_token_exchange_are_published() {
    use catalog::access::{ForwardIdentity, RateLimit};
    use catalog::runtime::AuthConfig;

    let w = World::new().await;
    apply_secret(
        &w,
        NS,
        "pets-idp",
        json!({"clientId": "toolgate", "clientSecret": "idp-s3cret"}),
    )
    .await;
    let mut spec = inline(PETSTORE, "pets");
    spec["auth"] = json!({
        "type": "tokenExchange",
        "secretRef": {"name": "pets-idp"},
        "tokenUrl": "https://idp.example.com/token",
        "audience": "pets-api",
        "scopes": ["pets.read"],
    });
    spec["rateLimit"] = json!({"requestsPerSecond": 2.5, "burst": 5});
    spec["forwardIdentity"] = json!({"header": "X-Forwarded-User"});
    w.apply_upstream(NS, "pets", spec.clone()).await;
    let op = w.operator("operator", false);
    wait_ready(&w, NS, "pets", "True", "Published").await;

    let index = w.index().await;
    let published = w.read_published(index.entry("pets").expect("entry")).await;
    let rt = &published.runtime;
    assert_eq!(
        rt.rate_limit,
        Some(RateLimit {
            requests_per_second: 2.5,
            burst: Some(5)
        })
    );
    assert_eq!(
        rt.forward_identity,
        Some(ForwardIdentity {
            header: "X-Forwarded-User".into(),
            issuer_header: None,
        })
    );
    let AuthConfig::TokenExchange {
        token_url,
        client_id,
        client_secret,
        audience,
        scopes,
        ..
    } = &rt.auth
    else {
        panic!("not token exchange: {:?}", rt.auth);
    };
    assert_eq!(token_url, "https://idp.example.com/token");
    assert_eq!(audience.as_deref(), Some("pets-api"));
    assert_eq!(scopes, &["pets.read"]);
    // References to the copied keys, never the values.
    for r in [client_id, client_secret] {
        assert!(r.secret_key.is_some() && r.value.is_none(), "{r:?}");
    }
    assert!(!format!("{rt:?}").contains("idp-s3cret"));

    for (name, patch, field) in [
        (
            "zero",
            json!({"requestsPerSecond": 0}),
            "rateLimit.requestsPerSecond",
        ),
        (
            "noburst",
            json!({"requestsPerSecond": 1, "burst": 0}),
            "rateLimit.burst",
        ),
    ] {
        let mut bad = inline(PETSTORE, name);
        bad["rateLimit"] = patch;
        let u: crds::McpUpstream = serde_json::from_value(json!({
            "apiVersion": "toolgate.dev/v1alpha1", "kind": "McpUpstream",
            "metadata": {"name": name, "namespace": NS}, "spec": bad,
        }))
        .expect("typed");
        match w.upstreams(NS).create(&PostParams::default(), &u).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422);
                assert!(s.message.contains(field), "{}", s.message);
            }
            other => panic!("{name}: expected 422, got {other:?}"),
        }
    }
    // A header the gateway sets itself passes the schema; the operator says.
    let mut own = inline(PETSTORE, "own");
    own["forwardIdentity"] = json!({"header": "Authorization"});
    w.apply_upstream(NS, "own", own).await;
    let u = wait_ready(&w, NS, "own", "False", "InvalidSettings").await;
    let (_, _, msg) = cond(&u, "Ready").expect("ready");
    assert!(msg.contains("spec.forwardIdentity.header"), "{msg}");
    op.stop().await;
}

/// `spec.access` reaches the gateway in the published runtime config; a
/// rule that does not compile fails the upstream naming the field and the
/// CEL error, and the last good version, rules included, keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_rules_are_published_and_a_bad_rule_keeps_the_last_good_version() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    let mut spec = inline(PETSTORE, "pets");
    spec["access"] = json!({"rules": [
        {"scopes": ["pets.read"], "tools": ["list_*", "fetch_*"], "readOnly": true},
        {"when": "\"sre\" in claims.groups"},
    ]});
    w.apply_upstream(NS, "pets", spec).await;
    wait_ready(&w, NS, "pets", "True", "Published").await;
    let good = w.index().await.entry("pets").cloned().expect("published");
    let published = w.read_published(&good).await;
    let access = published.runtime.access.clone().expect("access published");
    assert_eq!(access.rules.len(), 2);
    assert_eq!(access.rules[0].tools, ["list_*", "fetch_*"]);
    assert!(access.rules[0].read_only);
    // The API server fills in the default glob.
    assert_eq!(access.rules[1].tools, ["*"]);

    // The schema bounds what a tenant may write.
    let err = w
        .upstreams(NS)
        .patch(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"access": {"rules": [{"tools": [""]}]}}})),
        )
        .await
        .expect_err("an empty glob is refused");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains("spec.access.rules[0].tools[0]"),
                "{}",
                s.message
            );
        }
        other => panic!("unexpected {other}"),
    }

    w.upstreams(NS)
        .patch(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"access": {"rules": [
                {"scopes": ["pets.read"]},
                {"when": "claims.groups.exists(g, "},
            ]}}})),
        )
        .await
        .expect("patch");
    let u = wait_ready(&w, NS, "pets", "False", "InvalidAccessRule").await;
    let (_, _, msg) = cond(&u, "Ready").expect("Ready");
    assert!(
        msg.starts_with("spec.access.rules[1].when: invalid CEL"),
        "{msg}"
    );
    assert!(msg.contains("still serving the last good catalog"), "{msg}");
    let (s, r, _) = cond(&u, "Published").expect("Published");
    assert_eq!((s.as_str(), r.as_str()), ("True", "Stale"));
    assert_pets_still_serve(&w, &good, &access).await;

    // Issue 26: a rule inside every syntactic bound whose evaluation
    // would build gigabytes (900 zeros mapped to themselves, each then
    // concatenated eight times) once took every replica down on its first
    // listing. It is refused here, by its cost, before it is published.
    let zeros = vec!["0"; 900].join(",");
    let bomb = format!("[{zeros}].map(x, [{zeros}]).map(y, y+y+y+y+y+y+y+y).size() > 0");
    assert!(bomb.len() < 4096, "inside the documented size bound");
    w.upstreams(NS)
        .patch(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"access": {"rules": [{"when": bomb}]}}})),
        )
        .await
        .expect("patch");
    // The status of this generation, not the previous patch's.
    let u = wait_ready(&w, NS, "pets", "False", "InvalidAccessRule").await;
    let (_, _, msg) = cond(&u, "Ready").expect("Ready");
    assert!(msg.starts_with("spec.access.rules[0].when: "), "{msg}");
    assert!(
        msg.contains("may build a value") || msg.contains("may cost"),
        "{msg}"
    );
    assert_pets_still_serve(&w, &good, &access).await;
    op.stop().await;
}

/// The published `pets` is still `good`, with the access policy `access`.
async fn assert_pets_still_serve(
    w: &World,
    good: &catalog::publish::IndexEntry,
    access: &catalog::access::AccessPolicy,
) {
    let still = w
        .index()
        .await
        .entry("pets")
        .cloned()
        .expect("still published");
    assert_eq!(&still, good, "the last good version keeps serving");
    assert_eq!(
        w.read_published(&still).await.runtime.access.as_ref(),
        Some(access)
    );
}
