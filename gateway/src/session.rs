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
//! before it asks the session manager for an id; [`crate::intake::serve`]
//! captures them from the request body into a task-local that
//! [`ReplicaSessions`] reads, with the session slot it reserved.
//!
//! Sessions are bounded per replica ([`SessionLimit`]) and closed after
//! [`DEFAULT_SESSION_IDLE_TIMEOUT`] without traffic; a closed session's
//! client is brought back by the restore above when it returns.
//!
//! The key ([`SessionKey`], module `key`) follows `--session-key-file` as
//! it appears or changes, and accepts the key it replaced for a while.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

pub use key::{follow_key_file, KeyError, SessionKey, DEFAULT_KEY_GRACE};

/// Ids of sessions closed with DELETE that this replica remembers.
const CLOSED_MEMORY: usize = 10_000;

tokio::task_local! {
    /// What the intake learnt about the request being handled.
    static INTAKE: Intake;
}

/// Carried from [`crate::intake::serve`] into the session manager: the
/// `initialize` parameters (only known while rmcp handles the POST, before
/// it asks for an id) and the session slot reserved for this request.
pub(crate) struct Intake {
    params: Option<InitializeRequestParams>,
    slot: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Intake {
    pub(crate) fn new(
        params: Option<InitializeRequestParams>,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Self {
        Intake {
            params,
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

fn intake_slot() -> Option<OwnedSemaphorePermit> {
    INTAKE
        .try_with(|i| i.slot.lock().unwrap_or_else(|p| p.into_inner()).take())
        .ok()
        .flatten()
}

/// Default of [`SessionLimit`]: sessions one replica holds at once. A
/// session costs about 60 KiB while open (rmcp's worker, its channels and
/// caches: 4,000 sessions measured +238 MiB RSS), so this keeps sessions
/// under a quarter of the 512 MiB memory limit of the shipped manifests
/// (the response budget takes about half: `upstream::ResponseBudget`).
pub const DEFAULT_MAX_SESSIONS: usize = 2_000;
/// Default idle expiry of a session (rmcp's own default, made explicit).
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// How many sessions (`initialize` protocol versions) one replica holds at
/// once, over all its endpoints. Every open session costs memory (its
/// worker, channels, caches) until it is closed or expires, so without a
/// cap a burst of `initialize` calls grows the process without bound.
/// Default [`DEFAULT_MAX_SESSIONS`]; `toolgate serve --max-sessions`
/// (`TOOLGATE_MAX_SESSIONS`).
#[derive(Clone, Debug)]
pub struct SessionLimit {
    max: usize,
    slots: Arc<Semaphore>,
    refusals: Arc<Refusals>,
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
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        SessionLimit {
            max,
            slots: Arc::new(Semaphore::new(max)),
            refusals: Arc::new(Refusals {
                since: std::time::Instant::now(),
                total: AtomicU64::new(0),
                last_logged: AtomicU64::new(u64::MAX),
            }),
        }
    }

    /// Counts a refused session; warns on the first and then once a minute.
    pub(crate) fn note_refusal(&self) {
        let r = &self.refusals;
        let total = r.total.fetch_add(1, Ordering::Relaxed) + 1;
        let now = r.since.elapsed().as_secs();
        let last = r.last_logged.load(Ordering::Relaxed);
        let due = last == u64::MAX || now >= last.saturating_add(60);
        if due
            && r.last_logged
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                max = self.max,
                refused_total = total,
                "sessions refused: this replica holds its maximum (--max-sessions)"
            );
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Sessions open now.
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// A slot for one more session, if the replica has room.
    pub(crate) fn try_reserve(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// What a client is told when the replica is full.
    pub fn full_message(&self) -> String {
        format!(
            "too many open sessions on this gateway replica (limit {}, --max-sessions); \
             close unused sessions with DELETE or retry later",
            self.max
        )
    }
}

impl Default for SessionLimit {
    fn default() -> Self {
        SessionLimit::new(DEFAULT_MAX_SESSIONS)
    }
}

/// A session manager failure.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// Only when two requests race for the last slot: [`crate::intake`]
    /// answers 503 before rmcp gets here otherwise.
    #[error("{0}")]
    Full(String),
}

/// Called whenever a session closes (DELETE, idle expiry, shutdown).
pub type OnClose = Arc<dyn Fn() + Send + Sync>;

/// rmcp's in-memory session manager, issuing signed ids, holding at most
/// [`SessionLimit`] sessions and expiring idle ones.
pub struct ReplicaSessions {
    inner: LocalSessionManager,
    key: SessionKey,
    scope: Option<Arc<str>>,
    limit: SessionLimit,
    /// One slot per session in `inner`, released when it closes.
    slots: Mutex<HashMap<SessionId, OwnedSemaphorePermit>>,
    on_close: OnClose,
    /// Counts the sessions `slots` holds (`mcp_server_sessions_active`).
    metrics: Arc<crate::metrics::Metrics>,
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
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = idle;
        ReplicaSessions {
            inner,
            key,
            scope,
            limit,
            slots: Mutex::new(HashMap::new()),
            on_close,
            metrics,
        }
    }

    pub fn limit(&self) -> &SessionLimit {
        &self.limit
    }

    /// Whether a request naming session `id` would make rmcp restore it
    /// here (it is signed for this endpoint but not held by this process),
    /// and so needs a slot.
    pub(crate) async fn would_restore(&self, id: &str) -> bool {
        let held = self
            .inner
            .has_session(&SessionId::from(id))
            .await
            .unwrap_or(false);
        !held && self.key.open(self.scope.as_deref(), id).is_some()
    }

    fn reserve(&self) -> Result<OwnedSemaphorePermit, SessionsError> {
        intake_slot()
            .or_else(|| self.limit.try_reserve())
            .ok_or_else(|| {
                self.limit.note_refusal();
                SessionsError::Full(self.limit.full_message())
            })
    }

    fn hold(&self, id: &SessionId, slot: OwnedSemaphorePermit) {
        let mut s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if s.insert(id.clone(), slot).is_none() {
            self.metrics.session(true);
        }
    }
}

impl SessionManager for ReplicaSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let slot = self.reserve()?;
        let id: SessionId = self
            .key
            .issue(self.scope.as_deref(), intake_params())
            .into();
        // `restore_session` is the local manager's only way to create a
        // session under an id of our choosing.
        let (id, transport) = match self.inner.restore_session(id.clone()).await? {
            RestoreOutcome::Restored(t) => (id, t),
            // A nonce collision; practically impossible, but never reuse.
            _ => self.inner.create_session().await?,
        };
        self.hold(&id, slot);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let restoring = is_restore(&message);
        let response = self.inner.initialize_session(id, message).await?;
        if !restoring {
            // NB: the client's `notifications/initialized` may well land on
            // another replica, and rmcp's session worker stays in the
            // handshake (no `on_initialized`, so no list_changed on this
            // replica's GET stream) until it sees one. Complete the
            // handshake here; the client's own one is dropped below.
            self.inner.accept_message(id, initialized()).await?;
        }
        Ok(response)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        // rmcp calls this on DELETE and again when the session's worker
        // ends (idle expiry, shutdown); the slot goes back on the first.
        let slot = {
            let mut s = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            s.remove(id)
        };
        if slot.is_some() {
            self.metrics.session(false);
        }
        drop(slot);
        (self.on_close)();
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
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
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let slot = self.reserve()?;
        let outcome = self.inner.restore_session(id.clone()).await?;
        if matches!(outcome, RestoreOutcome::Restored(_)) {
            self.hold(&id, slot);
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
pub struct SignedIdStore {
    key: SessionKey,
    scope: Option<Arc<str>>,
    /// DELETEd ids, so this replica does not bring them back. Other
    /// replicas do not learn about the DELETE (documented in the ADR).
    closed: Mutex<(HashSet<String>, VecDeque<String>)>,
}

impl SignedIdStore {
    pub fn new(key: SessionKey, scope: Option<Arc<str>>) -> Self {
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
