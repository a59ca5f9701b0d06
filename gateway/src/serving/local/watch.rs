//! Following the config file, the files it names and the URL refresh
//! timer, and reloading on each change.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::Sources;
use crate::file_watch::{FileWatch, WatchOptions};
use crate::serving::reload::CatalogStore;

/// Reloads `sources` into `store` whenever the config file, or a document
/// or overlay file it names, changes, and when a URL refresh is due,
/// until `shutdown`. What [`Sources::start`] read is taken as loaded.
pub async fn watch(
    mut sources: Sources,
    store: Arc<CatalogStore>,
    opts: WatchOptions,
    shutdown: CancellationToken,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watches: BTreeMap<PathBuf, CancellationToken> = BTreeMap::new();
    let follow = |sources: &mut Sources, watches: &mut BTreeMap<PathBuf, CancellationToken>| {
        let read = std::mem::take(&mut sources.read);
        // A config that does not parse names no files: keep following
        // the ones it named before.
        let keep_all = !sources.read_all;
        watches.retain(|path, stop| {
            let keep = keep_all || read.contains_key(path);
            if !keep {
                stop.cancel();
            }
            keep
        });
        for (path, bytes) in read {
            if watches.contains_key(&path) {
                continue;
            }
            let stop = shutdown.child_token();
            let tx = tx.clone();
            let watch = FileWatch::after(path.clone(), opts, bytes.as_deref());
            tokio::spawn(watch.run(stop.clone(), move |_| {
                let _ = tx.send(());
                async {}
            }));
            watches.insert(path, stop);
        }
    };
    follow(&mut sources, &mut watches);
    loop {
        let refresh = sources.refresh_at();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            Some(()) = rx.recv() => {}
            // Cleared, so a config that no longer parses does not spin
            // here; a load that reads a URL sets the next one.
            _ = sleep_until(refresh) => sources.refresh_at = None,
        }
        // One reload for a burst of changes.
        while rx.try_recv().is_ok() {}
        sources.reload(&store).await;
        follow(&mut sources, &mut watches);
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
