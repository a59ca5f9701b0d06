//! Following a file that may change under the gateway: the catalog of
//! `serve --catalog` ([`crate::serving::reload::watch_file`]) and the session key
//! ([`crate::mcp::session::follow_key_file`]).
//!
//! The file is polled: its metadata every interval, its content hash when
//! the metadata changed (and every few seconds anyway). `std::fs::read`
//! follows symlinks, and the metadata is the resolved target's (inode
//! included), so a Kubernetes ConfigMap or Secret volume — where the file
//! is a symlink through `..data`, swapped atomically on update — is
//! handled like any other write. A change is reported once it has been
//! stable for the debounce period, so a half-written file is not parsed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

/// How a file is polled.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    pub interval: Duration,
    /// A change must be stable this long before it is reported.
    pub debounce: Duration,
    /// Content is re-hashed at least this often even when metadata looks
    /// unchanged (some volume drivers keep mtimes).
    pub rehash_every: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            interval: Duration::from_millis(250),
            debounce: Duration::from_millis(200),
            rehash_every: Duration::from_secs(5),
        }
    }
}

/// What changed since the last report (or since the watch started).
#[derive(Debug)]
pub(crate) enum FileChange {
    /// New content, stable for the debounce period.
    Content(Vec<u8>),
    /// The file no longer exists.
    Gone,
    /// The file exists but cannot be read (reported once per kind of
    /// error, not on every poll).
    Unreadable(std::io::Error),
}

/// What the watch last saw, so each state is reported once.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Content([u8; 32]),
    Missing,
    Unreadable(std::io::ErrorKind),
}

/// One file, polled until shutdown.
#[derive(Debug)]
pub(crate) struct FileWatch {
    path: PathBuf,
    opts: WatchOptions,
    seen: Seen,
}

impl FileWatch {
    /// Watches `path`, taking what it holds now as already handled.
    pub(crate) fn from_now(path: PathBuf, opts: WatchOptions) -> Self {
        let seen = seen(&path).0;
        FileWatch { path, opts, seen }
    }

    /// Watches `path`, taking `handled` (the content the caller read; `None`:
    /// the file did not exist) as already handled, so a change between the
    /// caller's read and the start of the watch is reported.
    pub(crate) fn after(path: PathBuf, opts: WatchOptions, handled: Option<&[u8]>) -> Self {
        let seen = handled.map_or(Seen::Missing, |b| Seen::Content(sha(b)));
        FileWatch { path, opts, seen }
    }

    /// Polls until `shutdown`, calling `on_change` with each change in
    /// turn (the next poll waits for it).
    pub(crate) async fn run<F, Fut>(mut self, shutdown: CancellationToken, mut on_change: F)
    where
        F: FnMut(FileChange) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let opts = self.opts;
        let mut seen_meta = None;
        let mut last_hash_at: Option<Instant> = None;
        loop {
            let m = meta(&self.path);
            let due = last_hash_at.is_none_or(|at| at.elapsed() >= opts.rehash_every);
            if m != seen_meta || due {
                seen_meta = m;
                last_hash_at = Some(Instant::now());
                if let Some(change) = self.poll(&shutdown).await {
                    seen_meta = meta(&self.path);
                    on_change(change).await;
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(opts.interval) => {}
            }
        }
    }

    /// Reads the file; a change from what was seen is returned once it is
    /// stable.
    async fn poll(&mut self, shutdown: &CancellationToken) -> Option<FileChange> {
        let (state, read) = seen(&self.path);
        if state == self.seen {
            return None;
        }
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(e) => {
                let gone = state == Seen::Missing;
                self.seen = state;
                return Some(if gone {
                    FileChange::Gone
                } else {
                    FileChange::Unreadable(e)
                });
            }
        };
        let Seen::Content(now) = state else {
            return None;
        };
        // Debounce: wait until the content stops changing.
        let (mut current, mut bytes) = (now, bytes);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return None,
                _ = tokio::time::sleep(self.opts.debounce) => {}
            }
            match std::fs::read(&self.path) {
                Ok(again) if sha(&again) == current => break,
                Ok(again) => {
                    current = sha(&again);
                    bytes = again;
                }
                // Gone or unreadable meanwhile: the next poll reports it.
                Err(_) => return None,
            }
        }
        if Seen::Content(current) == self.seen {
            return None;
        }
        self.seen = Seen::Content(current);
        Some(FileChange::Content(bytes))
    }
}

