//! Kubernetes mode (`toolgate serve --kube`): the catalog and the upstream
//! settings come from what the operator publishes in the gateway's
//! namespace (see `crds::publish` for the objects, `catalog::publish` for
//! their content), and are hot-swapped as they change.
//!
//! **Watching.** One kube-runtime reflector over the ConfigMaps labelled
//! `app.kubernetes.io/part-of=toolgate` in one namespace. The watcher
//! re-watches after a cut stream and relists after 410 Gone, and the
//! reflector swaps a relisted set in whole, so a relist never shows a
//! half-empty store. Needs only `get`/`list`/`watch` on ConfigMaps there.
//!
//! **Loading.** After a burst of changes has settled ([`KubeOptions::debounce`])
//! the index is read and every upstream it names is assembled from its
//! chunk ConfigMaps and checked ([`catalog::publish::decode`]). The
//! operator writes chunks before the index, so a missing or mismatched
//! chunk is normally transient: that upstream keeps serving the version
//! served before (a new upstream waits), the others load, and the next
//! ConfigMap event retries. The catalog and the [`GatewayConfig`] built
//! from the upstreams' runtime settings are installed together
//! ([`CatalogStore::install_with_config`]); sessions see
//! `notifications/tools/list_changed` as with a catalog file.
//!
//! **What is served** is reported by `/status`: the hash of the index
//! entries actually served ([`Index::hash`]), which equals the published
//! index's hash once everything loaded.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use catalog::publish::{catalog_of, decode, Index, IndexEntry, PublishedUpstream};
use crds::publish::{CHUNK_KEY, INDEX_KEY, INDEX_NAME, PART_OF};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Api;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::GatewayConfig;
use crate::reload::CatalogStore;
use crate::snapshot::{now_rfc3339, Provenance, UpstreamProvenance};

/// How the published catalog is watched.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// Namespace the operator publishes into (the gateway's own).
    pub namespace: String,
    /// Quiet time after a change before loading, so a publish of several
    /// objects makes one swap.
    pub debounce: Duration,
    /// Longest a load waits behind a steady stream of changes.
    pub max_delay: Duration,
}

impl KubeOptions {
    pub fn new(namespace: impl Into<String>) -> Self {
        KubeOptions {
            namespace: namespace.into(),
            debounce: Duration::from_millis(80),
            max_delay: Duration::from_secs(2),
        }
    }
}

