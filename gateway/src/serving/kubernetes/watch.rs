//! Watching the published catalog. One kube-runtime reflector over the
//! ConfigMaps labelled `app.kubernetes.io/part-of=toolgate` in one namespace.
//! The watcher re-watches after a cut stream and relists after 410 Gone, and
//! the reflector swaps a relisted set in whole, so a relist never shows a
//! half-empty store. Needs only `get`/`list`/`watch` on ConfigMaps there.

use std::sync::Arc;
use std::time::Duration;

use crds::publish::PART_OF;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Api;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::loader::Loader;
use crate::serving::reload::CatalogStore;

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
    let dir = crate::secret::credentials_dir();
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
