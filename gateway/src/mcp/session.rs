//! Session ids that any replica accepts (see docs/0004-gateway-replicas.md).
//!
//! A session id is `v1.<payload>.<mac>`: the payload (base64url JSON) holds
//! a random nonce, the endpoint scope and the client's `initialize`
//! parameters; the mac is HMAC-SHA256 over it with the key every replica
//! shares (`--session-key-file`). A replica that does not know a session
//! asks rmcp's session store, which here does not store anything: it
//! verifies the id and hands back the parameters inside it, and rmcp replays
//! the handshake (rmcp's cross-instance restore). So a client keeps its
//! session when its requests land on another replica or its replica
//! restarts, without a shared database.
//!
//! The parameters are only known while rmcp handles the `initialize` POST,
//! before it asks the session manager for an id; [`crate::edge::intake::serve`]
//! captures them from the request body into a task-local that
//! [`ReplicaSessions`] reads, with the session slot it reserved.
//!
//! Sessions are bounded per replica ([`SessionLimit`]) and closed after
//! [`DEFAULT_SESSION_IDLE_TIMEOUT`] without traffic; a closed session's
//! client is brought back by the restore above when it returns.
//!
//! The key ([`SessionKey`], module `key`) follows `--session-key-file` as
//! it appears or changes, and accepts the key it replaced for a while.
//!
//! **Per caller.** A session belongs to the caller that opened it: the id
//! of a verified caller's session carries a hash of its identity (method,
//! issuer, subject), and a request of any other caller naming it is
//! answered like an unknown session (404). Ids of anonymous callers (open
//! mode) and ids of versions before this carry none: they serve only
//! anonymous callers, so with inbound authentication on an old id is
//! unknown and its client opens a new session.
//! Each caller (its identity when verified, else its address: IPv6 by
//! /64) holds at most [`SessionLimit::per_caller`] sessions of a replica;
//! past that its own least recently used session without a request in
//! flight is closed for the new one (its client is restored when it
//! returns), or, when all are busy, the new one is refused (503). Behind
//! an ingress every anonymous client has the ingress's address, so they
//! share one quota: authenticate callers there.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::extract::ConnectInfo;

use futures::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, GetExtensions, InitializeRequestParams,
    InitializedNotification, JsonRpcMessage, ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager, SessionRestoreMarker,
    SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::WorkerTransport;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

mod key;

use key::Owner;
pub use key::{follow_key_file, SessionKey, DEFAULT_KEY_GRACE};

/// Ids of sessions closed with DELETE that this replica remembers.
const CLOSED_MEMORY: usize = 10_000;

tokio::task_local! {
    /// What the intake learnt about the request being handled.
    static INTAKE: Intake;
}

/// Carried from [`crate::edge::intake::serve`] into the session manager: the
/// `initialize` parameters (only known while rmcp handles the POST, before
/// it asks for an id), the caller and the session slot reserved for this
/// request.
pub(crate) struct Intake {
    params: Option<InitializeRequestParams>,
    caller: CallerKey,
    slot: Mutex<Option<Reservation>>,
}

impl Intake {
    pub(crate) fn new(
        params: Option<InitializeRequestParams>,
        caller: CallerKey,
        slot: Option<Reservation>,
    ) -> Self {
        Intake {
            params,
            caller,
            slot: Mutex::new(slot),
        }
    }

    /// Runs `fut` (rmcp handling one request) with `self` in reach of
    /// [`ReplicaSessions`].
    pub(crate) async fn scope<F: std::future::Future>(self, fut: F) -> F::Output {
        INTAKE.scope(self, fut).await
    }
}

fn intake_params() -> Option<InitializeRequestParams> {
    INTAKE.try_with(|i| i.params.clone()).ok().flatten()
}

fn intake_slot() -> Option<Reservation> {
    INTAKE
        .try_with(|i| i.slot.lock().unwrap_or_else(|p| p.into_inner()).take())
        .ok()
        .flatten()
}

fn intake_caller() -> CallerKey {
    INTAKE
        .try_with(|i| i.caller.clone())
        .unwrap_or_else(|_| CallerKey::unknown())
}

/// Who a request comes from, as sessions see it.
#[derive(Clone, Debug)]
pub(crate) struct CallerKey {
    /// What the per-caller quota counts under: `id:<identity>` for a
    /// verified caller, else `ip:<address>`.
    quota: Arc<str>,
    /// The identity a session it opens is bound to; `None` when anonymous.
    owner: Option<Owner>,
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

    fn unknown() -> CallerKey {
        CallerKey {
            quota: Arc::from("ip:unknown"),
            owner: None,
        }
    }
}