/// Watches the published catalog in `opts.namespace` and installs every
/// new version into `store` until `shutdown`. Watch errors are logged and
/// retried with backoff; this only returns on shutdown.
pub async fn watch_published(
    client: kube::Client,
    store: Arc<CatalogStore>,
    opts: KubeOptions,
    shutdown: CancellationToken,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &opts.namespace);
    let selector = format!("{}={}", PART_OF.0, PART_OF.1);
    // Chunks are up to ~1 MiB each: small list pages bound the size of
    // one list response.
    let config = watcher::Config::default().labels(&selector).page_size(16);
    let (reader, writer) = reflector::store::<ConfigMap>();
    let events = reflector(writer, watcher(api, config)).default_backoff();
    let mut events = std::pin::pin!(events);
    tracing::info!(namespace = %opts.namespace, selector = %selector, "watching the published catalog");

    let mut loader = Some(Loader::new(opts.namespace.clone()));
    let mut synced = false;
    // When to load: set by a change, pushed back by further changes up to
    // `max_delay` after the first.
    let mut due: Option<(Instant, Instant)> = None;
    let mut retry = FIRST_RETRY;
    // Rotated credentials arrive as files (the kubelet rewrites the mounted
    // Secret), not as watch events: notice them and rebuild.
    let mut credentials = credentials_fingerprint();
    let mut rebuild = false;
    let mut check = tokio::time::interval(CREDENTIALS_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let wake = due.map(|(at, _)| at);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = check.tick() => {
                let now = credentials_fingerprint();
                if now != credentials {
                    credentials = now;
                    if synced {
                        tracing::info!("credentials changed; rebuilding the upstream clients");
                        rebuild = true;
                        due = Some((Instant::now(), Instant::now()));
                    }
                }
            }
            ev = events.next() => match ev {
                None => {
                    tracing::error!("ConfigMap watch ended; no further catalog updates");
                    return;
                }
                Some(Err(watcher::Error::WatchError(s))) if s.code == 410 => {
                    tracing::info!(namespace = %opts.namespace, "ConfigMap watch too old (410 Gone); relisting");
                }
                Some(Err(e)) => {
                    tracing::warn!(namespace = %opts.namespace, error = %e, "watching ConfigMaps failed; retrying");
                }
                Some(Ok(ev)) => {
                    if matches!(ev, watcher::Event::InitDone) {
                        synced = true;
                    }
                    // Objects of a relist are applied at InitDone; loading
                    // before that would see the previous set.
                    if synced && !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
                        let now = Instant::now();
                        let first = due.map_or(now, |(_, first)| first);
                        let at = (now + opts.debounce).min(first + opts.max_delay);
                        due = Some((at, first));
                    }
                }
            },
            _ = sleep_until(wake), if wake.is_some() => {
                due = None;
                let objects = reader.state();
                let Some(mut l) = loader.take() else { return };
                let store = store.clone();
                let force = std::mem::take(&mut rebuild);
                // Decoding and building compile every schema: keep them
                // off the async workers.
                let pending = match tokio::task::spawn_blocking(move || {
                    if force {
                        l.installed = None;
                    }
                    let pending = l.sync(&objects, &store);
                    (l, pending)
                })
                .await
                {
                    Ok((l, pending)) => {
                        loader = Some(l);
                        pending
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "catalog load aborted");
                        loader = Some(Loader::new(opts.namespace.clone()));
                        true
                    }
                };
                // NB: not everything that holds an upstream back is a
                // ConfigMap: a credentials file appears when the kubelet
                // syncs the mounted Secret, up to a minute or so after the
                // operator wrote it. So retry on a timer as well.
                if pending {
                    let now = Instant::now();
                    due = Some((now + retry, now));
                    retry = (retry * 2).min(MAX_RETRY);
                } else {
                    retry = FIRST_RETRY;
                }
            }
        }
    }
}

/// How often the credentials directory is checked for rotated files.
const CREDENTIALS_CHECK: Duration = Duration::from_secs(2);

/// Names, sizes and modification times in the credentials directory (and
/// the kubelet's `..data` link, which moves on every Secret update).
fn credentials_fingerprint() -> Vec<(String, u64, Option<std::time::SystemTime>)> {
    let dir = crate::config::credentials_dir();
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let link = std::fs::read_link(e.path())
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            let meta = std::fs::metadata(e.path()).ok();
            (
                format!("{name}>{link}"),
                meta.as_ref().map_or(0, |m| m.len()),
                meta.and_then(|m| m.modified().ok()),
            )
        })
        .collect();
    out.sort();
    out
}

/// Retry delays while a published upstream is not served at its
/// published version.
const FIRST_RETRY: Duration = Duration::from_secs(2);
const MAX_RETRY: Duration = Duration::from_secs(60);

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One upstream as served: its index entry and the chunk objects it was
/// decoded from (kept, so it can be rebuilt after the operator has
/// replaced them).
#[derive(Clone)]
struct Served {
    entry: IndexEntry,
    chunks: Vec<Arc<ConfigMap>>,
}

impl Served {
    fn decode(&self) -> Result<PublishedUpstream, String> {
        let mut parts: Vec<&[u8]> = Vec::with_capacity(self.chunks.len());
        for (cm, r) in self.chunks.iter().zip(&self.entry.chunks) {
            match chunk_bytes(cm) {
                Some(b) => parts.push(b),
                None => {
                    return Err(format!(
                        "ConfigMap {} has no binaryData {CHUNK_KEY}",
                        r.name
                    ))
                }
            }
        }
        decode(&self.entry, &parts).map_err(|e| e.message)
    }
}

fn chunk_bytes(cm: &ConfigMap) -> Option<&[u8]> {
    cm.binary_data
        .as_ref()?
        .get(CHUNK_KEY)
        .map(|b| b.0.as_slice())
}

/// Turns the watched ConfigMaps into installs; remembers what is served.
struct Loader {
    namespace: String,
    /// What is installed, by prefix.
    served: BTreeMap<String, Served>,
    /// Hash of the installed set (None before the first install).
    installed: Option<String>,
    /// The last problem logged per prefix (or for the index), so a
    /// pending upstream is not logged again on every event.
    reported: BTreeMap<String, String>,
}

