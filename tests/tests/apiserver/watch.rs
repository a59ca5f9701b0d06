//! Watches: replay, bookmarks, 410 Gone, cut streams, streaming lists.

use super::*;

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
async fn history_is_bounded_in_bytes_and_older_versions_get_410() {
    let s = ApiServer::builder()
        .history_bytes_limit(200_000)
        .serve()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(s.client().unwrap(), "default");
    let big = "x".repeat(50_000);
    let first = api
        .create(&PostParams::default(), &cm("big", &[], &[("blob", &big)]))
        .await
        .unwrap();
    for i in 0..5 {
        let value = format!("{i}{big}");
        api.patch(
            "big",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"blob": value}})),
        )
        .await
        .unwrap();
    }
    let mut stream = api
        .watch(&WatchParams::default(), &first.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!(e.code, 410),
        other => panic!("expected 410 Gone, got {other:?}"),
    }
    let recent = api.get("big").await.unwrap().resource_version().unwrap();
    let mut ok = api
        .watch(&WatchParams::default().timeout(1), &recent)
        .await
        .unwrap()
        .boxed();
    while let Some(ev) = ok.try_next().await.unwrap() {
        assert!(matches!(ev, WatchEvent::Bookmark(_)), "{ev:?}");
    }
}

#[tokio::test]
async fn a_selector_watch_sees_objects_enter_and_leave_the_selection() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let start = api
        .create(&PostParams::default(), &cm("m", &[("role", "chunk")], &[]))
        .await
        .unwrap();
    api.patch(
        "m",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"role": "stale"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "m",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"role": "chunk"}}})),
    )
    .await
    .unwrap();
    let wp = WatchParams::default()
        .labels("role=chunk")
        .timeout(1)
        .disable_bookmarks();
    let events: Vec<String> = api
        .watch(&wp, &start.resource_version().unwrap())
        .await
        .unwrap()
        .map(|e| match e.unwrap() {
            WatchEvent::Added(o) => format!("ADDED {}", o.labels()["role"]),
            WatchEvent::Modified(o) => format!("MODIFIED {}", o.labels()["role"]),
            WatchEvent::Deleted(o) => format!("DELETED {}", o.labels()["role"]),
            other => format!("{other:?}"),
        })
        .collect()
        .await;
    assert_eq!(events, vec!["DELETED stale", "ADDED chunk"]);
}
