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

mod key;
mod quota;

use key::Owner;
pub use key::{follow_key_file, SessionKey, DEFAULT_KEY_GRACE};
use quota::Activity;
pub use quota::{
    default_per_caller, SessionLimit, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT,
};
pub(crate) use quota::{CallerKey, Refused, Reservation};

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
    use super::quota::quota_address;
    use super::*;
    use std::net::IpAddr;
    use std::sync::Weak;

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
