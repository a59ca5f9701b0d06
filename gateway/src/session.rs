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
//! before it asks the session manager for an id; [`serve`] captures them
//! from the request body into a task-local that [`ReplicaSessions`] reads.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use futures::Stream;
use rmcp::model::{
    ClientCapabilities, ClientJsonRpcMessage, ClientNotification, GetExtensions, Implementation,
    InitializeRequestParams, InitializedNotification, JsonRpcMessage, ServerJsonRpcMessage,
};
use rmcp::transport::common::server_side_http::session_id as random_id;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager, SessionRestoreMarker,
    SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::WorkerTransport;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tower_service::Service;

/// Payloads above this are trimmed (client info, then capabilities) so the
/// id stays a modest header.
const MAX_PARAMS_BYTES: usize = 2048;
/// Ids of sessions closed with DELETE that this replica remembers.
const CLOSED_MEMORY: usize = 10_000;
const VERSION: &str = "v1";

/// The HMAC key shared by the replicas.
#[derive(Clone)]
pub struct SessionKey(Arc<[u8]>);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

impl SessionKey {
    /// Minimum key length in bytes.
    pub const MIN_LEN: usize = 32;

    pub fn new(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < Self::MIN_LEN {
            return Err(format!(
                "session key is {} bytes; at least {} are required",
                bytes.len(),
                Self::MIN_LEN
            ));
        }
        Ok(SessionKey(Arc::from(bytes)))
    }

    /// A key of this process only: sessions then work on this replica alone.
    pub fn random() -> Self {
        // uuid v4 (122 random bits each, from the OS generator); three of
        // them hashed give a full-strength key without another dependency.
        let mut h = Sha256::new();
        for _ in 0..3 {
            h.update(random_id().as_bytes());
        }
        SessionKey(Arc::from(&h.finalize()[..]))
    }

    /// Reads a key file (a mounted Secret); surrounding whitespace is
    /// ignored so `echo`-made files work.
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        let bytes = std::fs::read(path)
            .map_err(|e| format!("cannot read session key file {}: {e}", path.display()))?;
        let trimmed = bytes.trim_ascii();
        Self::new(trimmed).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn mac(&self, data: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.0, data)
    }

    /// A new session id for `scope`, carrying `params`.
    pub fn issue(&self, scope: Option<&str>, params: Option<InitializeRequestParams>) -> String {
        let payload = Payload {
            nonce: random_id().to_string(),
            scope: scope.map(str::to_string),
            params: params.map(shrink),
        };
        let json = serde_json::to_vec(&payload).unwrap_or_default();
        let body = URL_SAFE_NO_PAD.encode(json);
        let mac = URL_SAFE_NO_PAD.encode(self.mac(signed_part(&body).as_bytes()));
        format!("{VERSION}.{body}.{mac}")
    }

    /// The `initialize` parameters of a session id issued for `scope` with
    /// this key; `None` for anything else (forged, other endpoint, other
    /// key, ids issued without parameters).
    pub fn open(&self, scope: Option<&str>, id: &str) -> Option<InitializeRequestParams> {
        let mut parts = id.split('.');
        let (Some(VERSION), Some(body), Some(mac), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
        if !constant_time_eq(&mac, &self.mac(signed_part(body).as_bytes())) {
            return None;
        }
        let payload: Payload = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()?;
        if payload.scope.as_deref() != scope {
            return None;
        }
        payload.params
    }
}

fn signed_part(body: &str) -> String {
    format!("toolgate-session.{VERSION}.{body}")
}

#[derive(Serialize, Deserialize)]
struct Payload {
    #[serde(rename = "n")]
    nonce: String,
    #[serde(rename = "s", default)]
    scope: Option<String>,
    #[serde(rename = "p", default)]
    params: Option<InitializeRequestParams>,
}

