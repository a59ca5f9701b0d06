//! What every endpoint of a replica shares: the catalog store, the connected sessions to notify of changes, calls in flight.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::{Peer, RoleServer};
use tokio::sync::Notify;

use catalog::listing::SearchSettings;

use crate::mcp::pages::PageLimits;
use crate::serving::reload::{CatalogStore, ToolDiff};

use crate::mcp::view::View;

/// A connected session (initialize protocol versions) and its endpoint.
type Session = (Peer<RoleServer>, View);

/// Search mode with no pinned tools and the built-in descriptions.
pub(crate) static NO_SEARCH: SearchSettings = SearchSettings {
    pinned: Vec::new(),
    descriptions: catalog::listing::MetaToolDescriptions {
        search_tools: None,
        describe_tool: None,
        call_tool: None,
    },
};

/// State shared by every session and endpoint.
pub struct Shared {
    pub store: Arc<CatalogStore>,
    /// This gateway's metrics (the store's).
    pub metrics: Arc<crate::observe::metrics::Metrics>,
    pub pages: PageLimits,
    /// Access to upstreams without an `access` policy.
    pub default_access: catalog::access::DefaultAccess,
    /// JSON bytes of the pages listed since the last trim.
    pub(crate) listed_since_trim: AtomicUsize,
    /// Search mode of `/mcp` and `/mcp/{prefix}`; set once, at start-up
    /// ([`Shared::set_search`]).
    search: std::sync::OnceLock<SearchSettings>,
    sessions: Mutex<Vec<Session>>,
    prune_pending: AtomicBool,
    pub(crate) in_flight: AtomicUsize,
    idle: Notify,
}

impl Shared {
    pub fn new(
        store: Arc<CatalogStore>,
        pages: PageLimits,
        default_access: catalog::access::DefaultAccess,
    ) -> Arc<Self> {
        Arc::new(Shared {
            metrics: store.metrics().clone(),
            store,
            pages: PageLimits {
                tools: pages.tools.max(1),
                bytes: pages.bytes.max(1),
            },
            default_access,
            listed_since_trim: AtomicUsize::new(0),
            search: std::sync::OnceLock::new(),
            sessions: Mutex::new(Vec::new()),
            prune_pending: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
        })
    }

    /// Sets the search mode of `/mcp` and `/mcp/{prefix}`; only the first
    /// call counts.
    pub(crate) fn set_search(&self, search: SearchSettings) {
        if self.search.set(search).is_err() {
            tracing::error!("search settings set twice; the first ones stay");
        }
    }

    /// The search mode of `/mcp` and `/mcp/{prefix}`.
    pub fn search(&self) -> &SearchSettings {
        self.search.get().unwrap_or(&NO_SEARCH)
    }

    /// Logs each pinned tool of `/mcp` that the snapshot does not have:
    /// listings skip it, so a misspelt name would otherwise go unseen.
    pub(crate) fn warn_missing_pinned(&self) {
        let snapshot = self.store.load();
        if !snapshot.loaded {
            return;
        }
        for name in &self.search().pinned {
            if snapshot.tool(name).is_none() {
                tracing::warn!(tool = %name, "pinned tool (listing.pinned) not in the catalog; search-mode listings skip it");
            }
        }
    }

    /// Tool calls currently running.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Resolves when no tool call is running.
    pub(crate) async fn drained(&self) {
        loop {
            let notified = self.idle.notified();
            if self.in_flight() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Drops closed sessions' peers shortly, once for any number of
    /// closes meanwhile: a burst of expiries is one pass over the list.
    pub(crate) fn forget_closed_soon(self: &Arc<Self>) {
        if self.prune_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.prune_pending.store(false, Ordering::Release);
            return;
        };
        let me = Arc::downgrade(self);
        rt.spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if let Some(s) = me.upgrade() {
                s.prune_pending.store(false, Ordering::Release);
                let mut list = s.sessions.lock().unwrap_or_else(|p| p.into_inner());
                list.retain(|(p, _)| !p.is_transport_closed());
                list.shrink_to_fit();
            }
        });
    }

    pub(crate) fn register(&self, peer: Peer<RoleServer>, view: View) {
        let mut s = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        s.retain(|(p, _)| !p.is_transport_closed());
        s.push((peer, view));
    }

    /// Sends list_changed to every session whose tool set `diff` touches.
    pub fn notify(&self, diff: &ToolDiff) {
        let targets: Vec<Peer<RoleServer>> = {
            let mut s = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            s.retain(|(p, _)| !p.is_transport_closed());
            s.iter()
                .filter(|(_, view)| view.affected_by(diff))
                .map(|(p, _)| p.clone())
                .collect()
        };
        for peer in targets {
            tokio::spawn(async move {
                // A stalled client must not hold a task forever.
                let _ =
                    tokio::time::timeout(Duration::from_secs(10), peer.notify_tool_list_changed())
                        .await;
            });
        }
    }

    /// Forwards reload diffs to sessions until the store is dropped.
    pub(crate) fn spawn_notifier(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let mut rx = self.store.subscribe();
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(d) => match me.upgrade() {
                        Some(s) => {
                            s.notify(&d);
                            s.warn_missing_pinned();
                        }
                        None => return,
                    },
                    // Missed some diffs: tell everyone, a spurious
                    // list_changed only costs a tools/list.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        match me.upgrade() {
                            Some(s) => s.notify_all(),
                            None => return,
                        }
                    }
                    Err(_) => return,
                }
            }
        })
    }

    pub(crate) fn notify_all(&self) {
        let mut d = ToolDiff::default();
        d.modified.push(String::new());
        let snapshot = self.store.load();
        d.prefixes = snapshot.prefixes().map(str::to_string).collect();
        d.toolsets = snapshot.toolsets().map(|t| t.def.id.clone()).collect();
        self.notify(&d);
    }
}

/// A call in flight: counted while it lives.
pub(crate) struct InFlight<'a>(pub(crate) &'a Shared);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}
