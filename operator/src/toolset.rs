//! The McpToolset controller: resolves which upstreams each toolset takes
//! tools from, publishes it beside the catalog, and reports what it serves.
//!
//! Level-triggered like the upstream controller: a reconcile reads the
//! toolset, the McpUpstream cache and the published index as they are now.
//! An upstream the toolset selects contributes its prefix when the index
//! holds its catalog, i.e. it holds its prefix and has published a version
//! (the last good one, if its newest spec fails): exactly the upstreams
//! `/mcp` serves. Which of their tools the toolset serves is
//! [`Toolset::selects`], the rule the gateway follows when it serves the
//! endpoint, run here on the published catalogs for the status (tool count,
//! estimated `tools/list` size). Those results are kept per toolset and
//! published upstream version, so a reconcile that changes neither the
//! filter nor an upstream's version reads no catalog.
//!
//! What wakes a toolset: its own changes, any change to an upstream it
//! selects or selected last time (labels, spec, status — an upstream writes
//! status after each publish), and every relist of the upstream cache.
//!
//! **No finalizer.** A toolset publishes an index entry and its chunks, and
//! nothing else; the controller unpublishes a toolset when the watch
//! reports its deletion, and after every complete list of toolsets (start,
//! relist after a watch gap) drops the entries of toolsets that are gone,
//! which covers deletions while no operator ran. So deleting a toolset or
//! its namespace never waits for the operator.
//!
//! Size: over 600 lines because this is one controller: the reconcile, what
//! it reads (selection) and what it writes (publish, status) follow each
//! other in the order they run.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use catalog::listing::ListingSize;
use catalog::publish::{IndexEntry, PublishedToolset, PUBLISHED_FORMAT};
use catalog::toolset::{Toolset, ToolsetName};
use crds::conditions::{types, Reason};
use crds::{McpToolset, McpToolsetStatus, McpUpstream, ResolvedUpstream};
use futures::StreamExt;
use kube::api::Api;
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, reflector, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::context::{Context, UpstreamChange};
use crate::error::Error;
use crate::metrics::Kind;
use crate::observe;
use crate::status::{self, Cond};
use crate::sync::lock;
use crate::upstream::controller::{receiver_stream, WatchBackoff};

/// Resync period: a toolset is recomputed at least this often.
const RESYNC: Duration = Duration::from_secs(600);

/// The toolset controller's state, shared by its reconciles.
pub struct Toolsets {
    ctx: Arc<Context>,
    store: Store<McpToolset>,
    /// True once `store` holds its first complete list.
    listed: AtomicBool,
    /// Upstreams (`namespace/name`) each toolset selected last time, so a
    /// change moving an upstream out of a selection still wakes it.
    selected: Mutex<HashMap<ToolsetName, BTreeSet<String>>>,
    /// Per toolset, what it selected in each published upstream version it
    /// takes tools from, by the version's content hash, with the
    /// [`filter_key`] it was computed for. Replaced by every reconcile, so
    /// it holds only current versions.
    selections: Mutex<HashMap<ToolsetName, Selections>>,
}

type Selections = HashMap<String, (String, Arc<Selection>)>;

/// A toolset's tools in one upstream.
#[derive(Debug, Default)]
struct Selection {
    tools: u32,
    size: ListingSize,
    /// Pinned names that are among them.
    pinned: Vec<String>,
}

/// Runs the McpToolset controller until `stop`.
pub async fn run(ctx: Arc<Context>, stop: CancellationToken) -> anyhow::Result<()> {
    let api: Api<McpToolset> = match &ctx.options.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let wc = watcher::Config::default().any_semantic();
    let (store, writer) = reflector::store::<McpToolset>();
    let (sweep_tx, sweep_rx) = mpsc::unbounded_channel::<()>();
    let state = Arc::new(Toolsets {
        ctx: ctx.clone(),
        store: store.clone(),
        listed: AtomicBool::new(false),
        selected: Mutex::default(),
        selections: Mutex::default(),
    });
    let s = state.clone();
    let events = reflector(writer, watcher(api, wc))
        .inspect(move |ev| match ev {
            Ok(watcher::Event::InitDone) => {
                s.listed.store(true, Ordering::Release);
                let _ = sweep_tx.send(());
            }
            Ok(watcher::Event::Delete(_)) => {
                let _ = sweep_tx.send(());
            }
            _ => {}
        })
        .applied_objects();
    tokio::spawn(sweep(state.clone(), sweep_rx, stop.clone()));

    let s = state.clone();
    let upstream_changes = receiver_stream(lock(&ctx.upstream_changes_rx).take())
        .flat_map(move |change| futures::stream::iter(toolsets_to_wake(&s, &change)));
    Controller::for_stream(events, store)
        .trigger_backoff(WatchBackoff::reset_after_quiet())
        .reconcile_on(upstream_changes)
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(reconcile, error_policy, state)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "toolset controller");
            }
        })
        .await;
    Ok(())
}