/// A candidate upstream: where it comes from and its content.
struct Candidate {
    served: Served,
    upstream: PublishedUpstream,
}

impl Loader {
    fn new(namespace: String) -> Self {
        Loader {
            namespace,
            served: BTreeMap::new(),
            installed: None,
            reported: BTreeMap::new(),
        }
    }

    /// Logs `message` for `key` unless it is what was logged last time.
    fn report(&mut self, key: &str, message: String, error: bool) {
        if self.reported.get(key) == Some(&message) {
            return;
        }
        if error {
            tracing::error!(namespace = %self.namespace, "{message}");
        } else {
            tracing::warn!(namespace = %self.namespace, "{message}");
        }
        self.reported.insert(key.to_string(), message);
    }

    /// Loads what `objects` publish, if it differs from what is served.
    /// True while something published is not served as published (a retry
    /// may help).
    fn sync(&mut self, objects: &[Arc<ConfigMap>], store: &CatalogStore) -> bool {
        let by_name: HashMap<&str, &Arc<ConfigMap>> = objects
            .iter()
            .filter_map(|cm| Some((cm.metadata.name.as_deref()?, cm)))
            .collect();
        let Some(index_cm) = by_name.get(INDEX_NAME) else {
            let what = if self.installed.is_some() {
                "; the last loaded catalog keeps serving"
            } else {
                "; not ready until it is published"
            };
            self.report(
                "",
                format!(
                    "no ConfigMap {INDEX_NAME} in namespace {}{what}",
                    self.namespace
                ),
                false,
            );
            // The index arriving is a watch event: no retry needed.
            return false;
        };
        // NB: a missing key is not an empty index: serving nothing because
        // of a malformed object would take every tool away.
        let Some(text) = index_cm.data.as_ref().and_then(|d| d.get(INDEX_KEY)) else {
            self.report(
                "",
                format!("ConfigMap {INDEX_NAME} has no data key {INDEX_KEY}; the last loaded catalog keeps serving"),
                true,
            );
            return false;
        };
        let index = match Index::parse(text) {
            Ok(i) => i,
            Err(e) => {
                self.report(
                    "",
                    format!("ConfigMap {INDEX_NAME} key {INDEX_KEY}: {e}; the last loaded catalog keeps serving"),
                    true,
                );
                return false;
            }
        };
        self.reported.remove("");

        let mut candidates: Vec<Candidate> = Vec::new();
        for entry in &index.upstreams {
            if let Some(c) = self.candidate(entry, &by_name) {
                candidates.push(c);
            }
        }
        self.install(candidates, store);
        index
            .upstreams
            .iter()
            .any(|e| self.served.get(&e.prefix).map(|s| &s.entry) != Some(e))
    }

    /// The version of `entry`'s upstream to serve: the published one if it
    /// is complete and valid, else the one served so far, else none.
    fn candidate(
        &mut self,
        entry: &IndexEntry,
        by_name: &HashMap<&str, &Arc<ConfigMap>>,
    ) -> Option<Candidate> {
        let prefix = entry.prefix.as_str();
        let previous = self.served.get(prefix).cloned();
        let fresh = match &previous {
            // Unchanged: no need for the (possibly already replaced) objects.
            Some(p) if p.entry == *entry => Ok(p.clone()),
            _ => {
                let missing: Vec<&str> = entry
                    .chunks
                    .iter()
                    .filter(|r| {
                        by_name
                            .get(r.name.as_str())
                            .and_then(|cm| chunk_bytes(cm))
                            .is_none()
                    })
                    .map(|r| r.name.as_str())
                    .collect();
                if missing.is_empty() {
                    Ok(Served {
                        entry: entry.clone(),
                        chunks: entry
                            .chunks
                            .iter()
                            .filter_map(|r| by_name.get(r.name.as_str()).map(|cm| Arc::clone(cm)))
                            .collect(),
                    })
                } else {
                    Err((
                        format!(
                            "upstream {prefix} ({}): chunk ConfigMap(s) {} not found (or without binaryData {CHUNK_KEY}); waiting for them",
                            entry.source,
                            missing.join(", ")
                        ),
                        false,
                    ))
                }
            }
        };
        let decoded = fresh.and_then(|s| match s.decode() {
            Ok(u) => Ok((s, u)),
            Err(e) => Err((
                format!(
                    "upstream {prefix} ({}) from ConfigMap(s) {}: {e}",
                    entry.source,
                    chunk_list(entry)
                ),
                true,
            )),
        });
        match decoded {
            Ok((served, upstream)) => {
                self.reported.remove(prefix);
                Some(Candidate { served, upstream })
            }
            Err((message, error)) => {
                let fallback = previous.and_then(|p| p.decode().ok().map(|u| (p, u)));
                let tail = if fallback.is_some() {
                    "; the previous version keeps serving"
                } else {
                    "; not served until it loads"
                };
                self.report(prefix, format!("{message}{tail}"), error);
                fallback.map(|(served, upstream)| Candidate { served, upstream })
            }
        }
    }

