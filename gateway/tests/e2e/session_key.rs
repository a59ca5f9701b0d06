//! The session key file, followed by real `toolgate serve` replicas that
//! share its path: it appears after they started (the kustomize install
//! creates the Secret after the Deployment), then it is rotated. Sessions
//! are opened and used with plain HTTP JSON-RPC, straight to each replica.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use crate::reload::{kubelet_publish, serve, tempdir, Served};
use crate::replicas::raw_list;
use crate::support::write_slow_catalog_files;

/// How long ids signed with a replaced key stay valid here. The replicas
/// poll the file every 50 ms, and the checks that a replaced key still
/// opens ids take a few requests: well under a second on an idle machine,
/// the rest is margin for a loaded one (the waits give up at half of it).
const GRACE: Duration = Duration::from_secs(20);
/// Failure guard of the wait for the first key file.
const DEADLINE: Duration = Duration::from_secs(30);

const KEY_1: &str = "first-shared-session-key-0123456789abcdef";
const KEY_2: &str = "second-shared-session-key-0123456789abcdef";

struct Files {
    catalog: PathBuf,
    config: PathBuf,
    /// The Secret volume's directory, empty until the Secret exists.
    secret: PathBuf,
}

impl Files {
    fn new(name: &str) -> Files {
        let dir = tempdir(name);
        // tools/list only: the upstream is never called.
        let (catalog, config) = write_slow_catalog_files(&dir, "http://127.0.0.1:9");
        let secret = dir.join("session");
        std::fs::create_dir_all(&secret).unwrap();
        Files {
            catalog,
            config,
            secret,
        }
    }

    fn key(&self) -> PathBuf {
        self.secret.join("key")
    }

    fn replica(&self) -> Served {
        serve(&[
            "--catalog",
            self.catalog.to_str().unwrap(),
            "--config",
            self.config.to_str().unwrap(),
            "--session-key-file",
            self.key().to_str().unwrap(),
            "--session-key-grace-seconds",
            &GRACE.as_secs().to_string(),
        ])
    }
}

/// Opens a session on `base` with a raw `initialize`; returns its id.
async fn initialize(base: &str) -> String {
    let r = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"key-test","version":"1"}}}"#,
        )
        .send()
        .await
        .expect("initialize answered");
    assert_eq!(r.status(), 200, "initialize on {base}");
    r.headers()["mcp-session-id"]
        .to_str()
        .expect("an ASCII session id")
        .to_string()
}

/// Whether `base` accepts session `id` (HTTP 200) or does not know it
/// (404, what a client re-initializes on).
async fn accepts(base: &str, id: &str) -> bool {
    match raw_list(base, id).await {
        200 => true,
        404 => false,
        other => panic!("tools/list on {base}: HTTP {other}"),
    }
}

/// Whether a session `from` opens is accepted by `on` (one that has not
/// seen it: it restores it by checking the id's signature).
async fn carries(from: &Served, on: &Served) -> bool {
    accepts(&on.url, &initialize(&from.url).await).await
}

/// Polls `check` until it holds; panics naming `what` at `give_up`.
async fn until<F: Future<Output = bool>>(
    what: &str,
    give_up: Instant,
    mut check: impl FnMut() -> F,
) {
    while !check().await {
        assert!(Instant::now() < give_up, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn publish(secret: &Path, n: usize, key: &str) {
    kubelet_publish(secret, n, "key", format!("{key}\n").as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_adopt_the_key_file_when_it_appears_and_keep_sessions_across_a_rotation() {
    gateway::net::install_crypto_provider();
    let files = Files::new("session-key");
    let a = files.replica();
    let b = files.replica();

    // No Secret yet: each replica signs with a key of its own.
    let random_a = initialize(&a.url).await;
    assert!(accepts(&a.url, &random_a).await);
    assert!(!accepts(&b.url, &random_a).await, "B knows A's own key");
    assert!(!carries(&b, &a).await, "A knows B's own key");

    // The Secret is created: both replicas switch to its key, no restart.
    publish(&files.secret, 1, KEY_1);
    let give_up = Instant::now() + DEADLINE;
    until(
        "A and B accept each other's new sessions",
        give_up,
        || async { carries(&a, &b).await && carries(&b, &a).await },
    )
    .await;

    // Sessions opened before the rotation. Each is used on the replica that
    // did not open it only after the rotation (then it must check the
    // signature: it holds no such session).
    let (before_a, before_b) = (initialize(&a.url).await, initialize(&b.url).await);
    let (late_a, late_b) = (initialize(&a.url).await, initialize(&b.url).await);

    publish(&files.secret, 2, KEY_2);
    // Neither replica switched before this, so both grace periods last at
    // least until then.
    let give_up = Instant::now() + GRACE / 2;
    // A witness started now knows only the new key: a replica's new
    // sessions open on it once that replica signs with the new key.
    let witness = files.replica();
    until("A signs with the new key", give_up, || {
        carries(&a, &witness)
    })
    .await;
    until("B signs with the new key", give_up, || {
        carries(&b, &witness)
    })
    .await;
    // Both switched at or before this point, so their grace periods end at
    // the latest GRACE from now.
    let switched = Instant::now();

    assert!(
        accepts(&b.url, &before_a).await,
        "B accepts a session A opened with the previous key"
    );
    assert!(
        accepts(&a.url, &before_b).await,
        "A accepts a session B opened with the previous key"
    );
    assert!(
        !accepts(&witness.url, &before_a).await,
        "a replica that never had the previous key refuses its sessions"
    );
    assert!(carries(&a, &b).await && carries(&b, &a).await);

    // Once the grace period is over, ids signed with the previous key are
    // refused (these two were never used on the other replica).
    tokio::time::sleep_until(switched + GRACE).await;
    assert!(!accepts(&b.url, &late_a).await, "the grace period is over");
    assert!(!accepts(&a.url, &late_b).await, "the grace period is over");
    assert!(carries(&a, &b).await && carries(&b, &a).await);
}
