//! One McpUpstream reconcile: read → compile → publish → report.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use catalog::publish::{IndexEntry, PublishedUpstream, PUBLISHED_FORMAT};
use catalog::runtime::UpstreamConfig;
use crds::conditions::Reason;
use crds::McpUpstream;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::conditions::{Outcome, Published};
use super::{overlays, report};
use crate::compile::{LoadedOverlay, Summary};
use crate::context::{Context, OverlayOutcome};
use crate::error::{Error, Failure};
use crate::metrics::Kind;
use crate::observe;
use crate::sources::SpecBytes;
use crate::sync::lock;

/// Removes the upstream's published catalog before the object goes.
pub const FINALIZER: &str = "toolgate.dev/unpublish";

/// Resync period: drift (a chunk deleted by hand) is repaired this often.
const RESYNC: Duration = Duration::from_secs(600);

pub async fn reconcile(u: Arc<McpUpstream>, ctx: Arc<Context>) -> Result<Action, Error> {
    let work = finalize(u.clone(), &ctx);
    observe::reconcile(&ctx.metrics, Kind::McpUpstream, u.as_ref(), work).await
}

async fn finalize(u: Arc<McpUpstream>, ctx: &Arc<Context>) -> Result<Action, Error> {
    let ns = u.namespace().unwrap_or_default();
    let api: Api<McpUpstream> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, u, |event| async {
        match event {
            Finalizer::Apply(u) => apply(&u, ctx).await,
            Finalizer::Cleanup(u) => cleanup(&u, ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn apply(u: &McpUpstream, ctx: &Context) -> Result<Action, Error> {
    // Read, in pipeline order; a transient API failure aborts the
    // reconcile (retried), a user error becomes a condition.
    let prefix = prefix_claim(ctx, u);
    let spec = users_fault(ctx.sources.spec(u).await)?;
    let mut overlay_outcomes = BTreeMap::new();
    let mut built = match &spec {
        Ok(spec) => compile(ctx, u, spec, &mut overlay_outcomes).await?,
        Err(_) => Built::default(),
    };
    let settings =
        users_fault(crate::settings::read(&ctx.client, &ctx.options.secret_access, u).await)?;

    // Moved, not shared: publishing drops it as soon as it is copied, so
    // a large catalog is not held twice while it is encoded.
    let fresh = built.fresh.take();
    let published = publish(ctx, u, &prefix, &spec, &built, fresh, &settings).await?;

    let outcome = Outcome {
        served: match &published {
            Published::Current(e) | Published::Stale(e, _) => {
                Some(ctx.gateways.served_by(&e.prefix, &e.hash))
            }
            Published::Not(_) => None,
        },
        spec: spec.map(drop),
        overlays: built.overlays,
        compiled: built.compiled,
        prefix,
        settings: settings.map(drop),
        published,
    };
    match &outcome.spec {
        Ok(()) => overlays::record(ctx, u, overlay_outcomes),
        Err(f) => overlays::record_not_tried(ctx, u, f),
    }
    report::write_status(ctx, u, &outcome).await?;
    Ok(Action::requeue(requeue_after(u)))
}

/// A user's error stays a result (it becomes a condition); a transient
/// one aborts the reconcile.
fn users_fault<T>(r: Result<T, Failure>) -> Result<Result<T, Failure>, Error> {
    match r {
        Err(f) if f.transient => Err(f.into()),
        r => Ok(r),
    }
}

/// What the compile stage produced.
#[derive(Default)]
struct Built {
    /// `None` when the overlays were not read (no document).
    overlays: Option<Result<Vec<String>, Failure>>,
    /// `None` when nothing was compiled (no document, a bad overlay).
    compiled: Option<Result<Arc<Summary>, Failure>>,
    /// The catalog, when this reconcile compiled it (else only its summary
    /// is cached); taken by publishing.
    fresh: Option<Arc<catalog::UpstreamCatalog>>,
    loaded: Vec<LoadedOverlay>,
}

async fn compile(
    ctx: &Context,
    u: &McpUpstream,
    spec: &SpecBytes,
    outcomes: &mut BTreeMap<String, OverlayOutcome>,
) -> Result<Built, Error> {
    let loaded = match overlays::load(ctx, u, outcomes).await? {
        Ok(loaded) => loaded,
        Err(f) => {
            return Ok(Built {
                overlays: Some(Err(f)),
                ..Built::default()
            })
        }
    };
    let names = loaded.iter().map(|o| o.name.clone()).collect();
    let (compiled, fresh) = ctx
        .compiler
        .compile(&u.key(), u, spec, &loaded, false)
        .await;
    overlays::attribute(&compiled.result, &loaded, outcomes);
    let overlays = match &compiled.result {
        Err(f) if f.overlay.is_some() => Err(f.clone()),
        _ => Ok(names),
    };
    Ok(Built {
        overlays: Some(overlays),
        compiled: Some(compiled.result),
        fresh,
        loaded,
    })
}

/// Publishes the compiled catalog when every stage allows it; otherwise
/// keeps the last good version (stale) or, without a prefix, unpublishes.
#[tracing::instrument(name = "publish", skip_all)]
async fn publish(
    ctx: &Context,
    u: &McpUpstream,
    prefix: &Result<(), Failure>,
    spec: &Result<SpecBytes, Failure>,
    built: &Built,
    fresh: Option<Arc<catalog::UpstreamCatalog>>,
    settings: &Result<(UpstreamConfig, BTreeMap<String, Vec<u8>>), Failure>,
) -> Result<Published, Error> {
    let source = u.key();
    let current = ctx.publisher.published(&source).await?;
    let (summary, (config, creds)) = match (prefix, &built.compiled, settings) {
        (Err(f), _, _) => {
            if ctx.publisher.unpublish(&source).await? {
                tracing::info!(upstream = %source, "unpublished: lost its prefix");
            }
            return Ok(Published::Not(f.clone()));
        }
        (Ok(()), Some(Ok(summary)), Ok(settings)) => (summary, settings),
        (Ok(()), Some(Err(f)), _) => return Ok(stale_or_not(current, f.clone())),
        (Ok(()), None, _) => {
            let why = spec.as_ref().err().cloned();
            let why = why.unwrap_or_else(|| Failure::new(Reason::SpecInvalid, "not compiled"));
            return Ok(stale_or_not(current, why));
        }
        (Ok(()), Some(Ok(_)), Err(f)) => return Ok(stale_or_not(current, f.clone())),
    };
    let identity = catalog::publish::identity(&source, config, &summary.catalog_hash);
    let too_large = |size: usize| {
        Failure::new(
            Reason::CatalogTooLarge,
            format!(
                "the compiled catalog is {size} bytes of JSON ({} tools), over the operator's cap of {} bytes (--max-upstream-bytes, which bounds what each gateway replica holds in memory); exclude toolsets or disable operations to shrink it",
                summary.tools,
                ctx.options.max_upstream_bytes
            ),
        )
    };
    match (&current, summary.encoded_size.get()) {
        (Some(e), _) if e.hash == identity && e.prefix == summary.prefix => {
            // Already published: only credentials may need a refresh.
            ctx.publisher.put_credentials(creds).await?;
            return Ok(Published::Current(e.clone()));
        }
        (_, Some(&size)) if size > ctx.options.max_upstream_bytes => {
            return Ok(stale_or_not(current, too_large(size)))
        }
        _ => {}
    }
    let cat = match (fresh, spec) {
        (Some(c), _) => Some(c),
        (None, Ok(spec)) => {
            ctx.compiler
                .compile(&source, u, spec, &built.loaded, true)
                .await
                .1
        }
        (None, Err(_)) => None,
    };
    let cat = cat.ok_or_else(|| {
        Error::Transient(format!(
            "{source}: recompiling for publishing gave no catalog"
        ))
    })?;
    let published = PublishedUpstream {
        format: PUBLISHED_FORMAT.into(),
        source: source.clone(),
        runtime: config.clone(),
        catalog: (*cat).clone(),
    };
    drop(cat);
    let encoded = catalog::publish::encode(&published, catalog::publish::MAX_CHUNK_BYTES);
    let meta = crate::publish::Meta {
        prefix: published.catalog.prefix.clone(),
        source: source.clone(),
        catalog_hash: published.catalog.hash.clone(),
        tool_count: published.catalog.tools.len(),
    };
    drop(published);
    catalog::release_freed_memory();
    let _ = summary.encoded_size.set(encoded.json_size);
    if encoded.json_size > ctx.options.max_upstream_bytes {
        return Ok(stale_or_not(current, too_large(encoded.json_size)));
    }
    let out = ctx
        .publisher
        .publish(&meta, &encoded, creds.clone())
        .await?;
    if out.changed {
        ctx.metrics.published(out.chunk_bytes);
        tracing::info!(upstream = %source, prefix = %out.entry.prefix, hash = %out.entry.hash, chunks = out.entry.chunks.len(), "published");
    }
    Ok(Published::Current(out.entry))
}

fn stale_or_not(current: Option<IndexEntry>, f: Failure) -> Published {
    match current {
        Some(entry) => Published::Stale(entry, f),
        None => Published::Not(f),
    }
}

/// Requeue for a URL's refresh interval, and at least every [`RESYNC`].
fn requeue_after(u: &McpUpstream) -> Duration {
    let refresh = u.spec.openapi.url.as_ref().map(|_| {
        u.spec
            .openapi
            .refresh_interval
            .as_deref()
            .and_then(crds::parse_duration)
            .or_else(|| crds::parse_duration(crds::DEFAULT_REFRESH_INTERVAL))
            .unwrap_or(RESYNC)
    });
    refresh.unwrap_or(RESYNC).min(RESYNC)
}

async fn cleanup(u: &McpUpstream, ctx: &Context) -> Result<Action, Error> {
    let source = u.key();
    if ctx.publisher.unpublish(&source).await? {
        tracing::info!(upstream = %source, "unpublished");
    }
    ctx.compiler.forget(&source);
    ctx.sources.forget(&source);
    ctx.metrics.upstream_gone(&source);
    if let Some(store) = ctx.upstreams.get() {
        // Also upstreams whose deletion this replica did not see (it was
        // not the leader then).
        let live: std::collections::HashSet<String> =
            store.state().iter().map(|u| u.key()).collect();
        ctx.sources.retain(|k| k != source && live.contains(k));
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
    if !all.iter().any(|o| o.key() == u.key()) {
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
    let me = all.iter().position(|o| o.key() == u.key()).unwrap_or(0);
    match resolution.conflict_for(me) {
        None => Ok(()),
        Some(h) => {
            let holder = &claims[h];
            Err(Failure::new(
                Reason::PrefixConflict,
                format!(
                    "spec.toolPrefix {:?} is held by McpUpstream {}/{}, which claimed it first; this upstream's tools are not published until that one is deleted or changes its prefix",
                    u.spec.tool_prefix, holder.namespace, holder.name
                ),
            ))
        }
    }
}