fn shrink(mut p: InitializeRequestParams) -> InitializeRequestParams {
    let size = |p: &InitializeRequestParams| serde_json::to_vec(p).map_or(usize::MAX, |v| v.len());
    p.meta = None;
    if size(&p) > MAX_PARAMS_BYTES {
        p.client_info = Implementation::new(
            truncate(&p.client_info.name, 128),
            truncate(&p.client_info.version, 64),
        );
    }
    if size(&p) > MAX_PARAMS_BYTES {
        p.capabilities = ClientCapabilities::default();
    }
    p
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(data);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

tokio::task_local! {
    /// The `initialize` parameters of the request being handled, if it is one.
    static INITIALIZE: Option<InitializeRequestParams>;
}

/// rmcp's in-memory session manager, issuing signed ids.
pub struct ReplicaSessions {
    inner: LocalSessionManager,
    key: SessionKey,
    scope: Option<Arc<str>>,
}

impl ReplicaSessions {
    pub fn new(key: SessionKey, scope: Option<Arc<str>>) -> Self {
        ReplicaSessions {
            inner: LocalSessionManager::default(),
            key,
            scope,
        }
    }
}

impl SessionManager for ReplicaSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let params = INITIALIZE.try_with(Clone::clone).ok().flatten();
        let id: SessionId = self.key.issue(self.scope.as_deref(), params).into();
        // `restore_session` is the local manager's only way to create a
        // session under an id of our choosing.
        match self.inner.restore_session(id.clone()).await? {
            RestoreOutcome::Restored(t) => Ok((id, t)),
            // A nonce collision; practically impossible, but never reuse.
            _ => self.inner.create_session().await,
        }
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
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
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
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
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

/// Calls an MCP service, capturing the `initialize` parameters of a
/// session-less POST for [`ReplicaSessions::create_session`].
pub async fn serve<S>(mut svc: S, req: Request) -> Response
where
    S: Service<Request, Error = std::convert::Infallible>,
    S::Response: IntoResponse,
{
    let sessionless_post =
        req.method() == http::Method::POST && !req.headers().contains_key("mcp-session-id");
    if !sessionless_post {
        return match svc.call(req).await {
            Ok(r) => r.into_response(),
            Err(never) => match never {},
        };
    }
    let (parts, body) = req.into_parts();
    // rmcp reads the whole body anyway; this only moves where it happens.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            return (
                http::StatusCode::BAD_REQUEST,
                format!("cannot read request body: {e}"),
            )
                .into_response()
        }
    };
    let params = initialize_params(&bytes);
    let req = Request::from_parts(parts, Body::from(bytes));
    match INITIALIZE.scope(params, svc.call(req)).await {
        Ok(r) => r.into_response(),
        Err(never) => match never {},
    }
}

fn initialize_params(body: &[u8]) -> Option<InitializeRequestParams> {
    // Cheap filter: most session-less POSTs are 2026-07-28 requests.
    if !body.windows(12).any(|w| w == b"\"initialize\"") {
        return None;
    }
    #[derive(Deserialize)]
    struct Msg {
        method: String,
        params: Option<serde_json::Value>,
    }
    let m: Msg = serde_json::from_slice(body).ok()?;
    if m.method != "initialize" {
        return None;
    }
    serde_json::from_value(m.params?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> InitializeRequestParams {
        let mut p = InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("c", "1"),
        );
        p.protocol_version = rmcp::model::ProtocolVersion::V_2025_06_18;
        p
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn ids_open_only_with_the_same_key_and_scope() {
        let k = SessionKey::new(&[7u8; 32]).unwrap();
        let id = k.issue(Some("pets"), Some(params()));
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        let p = k.open(Some("pets"), &id).expect("opens");
        assert_eq!(
            p.protocol_version,
            rmcp::model::ProtocolVersion::V_2025_06_18
        );
        assert!(k.open(None, &id).is_none(), "another endpoint");
        assert!(SessionKey::new(&[8u8; 32])
            .unwrap()
            .open(Some("pets"), &id)
            .is_none());
        let mut forged = id.clone();
        forged.insert(5, 'x');
        assert!(k.open(Some("pets"), &forged).is_none());
        assert_ne!(id, k.issue(Some("pets"), Some(params())), "nonce differs");
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(SessionKey::new(b"short").is_err());
    }

    #[test]
    fn large_client_info_is_trimmed() {
        let mut p = params();
        p.client_info = Implementation::new("n".repeat(5000), "1");
        let k = SessionKey::random();
        let id = k.issue(None, Some(p));
        assert!(id.len() < 4 * MAX_PARAMS_BYTES, "{}", id.len());
        assert_eq!(k.open(None, &id).unwrap().client_info.name.len(), 128);
    }
}
