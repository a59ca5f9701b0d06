//! Object storage, the global resourceVersion counter and the event history
//! watches replay from.
//!
//! Faithful: one cluster-wide, monotonically increasing resourceVersion
//! (every write takes the next number; lists report the current one); lists
//! are sorted by namespace/name; `limit`/`continue` paging keeps the first
//! page's resourceVersion so a watch from it sees every change made while
//! paging; history older than the retained window (by count of changes and
//! by approximate bytes, like etcd's compaction) or explicitly compacted
//! answers 410 Gone, for watches and for `continue` tokens alike.
//! Simplified: a watch's replay is read from an in-memory log instead of
//! etcd, and `resourceVersionMatch` on lists is ignored (lists always serve
//! the latest state).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::discovery::{Registry, ResourceType};
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One committed write, as watches see it.
#[derive(Debug)]
pub(crate) struct Change {
    pub rv: u64,
    pub key: String,
    pub kind: ChangeKind,
    pub object: Value,
    pub old: Option<Value>,
    /// Approximate bytes this change keeps alive in history.
    size: usize,
}

fn approx_size(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 8,
        Value::Array(a) => a.iter().map(approx_size).sum::<usize>() + 8,
        Value::Object(m) => {
            m.iter()
                .map(|(k, v)| k.len() + approx_size(v))
                .sum::<usize>()
                + 8
        }
        _ => 8,
    }
}

pub(crate) type ObjKey = (String, String);

/// Changes to replay, then a receiver for live ones.
pub(crate) type Subscription = (Vec<Arc<Change>>, broadcast::Receiver<Arc<Change>>);

/// Everything the server stores; guarded by one mutex in `State`.
pub(crate) struct Store {
    rv: u64,
    pub registry: Registry,
    objects: HashMap<String, BTreeMap<ObjKey, Value>>,
    history: VecDeque<Arc<Change>>,
    /// Watches and continue tokens from before this version get 410 Gone.
    compacted: u64,
    history_limit: usize,
    history_bytes: usize,
    history_bytes_limit: usize,
    tx: broadcast::Sender<Arc<Change>>,
    /// The resourceVersion of the last change sent to `tx`, readable without
    /// the lock (for bookmarks).
    published: Arc<AtomicU64>,
    seed: u64,
}

/// One page of a list.
pub(crate) struct Page {
    pub items: Vec<Value>,
    pub rv: u64,
    pub next: Option<String>,
    pub remaining: usize,
}

