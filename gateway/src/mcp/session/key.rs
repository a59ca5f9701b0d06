//! The key that signs session ids ([`SessionKey`]), and how it changes
//! without a restart ([`follow_key_file`]).
//!
//! Replicas accept each other's sessions only while they share the key, so
//! it comes from a file every replica mounts (a Secret). That file may
//! appear after the gateway started (the kustomize install creates the
//! Secret after the Deployment, and the volume is optional) and is
//! replaced when the key is rotated. The gateway follows it: the new key
//! signs new ids at once, and ids signed with the key it replaced — the
//! process's own random key included — are still accepted for a grace
//! period, so open sessions survive the switch (docs/0009).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams};
use rmcp::transport::common::server_side_http::session_id as random_id;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::file_watch::{FileChange, FileWatch, WatchOptions};

/// Payloads above this are trimmed (client info, then capabilities) so the
/// id stays a modest header.
pub(super) const MAX_PARAMS_BYTES: usize = 2048;
const VERSION: &str = "v1";
/// Replaced keys kept at once: a key file rewritten many times within one
/// grace period must not make every request try many keys.
const MAX_PREVIOUS: usize = 4;

/// Default of `toolgate serve --session-key-grace-seconds`: how long ids
/// signed with a replaced key stay valid. Long enough for the kubelet to
/// bring the new Secret to every pod (a minute or two) and for the
/// sessions open at a routine rotation to finish their work; short enough
/// that a rotation retires the old key within the hour. After a leak,
/// rotate with a grace of 0.
pub const DEFAULT_KEY_GRACE: Duration = Duration::from_secs(3600);

/// The key session ids are signed with, and the keys it recently replaced.
/// Clones share it: a rotation reaches every endpoint at once.
#[derive(Clone)]
pub struct SessionKey(Arc<ArcSwap<Ring>>);

struct Ring {
    current: Secret,
    /// Replaced keys, newest first, with when their ids stop being
    /// accepted (`None`: never, for a grace too large to count).
    previous: Vec<(Secret, Option<Instant>)>,
}

#[derive(Clone)]
struct Secret(Arc<[u8]>);

impl Secret {
    fn same(&self, other: &Secret) -> bool {
        constant_time_eq(&self.0, &other.0)
    }

    fn mac(&self, data: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.0, data)
    }
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// A key that cannot be used. Names the file and sizes, never key bytes.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "session key is {len} bytes; at least {} are required",
        SessionKey::MIN_LEN
    )]
    TooShort { len: usize },
    #[error("cannot read session key file {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "session key file {}: {len} bytes (surrounding whitespace ignored); at least {} are required",
        path.display(),
        SessionKey::MIN_LEN
    )]
    FileTooShort { path: PathBuf, len: usize },
}

impl SessionKey {
    /// Minimum key length in bytes.
    pub(crate) const MIN_LEN: usize = 32;

    pub fn new(bytes: &[u8]) -> Result<Self, KeyError> {
        if bytes.len() < Self::MIN_LEN {
            return Err(KeyError::TooShort { len: bytes.len() });
        }
        Ok(Self::of(Secret(Arc::from(bytes))))
    }

    fn of(secret: Secret) -> Self {
        SessionKey(Arc::new(ArcSwap::from_pointee(Ring {
            current: secret,
            previous: Vec::new(),
        })))
    }

    /// A key of this process only: sessions then work on this replica alone.
    pub fn random() -> Self {
        // uuid v4 (122 random bits each, from the OS generator); three of
        // them hashed give a full-strength key without another dependency.
        let mut h = Sha256::new();
        for _ in 0..3 {
            h.update(random_id().as_bytes());
        }
        Self::of(Secret(Arc::from(&h.finalize()[..])))
    }

