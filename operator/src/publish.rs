//! Publishing: the catalog ConfigMaps and the credentials Secret in the
//! operator's namespace (names and labels in `crds::publish`, content in
//! `catalog::publish`). Upstreams and toolsets share the index and the
//! chunk format.
//!
//! Order makes every intermediate state safe for a reader: chunks are
//! created first (content-addressed, never rewritten), then the index names
//! them, and only then are chunks no index entry names deleted. A gateway
//! that reads the index therefore always finds the chunks it names, or
//! keeps what it serves until they arrive.
//!
//! All writes go through one lock: the index is a single object shared by
//! every upstream, and garbage collection must not race a publish whose
//! chunks are not in the index yet. Across replicas, only the lease holder
//! publishes; the index is still replaced with a resourceVersion
//! precondition so a stale writer fails instead of overwriting.

use std::collections::{BTreeMap, BTreeSet};

use catalog::publish::{ChunkRef, Encoded, Index, IndexEntry, ToolsetEntry};
use catalog::toolset::ToolsetName;
use crds::publish as names;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use tokio::sync::Mutex;

use crate::status::FIELD_MANAGER as MANAGER;
const SOURCE_ANNOTATION: &str = "toolgate.dev/source";

pub struct Publisher {
    configmaps: Api<ConfigMap>,
    secrets: Api<Secret>,
    namespace: String,
    lock: Mutex<()>,
}

/// What is published, besides its chunks.
#[derive(Debug, Clone)]
pub struct Meta {
    pub prefix: String,
    /// `namespace/name` of the McpUpstream.
    pub source: String,
    pub catalog_hash: String,
    pub tool_count: usize,
}

/// What [`Publisher::publish`] (or [`Publisher::publish_toolset`]) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<E = IndexEntry> {
    /// False when the index already had exactly this version.
    pub changed: bool,
    pub entry: E,
    /// Bytes of the chunks this write created (existing chunks, shared
    /// by content, are not written again).
    pub chunk_bytes: usize,
}

fn labels(component: &str, prefix: Option<&str>) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([
        (names::PART_OF.0.to_string(), names::PART_OF.1.to_string()),
        (names::COMPONENT.to_string(), component.to_string()),
    ]);
    if let Some(p) = prefix {
        l.insert(names::PREFIX_LABEL.to_string(), p.to_string());
    }
    l
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