/// The address a quota counts under: an IPv6 client picks addresses from
/// its /64 at will, so the /64 is one caller.
fn quota_address(ip: IpAddr) -> IpAddr {
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
    max: usize,
    /// Sessions one caller holds at once ([`CallerKey`]).
    per_caller: usize,
    slots: Arc<Semaphore>,
    refusals: Arc<Refusals>,
    quota_refusals: Arc<Refusals>,
    book: Arc<Mutex<Book>>,
    /// Orders session uses: the least recently used is the smallest.
    clock: Arc<AtomicU64>,
}

/// The sessions each caller holds on this replica, over all endpoints.
#[derive(Default)]
struct Book {
    callers: HashMap<Arc<str>, Holder>,
}

impl std::fmt::Debug for Book {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Book")
            .field("callers", &self.callers.len())
            .finish()
    }
}

#[derive(Default)]
struct Holder {
    held: Vec<Held>,
    /// Reserved for sessions being opened.
    pending: usize,
}

struct Held {
    id: SessionId,
    endpoint: Weak<Core>,
    activity: Arc<Activity>,
    slot: Option<OwnedSemaphorePermit>,
}

/// When a session was last used and whether a request of it is running.
#[derive(Debug)]
pub(crate) struct Activity {
    clock: Arc<AtomicU64>,
    last: AtomicU64,
    busy: AtomicUsize,
}