/// Drops published toolsets that no longer exist, whenever asked (a
/// deletion, a complete list), until `stop`.
async fn sweep(
    state: Arc<Toolsets>,
    mut asked: mpsc::UnboundedReceiver<()>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            got = asked.recv() => if got.is_none() { return },
        }
        // One sweep answers every request made meanwhile.
        while asked.try_recv().is_ok() {}
        if !state.listed.load(Ordering::Acquire) {
            continue;
        }
        loop {
            match state
                .ctx
                .publisher
                .retain_toolsets(|id| state.live(id))
                .await
            {
                Ok(removed) => {
                    for id in removed {
                        tracing::info!(toolset = %id, "unpublished");
                    }
                    lock(&state.selected).retain(|id, _| state.live(id));
                    lock(&state.selections).retain(|id, _| state.live(id));
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "unpublishing deleted toolsets; retrying");
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    }
                }
            }
        }
    }
}

impl Toolsets {
    /// Whether the toolset exists and is not being deleted.
    fn live(&self, id: &ToolsetName) -> bool {
        self.store
            .get(&ObjectRef::new(&id.name).within(&id.namespace))
            .is_some_and(|t| t.meta().deletion_timestamp.is_none())
    }
}

/// Toolsets an upstream change concerns: those selecting the upstream now
/// or last time; every toolset after a relist.
fn toolsets_to_wake(state: &Toolsets, change: &UpstreamChange) -> Vec<ObjectRef<McpToolset>> {
    let all = state.store.state();
    let UpstreamChange::Touched(u) = change else {
        return all
            .iter()
            .map(|t| ObjectRef::from_obj(t.as_ref()))
            .collect();
    };
    let ns = u.namespace.clone().unwrap_or_default();
    let key = format!("{ns}/{}", u.name);
    let labels = state
        .ctx
        .upstreams
        .get()
        .and_then(|s| s.get(u))
        .map(|u| u.labels().clone());
    let before = lock(&state.selected);
    all.iter()
        .filter(|t| {
            before.get(&t.id()).is_some_and(|s| s.contains(&key))
                || labels
                    .as_ref()
                    .is_some_and(|l| could_select(t, &ns, &u.name, l))
        })
        .map(|t| ObjectRef::from_obj(t.as_ref()))
        .collect()
}

/// Whether some entry of `t.spec.upstreams` matches an upstream (a
/// selector that does not parse matches nothing).
fn could_select(t: &McpToolset, ns: &str, name: &str, labels: &BTreeMap<String, String>) -> bool {
    let own = t.namespace().unwrap_or_default();
    t.spec.upstreams.iter().any(|s| {
        let in_ns = if s.namespaces.is_empty() {
            own == ns
        } else {
            s.namespaces.iter().any(|n| n == ns)
        };
        in_ns
            && match (&s.name, &s.selector) {
                (Some(n), _) => n == name,
                (None, Some(sel)) => {
                    Selector::try_from(sel.clone()).is_ok_and(|s| s.matches(labels))
                }
                (None, None) => false,
            }
    })
}

