//! How many sessions a replica holds, and per caller: the quota, who a
//! request counts as ([`CallerKey`]), the slot a new session reserves, and
//! which idle session gives way when a caller is at its limit.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::extract::ConnectInfo;

use rmcp::transport::streamable_http_server::session::SessionId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::key::Owner;
use super::*;

/// Who a request comes from, as sessions see it.
#[derive(Clone, Debug)]
pub(crate) struct CallerKey {
    /// What the per-caller quota counts under: `id:<identity>` for a
    /// verified caller, else `ip:<address>`.
    pub(super) quota: Arc<str>,
    /// The identity a session it opens is bound to; `None` when anonymous.
    pub(super) owner: Option<Owner>,
}

impl CallerKey {
    /// The caller of a request whose extensions are `ext` (the verified
    /// caller from inbound authentication, the peer from `ConnectInfo`).
    pub(crate) fn of(ext: &http::Extensions) -> CallerKey {
        let caller = ext.get::<Arc<crate::identity::inbound::Caller>>().cloned();
        let verified = caller.is_some();
        let client_ip = ext
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| quota_address(c.0.ip()));
        let key = crate::identity::inbound::CallContext { caller, client_ip }
            .caller_key()
            .unwrap_or_else(|| "ip:unknown".into());
        CallerKey {
            owner: verified.then(|| Owner::of(&key)),
            quota: key.into(),
        }
    }

    pub(super) fn unknown() -> CallerKey {
        CallerKey {
            quota: Arc::from("ip:unknown"),
            owner: None,
        }
    }
}

/// The address a quota counts under: an IPv6 client picks addresses from
/// its /64 at will, so the /64 is one caller.
pub(super) fn quota_address(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// Default of [`SessionLimit`]: sessions one replica holds at once. A
/// session costs about 60 KiB while open (rmcp's worker, its channels and
/// caches: 4,000 sessions measured +238 MiB RSS), so this keeps sessions
/// under a quarter of the 512 MiB memory limit of the shipped manifests
/// (the response budget takes about half: `upstream::ResponseBudget`).
pub const DEFAULT_MAX_SESSIONS: usize = 2_000;
/// Default idle expiry of a session (rmcp's own default, made explicit).
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// `toolgate serve --max-sessions-per-caller` default for a replica
/// holding `max` sessions: a quarter, so one caller (one identity, or one
/// address in open mode) cannot take more than a quarter of the replica.
pub fn default_per_caller(max: usize) -> usize {
    (max / 4).max(1)
}

/// How many sessions (`initialize` protocol versions) one replica holds at
/// once, over all its endpoints. Every open session costs memory (its
/// worker, channels, caches) until it is closed or expires, so without a
/// cap a burst of `initialize` calls grows the process without bound.
/// Default [`DEFAULT_MAX_SESSIONS`]; `toolgate serve --max-sessions`
/// (`TOOLGATE_MAX_SESSIONS`).
#[derive(Clone, Debug)]
pub struct SessionLimit {
    pub(super) max: usize,
    /// Sessions one caller holds at once ([`CallerKey`]).
    pub(super) per_caller: usize,
    pub(super) slots: Arc<Semaphore>,
    pub(super) refusals: Arc<Refusals>,
    pub(super) quota_refusals: Arc<Refusals>,
    pub(super) book: Arc<Mutex<Book>>,
    /// Orders session uses: the least recently used is the smallest.
    pub(super) clock: Arc<AtomicU64>,
}

/// The sessions each caller holds on this replica, over all endpoints.
#[derive(Default)]
pub(super) struct Book {
    pub(super) callers: HashMap<Arc<str>, Holder>,
}

impl std::fmt::Debug for Book {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Book")
            .field("callers", &self.callers.len())
            .finish()
    }
}

#[derive(Default)]
pub(super) struct Holder {
    pub(super) held: Vec<Held>,
    /// Reserved for sessions being opened.
    pub(super) pending: usize,
}

pub(super) struct Held {
    pub(super) id: SessionId,
    pub(super) endpoint: Weak<Core>,
    pub(super) activity: Arc<Activity>,
    pub(super) slot: Option<OwnedSemaphorePermit>,
}

