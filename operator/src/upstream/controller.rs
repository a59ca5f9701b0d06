//! Wiring of the McpUpstream and McpOverlay controllers: what they watch,
//! and which upstreams each watched change wakes.

use std::sync::Arc;
use std::time::Duration;

use crds::conditions::Reason;
use crds::{McpOverlay, McpUpstream};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, reflector, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::context::{Context, UpstreamChange};
use crate::error::Error;
use crate::sources;
use crate::sources::SecretAccess;
use crate::status;
use crate::sync::lock;

/// Runs the McpUpstream and McpOverlay controllers until `stop`.
pub async fn run(ctx: Arc<Context>, stop: CancellationToken) -> anyhow::Result<()> {
    let client = ctx.client.clone();
    let ns = ctx.options.namespace.clone();
    fn api<K>(client: &kube::Client, ns: &Option<String>) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    let upstreams: Api<McpUpstream> = api(&client, &ns);
    let wc = watcher::Config::default().any_semantic();
    // NB: the upstream cache is built here rather than by
    // `Controller::new` so that its first complete list can be observed
    // (`listed`). The overlay controller must not wait for it with
    // `Store::wait_until_ready`: that future keeps a single waker, and the
    // controller's own runner already waits on it, so a second waiter can
    // be left asleep for ever (an overlay reconcile stuck mid-way, every
    // later trigger for it held behind it: an McpOverlay without status).
    let (store, writer) = reflector::store::<McpUpstream>();
    let (listed_tx, listed) = tokio::sync::watch::channel(false);
    let changes = ctx.upstream_changes.clone();
    let upstream_events = reflector(writer, watcher(upstreams.clone(), wc.clone()))
        .inspect(move |ev| {
            let change = match ev {
                Ok(watcher::Event::InitDone) => {
                    listed_tx.send_replace(true);
                    UpstreamChange::Relisted
                }
                Ok(watcher::Event::Apply(u) | watcher::Event::Delete(u)) => {
                    UpstreamChange::Touched(ObjectRef::from_obj(u))
                }
                _ => return,
            };
            // NB: nobody listening (no toolset controller) is fine.
            let _ = changes.send(change);
        })
        .applied_objects();
    let controller = Controller::for_stream(upstream_events, store.clone())
        .trigger_backoff(WatchBackoff::reset_after_quiet())
        .with_config(
            ControllerConfig::default()
                .concurrency(8)
                .debounce(Duration::from_millis(20)),
        );
    let _ = ctx.upstreams.set(store.clone());
    let _ = ctx.upstreams_listed.set(listed);

    let overlay_controller = Controller::new(api::<McpOverlay>(&client, &ns), wc.clone())
        .trigger_backoff(WatchBackoff::reset_after_quiet());
    let _ = ctx.overlays.set(overlay_controller.store());

    ctx.gateways
        .spawn_trigger(store.clone(), ctx.upstream_trigger.clone(), stop.clone());
    let served_trigger = receiver_stream(lock(&ctx.upstream_trigger_rx).take());
    let (c1, c2, c3, c4, c5) = (
        ctx.clone(),
        ctx.clone(),
        ctx.clone(),
        ctx.clone(),
        ctx.clone(),
    );
    let upstream_ctl = controller
        // Prefix ownership: any change to an upstream may promote or
        // demote the others claiming its prefix.
        .watches(upstreams, wc.clone(), move |u: McpUpstream| {
            prefix_neighbours(&c1, &u)
        })
        .watches(
            api::<McpOverlay>(&client, &ns),
            wc.clone(),
            move |o: McpOverlay| upstreams_of_overlay(&c2, &o),
        )
        .watches(
            api::<PartialObjectMeta<ConfigMap>>(&client, &ns),
            wc.clone(),
            move |cm| upstreams_using(&c3, &cm, Uses::ConfigMap),
        )
        .watches(
            api::<PartialObjectMeta<Service>>(&client, &ns),
            wc.clone(),
            move |s| upstreams_using(&c5, &s, Uses::Service),
        )
        .reconcile_on(served_trigger)
        .reconcile_on(secret_triggers(&c4, &client, &wc))
        .graceful_shutdown_on({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        })
        .run(super::reconcile::reconcile, error_policy, ctx.clone())
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "upstream controller");
            }
        });

    let trigger = receiver_stream(lock(&ctx.overlay_trigger_rx).take());
    let overlay_ctl = overlay_controller
        .reconcile_on(trigger)
        .graceful_shutdown_on({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        })
        .run(
            crate::overlay::reconcile,
            crate::overlay::error_policy,
            ctx.clone(),
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "overlay controller");
            }
        });
    tokio::join!(upstream_ctl, overlay_ctl);
    Ok(())
}