impl Store {
    pub fn new(history_limit: usize, history_bytes_limit: usize) -> Self {
        let (tx, _) = broadcast::channel(8192);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e3779b97f4a7c15)
            | 1;
        let mut store = Store {
            rv: 0,
            registry: Registry::with_builtins(),
            objects: HashMap::new(),
            history: VecDeque::new(),
            compacted: 0,
            history_limit: history_limit.max(1),
            history_bytes: 0,
            history_bytes_limit,
            tx,
            published: Arc::new(AtomicU64::new(0)),
            seed,
        };
        let now = now();
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "uid": store.uid(), "creationTimestamp": now,
                             "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            });
            store.commit("/namespaces", ChangeKind::Added, obj, None);
        }
        store
    }

    pub fn published(&self) -> Arc<AtomicU64> {
        self.published.clone()
    }

    pub fn rv(&self) -> u64 {
        self.rv
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: unique enough for uids and generated names.
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        self.seed.wrapping_mul(0x2545f4914f6cdd1d)
    }

    pub fn uid(&mut self) -> String {
        let a = self.next_random();
        let b = self.next_random();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }

    pub fn name_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut r = self.next_random();
        (0..5)
            .map(|_| {
                let c = ALPHABET[(r % ALPHABET.len() as u64) as usize] as char;
                r /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }

    /// Assigns the next resourceVersion to `object`, stores (or removes) it
    /// and publishes the change. Returns the object as stored.
    pub fn commit(
        &mut self,
        key: &str,
        kind: ChangeKind,
        mut object: Value,
        old: Option<Value>,
    ) -> Value {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let ok = obj_key(&object);
        let objects = self.objects.entry(key.to_string()).or_default();
        match kind {
            ChangeKind::Deleted => {
                objects.remove(&ok);
            }
            _ => {
                objects.insert(ok, object.clone());
            }
        }
        let size = approx_size(&object) + old.as_ref().map_or(0, approx_size);
        let change = Arc::new(Change {
            rv: self.rv,
            key: key.to_string(),
            kind,
            object: object.clone(),
            old,
            size,
        });
        self.history.push_back(change.clone());
        self.history_bytes += size;
        // Big objects (catalog chunks) would otherwise pile up in history.
        while self.history.len() > self.history_limit
            || (self.history_bytes > self.history_bytes_limit && self.history.len() > 1)
        {
            if let Some(c) = self.history.pop_front() {
                self.compacted = c.rv;
                self.history_bytes -= c.size;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(change);
        self.published.store(self.rv, Ordering::SeqCst);
        object
    }

    /// Drops all history: watches from any earlier version now get 410.
    pub fn compact(&mut self) -> u64 {
        self.history.clear();
        self.history_bytes = 0;
        self.compacted = self.rv;
        self.rv
    }

    pub fn get_raw(&self, rt: &ResourceType, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&rt.storage_key())?
            .get(&(ns.to_string(), name.to_string()))
    }

    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.get_raw(rt, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    pub fn namespace_exists(&self, ns: &str) -> bool {
        self.objects
            .get("/namespaces")
            .is_some_and(|m| m.contains_key(&(String::new(), ns.to_string())))
    }

    /// All objects of one storage key, in key order.
    pub fn all(&self, key: &str) -> Vec<Value> {
        self.objects
            .get(key)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn all_in_namespace(&self, ns: &str) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (key, objs) in &self.objects {
            for ((ons, _), o) in objs {
                if ons == ns {
                    out.push((key.clone(), o.clone()));
                }
            }
        }
        out
    }

    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        limit: Option<usize>,
        cont: Option<&str>,
    ) -> Result<Page, ApiError> {
        let (mut rv, mut start) = (self.rv, None);
        if let Some(token) = cont.filter(|c| !c.is_empty()) {
            let (trv, key) = token
                .split_once(':')
                .and_then(|(r, k)| Some((r.parse::<u64>().ok()?, k)))
                .ok_or_else(|| {
                    ApiError::bad_request(format!("continue key is not valid: {token}"))
                })?;
            if trv < self.compacted {
                return Err(ApiError::gone(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                ));
            }
            let (sns, sname) = key.split_once('/').unwrap_or(("", key));
            rv = trv;
            start = Some((sns.to_string(), sname.to_string()));
        }
        let mut matching = self
            .objects
            .get(&rt.storage_key())
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(|((ons, _), _)| ns.is_none_or(|n| n == ons))
            .filter(|(k, _)| start.as_ref().is_none_or(|s| *k > s))
            .filter(|(_, o)| labels.matches(o) && fields.matches(o))
            .map(|(k, o)| (k.clone(), o.clone()));
        let mut items = Vec::new();
        let mut last = None;
        for (k, o) in matching.by_ref() {
            if limit.is_some_and(|l| l > 0 && items.len() >= l) {
                let remaining = 1 + matching.count();
                let (lns, lname): ObjKey = last.unwrap_or_default();
                return Ok(Page {
                    items,
                    rv,
                    next: Some(format!("{rv}:{lns}/{lname}")),
                    remaining,
                });
            }
            items.push(o);
            last = Some(k);
        }
        Ok(Page {
            items,
            rv,
            next: None,
            remaining: 0,
        })
    }

    /// Changes to `key` after `from`, plus a receiver for later ones, taken
    /// atomically so nothing falls between them.
    pub fn subscribe(&self, key: &str, from: u64) -> Result<Subscription, ApiError> {
        if from < self.compacted {
            return Err(ApiError::gone(format!(
                "too old resource version: {from} ({})",
                self.compacted
            )));
        }
        let replay = self
            .history
            .iter()
            .filter(|c| c.rv > from && c.key == key)
            .cloned()
            .collect();
        Ok((replay, self.tx.subscribe()))
    }
}

pub(crate) fn obj_key(o: &Value) -> ObjKey {
    (
        o["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// Seconds-precision RFC 3339, as `metav1.Time` serialises.
pub(crate) fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub(crate) fn meta_str<'a>(o: &'a Value, k: &str) -> &'a str {
    o["metadata"][k].as_str().unwrap_or_default()
}

/// Only the metadata of `obj`, as served to clients that ask for
/// `as=PartialObjectMetadata`.
pub(crate) fn metadata_only(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}