    /// Reads a key file (a mounted Secret); surrounding whitespace is
    /// ignored so `echo`-made files work.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let bytes = std::fs::read(path).map_err(|source| KeyError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_file(path, &bytes)
    }

    fn parse_file(path: &Path, bytes: &[u8]) -> Result<Self, KeyError> {
        Self::new(bytes.trim_ascii()).map_err(|_| KeyError::FileTooShort {
            path: path.to_path_buf(),
            len: bytes.trim_ascii().len(),
        })
    }

    /// Signs new ids with `next`'s key from now on; ids signed with the key
    /// it replaces stay valid for `grace` (none with a zero grace). Returns
    /// whether the key changed (`next` may be the current key again).
    #[cfg(test)]
    pub(crate) fn rotate_to(&self, next: &SessionKey, grace: Duration) -> bool {
        self.rotate_at(next, grace, Instant::now())
    }

    fn rotate_at(&self, next: &SessionKey, grace: Duration, now: Instant) -> bool {
        let next = next.0.load().current.clone();
        let mut changed = false;
        self.0.rcu(|ring| {
            changed = !ring.current.same(&next);
            if !changed {
                return Arc::clone(ring);
            }
            let mut previous = Vec::with_capacity(MAX_PREVIOUS);
            if !grace.is_zero() {
                previous.push((ring.current.clone(), now.checked_add(grace)));
            }
            previous.extend(
                ring.previous
                    .iter()
                    .filter(|(k, until)| until.is_none_or(|t| t > now) && !k.same(&next))
                    .cloned(),
            );
            previous.truncate(MAX_PREVIOUS);
            Arc::new(Ring {
                current: next.clone(),
                previous,
            })
        });
        changed
    }

    /// A new session id for `scope`, carrying `params`, of no owner.
    pub fn issue(&self, scope: Option<&str>, params: Option<InitializeRequestParams>) -> String {
        self.issue_for(scope, params, None)
    }

    /// A new session id for `scope`, carrying `params`, bound to `owner`
    /// (the verified identity that opened it).
    pub(crate) fn issue_for(
        &self,
        scope: Option<&str>,
        params: Option<InitializeRequestParams>,
        owner: Option<&Owner>,
    ) -> String {
        let payload = Payload {
            nonce: random_id().to_string(),
            scope: scope.map(str::to_string),
            params: params.map(shrink),
            owner: owner.map(Owner::encode),
        };
        let json = serde_json::to_vec(&payload).unwrap_or_default();
        let body = URL_SAFE_NO_PAD.encode(json);
        let mac = self.0.load().current.mac(signed_part(&body).as_bytes());
        format!("{VERSION}.{body}.{}", URL_SAFE_NO_PAD.encode(mac))
    }

    /// The `initialize` parameters of a session id issued for `scope` with
    /// this key, or with a key it replaced less than the grace period ago;
    /// `None` for anything else (forged, other endpoint, other key, ids
    /// issued without parameters).
    pub fn open(&self, scope: Option<&str>, id: &str) -> Option<InitializeRequestParams> {
        self.open_at(scope, id, Instant::now())
    }

    fn open_at(
        &self,
        scope: Option<&str>,
        id: &str,
        now: Instant,
    ) -> Option<InitializeRequestParams> {
        self.payload_at(scope, id, now)?.params
    }

    /// The owner a session id issued for `scope` is bound to: `None` when
    /// the id is not valid here (as [`SessionKey::open`]), `Some(None)`
    /// for an id of no owner (opened anonymously, or by a version that
    /// did not bind sessions).
    pub(crate) fn owner(&self, scope: Option<&str>, id: &str) -> Option<Option<Owner>> {
        let payload = self.payload_at(scope, id, Instant::now())?;
        // NB: an owner field that does not decode is not "no owner": the
        // id was signed by us, so it cannot happen, but must not widen.
        match payload.owner {
            None => Some(None),
            Some(o) => Owner::decode(&o).map(Some),
        }
    }

    fn payload_at(&self, scope: Option<&str>, id: &str, now: Instant) -> Option<Payload> {
        let mut parts = id.split('.');
        let (Some(VERSION), Some(body), Some(mac), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
        let signed = signed_part(body);
        let ring = self.0.load();
        let valid = std::iter::once(&ring.current)
            .chain(
                ring.previous
                    .iter()
                    .filter(|(_, until)| until.is_none_or(|t| t > now))
                    .map(|(k, _)| k),
            )
            .any(|k| constant_time_eq(&mac, &k.mac(signed.as_bytes())));
        if !valid {
            return None;
        }
        let payload: Payload = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()?;
        if payload.scope.as_deref() != scope {
            return None;
        }
        Some(payload)
    }
}

