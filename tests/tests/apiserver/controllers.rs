//! kube-runtime controllers and Lease-based leader election.

use operator::leader::Elector;

use super::*;

#[tokio::test]
async fn two_clients_racing_for_a_lease_elect_exactly_one_leader() {
    let (s, _) = server().await;
    // The operator's own elector, one round at a time.
    let elector = |who: &str| Elector::new(s.client_as(who).unwrap(), "default", "leader", who);
    let (ea, eb) = (elector("replica-a"), elector("replica-b"));
    let a: Api<Lease> = Api::namespaced(s.client_as("replica-a").unwrap(), "default");
    let b: Api<Lease> = Api::namespaced(s.client_as("replica-b").unwrap(), "default");
    for _ in 0..10 {
        let (ra, rb) = tokio::join!(ea.try_acquire_or_renew(), eb.try_acquire_or_renew());
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
    // Request accounting by user tells the replicas apart: the holder wrote
    // every round, the other at most its losing create.
    let writes = |user: &str| {
        s.count(|r| {
            r.user == user
                && r.resource == "leases"
                && matches!(r.verb.as_str(), "create" | "update")
        })
    };
    let other = if holder == "replica-a" {
        "replica-b"
    } else {
        "replica-a"
    };
    assert_eq!(writes(&holder), 10);
    assert!(
        writes(other) <= 1,
        "{} writes by the follower",
        writes(other)
    );
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
    // A reconcile already in flight (the relist after the cut and the
    // patch's event can both start one) may still land a write: let those
    // settle first, then require silence.
    let mut writes = s.count(|r| r.field_manager == "widget-controller");
    let settle = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = s.count(|r| r.field_manager == "widget-controller");
        if now == writes {
            break;
        }
        assert!(
            settle.elapsed() < Duration::from_secs(10),
            "the controller kept writing ({now} writes)"
        );
        writes = now;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        s.count(|r| r.field_manager == "widget-controller"),
        writes,
        "a steady state writes nothing"
    );
    task.abort();
}
