//! The condition table, case by case and as a whole.

use super::*;
use std::sync::OnceLock;

fn fail(reason: Reason) -> Failure {
    Failure::new(reason, format!("{reason} message"))
}

fn summary() -> Arc<Summary> {
    Arc::new(Summary {
        catalog_hash: "0123456789abcdef".into(),
        prefix: "pets".into(),
        tools: 3,
        operations: 4,
        rejected: 1,
        warnings: 2,
        recorded: Default::default(),
        listing: Default::default(),
        unmatched: vec![],
        encoded_size: OnceLock::new(),
    })
}

fn entry() -> IndexEntry {
    IndexEntry {
        prefix: "pets".into(),
        source: "ns/pets".into(),
        hash: "h".into(),
        catalog_hash: "0123456789abcdef".into(),
        tool_count: 3,
        chunks: vec![],
        credentials: vec![],
    }
}

/// Everything went well and both gateway replicas serve it.
fn good() -> Outcome {
    Outcome {
        spec: Ok(()),
        overlays: Some(Ok(vec!["ns/a".into(), "ns/b".into()])),
        compiled: Some(Ok(summary())),
        prefix: Ok(()),
        settings: Ok(()),
        published: Published::Current(entry()),
        served: Some(ServedBy {
            serving: 2,
            live: 2,
        }),
    }
}

fn by_type<'a>(conds: &'a [Cond], t: &str) -> &'a Cond {
    conds.iter().find(|c| c.type_ == t).expect(t)
}

#[test]
fn a_served_upstream_is_ready_with_every_stage_true() {
    let conds = conditions(&good());
    let order: Vec<&str> = conds.iter().map(|c| c.type_).collect();
    assert_eq!(
        order,
        [
            types::READY,
            types::SPEC_RESOLVED,
            types::OVERLAYS_APPLIED,
            types::COMPILED,
            types::PREFIX_ACCEPTED,
            types::PUBLISHED
        ]
    );
    assert!(conds.iter().all(|c| c.status == Some(true)), "{conds:#?}");
    assert_eq!(conds[0].reason, Reason::Published);
    assert_eq!(conds[0].message, "3 tools published under prefix \"pets\"");
    assert_eq!(
        by_type(&conds, types::OVERLAYS_APPLIED).message,
        "applied in order: ns/a, ns/b"
    );
    assert_eq!(
        by_type(&conds, types::COMPILED).message,
        "3 tools from 4 operations (1 rejected, 2 warnings)"
    );
    assert!(by_type(&conds, types::PUBLISHED)
        .message
        .contains("served by 2 of 2 gateway replicas"));
}

#[test]
fn no_overlays_says_so() {
    let o = Outcome {
        overlays: Some(Ok(vec![])),
        ..good()
    };
    assert_eq!(
        by_type(&conditions(&o), types::OVERLAYS_APPLIED).message,
        "no overlays"
    );
}

#[test]
fn published_but_not_yet_served_by_every_live_replica_is_not_ready() {
    let o = Outcome {
        served: Some(ServedBy {
            serving: 1,
            live: 2,
        }),
        ..good()
    };
    let conds = conditions(&o);
    for t in [types::READY, types::PUBLISHED] {
        let c = by_type(&conds, t);
        assert_eq!((c.status, c.reason), (Some(false), Reason::NotServed));
        assert!(c.message.contains("served by 1 of 2"), "{}", c.message);
    }
}

#[test]
fn without_live_gateway_replicas_published_is_ready() {
    for served in [
        None,
        Some(ServedBy {
            serving: 0,
            live: 0,
        }),
    ] {
        let conds = conditions(&Outcome { served, ..good() });
        assert_eq!(conds[0].status, Some(true));
        assert!(conds[0].reason == Reason::Published);
        assert!(by_type(&conds, types::PUBLISHED)
            .message
            .contains("no gateway replica reports what it serves"));
    }
}

#[test]
fn a_missing_document_leaves_later_stages_unknown() {
    let o = Outcome {
        spec: Err(fail(Reason::SpecNotFound)),
        overlays: None,
        compiled: None,
        published: Published::Not(fail(Reason::SpecNotFound)),
        served: None,
        ..good()
    };
    let conds = conditions(&o);
    assert_eq!(
        (conds[0].status, conds[0].reason),
        (Some(false), Reason::SpecNotFound)
    );
    for t in [types::OVERLAYS_APPLIED, types::COMPILED] {
        let c = by_type(&conds, t);
        assert_eq!((c.status, c.reason), (None, Reason::Reconciling));
    }
    assert_eq!(by_type(&conds, types::PUBLISHED).status, Some(false));
}

#[test]
fn a_failed_new_version_is_not_ready_but_the_last_good_one_is_published_stale() {
    let o = Outcome {
        compiled: Some(Err(fail(Reason::SpecInvalid))),
        published: Published::Stale(entry(), fail(Reason::SpecInvalid)),
        ..good()
    };
    let conds = conditions(&o);
    assert_eq!(
        (conds[0].status, conds[0].reason),
        (Some(false), Reason::SpecInvalid)
    );
    assert!(conds[0]
        .message
        .ends_with("still serving the last good catalog 0123456789ab (3 tools)"));
    let p = by_type(&conds, types::PUBLISHED);
    assert_eq!((p.status, p.reason), (Some(true), Reason::Stale));
    assert!(p.message.contains("(SpecInvalid)"), "{}", p.message);
    assert_eq!(by_type(&conds, types::COMPILED).status, Some(false));
}