/// `--session-key-file`: the key the file holds now, and the task (to
/// spawn) that keeps `key` following the file until `shutdown`.
///
/// No file yet (an optional Secret volume whose Secret does not exist
/// yet): a random key of this process, with a warning; the file's key is
/// adopted when it appears. An unreadable or short file at start-up is an
/// error — a bad Secret should stop a rollout, not start replicas that
/// disagree — while later the error is logged and the last good key stays.
pub fn follow_key_file(
    path: PathBuf,
    grace: Duration,
    poll: WatchOptions,
    shutdown: CancellationToken,
) -> Result<(SessionKey, impl std::future::Future<Output = ()> + Send), KeyError> {
    let (key, handled) = match std::fs::read(&path) {
        Ok(bytes) => (SessionKey::parse_file(&path, &bytes)?, Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::warn!(
                path = %path.display(),
                "session key file not found: session ids are signed with a key of this \
                 process, so a session works only on the replica that created it (clients \
                 would need affinity) until the file appears; it is picked up without a restart"
            );
            (SessionKey::random(), None)
        }
        Err(source) => return Err(KeyError::Unreadable { path, source }),
    };
    let mut follower = Follower {
        key: key.clone(),
        path: path.clone(),
        grace,
        from_file: handled.is_some(),
    };
    let watch = FileWatch::after(path, poll, handled.as_deref());
    let task = watch.run(shutdown, move |change| {
        follower
            .apply(change, Instant::now())
            .log(&follower.path, grace);
        std::future::ready(())
    });
    Ok((key, task))
}

/// What follows the key file's changes into the key.
struct Follower {
    key: SessionKey,
    path: PathBuf,
    grace: Duration,
    /// Whether the current key came from the file (else it is random).
    from_file: bool,
}

/// What one change of the key file did.
#[derive(Debug)]
enum Followed {
    /// The file's key replaced this process's random key.
    Adopted,
    /// The file holds a new key, now current.
    Rotated,
    /// The file was rewritten with the current key.
    Same,
    /// The file cannot be used; the current key stays.
    Refused(KeyError),
    /// The file is gone; the current key stays.
    Gone,
}

impl Follower {
    fn apply(&mut self, change: FileChange, now: Instant) -> Followed {
        match change {
            FileChange::Content(bytes) => match SessionKey::parse_file(&self.path, &bytes) {
                Ok(next) if !self.key.rotate_at(&next, self.grace, now) => Followed::Same,
                Ok(_) if std::mem::replace(&mut self.from_file, true) => Followed::Rotated,
                Ok(_) => Followed::Adopted,
                Err(e) => Followed::Refused(e),
            },
            FileChange::Gone => Followed::Gone,
            FileChange::Unreadable(source) => Followed::Refused(KeyError::Unreadable {
                path: self.path.clone(),
                source,
            }),
        }
    }
}

impl Followed {
    /// Logs the outcome; names the file and sizes, never key bytes.
    fn log(self, path: &Path, grace: Duration) {
        let grace_seconds = grace.as_secs();
        match self {
            Followed::Adopted => tracing::info!(
                path = %path.display(),
                grace_seconds,
                "session key file found: new session ids are signed with its key, so every \
                 replica sharing it accepts them; ids signed with this process's own key stay \
                 valid here for the grace period"
            ),
            Followed::Rotated => tracing::info!(
                path = %path.display(),
                grace_seconds,
                "session key changed: new session ids are signed with the new key; ids signed \
                 with the previous one stay valid for the grace period"
            ),
            Followed::Same => {}
            Followed::Refused(e) => tracing::error!(
                error = %e,
                "session key file not usable; keeping the current key"
            ),
            Followed::Gone => tracing::warn!(
                path = %path.display(),
                "session key file removed; keeping the current key"
            ),
        }
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
    /// [`Owner`], base64url; absent for anonymous sessions and in ids of
    /// versions before sessions were bound to their caller.
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
}

/// Who a session belongs to: a truncated SHA-256 of the verified caller's
/// identity key (`id:<method, issuer, subject>`), so an id names no
/// identity in clear while another identity cannot present it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Owner([u8; 16]);

impl Owner {
    pub(crate) fn of(identity_key: &str) -> Owner {
        let mut h = Sha256::new();
        h.update(b"toolgate-session-owner\0");
        h.update(identity_key.as_bytes());
        let mut out = [0u8; 16];
        out.copy_from_slice(&h.finalize()[..16]);
        Owner(out)
    }

    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0)
    }

    fn decode(text: &str) -> Option<Owner> {
        URL_SAFE_NO_PAD
            .decode(text)
            .ok()?
            .try_into()
            .ok()
            .map(Owner)
    }

    pub(crate) fn same(a: Option<&Owner>, b: Option<&Owner>) -> bool {
        match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => constant_time_eq(&a.0, &b.0),
            _ => false,
        }
    }
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Owner(..)")
    }
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