/// When a session was last used and whether a request of it is running.
#[derive(Debug)]
pub(crate) struct Activity {
    pub(super) clock: Arc<AtomicU64>,
    pub(super) last: AtomicU64,
    pub(super) busy: AtomicUsize,
}

impl Activity {
    pub(super) fn new(clock: Arc<AtomicU64>) -> Arc<Activity> {
        let last = AtomicU64::new(clock.fetch_add(1, Ordering::Relaxed));
        Arc::new(Activity {
            clock,
            last,
            busy: AtomicUsize::new(0),
        })
    }

    pub(crate) fn touch(&self) {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        self.last.store(now, Ordering::Relaxed);
    }

    /// Marks a request of the session running until the guard drops.
    pub(crate) fn busy(self: Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.touch();
        Busy(self)
    }
}

/// A running request of a session ([`Activity::busy`]).
pub(crate) struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A session slot reserved for one caller; given back if unused.
pub(crate) struct Reservation {
    pub(super) slot: Option<OwnedSemaphorePermit>,
    pub(super) caller: CallerKey,
    pub(super) book: Arc<Mutex<Book>>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = book.callers.get_mut(&self.caller.quota) {
            h.pending = h.pending.saturating_sub(1);
            if h.pending == 0 && h.held.is_empty() {
                book.callers.remove(&self.caller.quota);
            }
        }
    }
}

/// Why no session slot was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The replica holds its maximum.
    Full,
    /// The caller holds its quota and every one of its sessions is busy.
    Quota,
}

/// Refusals counted, and logged at most once a minute: a client fleet
/// retrying against a full replica must not flood the log.
#[derive(Debug)]
pub(super) struct Refusals {
    pub(super) since: std::time::Instant,
    pub(super) total: AtomicU64,
    /// Seconds after `since` of the last warning, `u64::MAX` before any.
    pub(super) last_logged: AtomicU64,
}

impl SessionLimit {
    /// At most `max` sessions, any caller up to all of them; see
    /// [`SessionLimit::with_per_caller`].
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        let refusals = || {
            Arc::new(Refusals {
                since: std::time::Instant::now(),
                total: AtomicU64::new(0),
                last_logged: AtomicU64::new(u64::MAX),
            })
        };
        SessionLimit {
            max,
            per_caller: max,
            slots: Arc::new(Semaphore::new(max)),
            refusals: refusals(),
            quota_refusals: refusals(),
            book: Arc::default(),
            clock: Arc::default(),
        }
    }

    /// At most `n` sessions per caller (at least 1; the maximum, as
    /// [`SessionLimit::new`] sets it, means no quota).
    pub fn with_per_caller(mut self, n: usize) -> Self {
        self.per_caller = n.clamp(1, self.max);
        self
    }

    pub fn per_caller(&self) -> usize {
        self.per_caller
    }

    /// Counts a refused session; warns on the first and then once a minute.
    pub(crate) fn note_refusal(&self) {
        if note(&self.refusals) {
            tracing::warn!(
                max = self.max,
                refused_total = self.refusals.total.load(Ordering::Relaxed),
                "sessions refused: this replica holds its maximum (--max-sessions)"
            );
        }
    }

    pub(super) fn note_quota_refusal(&self) {
        // NB: the caller is not named: the log must not list identities
        // or addresses at the rate a client can make refusals.
        if note(&self.quota_refusals) {
            tracing::warn!(
                per_caller = self.per_caller,
                refused_total = self.quota_refusals.total.load(Ordering::Relaxed),
                "sessions refused: a caller holds its quota (--max-sessions-per-caller) \
                 and has a request running on each"
            );
        }
    }
}