#[test]
fn a_lost_prefix_is_reported_on_its_own_condition_and_ready() {
    let o = Outcome {
        prefix: Err(fail(Reason::PrefixConflict)),
        published: Published::Not(fail(Reason::PrefixConflict)),
        served: None,
        ..good()
    };
    let conds = conditions(&o);
    for t in [types::READY, types::PREFIX_ACCEPTED, types::PUBLISHED] {
        let c = by_type(&conds, t);
        assert_eq!((c.status, c.reason), (Some(false), Reason::PrefixConflict));
    }
    assert_eq!(by_type(&conds, types::COMPILED).status, Some(true));
}

#[test]
fn bad_settings_show_on_ready_only() {
    let o = Outcome {
        settings: Err(fail(Reason::SecretNotFound)),
        published: Published::Not(fail(Reason::SecretNotFound)),
        served: None,
        ..good()
    };
    let conds = conditions(&o);
    assert_eq!(conds[0].reason, Reason::SecretNotFound);
    for t in [
        types::SPEC_RESOLVED,
        types::OVERLAYS_APPLIED,
        types::COMPILED,
        types::PREFIX_ACCEPTED,
    ] {
        assert_eq!(by_type(&conds, t).status, Some(true), "{t}");
    }
}

#[test]
fn a_publishing_failure_without_an_earlier_one_is_readys_reason() {
    let o = Outcome {
        published: Published::Not(fail(Reason::CatalogTooLarge)),
        served: None,
        ..good()
    };
    let conds = conditions(&o);
    assert_eq!(
        (conds[0].status, conds[0].reason),
        (Some(false), Reason::CatalogTooLarge)
    );
}

/// Every combination of stage results: the set always has each type
/// once, Ready first; Ready is True exactly when nothing failed and
/// the current version is published and served; otherwise its reason
/// is the first failure in pipeline order.
#[test]
fn the_whole_truth_table_holds_its_invariants() {
    let specs = [Ok(()), Err(fail(Reason::SpecNotFound))];
    let overlays = [
        None,
        Some(Ok(vec![])),
        Some(Err(fail(Reason::OverlayInvalid))),
    ];
    let compiled = [
        None,
        Some(Ok(summary())),
        Some(Err(fail(Reason::SpecInvalid))),
    ];
    let prefixes = [Ok(()), Err(fail(Reason::PrefixConflict))];
    let settings = [Ok(()), Err(fail(Reason::SecretNotFound))];
    let published = || {
        [
            Published::Current(entry()),
            Published::Stale(entry(), fail(Reason::CatalogTooLarge)),
            Published::Not(fail(Reason::PublishFailed)),
        ]
    };
    let served = [
        None,
        Some(ServedBy {
            serving: 1,
            live: 2,
        }),
        Some(ServedBy {
            serving: 2,
            live: 2,
        }),
    ];
    let mut checked = 0;
    for spec in &specs {
        for ov in &overlays {
            for co in &compiled {
                for pr in &prefixes {
                    for st in &settings {
                        for pi in 0..published().len() {
                            for sv in &served {
                                let o = Outcome {
                                    spec: spec.clone(),
                                    overlays: ov.clone(),
                                    compiled: co.clone(),
                                    prefix: pr.clone(),
                                    settings: st.clone(),
                                    published: published().into_iter().nth(pi).expect("in range"),
                                    served: *sv,
                                };
                                check(&o);
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 2 * 3 * 3 * 2 * 2 * 3 * 3);
}

fn check(o: &Outcome) {
    let conds = conditions(o);
    let got: Vec<&str> = conds.iter().map(|c| c.type_).collect();
    let mut sorted = got.clone();
    sorted.sort_unstable();
    let mut all = types::ALL.to_vec();
    all.sort_unstable();
    assert_eq!(sorted, all);
    assert_eq!(got[0], types::READY);
    let first_failure = [
        o.spec.as_ref().err(),
        o.overlays.as_ref().and_then(|r| r.as_ref().err()),
        o.compiled.as_ref().and_then(|r| r.as_ref().err()),
        o.prefix.as_ref().err(),
        o.settings.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    .next();
    let under_served = matches!(o.served, Some(ServedBy { serving, live }) if serving < live);
    let ready = &conds[0];
    match (first_failure, &o.published) {
        (Some(f), _) => {
            assert_eq!(ready.status, Some(false));
            assert_eq!(ready.reason, f.reason);
        }
        (None, Published::Current(_)) => {
            assert_eq!(ready.status, Some(!under_served));
        }
        (None, Published::Stale(_, f) | Published::Not(f)) => {
            assert_eq!(ready.status, Some(false));
            assert_eq!(ready.reason, f.reason);
        }
    }
}
