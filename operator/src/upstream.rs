//! The McpUpstream controller.
//!
//! Level-triggered: every reconcile recomputes the upstream's whole outcome
//! from the cluster as it is now (spec source, overlays, Secrets, Service,
//! the other upstreams' prefix claims) and then makes the published catalog
//! and the status match it. Nothing it does depends on which event woke it.
//!
//! - Compiling is the only expensive step, so results are cached per
//!   upstream by a hash of every input: a change elsewhere in the cluster,
//!   or a restart that finds everything as it was, compiles at most once.
//! - A failed new version never replaces a published one: the index keeps
//!   the last good entry and `Published` says it is stale and why.
//! - The oldest claimant of a prefix holds it (`catalog::resolve_prefixes`);
//!   the others are not published and say who holds it. Deleting the holder
//!   wakes the others, and the next oldest publishes.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use catalog::publish::{IndexEntry, PublishedUpstream, PUBLISHED_FORMAT};
use catalog::runtime::{ApiKeyLocation, AuthConfig, ResponseValidation, SecretRef, UpstreamConfig};
use crds::conditions::{reasons, types};
use crds::{AuthType, McpOverlay, McpUpstream, McpUpstreamStatus};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::runtime::reflector::{self, reflector, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::context::{lock, Applied, Compiled, Context, Metrics, OverlayOutcome, Summary};
use crate::served::ServedBy;
use crate::sources;
use crate::status::{self, Cond};

/// Removes the upstream's published catalog before the object goes.
pub const FINALIZER: &str = "toolgate.dev/unpublish";

/// Resync period: drift (a chunk deleted by hand) is repaired this often.
const RESYNC: Duration = Duration::from_secs(600);

/// Why an upstream (or one stage of it) is not good, as a condition says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Failure {
    pub reason: String,
    pub message: String,
    /// The API server or network failed, not the user's input: retry with
    /// backoff instead of reporting it as the resource's fault.
    pub transient: bool,
    /// The overlay (`namespace/name`) at fault, when one is.
    pub overlay: Option<String>,
}