    /// Installs `candidates` unless that is what is served. An upstream the
    /// gateway cannot serve (say, its credentials file is missing) falls
    /// back to its previous version or is left out; the others still load.
    fn install(&mut self, mut candidates: Vec<Candidate>, store: &CatalogStore) {
        // Each round removes or replaces one upstream, so this ends.
        for _ in 0..=candidates.len() * 2 + 1 {
            let hash = served_hash(&candidates);
            if self.installed.as_deref() == Some(hash.as_str()) {
                return;
            }
            let upstreams: Vec<PublishedUpstream> =
                candidates.iter().map(|c| c.upstream.clone()).collect();
            let config = GatewayConfig {
                upstreams: upstreams
                    .iter()
                    .map(|u| (u.catalog.prefix.clone(), u.runtime.clone()))
                    .collect(),
            };
            let provenance = Provenance {
                catalog_hash: hash.clone(),
                tools: upstreams.iter().map(|u| u.catalog.tools.len()).sum(),
                upstreams: candidates
                    .iter()
                    .map(|c| UpstreamProvenance {
                        prefix: c.served.entry.prefix.clone(),
                        source: c.upstream.source.clone(),
                        hash: c.served.entry.hash.clone(),
                        tools: c.upstream.catalog.tools.len(),
                    })
                    .collect(),
                loaded_at: now_rfc3339(),
            };
            let catalog = catalog_of(&upstreams);
            drop(upstreams);
            match store.install_with_config(catalog, config, provenance) {
                Ok(d) => {
                    tracing::info!(
                        namespace = %self.namespace,
                        catalog_hash = %hash,
                        upstreams = candidates.len(),
                        added = d.added.len(),
                        removed = d.removed.len(),
                        modified = d.modified.len(),
                        "published catalog loaded"
                    );
                    for c in &candidates {
                        self.reported
                            .remove(&format!("build {}", c.served.entry.prefix));
                    }
                    self.served = candidates
                        .into_iter()
                        .map(|c| (c.served.entry.prefix.clone(), c.served))
                        .collect();
                    self.installed = Some(hash);
                    return;
                }
                Err(e) => {
                    // A tool name two upstreams produce stays with the one
                    // already serving it: a newcomer never takes over
                    // another's tool, whatever the catalog order.
                    let out = match &e.held_by {
                        Some(first)
                            if !self.served.contains_key(first)
                                && self.served.contains_key(&e.upstream) =>
                        {
                            first.as_str()
                        }
                        _ => e.upstream.as_str(),
                    };
                    let Some(i) = candidates.iter().position(|c| c.served.entry.prefix == out)
                    else {
                        tracing::error!(namespace = %self.namespace, error = %e, "published catalog not loaded; the previous catalog keeps serving");
                        return;
                    };
                    let prefix = out.to_string();
                    let why = if out == e.upstream {
                        e.to_string()
                    } else {
                        format!(
                            "tool {} is already served by upstream {}",
                            e.tool.as_deref().unwrap_or_default(),
                            e.upstream
                        )
                    };
                    let previous = self
                        .served
                        .get(&prefix)
                        .filter(|p| p.entry != candidates[i].served.entry)
                        .cloned()
                        .and_then(|p| p.decode().ok().map(|u| (p, u)));
                    let tail = if previous.is_some() {
                        "; the previous version keeps serving"
                    } else {
                        "; not served until it loads"
                    };
                    self.report(
                        &format!("build {prefix}"),
                        format!(
                            "upstream {prefix} ({}) cannot be served: {why}{tail}",
                            candidates[i].upstream.source
                        ),
                        true,
                    );
                    match previous {
                        Some((served, upstream)) => candidates[i] = Candidate { served, upstream },
                        None => {
                            candidates.remove(i);
                        }
                    }
                }
            }
        }
    }
}