fn error_policy(t: Arc<McpToolset>, e: &Error, state: Arc<Toolsets>) -> Action {
    state.ctx.metrics.reconcile_failed(e);
    tracing::warn!(toolset = %t.id(), error = %e, kind = %e.metric_label(), "toolset reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// A toolset's spec, checked: the filter with defaults, and each
/// `spec.upstreams` entry as a matcher.
struct Spec {
    toolset: Toolset,
    entries: Vec<Entry>,
}

struct Entry {
    namespaces: Vec<String>,
    by: By,
}

enum By {
    Name(String),
    Selector(Selector),
}

impl Spec {
    /// `Err` names the field at fault, as `spec.…`.
    fn read(t: &McpToolset) -> Result<Spec, String> {
        let own = t.namespace().unwrap_or_default();
        let mut entries = Vec::with_capacity(t.spec.upstreams.len());
        if t.spec.upstreams.is_empty() {
            return Err("spec.upstreams: names no upstream".into());
        }
        if t.spec.upstreams.len() > crds::MAX_UPSTREAM_SELECTIONS {
            return Err(format!(
                "spec.upstreams: more than {} entries",
                crds::MAX_UPSTREAM_SELECTIONS
            ));
        }
        for (i, s) in t.spec.upstreams.iter().enumerate() {
            if s.namespaces.len() > crds::MAX_SELECTOR_NAMESPACES {
                return Err(format!(
                    "spec.upstreams[{i}].namespaces: more than {} entries",
                    crds::MAX_SELECTOR_NAMESPACES
                ));
            }
            let by = match (&s.name, &s.selector) {
                (Some(n), None) => By::Name(n.clone()),
                (None, Some(sel)) => By::Selector(
                    Selector::try_from(sel.clone())
                        .map_err(|e| format!("spec.upstreams[{i}].selector: {e}"))?,
                ),
                _ => {
                    return Err(format!(
                        "spec.upstreams[{i}]: exactly one of name or selector must be set"
                    ))
                }
            };
            let namespaces = if s.namespaces.is_empty() {
                vec![own.clone()]
            } else {
                s.namespaces.clone()
            };
            entries.push(Entry { namespaces, by });
        }
        let toolset = Toolset {
            tools: t.spec.tools.clone().unwrap_or_default(),
            mode: t.spec.mode,
            pinned: t.spec.pinned.clone(),
            descriptions: t.spec.meta_tool_descriptions.clone().unwrap_or_default(),
            ..Toolset::new(t.id())
        };
        toolset.check().map_err(|e| format!("spec.{e}"))?;
        Ok(Spec { toolset, entries })
    }
}

/// What a toolset's `spec.upstreams` matched in the upstream cache.
struct Resolution {
    /// Sorted by `namespace/name`.
    upstreams: Vec<Arc<McpUpstream>>,
    /// Namespaces it names that the operator does not watch.
    unwatched: BTreeSet<String>,
}

fn resolve(ctx: &Context, spec: &Spec, all: &[Arc<McpUpstream>]) -> Resolution {
    let mut unwatched = BTreeSet::new();
    let mut found: BTreeMap<String, Arc<McpUpstream>> = BTreeMap::new();
    for entry in &spec.entries {
        for ns in &entry.namespaces {
            if ctx.options.namespace.as_ref().is_some_and(|w| w != ns) {
                unwatched.insert(ns.clone());
                continue;
            }
            for u in all {
                if u.namespace().as_deref() != Some(ns.as_str()) {
                    continue;
                }
                let hit = match &entry.by {
                    By::Name(n) => u.name_any() == *n,
                    By::Selector(s) => s.matches(u.labels()),
                };
                if hit {
                    found.insert(u.key(), u.clone());
                }
            }
        }
    }
    Resolution {
        upstreams: found.into_values().collect(),
        unwatched,
    }
}

async fn reconcile(t: Arc<McpToolset>, state: Arc<Toolsets>) -> Result<Action, Error> {
    let work = apply(&t, &state);
    observe::reconcile(&state.ctx.metrics, Kind::McpToolset, t.as_ref(), work).await
}

async fn apply(t: &Arc<McpToolset>, state: &Arc<Toolsets>) -> Result<Action, Error> {
    let ctx = &state.ctx;
    // The upstream cache's first list, before anything is resolved
    // against it: before, every selection would look empty.
    let (Some(upstreams), Some(listed)) = (ctx.upstreams.get(), ctx.upstreams_listed.get()) else {
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    if listed.clone().wait_for(|listed| *listed).await.is_err() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let id = t.id();
    if t.meta().deletion_timestamp.is_some() {
        // Held by someone else's finalizer: it stops serving now.
        ctx.publisher.retain_toolsets(|id| state.live(id)).await?;
        return Ok(Action::await_change());
    }
    let spec = match Spec::read(t) {
        Ok(spec) => spec,
        Err(message) => return invalid(ctx, t, message).await,
    };
    let resolution = resolve(ctx, &spec, &upstreams.state());
    lock(&state.selected).insert(
        id.clone(),
        resolution.upstreams.iter().map(|u| u.key()).collect(),
    );

    let index = ctx.publisher.index().await?;
    let by_source: HashMap<&str, &IndexEntry> = index
        .upstreams
        .iter()
        .map(|e| (e.source.as_str(), e))
        .collect();
    let mut toolset = spec.toolset;
    let contributing: Vec<(&Arc<McpUpstream>, &IndexEntry)> = resolution
        .upstreams
        .iter()
        .filter_map(|u| by_source.get(u.key().as_str()).map(|e| (u, *e)))
        .collect();
    toolset.upstreams = contributing.iter().map(|(_, e)| e.prefix.clone()).collect();
    if let Err(e) = toolset.check() {
        let message = format!("spec.upstreams: {}; narrow the selection", e.message);
        return invalid(ctx, t, message).await;
    }
    let mut resolved = Vec::with_capacity(contributing.len());
    let mut size = ListingSize::default();
    let mut pinned_found = BTreeSet::new();
    let key = filter_key(&toolset);
    let known = lock(&state.selections).remove(&id).unwrap_or_default();
    let mut selections = Selections::new();
    for (u, e) in &contributing {
        let sel = match known.get(&e.hash) {
            Some((k, sel)) if *k == key => sel.clone(),
            _ => state.selection(&toolset, e).await?,
        };
        selections.insert(e.hash.clone(), (key.clone(), sel.clone()));
        size = size + sel.size;
        pinned_found.extend(sel.pinned.iter().cloned());
        resolved.push(ResolvedUpstream {
            namespace: u.namespace().unwrap_or_default(),
            name: u.name_any(),
            prefix: e.prefix.clone(),
            tools: sel.tools,
        });
    }
    lock(&state.selections).insert(id.clone(), selections);

    let published = PublishedToolset {
        format: PUBLISHED_FORMAT.into(),
        toolset,
    };
    let encoded = catalog::publish::encode_toolset(&published, catalog::publish::MAX_CHUNK_BYTES);
    let out = ctx
        .publisher
        .publish_toolset(&id, &encoded, |id| state.live(id))
        .await?;
    if out.changed {
        ctx.metrics.published(out.chunk_bytes);
        tracing::info!(toolset = %id, hash = %out.entry.hash, upstreams = resolved.len(), "toolset published");
    }

    let tool_count: u32 = resolved.iter().map(|r| r.tools).sum();
    let ready = readiness(
        &published.toolset,
        &resolution,
        &resolved,
        &pinned_found,
        tool_count,
    );
    let old = t.status.clone().unwrap_or_default();
    let new = McpToolsetStatus {
        observed_generation: t.metadata.generation,
        conditions: status::merge(&old.conditions, &[ready], t.metadata.generation),
        tool_count: Some(tool_count),
        listing: Some(size.into()),
        upstreams: resolved,
    };
    write_status(ctx, t, &old, &new).await?;
    Ok(Action::requeue(RESYNC))
}

/// Reports a toolset that cannot be published as it is (`message` names
/// the field), describing what still serves.
async fn invalid(ctx: &Context, t: &McpToolset, message: String) -> Result<Action, Error> {
    let old = t.status.clone().unwrap_or_default();
    let ready = Cond::fail(
        types::READY,
        Reason::InvalidSettings,
        format!("{message}; the last published version (if any) keeps serving"),
    );
    let new = McpToolsetStatus {
        observed_generation: t.metadata.generation,
        conditions: status::merge(&old.conditions, &[ready], t.metadata.generation),
        ..old.clone()
    };
    write_status(ctx, t, &old, &new).await?;
    Ok(Action::requeue(RESYNC))
}

/// The `Ready` condition: what the toolset serves, or why it serves
/// nothing, and what it selected that contributes nothing.
fn readiness(
    toolset: &Toolset,
    resolution: &Resolution,
    resolved: &[ResolvedUpstream],
    pinned_found: &BTreeSet<String>,
    tool_count: u32,
) -> Cond {
    let contributing: HashSet<String> = resolved
        .iter()
        .map(|r| format!("{}/{}", r.namespace, r.name))
        .collect();
    let idle: Vec<String> = resolution
        .upstreams
        .iter()
        .filter(|u| !contributing.contains(&u.key()))
        .map(|u| format!("{} ({})", u.key(), why_not_published(u)))
        .collect();
    let mut notes = Vec::new();
    if !idle.is_empty() && !resolved.is_empty() {
        notes.push(format!("selected but serving nothing: {}", idle.join(", ")));
    }
    if !resolution.unwatched.is_empty() {
        notes.push(format!(
            "namespace(s) {} are not watched by the operator",
            resolution
                .unwatched
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let unpinned: Vec<&str> = toolset
        .pinned
        .iter()
        .filter(|p| !pinned_found.contains(*p))
        .map(String::as_str)
        .collect();
    if !unpinned.is_empty() && !resolved.is_empty() {
        notes.push(format!(
            "spec.pinned names tools the toolset does not serve, ignored: {}",
            unpinned.join(", ")
        ));
    }
    let with_notes = |head: String| {
        if notes.is_empty() {
            head
        } else {
            format!("{head}; {}", notes.join("; "))
        }
    };
    if tool_count > 0 {
        let from: Vec<String> = resolved
            .iter()
            .map(|r| format!("{}/{} ({}: {})", r.namespace, r.name, r.prefix, r.tools))
            .collect();
        return Cond::ok(
            types::READY,
            Reason::Resolved,
            with_notes(format!(
                "serves {tool_count} tools of {} upstream(s): {}",
                resolved.len(),
                from.join(", ")
            )),
        );
    }
    if resolved.is_empty() {
        let head = if idle.is_empty() {
            "spec.upstreams matches no McpUpstream".to_string()
        } else {
            format!(
                "no McpUpstream it selects is published: {}",
                idle.join(", ")
            )
        };
        return Cond::fail(types::READY, Reason::NoUpstreamsMatched, with_notes(head));
    }
    let names: Vec<String> = resolved
        .iter()
        .map(|r| format!("{}/{}", r.namespace, r.name))
        .collect();
    Cond::fail(
        types::READY,
        Reason::NoToolsMatched,
        with_notes(format!("no tool of {} passes spec.tools", names.join(", "))),
    )
}

/// Why a selected upstream has no published catalog, from its status.
fn why_not_published(u: &McpUpstream) -> String {
    if u.meta().deletion_timestamp.is_some() {
        return "being deleted".into();
    }
    match u.status.as_ref().and_then(|s| status::ready(&s.conditions)) {
        Some(c) => format!(
            "Ready={}, {}: {}",
            c.status,
            c.reason,
            status::truncate(&c.message, 200)
        ),
        None => "not reconciled yet".into(),
    }
}

impl Toolsets {
    /// What `toolset` selects in the upstream version `entry` publishes,
    /// read from its chunks.
    async fn selection(
        &self,
        toolset: &Toolset,
        entry: &IndexEntry,
    ) -> Result<Arc<Selection>, Error> {
        let Some(chunks) = self.ctx.publisher.chunks(entry).await? else {
            return Err(Error::Transient(format!(
                "upstream {} ({}): its published chunks changed while being read",
                entry.prefix, entry.source
            )));
        };
        let (entry, toolset) = (entry.clone(), toolset.clone());
        // Decoding a large catalog is CPU-bound: off the async workers.
        let selection = tokio::task::spawn_blocking(move || {
            let parts: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            let up = catalog::publish::decode(&entry, &parts).map_err(|e| e.to_string())?;
            let advertise = up.runtime.response_validation.advertises_output_schemas();
            let mut s = Selection::default();
            for tool in &up.catalog.tools {
                if toolset.selects(&up.catalog, tool) {
                    s.tools += 1;
                    s.size = s.size
                        + ListingSize::of_bytes(catalog::listing::tool_bytes(tool, advertise));
                    if toolset.pinned.contains(&tool.name) {
                        s.pinned.push(tool.name.clone());
                    }
                }
            }
            drop(up);
            catalog::release_freed_memory();
            Ok::<_, String>(s)
        })
        .await
        .map_err(|e| Error::Transient(format!("reading a published catalog: {e}")))?
        .map_err(Error::Transient)?;
        Ok(Arc::new(selection))
    }
}

/// Identifies what decides a [`Selection`] besides the upstream version:
/// the filter and the pinned names.
fn filter_key(toolset: &Toolset) -> String {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(&toolset.tools).unwrap_or_default());
    h.update([0]);
    h.update(serde_json::to_vec(&toolset.pinned).unwrap_or_default());
    hex::encode(h.finalize())
}

async fn write_status(
    ctx: &Context,
    t: &McpToolset,
    old: &McpToolsetStatus,
    new: &McpToolsetStatus,
) -> Result<(), Error> {
    if new == old {
        return Ok(());
    }
    let api: Api<McpToolset> =
        Api::namespaced(ctx.client.clone(), &t.namespace().unwrap_or_default());
    status::apply(&api, &t.name_any(), new).await?;
    ctx.metrics.status_written();
    Ok(())
}