impl Failure {
    pub fn new(reason: &str, message: impl Into<String>) -> Self {
        Failure {
            reason: reason.to_string(),
            message: message.into(),
            transient: false,
            overlay: None,
        }
    }
    pub fn transient(message: impl Into<String>) -> Self {
        Failure {
            transient: true,
            ..Failure::new("Transient", message)
        }
    }
    /// A compile error, remembering which overlay caused it (if one did).
    pub fn compile(e: &catalog::CompileError) -> Self {
        Failure {
            overlay: match e {
                catalog::CompileError::Overlay(o) => Some(o.overlay.clone()),
                _ => None,
            },
            ..Failure::new(e.reason(), compile_message(e))
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Transient(String),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Self {
        Error::Transient(f.message)
    }
}

fn key(u: &McpUpstream) -> String {
    format!("{}/{}", u.namespace().unwrap_or_default(), u.name_any())
}

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
    let upstream_events = reflector(writer, watcher(upstreams.clone(), wc.clone()))
        .inspect(move |ev| {
            if matches!(ev, Ok(watcher::Event::InitDone)) {
                listed_tx.send_replace(true);
            }
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
            api::<PartialObjectMeta<Secret>>(&client, &ns),
            wc.clone(),
            move |s| upstreams_using(&c4, &s, Uses::Secret),
        )
        .watches(
            api::<PartialObjectMeta<Service>>(&client, &ns),
            wc.clone(),
            move |s| upstreams_using(&c5, &s, Uses::Service),
        )
        .reconcile_on(served_trigger)
        .graceful_shutdown_on({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        })
        .run(reconcile, error_policy, ctx.clone())
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

fn receiver_stream<T: Send + 'static>(
    rx: Option<tokio::sync::mpsc::UnboundedReceiver<T>>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::unfold(rx, |rx| async move {
        let mut rx = rx?;
        let item = rx.recv().await?;
        Some((item, Some(rx)))
    })
}

fn error_policy(u: Arc<McpUpstream>, e: &Error, ctx: Arc<Context>) -> Action {
    Metrics::inc(&ctx.metrics.reconcile_errors);
    tracing::warn!(upstream = %key(&u), error = %e, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

fn prefix_neighbours(ctx: &Context, u: &McpUpstream) -> Vec<ObjectRef<McpUpstream>> {
    let Some(store) = ctx.upstreams.get() else {
        return vec![];
    };
    let me = key(u);
    store
        .state()
        .into_iter()
        .filter(|o| key(o) != me)
        .filter(|o| {
            o.spec.tool_prefix == u.spec.tool_prefix
                || o.status
                    .as_ref()
                    .and_then(|s| status::ready(&s.conditions))
                    .is_some_and(|c| c.reason == reasons::PREFIX_CONFLICT)
        })
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

fn upstreams_of_overlay(ctx: &Context, o: &McpOverlay) -> Vec<ObjectRef<McpUpstream>> {
    let Some(store) = ctx.upstreams.get() else {
        return vec![];
    };
    let name = o.name_any();
    let okey = format!("{}/{name}", o.namespace().unwrap_or_default());
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

async fn reconcile(u: Arc<McpUpstream>, ctx: Arc<Context>) -> Result<Action, Error> {
    Metrics::inc(&ctx.metrics.reconciles);
    let ns = u.namespace().unwrap_or_default();
    let api: Api<McpUpstream> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, u, |event| async {
        match event {
            Finalizer::Apply(u) => apply(&u, &ctx).await,
            Finalizer::Cleanup(u) => cleanup(&u, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn cleanup(u: &McpUpstream, ctx: &Context) -> Result<Action, Error> {
    let source = key(u);
    if ctx.publisher.unpublish(&source).await? {
        tracing::info!(upstream = %source, "unpublished");
    }
    lock(&ctx.compiled).remove(&source);
    ctx.url_cache.forget(&source, &ctx.metrics);
    if let Some(store) = ctx.upstreams.get() {
        // Also upstreams whose deletion this replica did not see (it was
        // not the leader then).
        let live: std::collections::HashSet<String> =
            store.state().iter().map(|u| key(u)).collect();
        ctx.url_cache
            .retain(|k| k != source && live.contains(k), &ctx.metrics);
    }
    let mut outcomes = lock(&ctx.overlay_outcomes);
    for (overlay, per) in outcomes.iter_mut() {
        if per.remove(&u.name_any()).is_some() {
            if let Some((ons, oname)) = overlay.split_once('/') {
                let _ = ctx.overlay_trigger.send(ObjectRef::new(oname).within(ons));
            }
        }
    }
    Ok(Action::await_change())
}

/// Everything one reconcile concluded.
struct Outcome {
    spec: Result<(), Failure>,
    overlays: Option<Result<Vec<String>, Failure>>,
    compiled: Option<Result<Arc<Summary>, Failure>>,
    prefix: Result<(), Failure>,
    runtime: Option<Result<(), Failure>>,
    published: Published,
    /// Gateway replicas serving the published (or stale) version.
    served: Option<ServedBy>,
}

enum Published {
    Current(IndexEntry),
    Stale(IndexEntry, Failure),
    Not(Failure),
}

async fn apply(u: &McpUpstream, ctx: &Context) -> Result<Action, Error> {
    let source = key(u);

    let prefix = prefix_claim(ctx, u);

    // Inputs, in pipeline order; a transient API failure aborts the
    // reconcile (retried), a user error becomes a condition.
    let mut outcome = Outcome {
        spec: Ok(()),
        overlays: None,
        compiled: None,
        prefix,
        runtime: None,
        published: Published::Not(Failure::new(reasons::RECONCILING, "not published yet")),
        served: None,
    };
    let spec = match sources::spec(ctx, u).await {
        Ok(s) => Some(s),
        Err(f) if f.transient => return Err(f.into()),
        Err(f) => {
            outcome.spec = Err(f);
            None
        }
    };
    let mut overlay_outcomes: BTreeMap<String, OverlayOutcome> = BTreeMap::new();
    // The catalog, when this reconcile compiled it (else only its summary
    // is cached).
    let mut fresh: Option<Arc<catalog::UpstreamCatalog>> = None;
    let mut loaded_overlays = Vec::new();
    if let Some(spec) = &spec {
        let overlays = load_overlays(ctx, u, &mut overlay_outcomes).await?;
        outcome.overlays = Some(
            overlays
                .as_ref()
                .map(|o| o.iter().map(|x| x.name.clone()).collect())
                .map_err(Clone::clone),
        );
        if let Ok(overlays) = overlays {
            let (compiled, catalog) = compile(ctx, u, spec, &overlays, false).await;
            fresh = catalog;
            attribute_overlays(&compiled.result, &overlays, &mut overlay_outcomes);
            loaded_overlays = overlays;
            if let Err(f) = &compiled.result {
                if f.overlay.is_some() {
                    outcome.overlays = Some(Err(f.clone()));
                }
            }
            outcome.compiled = Some(compiled.result);
        }
    }

    // Runtime settings and credentials, only needed to publish.
    let runtime = match runtime(ctx, u).await {
        Ok(r) => Some(r),
        Err(f) if f.transient => return Err(f.into()),
        Err(f) => {
            outcome.runtime = Some(Err(f));
            None
        }
    };
    if runtime.is_some() {
        outcome.runtime = Some(Ok(()));
    }

    let current = ctx.publisher.published(&source).await?;
    outcome.published = match (&outcome.prefix, &outcome.compiled, runtime) {
        (Err(f), _, _) => {
            if ctx.publisher.unpublish(&source).await? {
                tracing::info!(upstream = %source, "unpublished: lost its prefix");
            }
            Published::Not(f.clone())
        }
        (Ok(()), Some(Ok(summary)), Some((config, creds))) => {
            let identity = catalog::publish::identity(&source, &config, &summary.catalog_hash);
            let too_large = |size: usize| {
                Failure::new(
                    reasons::CATALOG_TOO_LARGE,
                    format!(
                        "the compiled catalog is {size} bytes gzipped ({} tools), over the operator's cap of {} bytes (--max-upstream-bytes); exclude toolsets or disable operations to shrink it",
                        summary.tools,
                        ctx.options.max_upstream_bytes
                    ),
                )
            };
            match (&current, summary.encoded_size.get()) {
                (Some(e), _) if e.hash == identity && e.prefix == summary.prefix => {
                    // Already published: only credentials may need a refresh.
                    ctx.publisher.put_credentials(&creds).await?;
                    Published::Current(e.clone())
                }
                (_, Some(&size)) if size > ctx.options.max_upstream_bytes => {
                    stale_or_not(current, too_large(size))
                }
                _ => {
                    let cat = match fresh.take() {
                        Some(c) => c,
                        None => {
                            let recompiled = match &spec {
                                Some(spec) => compile(ctx, u, spec, &loaded_overlays, true).await.1,
                                None => None,
                            };
                            recompiled.ok_or_else(|| {
                                Error::Transient(format!(
                                    "{source}: recompiling for publishing gave no catalog"
                                ))
                            })?
                        }
                    };
                    let published = PublishedUpstream {
                        format: PUBLISHED_FORMAT.into(),
                        source: source.clone(),
                        runtime: config,
                        catalog: (*cat).clone(),
                    };
                    drop(cat);
                    let encoded =
                        catalog::publish::encode(&published, catalog::publish::MAX_CHUNK_BYTES);
                    let meta = crate::publish::Meta {
                        prefix: published.catalog.prefix.clone(),
                        source: source.clone(),
                        catalog_hash: published.catalog.hash.clone(),
                        tool_count: published.catalog.tools.len(),
                    };
                    drop(published);
                    release_freed_memory();
                    let _ = summary.encoded_size.set(encoded.size);
                    if encoded.size > ctx.options.max_upstream_bytes {
                        stale_or_not(current, too_large(encoded.size))
                    } else {
                        let out = ctx.publisher.publish(&meta, &encoded, creds).await?;
                        if out.changed {
                            Metrics::inc(&ctx.metrics.publishes);
                            tracing::info!(upstream = %source, prefix = %out.entry.prefix, hash = %out.entry.hash, chunks = out.entry.chunks.len(), "published");
                        }
                        Published::Current(out.entry)
                    }
                }
            }
        }
        (Ok(()), Some(Err(f)), _) => stale_or_not(current, f.clone()),
        (Ok(()), None, _) => stale_or_not(
            current,
            outcome
                .spec
                .clone()
                .err()
                .unwrap_or_else(|| Failure::new(reasons::SPEC_INVALID, "not compiled")),
        ),
        (Ok(()), Some(Ok(_)), None) => stale_or_not(
            current,
            outcome
                .runtime
                .clone()
                .and_then(Result::err)
                .unwrap_or_else(|| Failure::new(reasons::PUBLISH_FAILED, "no runtime settings")),
        ),
    };

    outcome.served = match &outcome.published {
        Published::Current(e) | Published::Stale(e, _) => {
            Some(ctx.gateways.served_by(&e.prefix, &e.hash))
        }
        Published::Not(_) => None,
    };
    match &outcome.spec {
        Ok(()) => record_overlays(ctx, u, overlay_outcomes),
        Err(f) => record_not_tried(ctx, u, f),
    }
    write_status(ctx, u, &outcome).await?;

    let refresh = u.spec.openapi.url.as_ref().map(|_| {
        u.spec
            .openapi
            .refresh_interval
            .as_deref()
            .and_then(crds::parse_duration)
            .or_else(|| crds::parse_duration(crds::DEFAULT_REFRESH_INTERVAL))
            .unwrap_or(RESYNC)
    });
    Ok(Action::requeue(refresh.unwrap_or(RESYNC).min(RESYNC)))
}

fn stale_or_not(current: Option<IndexEntry>, f: Failure) -> Published {
    match current {
        Some(entry) => Published::Stale(entry, f),
        None => Published::Not(f),
    }
}

/// `Err` naming the holder when an older upstream claims the same prefix.
fn prefix_claim(ctx: &Context, u: &McpUpstream) -> Result<(), Failure> {
    let Some(store) = ctx.upstreams.get() else {
        return Ok(());
    };
    let mut all: Vec<Arc<McpUpstream>> = store
        .state()
        .into_iter()
        .filter(|o| o.meta().deletion_timestamp.is_none())
        .filter(|o| o.spec.tool_prefix == u.spec.tool_prefix)
        .collect();
    if !all.iter().any(|o| key(o) == key(u)) {
        all.push(Arc::new(u.clone()));
    }
    let claims: Vec<catalog::PrefixClaim> = all
        .iter()
        .map(|o| catalog::PrefixClaim {
            prefix: o.spec.tool_prefix.clone(),
            namespace: o.namespace().unwrap_or_default(),
            name: o.name_any(),
            created: o
                .meta()
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_millisecond())
                .unwrap_or(i64::MAX),
        })
        .collect();
    let resolution = catalog::resolve_prefixes(&claims);
    let me = all.iter().position(|o| key(o) == key(u)).unwrap_or(0);
    match resolution.conflict_for(me) {
        None => Ok(()),
        Some(h) => {
            let holder = &claims[h];
            Err(Failure::new(
                reasons::PREFIX_CONFLICT,
                format!(
                    "spec.toolPrefix {:?} is held by McpUpstream {}/{}, which claimed it first; this upstream's tools are not published until that one is deleted or changes its prefix",
                    u.spec.tool_prefix, holder.namespace, holder.name
                ),
            ))
        }
    }
}

async fn load_overlays(
    ctx: &Context,
    u: &McpUpstream,
    outcomes: &mut BTreeMap<String, OverlayOutcome>,
) -> Result<Result<Vec<LoadedOverlay>, Failure>, Error> {
    let ns = u.namespace().unwrap_or_default();
    // Listed rather than read from the overlay controller's cache: that
    // cache may lag the event that woke this reconcile.
    let api: Api<McpOverlay> = Api::namespaced(ctx.client.clone(), &ns);
    let all: Vec<Arc<McpOverlay>> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(Arc::new)
        .collect();
    let order = sources::overlay_order(u, &all);
    let mut loaded = Vec::new();
    let mut first_failure = None;
    for name in order {
        let okey = format!("{ns}/{name}");
        let Some(o) = all.iter().find(|o| o.name_any() == name) else {
            first_failure.get_or_insert(Failure::new(
                reasons::OVERLAY_NOT_FOUND,
                format!("spec.overlays: McpOverlay {okey} not found"),
            ));
            continue;
        };
        let src = match sources::overlay(ctx, &ns, o).await {
            Ok(s) => s,
            Err(f) if f.transient => return Err(f.into()),
            Err(f) => {
                outcomes.insert(
                    okey.clone(),
                    OverlayOutcome {
                        result: Applied::Failed(f.message.clone()),
                        unmatched: vec![],
                    },
                );
                first_failure.get_or_insert(f);
                continue;
            }
        };
        match catalog::Overlay::parse(&okey, &src.bytes, src.strict) {
            Ok(parsed) => {
                let targets = action_targets(&src.bytes);
                outcomes.insert(
                    okey.clone(),
                    OverlayOutcome {
                        result: Applied::Yes,
                        unmatched: vec![],
                    },
                );
                loaded.push(LoadedOverlay {
                    name: okey,
                    bytes: src.bytes,
                    strict: src.strict,
                    parsed,
                    targets,
                });
            }
            Err(e) => {
                let f = Failure::new(reasons::OVERLAY_INVALID, format!("McpOverlay {okey}: {e}"));
                outcomes.insert(
                    okey,
                    OverlayOutcome {
                        result: Applied::Failed(f.message.clone()),
                        unmatched: vec![],
                    },
                );
                first_failure.get_or_insert(f);
            }
        }
    }
    Ok(match first_failure {
        Some(f) => Err(f),
        None => Ok(loaded),
    })
}

pub struct LoadedOverlay {
    /// `namespace/name`.
    pub name: String,
    pub bytes: Vec<u8>,
    pub strict: bool,
    pub parsed: catalog::Overlay,
    /// `actions[i].target`, to report unmatched targets by text.
    pub targets: Vec<String>,
}

fn action_targets(bytes: &[u8]) -> Vec<String> {
    catalog::spec::parse_value("overlay", bytes)
        .ok()
        .and_then(|v| {
            v.get("actions").and_then(|a| a.as_array()).map(|a| {
                a.iter()
                    .map(|x| {
                        x.get("target")
                            .and_then(|t| t.as_str())
                            .unwrap_or_default()
                            .to_string()
                    })
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Compiles, or reuses the last result when no input changed (unless
/// `force`: the catalog itself is needed). Returns the catalog when it
/// compiled one.
async fn compile(
    ctx: &Context,
    u: &McpUpstream,
    spec: &sources::SpecBytes,
    overlays: &[LoadedOverlay],
    force: bool,
) -> (Compiled, Option<Arc<catalog::UpstreamCatalog>>) {
    let options = u.spec.compile_options();
    // Objects stored before the CRD enforced these (or written around it)
    // must not publish names another upstream's prefix owns.
    if let Err(e) = catalog::prefix::check_shared(&u.spec.tool_prefix, &options.naming.separator) {
        let message = match &e {
            catalog::CompileError::Options { field, message } => format!("spec.{field}: {message}"),
            other => other.to_string(),
        };
        let result = Err(Failure::new(e.reason(), message));
        return (
            Compiled {
                input_hash: String::new(),
                result,
            },
            None,
        );
    }
    let mut h = Sha256::new();
    h.update(u.spec.tool_prefix.as_bytes());
    h.update([0]);
    h.update(spec.document.as_bytes());
    h.update([0]);
    h.update(&spec.bytes);
    for o in overlays {
        h.update([0]);
        h.update(o.name.as_bytes());
        h.update([u8::from(o.strict)]);
        h.update(&o.bytes);
    }
    h.update(serde_json::to_vec(&options).unwrap_or_default());
    let input_hash = format!("{:x}", h.finalize());
    let source = key(u);
    if !force {
        if let Some(c) = lock(&ctx.compiled).get(&source) {
            if c.input_hash == input_hash {
                return (c.clone(), None);
            }
        }
    }
    let _permit = ctx.compile_slots.acquire().await;
    Metrics::inc(&ctx.metrics.compiles);
    let prefix = u.spec.tool_prefix.clone();
    let document = spec.document.clone();
    let bytes = spec.bytes.clone();
    let parsed: Vec<catalog::Overlay> = overlays.iter().map(|o| o.parsed.clone()).collect();
    let started = std::time::Instant::now();
    let result = tokio::task::spawn_blocking(move || {
        catalog::compile_upstream(&catalog::UpstreamSource {
            prefix: &prefix,
            document: &document,
            spec: &bytes,
            overlays: &parsed,
            options: &options,
        })
    })
    .await;
    tracing::debug!(upstream = %source, ms = started.elapsed().as_millis() as u64, "compiled");
    let mut catalog = None;
    let result = match result {
        Ok(Ok(cat)) => match transform_failure(&cat) {
            Some(f) => Err(f),
            None => {
                let summary = summarize(&cat, overlays);
                catalog = Some(Arc::new(cat));
                Ok(Arc::new(summary))
            }
        },
        Ok(Err(e)) => Err(Failure::compile(&e)),
        Err(join) => Err(Failure::new(
            reasons::SPEC_INVALID,
            format!("the compiler failed on this document: {join}"),
        )),
    };
    let compiled = Compiled { input_hash, result };
    lock(&ctx.compiled).insert(source, compiled.clone());
    if catalog.is_none() {
        release_freed_memory();
    }
    (compiled, catalog)
}

/// Hands the compiler's freed working memory back to the OS. NB: glibc
/// keeps freed heap in per-thread arenas, so without this every compile
/// thread would keep the peak of the largest document it ever compiled.
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and shrinks the allocator's own free
    // lists; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn summarize(cat: &catalog::UpstreamCatalog, overlays: &[LoadedOverlay]) -> Summary {
    let mut recorded = McpUpstreamStatus::default();
    recorded.record_catalog(cat);
    let mut unmatched = Vec::new();
    for o in overlays {
        for w in &cat.warnings {
            if w.code != catalog::WarningCode::OverlayTargetUnmatched {
                continue;
            }
            if let Some(catalog::Location::Overlay { name, action }) = &w.at {
                if *name == o.name {
                    unmatched.push((o.name.clone(), *action));
                }
            }
        }
    }
    Summary {
        catalog_hash: cat.hash.clone(),
        prefix: cat.prefix.clone(),
        tools: cat.tools.len(),
        operations: cat.source.operation_count,
        rejected: cat.rejected.len(),
        warnings: cat.warnings.len(),
        recorded,
        unmatched,
        encoded_size: OnceLock::new(),
    }
}

fn compile_message(e: &catalog::CompileError) -> String {
    match e {
        catalog::CompileError::NameConflict(c) => {
            let list: Vec<String> = c
                .conflicts
                .iter()
                .take(10)
                .map(|c| {
                    format!(
                        "{} ({} {} and {} {})",
                        c.name, c.first.0, c.first.1, c.second.0, c.second.1
                    )
                })
                .collect();
            format!(
                "{} tool names are claimed by two operations: {}; rename one with x-mcp-tool-name or set spec.naming.conflictResolution",
                c.conflicts.len(),
                list.join("; ")
            )
        }
        other => other.to_string(),
    }
}

/// A transform that does not work fails the version: publishing the
/// upstream without that tool would silently drop what the overlay asked.
fn transform_failure(cat: &catalog::UpstreamCatalog) -> Option<Failure> {
    let bad: Vec<&catalog::Rejected> = cat
        .rejected
        .iter()
        .filter(|r| r.reason == catalog::RejectReason::TransformInvalid)
        .collect();
    let first = bad.first()?;
    Some(Failure::new(
        reasons::TRANSFORM_INVALID,
        format!(
            "{} operation(s) have an invalid transform; first: {} {} at {}: {}",
            bad.len(),
            first.method.to_ascii_uppercase(),
            first.path,
            first.pointer,
            first.message
        ),
    ))
}

/// Fills in what each overlay did: a compile failure it caused, the targets
/// it left unmatched.
fn attribute_overlays(
    result: &Result<Arc<Summary>, Failure>,
    overlays: &[LoadedOverlay],
    outcomes: &mut BTreeMap<String, OverlayOutcome>,
) {
    for o in overlays {
        let Some(out) = outcomes.get_mut(&o.name) else {
            continue;
        };
        match result {
            Err(f) if f.overlay.as_deref() == Some(o.name.as_str()) => {
                out.result = Applied::Failed(f.message.clone());
            }
            Ok(summary) => {
                for (_, i) in summary.unmatched.iter().filter(|(n, _)| *n == o.name) {
                    let target = o.targets.get(*i as usize).cloned().unwrap_or_default();
                    out.unmatched.push((*i, target));
                }
            }
            _ => {}
        }
    }
}

fn record_overlays(ctx: &Context, u: &McpUpstream, outcomes: BTreeMap<String, OverlayOutcome>) {
    let name = u.name_any();
    let ns = u.namespace().unwrap_or_default();
    let mut changed = Vec::new();
    {
        let mut all = lock(&ctx.overlay_outcomes);
        // Overlays that no longer apply to this upstream.
        for (okey, per) in all.iter_mut() {
            if okey.starts_with(&format!("{ns}/"))
                && !outcomes.contains_key(okey)
                && per.remove(&name).is_some()
            {
                changed.push(okey.clone());
            }
        }
        for (okey, out) in outcomes {
            let per = all.entry(okey.clone()).or_default();
            if per.get(&name) != Some(&out) {
                per.insert(name.clone(), out);
                changed.push(okey);
            }
        }
    }
    wake_overlays(ctx, changed);
}

/// Without a document no overlay was tried. An overlay that has a report
/// from this upstream keeps it (what it did to the last document); the
/// others learn why nothing was applied, rather than waiting for a report
/// that will not come.
fn record_not_tried(ctx: &Context, u: &McpUpstream, spec: &Failure) {
    let Some(store) = ctx.overlays.get() else {
        return;
    };
    let all = store.state();
    let ns = u.namespace().unwrap_or_default();
    let name = u.name_any();
    let why = format!(
        "not applied: no OpenAPI document ({}: {})",
        spec.reason, spec.message
    );
    let mut changed = Vec::new();
    {
        let mut outcomes = lock(&ctx.overlay_outcomes);
        for oname in sources::overlay_order(u, &all) {
            if !all.iter().any(|o| o.name_any() == oname) {
                continue;
            }
            let okey = format!("{ns}/{oname}");
            let per = outcomes.entry(okey.clone()).or_default();
            let stale = match per.get(&name).map(|o| &o.result) {
                None => true,
                Some(Applied::NotTried(old)) => *old != why,
                Some(_) => false,
            };
            if stale {
                per.insert(
                    name.clone(),
                    OverlayOutcome {
                        result: Applied::NotTried(why.clone()),
                        unmatched: vec![],
                    },
                );
                changed.push(okey);
            }
        }
    }
    wake_overlays(ctx, changed);
}

fn wake_overlays(ctx: &Context, overlays: Vec<String>) {
    for okey in overlays {
        if let Some((ons, oname)) = okey.split_once('/') {
            let _ = ctx.overlay_trigger.send(ObjectRef::new(oname).within(ons));
        }
    }
}

/// The gateway's settings for this upstream and the credentials to copy.
async fn runtime(
    ctx: &Context,
    u: &McpUpstream,
) -> Result<(UpstreamConfig, BTreeMap<String, Vec<u8>>), Failure> {
    let ns = u.namespace().unwrap_or_default();
    let spec = &u.spec;
    let base_url = match (&spec.base_url, &spec.service_ref) {
        (Some(url), _) => url.clone(),
        (None, Some(svc)) => {
            match sources::service_exists(&ctx.client, &ns, &svc.name).await {
                Ok(true) => {}
                Ok(false) => {
                    return Err(Failure::new(
                        reasons::SERVICE_NOT_FOUND,
                        format!("spec.serviceRef: Service {ns}/{} not found", svc.name),
                    ))
                }
                Err(e) => {
                    return Err(Failure::transient(format!(
                        "reading Service {ns}/{}: {e}",
                        svc.name
                    )))
                }
            }
            let scheme = match svc.scheme {
                crds::Scheme::Http => "http",
                crds::Scheme::Https => "https",
            };
            format!(
                "{scheme}://{}.{ns}.svc:{}{}",
                svc.name,
                svc.port,
                svc.path.as_deref().unwrap_or("")
            )
        }
        (None, None) => {
            return Err(Failure::new(
                reasons::SPEC_INVALID,
                "exactly one of spec.baseUrl or spec.serviceRef must be set",
            ))
        }
    };
    let http = spec.http.clone().unwrap_or_default();
    // The gateway would refuse the whole upstream for a header it cannot
    // send; say which one here, where it was written.
    for (name, value) in &http.headers {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(Failure::new(
                reasons::INVALID_SETTINGS,
                format!("spec.http.headers: {name:?} is not a valid HTTP header name"),
            ));
        }
        if reqwest::header::HeaderValue::from_str(value).is_err() {
            return Err(Failure::new(
                reasons::INVALID_SETTINGS,
                format!("spec.http.headers[{name:?}]: the value is not a valid HTTP header value (line breaks and control characters are not allowed)"),
            ));
        }
    }
    let validation = spec.validation.clone().unwrap_or_default();
    let mut config = UpstreamConfig {
        base_url: Some(base_url),
        timeout_seconds: Some(
            http.timeout
                .as_deref()
                .and_then(crds::parse_duration)
                .or_else(|| crds::parse_duration(crds::DEFAULT_TIMEOUT))
                .map(|d| d.as_secs_f64())
                .unwrap_or(30.0),
        ),
        max_response_bytes: Some(
            http.max_response_bytes
                .unwrap_or(crds::DEFAULT_MAX_RESPONSE_BYTES),
        ),
        headers: http.headers.clone(),
        response_validation: match (validation.response, validation.response_failure) {
            (false, _) => ResponseValidation::Off,
            (true, crds::ResponseFailure::Warn) => ResponseValidation::Warn,
            (true, crds::ResponseFailure::Fail) => ResponseValidation::Fail,
        },
        success_status: (!validation.success_status.is_empty())
            .then(|| validation.success_status.clone()),
        error_status: (!validation.error_status.is_empty())
            .then(|| validation.error_status.clone()),
        ..Default::default()
    };
    let mut creds = BTreeMap::new();
    if let Some(auth) = &spec.auth {
        if auth.type_ != AuthType::None {
            let Some(sref) = &auth.secret_ref else {
                return Err(Failure::new(
                    reasons::SECRET_NOT_FOUND,
                    "spec.auth.secretRef is required unless spec.auth.type is none",
                ));
            };
            let data = match sources::secret_data(&ctx.client, &ns, &sref.name).await {
                Ok(Some(d)) => d,
                Ok(None) => {
                    return Err(Failure::new(
                        reasons::SECRET_NOT_FOUND,
                        format!("spec.auth.secretRef: Secret {ns}/{} not found", sref.name),
                    ))
                }
                Err(e) => {
                    return Err(Failure::transient(format!(
                        "reading Secret {ns}/{}: {e}",
                        sref.name
                    )))
                }
            };
            let mut refs = Vec::new();
            for k in sref.keys(auth.type_) {
                let Some(v) = data.get(k) else {
                    return Err(Failure::new(
                        reasons::SECRET_NOT_FOUND,
                        format!(
                            "spec.auth.secretRef: Secret {ns}/{} has no key {k:?}",
                            sref.name
                        ),
                    ));
                };
                let ck = crds::publish::credentials_key(&ns, &sref.name, k);
                creds.insert(ck.clone(), v.clone());
                refs.push(SecretRef {
                    secret_key: Some(ck),
                    ..Default::default()
                });
            }
            let mut refs = refs.into_iter();
            let mut next = || refs.next().unwrap_or_default();
            config.auth = match auth.type_ {
                AuthType::None => AuthConfig::None,
                AuthType::Bearer => AuthConfig::Bearer { token: next() },
                AuthType::ApiKey => {
                    let (location, name) = match (&auth.header, &auth.query) {
                        (Some(h), _) => (ApiKeyLocation::Header, h.clone()),
                        (None, Some(q)) => (ApiKeyLocation::Query, q.clone()),
                        (None, None) => {
                            return Err(Failure::new(
                                reasons::SPEC_INVALID,
                                "spec.auth.type apiKey needs exactly one of spec.auth.header or spec.auth.query",
                            ))
                        }
                    };
                    AuthConfig::ApiKey {
                        location,
                        name,
                        value: next(),
                    }
                }
                AuthType::Basic => AuthConfig::Basic {
                    username: next(),
                    password: next(),
                },
                AuthType::Oauth2ClientCredentials => AuthConfig::Oauth2ClientCredentials {
                    token_url: auth.token_url.clone().unwrap_or_default(),
                    client_id: next(),
                    client_secret: next(),
                    scopes: auth.scopes.clone(),
                    audience: None,
                    client_auth: Default::default(),
                },
            };
        }
    }
    Ok((config, creds))
}

/// Conditions from the outcome, in a fixed order, Ready first.
fn conditions(o: &Outcome) -> Vec<Cond> {
    let mut conds = Vec::new();
    conds.push(match &o.spec {
        Ok(()) => Cond::ok(
            types::SPEC_RESOLVED,
            reasons::RESOLVED,
            "the OpenAPI document was read",
        ),
        Err(f) => Cond::fail(types::SPEC_RESOLVED, &f.reason, &f.message),
    });
    conds.push(match &o.overlays {
        None => Cond::unknown(
            types::OVERLAYS_APPLIED,
            reasons::RECONCILING,
            "waiting for the OpenAPI document",
        ),
        Some(Ok(names)) if names.is_empty() => {
            Cond::ok(types::OVERLAYS_APPLIED, reasons::APPLIED, "no overlays")
        }
        Some(Ok(names)) => Cond::ok(
            types::OVERLAYS_APPLIED,
            reasons::APPLIED,
            format!("applied in order: {}", names.join(", ")),
        ),
        Some(Err(f)) => Cond::fail(types::OVERLAYS_APPLIED, &f.reason, &f.message),
    });
    conds.push(match &o.compiled {
        None => Cond::unknown(
            types::COMPILED,
            reasons::RECONCILING,
            "not compiled: an earlier stage failed",
        ),
        Some(Ok(c)) => Cond::ok(
            types::COMPILED,
            reasons::COMPILED,
            format!(
                "{} tools from {} operations ({} rejected, {} warnings)",
                c.tools, c.operations, c.rejected, c.warnings
            ),
        ),
        Some(Err(f)) => Cond::fail(types::COMPILED, &f.reason, &f.message),
    });
    conds.push(match &o.prefix {
        Ok(()) => Cond::ok(
            types::PREFIX_ACCEPTED,
            reasons::PREFIX_HELD,
            "this upstream holds its tool prefix",
        ),
        Err(f) => Cond::fail(types::PREFIX_ACCEPTED, &f.reason, &f.message),
    });
    let served_note = match o.served {
        Some(ServedBy { live: 0, .. }) | None => {
            "no gateway replica reports what it serves".to_string()
        }
        Some(ServedBy { serving, live }) => {
            format!("served by {serving} of {live} gateway replicas")
        }
    };
    let not_served =
        matches!(o.served, Some(ServedBy { serving, live }) if live > 0 && serving < live);
    let published = match &o.published {
        Published::Current(e) if not_served => Cond::fail(
            types::PUBLISHED,
            reasons::NOT_SERVED,
            format!(
                "catalog {} is published; {served_note} so far",
                short(&e.catalog_hash)
            ),
        ),
        Published::Current(e) => Cond::ok(
            types::PUBLISHED,
            reasons::PUBLISHED,
            format!(
                "{} tools published (catalog {}, {} chunk(s)); {served_note}",
                e.tool_count,
                short(&e.catalog_hash),
                e.chunks.len()
            ),
        ),
        Published::Stale(e, f) => Cond::ok(
            types::PUBLISHED,
            reasons::STALE,
            format!(
                "the current spec is not published ({}); the last good catalog {} with {} tools keeps serving",
                f.reason,
                short(&e.catalog_hash),
                e.tool_count
            ),
        ),
        Published::Not(f) => Cond::fail(types::PUBLISHED, &f.reason, &f.message),
    };
    // Ready: the first failure in pipeline order, else published.
    let first_failure = [
        &o.spec.clone().err(),
        &o.overlays.clone().and_then(Result::err),
        &o.compiled.clone().and_then(Result::err),
        &o.prefix.clone().err(),
        &o.runtime.clone().and_then(Result::err),
    ]
    .into_iter()
    .flatten()
    .next()
    .cloned();
    let ready = match (&first_failure, &o.published) {
        (None, Published::Current(e)) if not_served => Cond::fail(
            types::READY,
            reasons::NOT_SERVED,
            format!(
                "{} tools published under prefix {:?}; {served_note} so far",
                e.tool_count, e.prefix
            ),
        ),
        (None, Published::Current(e)) => Cond::ok(
            types::READY,
            reasons::PUBLISHED,
            format!(
                "{} tools published under prefix {:?}",
                e.tool_count, e.prefix
            ),
        ),
        (Some(f), Published::Stale(e, _)) => Cond::fail(
            types::READY,
            &f.reason,
            format!(
                "{}; still serving the last good catalog {} ({} tools)",
                f.message,
                short(&e.catalog_hash),
                e.tool_count
            ),
        ),
        (Some(f), _) => Cond::fail(types::READY, &f.reason, &f.message),
        (None, Published::Stale(_, f) | Published::Not(f)) => {
            Cond::fail(types::READY, &f.reason, &f.message)
        }
    };
    conds.insert(0, ready);
    conds.push(published);
    conds
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn record(status: &mut McpUpstreamStatus, c: &Summary) {
    let r = &c.recorded;
    status.tool_count = r.tool_count;
    status.warnings = r.warnings.clone();
    status.warning_count = r.warning_count;
    status.rejected_operations = r.rejected_operations.clone();
    status.rejected_count = r.rejected_count;
    status.catalog_hash = r.catalog_hash.clone();
}

async fn write_status(ctx: &Context, u: &McpUpstream, o: &Outcome) -> Result<(), Error> {
    let old = u.status.clone().unwrap_or_default();
    let mut new = McpUpstreamStatus {
        observed_generation: u.metadata.generation,
        conditions: status::merge(&old.conditions, &conditions(o), u.metadata.generation),
        served_replicas: o.served.map(|s| s.serving as i32),
        ..Default::default()
    };
    match (&o.compiled, &o.published) {
        (Some(Ok(c)), Published::Current(_)) => record(&mut new, c),
        (_, Published::Stale(e, _)) => {
            // Describe what serves, not what failed.
            new.tool_count = Some(e.tool_count as u32);
            new.catalog_hash = Some(e.catalog_hash.clone());
            new.warnings = old.warnings.clone();
            new.warning_count = old.warning_count;
            new.rejected_operations = old.rejected_operations.clone();
            new.rejected_count = old.rejected_count;
        }
        (Some(Ok(c)), Published::Not(_)) => {
            record(&mut new, c);
            new.tool_count = Some(0);
        }
        _ => new.tool_count = Some(0),
    }
    emit_transition_event(ctx, u, &old, &new).await;
    if new == old {
        return Ok(());
    }
    let mut body = serde_json::to_value(&new).unwrap_or_default();
    // A merge patch keeps fields it does not mention: clear them explicitly.
    if let Some(m) = body.as_object_mut() {
        for k in [
            "toolCount",
            "warnings",
            "warningCount",
            "rejectedOperations",
            "rejectedCount",
            "catalogHash",
            "servedReplicas",
        ] {
            m.entry(k).or_insert(serde_json::Value::Null);
        }
    }
    let api: Api<McpUpstream> =
        Api::namespaced(ctx.client.clone(), &u.namespace().unwrap_or_default());
    api.patch_status(
        &u.name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": body })),
    )
    .await?;
    Metrics::inc(&ctx.metrics.status_writes);
    Ok(())
}

async fn emit_transition_event(
    ctx: &Context,
    u: &McpUpstream,
    old: &McpUpstreamStatus,
    new: &McpUpstreamStatus,
) {
    let (Some(n), o) = (
        status::ready(&new.conditions),
        status::ready(&old.conditions),
    ) else {
        return;
    };
    if o.is_some_and(|o| o.status == n.status && o.reason == n.reason) {
        return;
    }
    let ev = KubeEvent {
        type_: if n.status == "True" {
            EventType::Normal
        } else {
            EventType::Warning
        },
        reason: n.reason.clone(),
        note: Some(status::truncate(&n.message, 1000)),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &u.object_ref(&())).await {
        tracing::warn!(upstream = %key(u), error = %e, "recording an event");
    }
}