/// HMAC-SHA-256 (RFC 2104), by the `hmac` crate.
fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    use hmac::{Hmac, KeyInit, Mac};
    #[allow(clippy::expect_used)]
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// Equal, in time independent of where they differ (`subtle`).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
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

    fn key(b: u8) -> SessionKey {
        SessionKey::new(&[b; 32]).unwrap()
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex = hex::encode(mac);
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn ids_open_only_with_the_same_key_and_scope() {
        let k = key(7);
        let id = k.issue(Some("pets"), Some(params()));
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        let p = k.open(Some("pets"), &id).expect("opens");
        assert_eq!(
            p.protocol_version,
            rmcp::model::ProtocolVersion::V_2025_06_18
        );
        assert!(k.open(None, &id).is_none(), "another endpoint");
        assert!(key(8).open(Some("pets"), &id).is_none());
        let mut forged = id.clone();
        forged.insert(5, 'x');
        assert!(k.open(Some("pets"), &forged).is_none());
        assert_ne!(id, k.issue(Some("pets"), Some(params())), "nonce differs");
    }

    #[test]
    fn ids_carry_their_owner_and_ids_without_one_stay_valid() {
        let k = key(7);
        let alice = Owner::of("id:jwt|https://a.example|alice");
        let id = k.issue_for(None, Some(params()), Some(&alice));
        assert_eq!(k.owner(None, &id), Some(Some(alice)));
        assert!(!Owner::same(
            Some(&alice),
            Some(&Owner::of("id:jwt|https://b.example|alice"))
        ));
        assert!(!id.contains("alice"), "the identity is hashed");
        let anonymous = k.issue(None, Some(params()));
        assert_eq!(k.owner(None, &anonymous), Some(None));
        assert!(k.open(None, &anonymous).is_some());
        assert_eq!(k.owner(Some("pets"), &id), None, "another endpoint");
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(matches!(
            SessionKey::new(b"short"),
            Err(KeyError::TooShort { len: 5 })
        ));
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

    #[test]
    fn the_replaced_key_opens_ids_until_the_grace_period_ends() {
        let t0 = Instant::now();
        let k = SessionKey::random();
        let endpoint = k.clone();
        let old = k.issue(None, Some(params()));
        assert!(k.rotate_at(&key(1), Duration::from_secs(60), t0));
        let new = k.issue(None, Some(params()));
        // Clones (each endpoint holds one) see the rotation.
        assert!(endpoint.open_at(None, &new, t0).is_some());
        assert!(key(1).open(None, &new).is_some(), "signed with the new key");
        assert!(
            endpoint.open_at(None, &old, t0).is_some(),
            "within the grace"
        );
        let later = |s| t0 + Duration::from_secs(s);
        assert!(endpoint.open_at(None, &old, later(59)).is_some());
        assert!(
            endpoint.open_at(None, &old, later(60)).is_none(),
            "after the grace"
        );
        assert!(endpoint.open_at(None, &new, later(60)).is_some());
    }

    #[test]
    fn a_zero_grace_retires_the_replaced_key_at_once() {
        let k = key(1);
        let old = k.issue(None, Some(params()));
        assert!(k.rotate_to(&key(2), Duration::ZERO));
        assert!(k.open(None, &old).is_none());
    }

    #[test]
    fn rotating_to_the_current_key_changes_nothing() {
        let t0 = Instant::now();
        let k = key(1);
        let before = k.issue(None, Some(params()));
        assert!(k.rotate_at(&key(2), Duration::from_secs(10), t0));
        let id = k.issue(None, Some(params()));
        let t5 = t0 + Duration::from_secs(5);
        assert!(!k.rotate_at(&key(2), Duration::ZERO, t5));
        assert!(k.open_at(None, &id, t5).is_some());
        // The key before keeps the grace of its own rotation.
        assert!(k.open_at(None, &before, t5).is_some());
        assert!(k
            .open_at(None, &before, t0 + Duration::from_secs(10))
            .is_none());
    }

    #[test]
    fn at_most_a_few_replaced_keys_are_tried() {
        let k = key(0);
        let ids: Vec<String> = (1..=6)
            .map(|i| {
                let id = k.issue(None, Some(params()));
                assert!(k.rotate_to(&key(i), HOUR));
                id
            })
            .collect();
        let open: Vec<bool> = ids.iter().map(|id| k.open(None, id).is_some()).collect();
        assert_eq!(open, [false, false, true, true, true, true]);
    }

    fn follower(key: &SessionKey, from_file: bool) -> Follower {
        Follower {
            key: key.clone(),
            path: PathBuf::from("/var/run/toolgate/session/key"),
            grace: HOUR,
            from_file,
        }
    }

    fn content(b: u8) -> FileChange {
        // As `echo` writes it: the newline is not part of the key.
        let mut bytes = vec![b; 40];
        bytes.push(b'\n');
        FileChange::Content(bytes)
    }

    #[test]
    fn the_key_file_is_adopted_then_rotated_and_bad_files_are_refused() {
        let t0 = Instant::now();
        let k = SessionKey::random();
        let random_id = k.issue(None, Some(params()));
        let file_key = |b: u8| SessionKey::new(&[b; 40]).unwrap();
        let mut f = follower(&k, false);
        assert!(matches!(f.apply(content(b'a'), t0), Followed::Adopted));
        let a = k.issue(None, Some(params()));
        assert!(file_key(b'a').open(None, &a).is_some());
        assert!(
            k.open_at(None, &random_id, t0).is_some(),
            "the random key's grace"
        );
        assert!(matches!(f.apply(content(b'a'), t0), Followed::Same));

        let short = FileChange::Content(b"too short\n".to_vec());
        match f.apply(short, t0) {
            Followed::Refused(e) => {
                let text = e.to_string();
                assert!(text.contains("/var/run/toolgate/session/key"), "{text}");
                assert!(text.contains("9 bytes"), "{text}");
                assert!(!text.contains("too short"), "key bytes in {text}");
            }
            other => panic!("{other:?}"),
        }
        let unreadable = FileChange::Unreadable(std::io::ErrorKind::PermissionDenied.into());
        assert!(matches!(f.apply(unreadable, t0), Followed::Refused(_)));
        assert!(matches!(f.apply(FileChange::Gone, t0), Followed::Gone));
        let after = k.issue(None, Some(params()));
        assert!(
            file_key(b'a').open(None, &after).is_some(),
            "the last good key still signs"
        );

        let t1 = t0 + Duration::from_secs(1);
        assert!(matches!(f.apply(content(b'b'), t1), Followed::Rotated));
        assert!(file_key(b'b')
            .open(None, &k.issue(None, Some(params())))
            .is_some());
        assert!(
            k.open_at(None, &a, t1).is_some(),
            "the previous key's grace"
        );
        let expired = t1 + HOUR;
        assert!(k.open_at(None, &a, expired).is_none());
        assert!(k.open_at(None, &random_id, expired).is_none());
    }

    #[tokio::test]
    async fn a_bad_key_file_at_start_up_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "short\n").unwrap();
        let err = follow_key_file(
            path.clone(),
            HOUR,
            WatchOptions::default(),
            CancellationToken::new(),
        )
        .err()
        .expect("a short key is refused");
        assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    }
}
