//! Watch streams: newline-delimited JSON `WatchEvent`s over a chunked
//! HTTP response.
//!
//! Faithful: no resourceVersion (or "0") starts with synthetic `ADDED`
//! events for the current state; resourceVersion N replays every change
//! after N from history, then streams live changes; a compacted N yields a
//! single `ERROR` event carrying a 410 `Status` (reason Expired) and ends
//! the stream, so clients relist; label/field selectors filter events, and
//! an object that stops (starts) matching is reported as `DELETED`
//! (`ADDED`); `allowWatchBookmarks` sends `BOOKMARK` events carrying only
//! `metadata.resourceVersion`; `sendInitialEvents=true` ends the initial
//! events with a bookmark annotated `k8s.io/initial-events-end: "true"`;
//! `timeoutSeconds` ends the stream; `Accept: ...;as=PartialObjectMetadata`
//! streams metadata only, `as=Table` one-row Tables (`kubectl get -w`).
//! Simplified: bookmarks come every `bookmark_interval` (default 1s, the
//! real server's is about a minute); a watcher that falls more than 8192
//! events behind is disconnected (it resumes from its last resourceVersion,
//! still in history).

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use super::discovery::ResourceType;
use super::kinds::present;
use super::selector::{FieldSelector, LabelSelector};
use super::store::{metadata_only, Change, ChangeKind};
use super::table::table;
use super::State;

pub(crate) struct WatchRequest {
    pub rt: Arc<ResourceType>,
    pub version: String,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// None for "" and "0": start from the current state.
    pub resource_version: Option<u64>,
    pub bookmarks: bool,
    pub send_initial: bool,
    pub timeout: Option<Duration>,
    /// Objects as `PartialObjectMetadata` (kube's metadata watchers).
    pub metadata_only: bool,
    /// Objects as one-row Tables with this `includeObject` (`kubectl get -w`).
    pub table: Option<String>,
}

impl WatchRequest {
    fn matches(&self, o: &Value) -> bool {
        let ns_ok = self
            .namespace
            .as_deref()
            .is_none_or(|ns| o["metadata"]["namespace"].as_str() == Some(ns));
        ns_ok && self.labels.matches(o) && self.fields.matches(o)
    }

    /// The event a change becomes for this watcher, if any.
    fn event_for(&self, c: &Change) -> Option<Value> {
        let now = self.matches(&c.object);
        let before = c.old.as_ref().is_some_and(|o| self.matches(o));
        let ty = match c.kind {
            ChangeKind::Added if now => "ADDED",
            ChangeKind::Modified if now && before => "MODIFIED",
            ChangeKind::Modified if now => "ADDED",
            ChangeKind::Modified if before => "DELETED",
            ChangeKind::Deleted if now || before => "DELETED",
            _ => return None,
        };
        Some(json!({"type": ty, "object": self.render(&c.object)}))
    }

    fn render(&self, o: &Value) -> Value {
        if let Some(include) = &self.table {
            let rv = o["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            let obj = present(o, &self.rt, &self.version);
            return table(&self.rt, &self.version, &[obj], rv, include);
        }
        match self.metadata_only {
            true => metadata_only(o),
            false => present(o, &self.rt, &self.version),
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Value {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({"type": "BOOKMARK", "object": {
            "kind": self.rt.kind, "apiVersion": self.rt.api_version(&self.version), "metadata": meta}})
    }
}

fn line(v: &Value) -> Bytes {
    let mut s = v.to_string();
    s.push('\n');
    Bytes::from(s)
}

/// Starts a watch; the body streams until timeout, disconnect, or
/// `cut_watches`.
pub(crate) fn start(state: Arc<State>, req: WatchRequest) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let mut initial = Vec::new();
    let subscribed = {
        let store = state.lock();
        let key = req.rt.storage_key();
        let from = req.resource_version.unwrap_or(store.rv());
        if req.resource_version.is_none() || req.send_initial {
            for o in store.all(&key).iter().filter(|o| req.matches(o)) {
                initial.push(json!({"type": "ADDED", "object": req.render(o)}));
            }
        }
        match store.subscribe(&key, from) {
            Ok((replay, live)) => Ok((replay, live, from)),
            Err(e) => Err(e),
        }
    };
    let mut cut = state.cut.subscribe();
    let published = state.published.clone();
    let interval = state.options.bookmark_interval;
    tokio::spawn(async move {
        let send = |v: Value| {
            let tx = tx.clone();
            async move { tx.send(line(&v)).await.is_ok() }
        };
        let (replay, mut live, from) = match subscribed {
            Ok(s) => s,
            Err(e) => {
                let _ = send(json!({"type": "ERROR", "object": e.to_status()})).await;
                return;
            }
        };
        let mut last = from;
        for ev in initial {
            if !send(ev).await {
                return;
            }
        }
        if req.send_initial && req.bookmarks && !send(req.bookmark(last, true)).await {
            return;
        }
        for c in replay {
            last = c.rv;
            if let Some(ev) = req.event_for(&c) {
                if !send(ev).await {
                    return;
                }
            }
        }
        let deadline = req.timeout.map(|t| tokio::time::Instant::now() + t);
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        let key = req.rt.storage_key();
        loop {
            let sleep_until = deadline
                .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(86400));
            tokio::select! {
                _ = tokio::time::sleep_until(sleep_until) => return,
                _ = cut.changed() => return,
                _ = tx.closed() => return,
                _ = ticker.tick(), if req.bookmarks => {
                    // Read the published version first, then drain: every
                    // change up to it is already queued for us.
                    let upto = published.load(Ordering::SeqCst);
                    loop {
                        match live.try_recv() {
                            Ok(c) => {
                                if c.rv <= last || c.key != key { continue; }
                                last = c.rv;
                                if let Some(ev) = req.event_for(&c) {
                                    if !send(ev).await { return; }
                                }
                            }
                            Err(broadcast::error::TryRecvError::Empty) => break,
                            Err(_) => return,
                        }
                    }
                    last = last.max(upto);
                    if !send(req.bookmark(last, false)).await { return; }
                }
                msg = live.recv() => match msg {
                    Ok(c) => {
                        if c.rv <= last || c.key != key { continue; }
                        last = c.rv;
                        if let Some(ev) = req.event_for(&c) {
                            if !send(ev).await { return; }
                        }
                    }
                    Err(_) => return,
                }
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Body::from_stream(stream)
}