impl Publisher {
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        Publisher {
            configmaps: Api::namespaced(client.clone(), namespace),
            secrets: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            lock: Mutex::new(()),
        }
    }

    /// The index as stored, with its resourceVersion (None: no index yet).
    async fn read_index(&self) -> Result<(Index, Option<String>), kube::Error> {
        let Some(cm) = self.configmaps.get_opt(names::INDEX_NAME).await? else {
            return Ok((Index::default(), None));
        };
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(names::INDEX_KEY))
            .map(String::as_str)
            .unwrap_or_default();
        let index = Index::parse(text).unwrap_or_else(|e| {
            // Rebuilt from the upstreams as they reconcile; better than
            // refusing to publish anything ever again.
            tracing::error!(error = %e, configmap = names::INDEX_NAME, "unreadable index; starting a new one");
            Index::default()
        });
        Ok((index, cm.metadata.resource_version))
    }

    /// Writes the index; `Err` 409 when someone else wrote it since it was read.
    async fn write_index(&self, index: &Index, rv: Option<String>) -> Result<(), kube::Error> {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(names::INDEX_NAME.into()),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels(names::COMPONENT_INDEX, None)),
                resource_version: rv.clone(),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                names::INDEX_KEY.to_string(),
                index.to_text(),
            )])),
            ..Default::default()
        };
        let pp = PostParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        if rv.is_some() {
            self.configmaps
                .replace(names::INDEX_NAME, &pp, &cm)
                .await
                .map(drop)
        } else {
            self.configmaps.create(&pp, &cm).await.map(drop)
        }
    }

    /// Reads, changes and writes the index, retrying on write conflicts.
    /// `change` returns false when nothing needs writing.
    async fn update_index(
        &self,
        mut change: impl FnMut(&mut Index) -> bool,
    ) -> Result<Index, kube::Error> {
        let mut attempt = 0;
        loop {
            let (mut index, rv) = self.read_index().await?;
            if !change(&mut index) {
                return Ok(index);
            }
            match self.write_index(&index, rv).await {
                Ok(()) => return Ok(index),
                Err(e) if (is_status(&e, 409)) && attempt < 5 => attempt += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Creates an empty index if there is none.
    pub async fn ensure_index(&self) -> Result<(), kube::Error> {
        let _guard = self.lock.lock().await;
        if self.configmaps.get_opt(names::INDEX_NAME).await?.is_some() {
            return Ok(());
        }
        match self.write_index(&Index::default(), None).await {
            Err(e) if is_status(&e, 409) => Ok(()),
            other => other,
        }
    }

    /// The entry currently published for an McpUpstream (`namespace/name`).
    pub async fn published(&self, source: &str) -> Result<Option<IndexEntry>, kube::Error> {
        let (index, _) = self.read_index().await?;
        Ok(index.upstreams.into_iter().find(|e| e.source == source))
    }

    /// Publishes one upstream: credentials, chunks, index, then garbage.
    pub async fn publish(
        &self,
        upstream: &Meta,
        encoded: &Encoded,
        credentials: BTreeMap<String, Vec<u8>>,
    ) -> Result<Outcome, kube::Error> {
        let _guard = self.lock.lock().await;
        let prefix = upstream.prefix.clone();
        let entry = IndexEntry {
            prefix: prefix.clone(),
            source: upstream.source.clone(),
            hash: encoded.hash.clone(),
            catalog_hash: upstream.catalog_hash.clone(),
            tool_count: upstream.tool_count,
            chunks: encoded
                .chunks
                .iter()
                .zip(&encoded.chunk_hashes)
                .map(|(c, h)| ChunkRef {
                    name: names::chunk_name(&prefix, h),
                    sha256: h.clone(),
                    size: c.len(),
                })
                .collect(),
            credentials: credentials.keys().cloned().collect(),
        };
        self.put_credentials(&credentials).await?;
        let (index, _) = self.read_index().await?;
        if index.entry(&prefix) == Some(&entry)
            && index
                .upstreams
                .iter()
                .all(|e| e.source != entry.source || e.prefix == prefix)
        {
            return Ok(Outcome {
                changed: false,
                entry,
                chunk_bytes: 0,
            });
        }
        let mut chunk_bytes = 0;
        for (chunk, r) in encoded.chunks.iter().zip(&entry.chunks) {
            chunk_bytes += self
                .put_chunk(Some(&prefix), &upstream.source, r, chunk)
                .await?;
        }
        let new_entry = entry.clone();
        let index = self
            .update_index(|index| {
                // A renamed prefix leaves its old entry behind otherwise.
                index.upstreams.retain(|e| e.source != new_entry.source);
                index.upsert(new_entry.clone());
                true
            })
            .await?;
        self.collect_garbage(&index).await?;
        Ok(Outcome {
            changed: true,
            entry,
            chunk_bytes,
        })
    }

    /// Removes whatever an McpUpstream published. True if it had an entry.
    pub async fn unpublish(&self, source: &str) -> Result<bool, kube::Error> {
        let _guard = self.lock.lock().await;
        let mut removed = false;
        let index = self
            .update_index(|index| {
                let before = index.upstreams.len();
                index.upstreams.retain(|e| e.source != source);
                removed = before != index.upstreams.len();
                removed
            })
            .await?;
        if removed {
            self.collect_garbage(&index).await?;
        }
        Ok(removed)
    }

    /// The whole index as published (empty before the first publish).
    pub async fn index(&self) -> Result<Index, kube::Error> {
        Ok(self.read_index().await?.0)
    }

    /// The chunks an upstream's entry names, in order; `None` when one is
    /// gone (a newer version replaced it meanwhile: read the index again).
    pub async fn chunks(&self, entry: &IndexEntry) -> Result<Option<Vec<Vec<u8>>>, kube::Error> {
        let mut out = Vec::with_capacity(entry.chunks.len());
        for r in &entry.chunks {
            let Some(cm) = self.configmaps.get_opt(&r.name).await? else {
                return Ok(None);
            };
            let Some(bytes) = cm.binary_data.and_then(|mut d| d.remove(names::CHUNK_KEY)) else {
                return Ok(None);
            };
            out.push(bytes.0);
        }
        Ok(Some(out))
    }

    /// Publishes one toolset: chunks, then the index entry, then garbage.
    /// Entries of toolsets that are not `live` (deleted, or its own when it
    /// was deleted while this ran) are dropped in the same write.
    #[tracing::instrument(name = "publish", skip_all)]
    pub async fn publish_toolset(
        &self,
        id: &ToolsetName,
        encoded: &Encoded,
        live: impl Fn(&ToolsetName) -> bool,
    ) -> Result<Outcome<ToolsetEntry>, kube::Error> {
        let _guard = self.lock.lock().await;
        let entry = ToolsetEntry {
            id: id.clone(),
            hash: encoded.hash.clone(),
            chunks: encoded
                .chunks
                .iter()
                .zip(&encoded.chunk_hashes)
                .map(|(c, h)| ChunkRef {
                    name: names::toolset_chunk_name(h),
                    sha256: h.clone(),
                    size: c.len(),
                })
                .collect(),
        };
        let (index, _) = self.read_index().await?;
        if index.toolset(id) == Some(&entry) && index.toolsets.iter().all(|e| live(&e.id)) {
            return Ok(Outcome {
                changed: false,
                entry,
                chunk_bytes: 0,
            });
        }
        let source = id.to_string();
        let mut chunk_bytes = 0;
        for (chunk, r) in encoded.chunks.iter().zip(&entry.chunks) {
            chunk_bytes += self.put_chunk(None, &source, r, chunk).await?;
        }
        let new_entry = entry.clone();
        let index = self
            .update_index(|index| {
                index.upsert_toolset(new_entry.clone());
                index.toolsets.retain(|e| live(&e.id));
                true
            })
            .await?;
        self.collect_garbage(&index).await?;
        Ok(Outcome {
            changed: true,
            entry,
            chunk_bytes,
        })
    }

    /// Removes the entries of toolsets that are not `live`; returns them.
    pub async fn retain_toolsets(
        &self,
        live: impl Fn(&ToolsetName) -> bool,
    ) -> Result<Vec<ToolsetName>, kube::Error> {
        let _guard = self.lock.lock().await;
        let mut removed = Vec::new();
        let index = self
            .update_index(|index| {
                removed = index
                    .toolsets
                    .iter()
                    .filter(|e| !live(&e.id))
                    .map(|e| e.id.clone())
                    .collect();
                index.toolsets.retain(|e| live(&e.id));
                !removed.is_empty()
            })
            .await?;
        if !removed.is_empty() {
            self.collect_garbage(&index).await?;
        }
        Ok(removed)
    }

    /// Creates a chunk unless it exists; returns the bytes written.
    async fn put_chunk(
        &self,
        prefix: Option<&str>,
        source: &str,
        r: &ChunkRef,
        bytes: &[u8],
    ) -> Result<usize, kube::Error> {
        if self.configmaps.get_opt(&r.name).await?.is_some() {
            // Content-addressed: an existing chunk already holds these bytes.
            return Ok(0);
        }
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(r.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels(names::COMPONENT_CHUNK, prefix)),
                annotations: Some(BTreeMap::from([(
                    SOURCE_ANNOTATION.to_string(),
                    source.to_string(),
                )])),
                ..Default::default()
            },
            binary_data: Some(BTreeMap::from([(
                names::CHUNK_KEY.to_string(),
                ByteString(bytes.to_vec()),
            )])),
            immutable: Some(true),
            ..Default::default()
        };
        let pp = PostParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        match self.configmaps.create(&pp, &cm).await {
            Ok(_) => Ok(bytes.len()),
            Err(e) if is_status(&e, 409) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Adds or updates credential keys (a merge patch: other upstreams'
    /// keys are untouched; nothing is written when values are current).
    pub async fn put_credentials(
        &self,
        creds: &BTreeMap<String, Vec<u8>>,
    ) -> Result<(), kube::Error> {
        if creds.is_empty() {
            return Ok(());
        }
        let current = self.secrets.get_opt(names::CREDENTIALS_SECRET).await?;
        let Some(current) = current else {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(names::CREDENTIALS_SECRET.into()),
                    namespace: Some(self.namespace.clone()),
                    labels: Some(labels(names::COMPONENT_CREDENTIALS, None)),
                    ..Default::default()
                },
                data: Some(
                    creds
                        .iter()
                        .map(|(k, v)| (k.clone(), ByteString(v.clone())))
                        .collect(),
                ),
                type_: Some("Opaque".into()),
                ..Default::default()
            };
            let pp = PostParams {
                field_manager: Some(MANAGER.into()),
                ..Default::default()
            };
            return match self.secrets.create(&pp, &secret).await {
                Ok(_) => Ok(()),
                // Created meanwhile: fall through to a patch next time round.
                Err(e) if is_status(&e, 409) => Box::pin(self.put_credentials(creds)).await,
                Err(e) => Err(e),
            };
        };
        let data = current.data.unwrap_or_default();
        let stale: BTreeMap<&String, &Vec<u8>> = creds
            .iter()
            .filter(|(k, v)| data.get(*k).map(|b| &b.0) != Some(*v))
            .collect();
        if stale.is_empty() {
            return Ok(());
        }
        let patch = serde_json::json!({
            "data": stale
                .iter()
                .map(|(k, v)| ((*k).clone(), serde_json::to_value(ByteString((*v).clone())).unwrap_or_default()))
                .collect::<serde_json::Map<_, _>>()
        });
        self.secrets
            .patch(
                names::CREDENTIALS_SECRET,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map(drop)
    }

    /// Deletes chunks the index does not name and credential keys no entry
    /// references.
    async fn collect_garbage(&self, index: &Index) -> Result<(), kube::Error> {
        let live: BTreeSet<&str> = index.chunk_names().collect();
        let chunks = self
            .configmaps
            .list_metadata(&ListParams::default().labels(names::CHUNK_SELECTOR))
            .await?;
        for cm in chunks.items {
            let Some(name) = cm.metadata.name else {
                continue;
            };
            if !live.contains(name.as_str()) {
                match self
                    .configmaps
                    .delete(&name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => tracing::debug!(chunk = %name, "deleted unreferenced chunk"),
                    Err(e) if is_status(&e, 404) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let wanted: BTreeSet<&str> = index
            .upstreams
            .iter()
            .flat_map(|e| e.credentials.iter().map(String::as_str))
            .collect();
        if let Some(secret) = self.secrets.get_opt(names::CREDENTIALS_SECRET).await? {
            let unused: Vec<String> = secret
                .data
                .unwrap_or_default()
                .into_keys()
                .filter(|k| !wanted.contains(k.as_str()))
                .collect();
            if !unused.is_empty() {
                let patch = serde_json::json!({
                    "data": unused.iter().map(|k| (k.clone(), serde_json::Value::Null)).collect::<serde_json::Map<_, _>>()
                });
                self.secrets
                    .patch(
                        names::CREDENTIALS_SECRET,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await?;
            }
        }
        Ok(())
    }
}