/// Counts one refusal of `r`; whether to warn (the first, then once a
/// minute).
pub(super) fn note(r: &Refusals) -> bool {
    r.total.fetch_add(1, Ordering::Relaxed);
    let now = r.since.elapsed().as_secs();
    let last = r.last_logged.load(Ordering::Relaxed);
    let due = last == u64::MAX || now >= last.saturating_add(60);
    due && r
        .last_logged
        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

impl SessionLimit {
    pub fn max(&self) -> usize {
        self.max
    }

    /// Sessions open now.
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// A slot for one more session of `caller`. At its quota, the slot of
    /// its least recently used session with no request running is taken
    /// and that session returned, to be closed by the caller of this.
    pub(super) fn reserve(
        &self,
        caller: &CallerKey,
    ) -> Result<(Reservation, Option<Held>), Refused> {
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let h = book.callers.entry(caller.quota.clone()).or_default();
        // NB: a quota of the whole replica is no quota: full is full.
        let at_quota = self.per_caller < self.max && h.held.len() + h.pending >= self.per_caller;
        let (slot, victim) = if at_quota {
            let oldest = h
                .held
                .iter()
                .enumerate()
                .filter(|(_, s)| s.activity.busy.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, s)| s.activity.last.load(Ordering::Relaxed))
                .map(|(i, _)| i);
            match oldest {
                Some(i) => {
                    // The victim's slot goes to the new session.
                    let mut victim = h.held.swap_remove(i);
                    match victim.slot.take() {
                        Some(slot) => (slot, Some(victim)),
                        None => return Err(Refused::Quota),
                    }
                }
                None => {
                    if h.held.is_empty() && h.pending == 0 {
                        book.callers.remove(&caller.quota);
                    }
                    return Err(Refused::Quota);
                }
            }
        } else {
            match self.slots.clone().try_acquire_owned() {
                Ok(s) => (s, None),
                Err(_) => {
                    if h.held.is_empty() && h.pending == 0 {
                        book.callers.remove(&caller.quota);
                    }
                    return Err(Refused::Full);
                }
            }
        };
        h.pending += 1;
        Ok((
            Reservation {
                slot: Some(slot),
                caller: caller.clone(),
                book: self.book.clone(),
            },
            victim,
        ))
    }

    /// Records session `id` of `endpoint` as held with `reservation`'s slot.
    pub(super) fn hold(
        &self,
        mut reservation: Reservation,
        id: &SessionId,
        endpoint: Weak<Core>,
        activity: Arc<Activity>,
    ) {
        let Some(slot) = reservation.slot.take() else {
            return;
        };
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let h = book
            .callers
            .entry(reservation.caller.quota.clone())
            .or_default();
        h.held.push(Held {
            id: id.clone(),
            endpoint,
            activity,
            slot: Some(slot),
        });
        // `reservation`'s drop takes back its pending count.
    }

    /// Gives back the slot of session `id` of `endpoint`, held by `caller`.
    pub(super) fn release(&self, caller: &str, id: &SessionId, endpoint: &Arc<Core>) {
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = book.callers.get_mut(caller) {
            h.held.retain(|s| {
                !(s.id == *id && std::ptr::eq(s.endpoint.as_ptr(), Arc::as_ptr(endpoint)))
            });
            if h.held.is_empty() && h.pending == 0 {
                book.callers.remove(caller);
            }
        }
    }

    /// What a client is told when the replica is full.
    pub(crate) fn full_message(&self) -> String {
        format!(
            "too many open sessions on this gateway replica (limit {}, --max-sessions); \
             close unused sessions with DELETE or retry later",
            self.max
        )
    }

    /// What a client is told when it holds its quota, all busy.
    pub(crate) fn quota_message(&self) -> String {
        format!(
            "too many open sessions of this caller on this gateway replica (limit {} per \
             caller, --max-sessions-per-caller), each with a request running; close unused \
             sessions with DELETE or retry later",
            self.per_caller
        )
    }

    pub(super) fn message(&self, why: Refused) -> String {
        match why {
            Refused::Full => self.full_message(),
            Refused::Quota => self.quota_message(),
        }
    }
}

impl Default for SessionLimit {
    fn default() -> Self {
        SessionLimit::new(DEFAULT_MAX_SESSIONS)
            .with_per_caller(default_per_caller(DEFAULT_MAX_SESSIONS))
    }
}