/// Upstreams to reconcile when a Secret changes (its credentials are
/// re-copied), from one watch per namespace the operator may read Secrets
/// in (`--secret-namespaces`), or one over all namespaces (within the
/// watched one, if any).
///
/// NB: not `Controller::watches`: a watch the API server refuses (a
/// namespace listed before it granted access) would fail for as long as
/// the grant is missing, and every watch error pauses all of the
/// controller's watches (see [`WatchBackoff`]). These watches back off on
/// their own instead, and their errors are logged.
fn secret_triggers(
    ctx: &Arc<Context>,
    client: &kube::Client,
    wc: &watcher::Config,
) -> impl futures::Stream<Item = ObjectRef<McpUpstream>> + Send + 'static {
    let apis: Vec<(String, Api<PartialObjectMeta<Secret>>)> =
        match (&ctx.options.secret_access, &ctx.options.namespace) {
            (SecretAccess::Cluster, None) => vec![("*".into(), Api::all(client.clone()))],
            (SecretAccess::Cluster, Some(ns)) => {
                vec![(ns.clone(), Api::namespaced(client.clone(), ns))]
            }
            (SecretAccess::Namespaces(granted), watched) => granted
                .iter()
                .filter(|ns| watched.as_ref().is_none_or(|w| w == *ns))
                .map(|ns| (ns.clone(), Api::namespaced(client.clone(), ns)))
                .collect(),
        };
    let streams = apis.into_iter().map(|(scope, api)| {
        let ctx = ctx.clone();
        watcher(api, wc.clone())
            .default_backoff()
            .touched_objects()
            .flat_map(move |ev| {
                futures::stream::iter(match ev {
                    Ok(s) => upstreams_using(&ctx, &s, Uses::Secret),
                    Err(
                        watcher::Error::InitialListFailed(kube::Error::Api(s))
                        | watcher::Error::WatchStartFailed(kube::Error::Api(s)),
                    ) if s.code == 403 => {
                        tracing::warn!(namespace = %scope, error = %s.message, "watching Secrets: forbidden (has the namespace granted the operator access?)");
                        vec![]
                    }
                    // Cut streams and 410 Gone after compaction: the
                    // watcher resumes or relists by itself.
                    Err(e) => {
                        tracing::debug!(namespace = %scope, error = %e, "watching Secrets");
                        vec![]
                    }
                })
            })
            .boxed()
    });
    futures::stream::select_all(streams)
}

/// Backoff for the controllers' watches. NB: the controller pauses *all*
/// its watches while backing off after an error in *any* of them, and a
/// `410 Gone` after the API server compacts history counts as an error, so
/// with the default (800 ms doubling to 30 s) a compaction seen by six
/// watches in turn stalls reconciles for many seconds. Start small, cap
/// low, reset after a quiet minute.
#[derive(Debug, Clone)]
pub(crate) struct WatchBackoff {
    next: Duration,
}

impl WatchBackoff {
    const FIRST: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(5);