/// The file's state now, with its content or the error reading it.
fn seen(path: &Path) -> (Seen, std::io::Result<Vec<u8>>) {
    match std::fs::read(path) {
        Ok(b) => (Seen::Content(sha(&b)), Ok(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Seen::Missing, Err(e)),
        Err(e) => (Seen::Unreadable(e.kind()), Err(e)),
    }
}

/// (len, mtime, inode of the resolved target): cheap change detection.
fn meta(path: &Path) -> Option<(u64, Option<std::time::SystemTime>, u64)> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((m.len(), m.modified().ok(), ino))
}

fn sha(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn fast() -> WatchOptions {
        WatchOptions {
            interval: Duration::from_millis(10),
            debounce: Duration::from_millis(10),
            rehash_every: Duration::from_millis(50),
        }
    }

    /// Runs a watch of `path`, sending what it reports.
    fn spawn(
        watch: FileWatch,
    ) -> (
        tokio::sync::mpsc::UnboundedReceiver<String>,
        CancellationToken,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let tx = Arc::new(Mutex::new(tx));
        tokio::spawn(watch.run(stop.clone(), move |c| {
            let text = match c {
                FileChange::Content(b) => String::from_utf8_lossy(&b).into_owned(),
                FileChange::Gone => "<gone>".into(),
                FileChange::Unreadable(_) => "<unreadable>".into(),
            };
            let _ = tx.lock().unwrap().send(text);
            async {}
        }));
        (rx, stop)
    }

    async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("timed out waiting for a change")
            .expect("the watch runs")
    }

    /// What the kubelet does to a Secret or ConfigMap volume: a new
    /// timestamped directory, then an atomic rename of the `..data` link.
    fn kubelet_write(dir: &Path, n: usize, name: &str, bytes: &[u8]) {
        let ts = dir.join(format!("..v{n}"));
        std::fs::create_dir_all(&ts).unwrap();
        std::fs::write(ts.join(name), bytes).unwrap();
        let tmp = dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(format!("..v{n}"), &tmp).unwrap();
        std::fs::rename(&tmp, dir.join("..data")).unwrap();
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).unwrap();
        }
    }

    #[tokio::test]
    async fn a_file_that_appears_and_is_swapped_through_data_is_reported_each_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let (mut rx, stop) = spawn(FileWatch::after(path.clone(), fast(), None));
        kubelet_write(dir.path(), 1, "key", b"one");
        assert_eq!(next(&mut rx).await, "one");
        // Same length: only the resolved inode (or the rehash) shows it.
        kubelet_write(dir.path(), 2, "key", b"two");
        assert_eq!(next(&mut rx).await, "two");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(next(&mut rx).await, "<gone>");
        kubelet_write(dir.path(), 3, "key", b"three");
        assert_eq!(next(&mut rx).await, "three");
        stop.cancel();
    }

    #[tokio::test]
    async fn content_read_before_the_watch_is_not_reported_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "a").unwrap();
        // The caller read "a"; the file changed before the watch started.
        std::fs::write(&path, "b").unwrap();
        let (mut rx, stop) = spawn(FileWatch::after(path.clone(), fast(), Some(b"a")));
        assert_eq!(next(&mut rx).await, "b");
        std::fs::write(&path, "c").unwrap();
        assert_eq!(next(&mut rx).await, "c", "\"b\" was reported once");
        stop.cancel();
    }
}