/// [`Index::hash`] of the entries in `candidates`.
fn served_hash(candidates: &[Candidate]) -> String {
    Index {
        format: catalog::publish::PUBLISHED_FORMAT.to_string(),
        upstreams: candidates.iter().map(|c| c.served.entry.clone()).collect(),
    }
    .hash()
}

fn chunk_list(entry: &IndexEntry) -> String {
    entry
        .chunks
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How often a replica renews its report while nothing changes, and how
/// long the operator trusts a report that is not renewed.
pub const REPORT_RENEW: Duration = Duration::from_secs(10);
pub const REPORT_TTL_SECONDS: i32 = 30;

/// Reports what this replica serves in a Lease of its own
/// (`crds::publish::gateway_lease_name`), so the operator can say how many
/// replicas serve each published upstream. Written when what is served
/// changes (checked every 250 ms) and renewed every [`REPORT_RENEW`];
/// deleted on shutdown so the operator stops counting this replica at once.
/// With `pod_uid` (the replica is Pod `replica`), the Lease is owned by the
/// Pod, so a replica that crashes leaves no report behind either: the
/// garbage collector deletes it with the Pod.
pub async fn report_served(
    client: kube::Client,
    store: Arc<CatalogStore>,
    namespace: String,
    replica: String,
    pod_uid: Option<String>,
    shutdown: CancellationToken,
) {
    use catalog::publish::Served;
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
    use kube::api::{DeleteParams, PostParams};

    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let name = crds::publish::gateway_lease_name(&replica);
    let owner = pod_uid.map(|uid| {
        vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: replica.clone(),
            uid,
            ..Default::default()
        }]
    });
    let mut last: Option<(Served, Instant)> = None;
    loop {
        let p = store.load().provenance.clone();
        let served = Served {
            catalog_hash: p.catalog_hash.clone(),
            upstreams: p
                .upstreams
                .iter()
                .map(|u| (u.prefix.clone(), u.hash.clone()))
                .collect(),
        };
        let due = match &last {
            Some((s, at)) => *s != served || at.elapsed() >= REPORT_RENEW,
            None => true,
        };
        if due {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.clone()),
                    labels: Some(BTreeMap::from([
                        (PART_OF.0.to_string(), PART_OF.1.to_string()),
                        (
                            crds::publish::COMPONENT.to_string(),
                            crds::publish::COMPONENT_GATEWAY.to_string(),
                        ),
                    ])),
                    annotations: Some(BTreeMap::from([(
                        crds::publish::SERVED_ANNOTATION.to_string(),
                        serde_json::to_string(&served).unwrap_or_default(),
                    )])),
                    owner_references: owner.clone(),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(replica.clone()),
                    lease_duration_seconds: Some(REPORT_TTL_SECONDS),
                    renew_time: Some(MicroTime(jiff::Timestamp::now())),
                    ..Default::default()
                }),
            };
            let pp = PostParams {
                field_manager: Some("toolgate-gateway".into()),
                ..Default::default()
            };
            let written = match api.get_opt(&name).await {
                Ok(Some(old)) => {
                    let mut l = lease;
                    l.metadata.resource_version = old.metadata.resource_version;
                    api.replace(&name, &pp, &l).await.map(drop)
                }
                Ok(None) => api.create(&pp, &lease).await.map(drop),
                Err(e) => Err(e),
            };
            match written {
                Ok(()) => last = Some((served, Instant::now())),
                Err(e) => {
                    tracing::warn!(lease = %name, error = %e, "reporting what this replica serves")
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
    if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
        tracing::debug!(lease = %name, error = %e, "removing the served report");
    }
}