    pub(crate) fn reset_after_quiet() -> kube::runtime::utils::ResetTimerBackoff<WatchBackoff> {
        kube::runtime::utils::ResetTimerBackoff::new(
            WatchBackoff { next: Self::FIRST },
            Duration::from_secs(60),
        )
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

pub(crate) fn receiver_stream<T: Send + 'static>(
    rx: Option<tokio::sync::mpsc::UnboundedReceiver<T>>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::unfold(rx, |rx| async move {
        let mut rx = rx?;
        let item = rx.recv().await?;
        Some((item, Some(rx)))
    })
}

fn error_policy(u: Arc<McpUpstream>, e: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_failed(e);
    tracing::warn!(upstream = %u.key(), error = %e, kind = %e.metric_label(), "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

fn prefix_neighbours(ctx: &Context, u: &McpUpstream) -> Vec<ObjectRef<McpUpstream>> {
    let Some(store) = ctx.upstreams.get() else {
        return vec![];
    };
    let me = u.key();
    store
        .state()
        .into_iter()
        .filter(|o| o.key() != me)
        .filter(|o| {
            o.spec.tool_prefix == u.spec.tool_prefix
                || o.status
                    .as_ref()
                    .and_then(|s| status::ready(&s.conditions))
                    .is_some_and(|c| c.reason == Reason::PrefixConflict.as_str())
        })
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

fn upstreams_of_overlay(ctx: &Context, o: &McpOverlay) -> Vec<ObjectRef<McpUpstream>> {
    let Some(store) = ctx.upstreams.get() else {
        return vec![];
    };
    let name = o.name_any();
    let okey = o.key();
    // Upstreams it applied to last time, in case its selector moved away.
    let before: Vec<String> = lock(&ctx.overlay_outcomes)
        .get(&okey)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    store
        .state()
        .into_iter()
        .filter(|u| u.namespace() == o.namespace())
        .filter(|u| {
            sources::targets(o, u)
                || u.spec.overlays.contains(&name)
                || before.contains(&u.name_any())
        })
        .map(|u| ObjectRef::from_obj(u.as_ref()))
        .collect()
}

enum Uses {
    ConfigMap,
    Secret,
    Service,
}

fn upstreams_using<K: Resource>(ctx: &Context, obj: &K, what: Uses) -> Vec<ObjectRef<McpUpstream>> {
    let Some(store) = ctx.upstreams.get() else {
        return vec![];
    };
    let ns = obj.meta().namespace.clone();
    let name = obj.meta().name.clone().unwrap_or_default();
    // ConfigMaps holding an overlay document reach upstreams via the overlay.
    let overlay_names: Vec<String> = match (&what, ctx.overlays.get()) {
        (Uses::ConfigMap, Some(ostore)) => ostore
            .state()
            .into_iter()
            .filter(|o| o.namespace() == ns)
            .filter(|o| {
                o.spec
                    .config_map_ref
                    .as_ref()
                    .is_some_and(|r| r.name == name)
            })
            .map(|o| o.name_any())
            .collect(),
        _ => vec![],
    };
    let overlays: Vec<Arc<McpOverlay>> = ctx
        .overlays
        .get()
        .map(|s| s.state())
        .unwrap_or_default()
        .into_iter()
        .filter(|o| overlay_names.contains(&o.name_any()))
        .collect();
    store
        .state()
        .into_iter()
        .filter(|u| u.namespace() == ns)
        .filter(|u| {
            let s = &u.spec;
            match what {
                Uses::ConfigMap => {
                    s.openapi
                        .config_map_ref
                        .as_ref()
                        .is_some_and(|r| r.name == name)
                        || overlays
                            .iter()
                            .any(|o| sources::targets(o, u) || s.overlays.contains(&o.name_any()))
                }
                Uses::Secret => {
                    s.auth
                        .as_ref()
                        .and_then(|a| a.secret_ref.as_ref())
                        .is_some_and(|r| r.name == name)
                        || s.openapi
                            .headers_from
                            .as_ref()
                            .is_some_and(|r| r.name == name)
                }
                Uses::Service => s.service_ref.as_ref().is_some_and(|r| r.name == name),
            }
        })
        .map(|u| ObjectRef::from_obj(u.as_ref()))
        .collect()
}