impl Activity {
    fn new(clock: Arc<AtomicU64>) -> Arc<Activity> {
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
    slot: Option<OwnedSemaphorePermit>,
    caller: CallerKey,
    book: Arc<Mutex<Book>>,
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
struct Refusals {
    since: std::time::Instant,
    total: AtomicU64,
    /// Seconds after `since` of the last warning, `u64::MAX` before any.
    last_logged: AtomicU64,
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

    fn note_quota_refusal(&self) {
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
fn note(r: &Refusals) -> bool {
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
    fn reserve(&self, caller: &CallerKey) -> Result<(Reservation, Option<Held>), Refused> {
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
    fn hold(
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
    fn release(&self, caller: &str, id: &SessionId, endpoint: &Arc<Core>) {
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

    fn message(&self, why: Refused) -> String {
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

/// A session manager failure.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// Only when two requests race for the last slot: [`crate::edge::intake`]
    /// answers 503 before rmcp gets here otherwise.
    #[error("{0}")]
    Full(String),
}

/// Called whenever a session closes (DELETE, idle expiry, shutdown).
pub(crate) type OnClose = Arc<dyn Fn() + Send + Sync>;

/// rmcp's in-memory session manager, issuing signed ids, holding at most
/// [`SessionLimit`] sessions (and as many per caller) and expiring idle
/// ones.
pub struct ReplicaSessions(Arc<Core>);

struct Core {
    inner: LocalSessionManager,
    key: SessionKey,
    scope: Option<Arc<str>>,
    limit: SessionLimit,
    /// The sessions of `inner` this endpoint counts, each with its slot
    /// in the limit's book.
    held: Mutex<HashMap<SessionId, Local>>,
    on_close: OnClose,
    /// Counts the sessions `held` holds (`mcp_server_sessions_active`).
    metrics: Arc<crate::observe::metrics::Metrics>,
}

struct Local {
    caller: Arc<str>,
    owner: Option<Owner>,
    activity: Arc<Activity>,
}

impl Core {
    /// Closes a session whose slot the limit gave to another session of
    /// its caller.
    async fn evict(self: Arc<Self>, id: SessionId) {
        let was_held = {
            let mut h = self.held.lock().unwrap_or_else(|p| p.into_inner());
            h.remove(&id).is_some()
        };
        if !was_held {
            return;
        }
        self.metrics.session(false);
        self.metrics.session_evicted();
        // NB: rmcp calls `close_session` again when the worker ends; the
        // id is no longer held then, so nothing is counted twice.
        if let Err(e) = self.inner.close_session(&id).await {
            tracing::debug!(error = %e, "closing an evicted session");
        }
        (self.on_close)();
    }
}

impl ReplicaSessions {
    /// `idle`: a session with no request and no message for this long is
    /// closed (rmcp's keep-alive); `None` keeps sessions until DELETE.
    pub fn new(
        key: SessionKey,
        scope: Option<Arc<str>>,
        limit: SessionLimit,
        idle: Option<Duration>,
        on_close: OnClose,
        metrics: Arc<crate::observe::metrics::Metrics>,
    ) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = idle;
        ReplicaSessions(Arc::new(Core {
            inner,
            key,
            scope,
            limit,
            held: Mutex::new(HashMap::new()),
            on_close,
            metrics,
        }))
    }

    pub fn limit(&self) -> &SessionLimit {
        &self.0.limit
    }

    /// Whether a request naming session `id` would make rmcp restore it
    /// here (it is signed for this endpoint but not held by this process),
    /// and so needs a slot.
    pub(crate) async fn would_restore(&self, id: &str) -> bool {
        let held = self
            .0
            .inner
            .has_session(&SessionId::from(id))
            .await
            .unwrap_or(false);
        !held && self.0.key.open(self.0.scope.as_deref(), id).is_some()
    }

    /// Whether `caller` may use session `id`: the session's owner is the
    /// caller's verified identity, or both are anonymous. An id that is
    /// neither held nor valid here is left to rmcp (unknown: 404).
    pub(crate) fn admits(&self, id: &str, caller: &CallerKey) -> bool {
        let held = {
            let h = self.0.held.lock().unwrap_or_else(|p| p.into_inner());
            h.get(id).map(|l| l.owner)
        };
        match held {
            Some(owner) => Owner::same(owner.as_ref(), caller.owner.as_ref()),
            None => match self.0.key.owner(self.0.scope.as_deref(), id) {
                Some(owner) => Owner::same(owner.as_ref(), caller.owner.as_ref()),
                None => true,
            },
        }
    }

    /// The activity record of held session `id`.
    pub(crate) fn activity(&self, id: &str) -> Option<Arc<Activity>> {
        let h = self.0.held.lock().unwrap_or_else(|p| p.into_inner());
        h.get(id).map(|l| l.activity.clone())
    }

    /// A slot for one more session of `caller`, closing its least recently
    /// used idle session when it holds its quota. Counts refusals and
    /// evictions.
    pub(crate) async fn reserve(&self, caller: &CallerKey) -> Result<Reservation, Refused> {
        let limit = &self.0.limit;
        match limit.reserve(caller) {
            Ok((reservation, victim)) => {
                if let Some(endpoint) = victim.and_then(|v| Some((v.endpoint.upgrade()?, v.id))) {
                    endpoint.0.evict(endpoint.1).await;
                }
                Ok(reservation)
            }
            Err(why) => {
                match why {
                    Refused::Full => limit.note_refusal(),
                    Refused::Quota => limit.note_quota_refusal(),
                }
                self.0.metrics.session_refused(why == Refused::Quota);
                Err(why)
            }
        }
    }

    async fn slot(&self) -> Result<(Reservation, CallerKey), SessionsError> {
        let caller = intake_caller();
        let reservation = match intake_slot() {
            Some(r) => r,
            None => self
                .reserve(&caller)
                .await
                .map_err(|why| SessionsError::Full(self.0.limit.message(why)))?,
        };
        Ok((reservation, caller))
    }

    fn hold(&self, id: &SessionId, reservation: Reservation, caller: &CallerKey) {
        let activity = Activity::new(self.0.limit.clock.clone());
        {
            let mut h = self.0.held.lock().unwrap_or_else(|p| p.into_inner());
            if h.contains_key(id) {
                return;
            }
            h.insert(
                id.clone(),
                Local {
                    caller: caller.quota.clone(),
                    owner: caller.owner,
                    activity: activity.clone(),
                },
            );
        }
        self.0
            .limit
            .hold(reservation, id, Arc::downgrade(&self.0), activity);
        self.0.metrics.session(true);
    }
}

impl SessionManager for ReplicaSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (slot, caller) = self.slot().await?;
        let id: SessionId = self
            .0
            .key
            .issue_for(
                self.0.scope.as_deref(),
                intake_params(),
                caller.owner.as_ref(),
            )
            .into();
        // `restore_session` is the local manager's only way to create a
        // session under an id of our choosing.
        let (id, transport) = match self.0.inner.restore_session(id.clone()).await? {
            RestoreOutcome::Restored(t) => (id, t),
            // A nonce collision; practically impossible, but never reuse.
            _ => self.0.inner.create_session().await?,
        };
        self.hold(&id, slot, &caller);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let restoring = is_restore(&message);
        let response = self.0.inner.initialize_session(id, message).await?;
        if !restoring {
            // NB: the client's `notifications/initialized` may well land on
            // another replica, and rmcp's session worker stays in the
            // handshake (no `on_initialized`, so no list_changed on this
            // replica's GET stream) until it sees one. Complete the
            // handshake here; the client's own one is dropped below.
            self.0.inner.accept_message(id, initialized()).await?;
        }
        Ok(response)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.0.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.0.inner.close_session(id).await;
        // rmcp calls this on DELETE and again when the session's worker
        // ends (idle expiry, shutdown); the slot goes back on the first.
        let local = {
            let mut h = self.0.held.lock().unwrap_or_else(|p| p.into_inner());
            h.remove(id)
        };
        if let Some(l) = local {
            self.0.limit.release(&l.caller, id, &self.0);
            self.0.metrics.session(false);
        }
        (self.0.on_close)();
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.0.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        // Every session's handshake was completed by `initialize_session`
        // or by rmcp's restore (which marks its replay).
        if is_initialized(&message) && !is_restore(&message) {
            return Ok(());
        }
        Ok(self.0.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.0.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.0.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let (slot, caller) = self.slot().await?;
        let outcome = self.0.inner.restore_session(id.clone()).await?;
        if matches!(outcome, RestoreOutcome::Restored(_)) {
            self.hold(&id, slot, &caller);
        }
        Ok(outcome)
    }
}

fn initialized() -> ClientJsonRpcMessage {
    ClientJsonRpcMessage::notification(ClientNotification::InitializedNotification(
        InitializedNotification::default(),
    ))
}

fn is_initialized(m: &ClientJsonRpcMessage) -> bool {
    matches!(m, JsonRpcMessage::Notification(n)
        if matches!(n.notification, ClientNotification::InitializedNotification(_)))
}

fn is_restore(m: &ClientJsonRpcMessage) -> bool {
    match m {
        JsonRpcMessage::Request(r) => r
            .request
            .extensions()
            .get::<SessionRestoreMarker>()
            .is_some(),
        JsonRpcMessage::Notification(n) => n
            .notification
            .extensions()
            .get::<SessionRestoreMarker>()
            .is_some(),
        _ => false,
    }
}

/// rmcp's session store, backed by the ids themselves.
pub(crate) struct SignedIdStore {
    key: SessionKey,
    scope: Option<Arc<str>>,
    /// DELETEd ids, so this replica does not bring them back. Other
    /// replicas do not learn about the DELETE (documented in the ADR).
    closed: Mutex<(HashSet<String>, VecDeque<String>)>,
}

impl SignedIdStore {
    pub(crate) fn new(key: SessionKey, scope: Option<Arc<str>>) -> Self {
        SignedIdStore {
            key,
            scope,
            closed: Mutex::new((HashSet::new(), VecDeque::new())),
        }
    }

    fn is_closed(&self, id: &str) -> bool {
        let c = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        c.0.contains(id)
    }
}

#[async_trait::async_trait]
impl SessionStore for SignedIdStore {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        if self.is_closed(session_id) {
            return Ok(None);
        }
        Ok(self
            .key
            .open(self.scope.as_deref(), session_id)
            .map(SessionState::new))
    }

    async fn store(&self, _: &str, _: &SessionState) -> Result<(), SessionStoreError> {
        // The state travels in the id.
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let mut c = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        if c.0.insert(session_id.to_string()) {
            c.1.push_back(session_id.to_string());
            if c.1.len() > CLOSED_MEMORY {
                if let Some(old) = c.1.pop_front() {
                    c.0.remove(&old);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(key: &str) -> CallerKey {
        CallerKey {
            quota: Arc::from(key),
            owner: None,
        }
    }

    fn held(limit: &SessionLimit, who: &CallerKey, id: &str) -> Arc<Activity> {
        let (r, victim) = limit.reserve(who).expect("room");
        assert!(victim.is_none());
        let activity = Activity::new(limit.clock.clone());
        limit.hold(r, &SessionId::from(id), Weak::new(), activity.clone());
        activity
    }

    #[test]
    fn at_its_quota_a_caller_gives_up_its_least_recently_used_idle_session() {
        let limit = SessionLimit::new(10).with_per_caller(2);
        let alice = caller("id:alice");
        let a = held(&limit, &alice, "a");
        let _b = held(&limit, &alice, "b");
        a.touch();
        let (_r, victim) = limit.reserve(&alice).expect("evicts");
        assert_eq!(victim.map(|v| v.id), Some(SessionId::from("b")));
        assert_eq!(limit.open(), 2, "the new session took b's slot");
    }

    #[test]
    fn a_caller_whose_sessions_are_all_busy_is_refused() {
        let limit = SessionLimit::new(10).with_per_caller(1);
        let alice = caller("id:alice");
        let a = held(&limit, &alice, "a");
        let busy = a.clone().busy();
        assert_eq!(limit.reserve(&alice).err(), Some(Refused::Quota));
        assert!(limit.reserve(&caller("id:bob")).is_ok());
        drop(busy);
        assert!(limit.reserve(&alice).is_ok());
    }

    #[test]
    fn ipv6_clients_count_by_their_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        assert_eq!(quota_address(a), quota_address(b));
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(quota_address(mapped), "10.1.2.3".parse::<IpAddr>().unwrap());
    }
}
