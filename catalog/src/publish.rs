//! The published form of a catalog: what the operator writes and the
//! gateway reads, independent of where it is stored.
//!
//! One [`PublishedUpstream`] per upstream — its compiled catalog plus the
//! [`UpstreamConfig`] the gateway needs to call it — serialised as JSON,
//! gzipped, and cut into chunks of at most [`MAX_CHUNK_BYTES`] so that each
//! fits a Kubernetes object (ConfigMaps hold at most 1 MiB). An [`Index`]
//! names every upstream's chunks with their sha256, so a reader can tell a
//! complete set from a half-written one and never assembles a mix of two
//! versions.
//!
//! Toolsets ([`crate::toolset::Toolset`]) are published the same way, one
//! [`PublishedToolset`] per McpToolset in chunks of their own, named in the
//! index beside the upstreams ([`Index::toolsets`]), so one index version
//! says which upstreams and which toolsets the gateway serves, and both
//! change in one swap.
//!
//! Encoding is deterministic (gzip with no timestamp, JSON in field order):
//! the same upstream always gives the same chunks and hash, which is what
//! lets a restarted operator see that nothing needs republishing.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::{Catalog, UpstreamCatalog};
use crate::runtime::UpstreamConfig;
use crate::toolset::{Toolset, ToolsetName};

/// Identifies the published format. Bumped on any incompatible change.
pub const PUBLISHED_FORMAT: &str = "toolgate.dev/published/v1";

/// Largest chunk, in (compressed) bytes: room under the 1 MiB ConfigMap
/// limit for metadata and the index's own growth.
pub const MAX_CHUNK_BYTES: usize = 900 * 1024;

/// Default cap on one upstream's published catalog, as uncompressed JSON:
/// what a gateway's memory follows (measured: a loaded catalog holds about
/// 1.5x its JSON size, 3.5x at the peak of loading it; the largest corpus
/// catalog, Argo Workflows, is 8.9 MB). 32 MiB keeps one such upstream
/// within the gateway's default 512Mi limit next to its response budget;
/// see the chart's values.yaml.
pub const DEFAULT_MAX_UPSTREAM_BYTES: usize = 32 << 20;

/// Decompressed size a reader accepts per upstream: a gzip bomb in a
/// ConfigMap must not take the gateway down.
pub const MAX_DECOMPRESSED_BYTES: u64 = 512 << 20;

/// One upstream as the gateway serves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedUpstream {
    /// Always [`PUBLISHED_FORMAT`].
    pub format: String,
    /// Where it came from, for logs and `/status` (`namespace/name`).
    pub source: String,
    pub runtime: UpstreamConfig,
    pub catalog: UpstreamCatalog,
}

/// An encoded upstream: its chunks and their identities.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// [`identity`] of the content; changes iff the content does.
    pub hash: String,
    pub chunks: Vec<Vec<u8>>,
    /// sha256 of each chunk, in order.
    pub chunk_hashes: Vec<String>,
    /// Total compressed size.
    pub size: usize,
    /// Size of the JSON before compression: what a reader holds.
    pub json_size: usize,
}

/// The index: every published upstream and its chunks, sorted by prefix,
/// and every published toolset, sorted by namespace and name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Always [`PUBLISHED_FORMAT`] once written.
    pub format: String,
    pub upstreams: Vec<IndexEntry>,
    /// Omitted when empty, so an index without toolsets reads (and hashes)
    /// as it did before toolsets existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolsets: Vec<ToolsetEntry>,
}

/// One toolset in the [`Index`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsetEntry {
    #[serde(flatten)]
    pub id: ToolsetName,
    /// [`toolset_identity`] of the content.
    pub hash: String,
    pub chunks: Vec<ChunkRef>,
}

/// One toolset as the gateway serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedToolset {
    /// Always [`PUBLISHED_FORMAT`].
    pub format: String,
    pub toolset: Toolset,
}

/// One upstream in the [`Index`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexEntry {
    pub prefix: String,
    /// `namespace/name` of the McpUpstream.
    pub source: String,
    /// [`Encoded::hash`].
    pub hash: String,
    /// The upstream catalog's own hash (as in `status.catalogHash`).
    pub catalog_hash: String,
    pub tool_count: usize,
    pub chunks: Vec<ChunkRef>,
    /// Keys of the credentials store this upstream's runtime references,
    /// so the publisher can drop the ones no upstream needs any more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
}

/// Where one chunk is stored and what it must hash to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRef {
    /// Storage name (the ConfigMap's name).
    pub name: String,
    pub sha256: String,
    pub size: usize,
}

/// A published upstream that cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("published upstream {prefix}: {message}")]
pub struct PublishError {
    pub prefix: String,
    pub message: String,
}

/// The content hash of a published upstream, from its parts: the catalog's
/// own (sealed) hash stands for the catalog, so a publisher can tell whether
/// a version is already published without holding the catalog in memory.
pub fn identity(source: &str, runtime: &UpstreamConfig, catalog_hash: &str) -> String {
    let mut h = Sha256::new();
    h.update(PUBLISHED_FORMAT.as_bytes());
    h.update([0]);
    h.update(source.as_bytes());
    h.update([0]);
    // Serialising plain data types into memory cannot fail.
    h.update(serde_json::to_vec(runtime).unwrap_or_default());
    h.update([0]);
    h.update(catalog_hash.as_bytes());
    hex::encode(h.finalize())
}

/// Serialises, compresses and chunks one upstream. Its catalog must be
/// sealed ([`UpstreamCatalog::seal`]), as the compiler leaves it.
pub fn encode(upstream: &PublishedUpstream, max_chunk: usize) -> Encoded {
    // Serialising plain data types into memory cannot fail.
    let json = serde_json::to_vec(upstream).unwrap_or_default();
    let hash = identity(&upstream.source, &upstream.runtime, &upstream.catalog.hash);
    compress(&json, hash, max_chunk)
}

/// Reassembles an upstream from the chunks its index entry names, in order,
/// checking every chunk's hash, the content hash and the format.
pub fn decode(entry: &IndexEntry, chunks: &[&[u8]]) -> Result<PublishedUpstream, PublishError> {
    let err = |message: String| PublishError {
        prefix: entry.prefix.clone(),
        message,
    };
    let json = reassemble(&entry.chunks, chunks).map_err(err)?;
    let upstream: PublishedUpstream =
        serde_json::from_slice(&json).map_err(|e| err(format!("JSON: {e}")))?;
    let got = identity(&upstream.source, &upstream.runtime, &upstream.catalog.hash);
    if got != entry.hash {
        return Err(err(format!(
            "content hash {got} differs from the index's {}",
            entry.hash
        )));
    }
    if upstream.format != PUBLISHED_FORMAT {
        return Err(err(format!(
            "format {:?}, this build reads {PUBLISHED_FORMAT:?}",
            upstream.format
        )));
    }
    if upstream.catalog.prefix != entry.prefix {
        return Err(err(format!(
            "holds prefix {:?}, the index says {:?}",
            upstream.catalog.prefix, entry.prefix
        )));
    }
    Ok(upstream)
}

/// The chunks `refs` name, checked against their hashes, joined and
/// decompressed (within [`MAX_DECOMPRESSED_BYTES`]).
fn reassemble(refs: &[ChunkRef], chunks: &[&[u8]]) -> Result<Vec<u8>, String> {
    if chunks.len() != refs.len() {
        return Err(format!(
            "index names {} chunks, {} given",
            refs.len(),
            chunks.len()
        ));
    }
    let mut compressed = Vec::with_capacity(refs.iter().map(|c| c.size).sum());
    for (chunk, r) in chunks.iter().zip(refs) {
        let got = hex::encode(Sha256::digest(chunk));
        if got != r.sha256 {
            return Err(format!(
                "chunk {} has sha256 {got}, the index says {} (written while being read?)",
                r.name, r.sha256
            ));
        }
        compressed.extend_from_slice(chunk);
    }
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(compressed.as_slice())
        .take(MAX_DECOMPRESSED_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| format!("gzip: {e}"))?;
    if json.len() as u64 > MAX_DECOMPRESSED_BYTES {
        return Err(format!(
            "larger than {MAX_DECOMPRESSED_BYTES} bytes uncompressed"
        ));
    }
    Ok(json)
}

/// Gzips `json` and cuts it into chunks.
fn compress(json: &[u8], hash: String, max_chunk: usize) -> Encoded {
    let mut gz = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::new(6));
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(json);
    let compressed = gz.finish().unwrap_or_default();
    let max_chunk = max_chunk.max(1);
    let chunks: Vec<Vec<u8>> = compressed.chunks(max_chunk).map(<[u8]>::to_vec).collect();
    let chunk_hashes = chunks
        .iter()
        .map(|c| hex::encode(Sha256::digest(c)))
        .collect();
    Encoded {
        hash,
        size: compressed.len(),
        json_size: json.len(),
        chunks,
        chunk_hashes,
    }
}

/// The content hash of a published toolset.
pub fn toolset_identity(toolset: &Toolset) -> String {
    let mut h = Sha256::new();
    h.update(PUBLISHED_FORMAT.as_bytes());
    h.update([0]);
    // Serialising plain data types into memory cannot fail; the form is
    // deterministic (sets are sorted, lists keep the spec's order).
    h.update(serde_json::to_vec(toolset).unwrap_or_default());
    hex::encode(h.finalize())
}

/// Serialises, compresses and chunks one toolset, as [`encode`] does an
/// upstream.
pub fn encode_toolset(toolset: &PublishedToolset, max_chunk: usize) -> Encoded {
    // Serialising plain data types into memory cannot fail.
    let json = serde_json::to_vec(toolset).unwrap_or_default();
    compress(&json, toolset_identity(&toolset.toolset), max_chunk)
}

/// A published toolset that cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("published toolset {toolset}: {message}")]
pub struct ToolsetPublishError {
    pub toolset: ToolsetName,
    pub message: String,
}

/// Reassembles a toolset from the chunks its index entry names, checking
/// every chunk's hash, the content hash, the format and that it is the
/// toolset the entry names.
pub fn decode_toolset(
    entry: &ToolsetEntry,
    chunks: &[&[u8]],
) -> Result<Toolset, ToolsetPublishError> {
    let err = |message: String| ToolsetPublishError {
        toolset: entry.id.clone(),
        message,
    };
    let json = reassemble(&entry.chunks, chunks).map_err(err)?;
    let published: PublishedToolset =
        serde_json::from_slice(&json).map_err(|e| err(format!("JSON: {e}")))?;
    if published.format != PUBLISHED_FORMAT {
        return Err(err(format!(
            "format {:?}, this build reads {PUBLISHED_FORMAT:?}",
            published.format
        )));
    }
    let got = toolset_identity(&published.toolset);
    if got != entry.hash {
        return Err(err(format!(
            "content hash {got} differs from the index's {}",
            entry.hash
        )));
    }
    if published.toolset.id != entry.id {
        return Err(err(format!(
            "holds toolset {}, the index says {}",
            published.toolset.id, entry.id
        )));
    }
    Ok(published.toolset)
}

impl Index {
    /// Parses an index; an empty text is an empty index.
    pub fn parse(text: &str) -> Result<Index, String> {
        if text.trim().is_empty() {
            return Ok(Index::default());
        }
        let index: Index = serde_json::from_str(text).map_err(|e| format!("index: {e}"))?;
        if index.format != PUBLISHED_FORMAT {
            return Err(format!(
                "index format {:?}, this build reads {PUBLISHED_FORMAT:?}",
                index.format
            ));
        }
        Ok(index)
    }

    /// Canonical text: sorted by prefix, pretty enough to `kubectl get -o yaml`.
    pub fn to_text(&self) -> String {
        let mut sorted = self.clone();
        sorted.format = PUBLISHED_FORMAT.to_string();
        sorted.upstreams.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        sorted.toolsets.sort_by(|a, b| a.id.cmp(&b.id));
        serde_json::to_string_pretty(&sorted).unwrap_or_default()
    }

    pub fn entry(&self, prefix: &str) -> Option<&IndexEntry> {
        self.upstreams.iter().find(|e| e.prefix == prefix)
    }

    /// Inserts or replaces the entry for its prefix.
    pub fn upsert(&mut self, entry: IndexEntry) {
        self.upstreams.retain(|e| e.prefix != entry.prefix);
        self.upstreams.push(entry);
        self.upstreams.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    }

    /// Removes the entry for a prefix; true if there was one.
    pub fn remove(&mut self, prefix: &str) -> bool {
        let before = self.upstreams.len();
        self.upstreams.retain(|e| e.prefix != prefix);
        before != self.upstreams.len()
    }

    /// Every chunk name the index refers to, upstreams' and toolsets'.
    pub fn chunk_names(&self) -> impl Iterator<Item = &str> {
        self.upstreams
            .iter()
            .flat_map(|e| e.chunks.iter())
            .chain(self.toolsets.iter().flat_map(|e| e.chunks.iter()))
            .map(|c| c.name.as_str())
    }

    pub fn toolset(&self, id: &ToolsetName) -> Option<&ToolsetEntry> {
        self.toolsets.iter().find(|e| e.id == *id)
    }

    /// Inserts or replaces the entry for its toolset.
    pub fn upsert_toolset(&mut self, entry: ToolsetEntry) {
        self.toolsets.retain(|e| e.id != entry.id);
        self.toolsets.push(entry);
        self.toolsets.sort_by(|a, b| a.id.cmp(&b.id));
    }

    /// sha256 over the entries' content hashes: what the gateway reports as
    /// the catalog it serves once it has loaded this index.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(PUBLISHED_FORMAT.as_bytes());
        let mut entries: Vec<&IndexEntry> = self.upstreams.iter().collect();
        entries.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        for e in entries {
            h.update(e.prefix.as_bytes());
            h.update([0]);
            h.update(e.hash.as_bytes());
            h.update([0]);
        }
        // NB: only when there are toolsets, so an index without any keeps
        // the hash it had before toolsets existed (replicas of an older
        // version report the same hash for it). `/` never occurs in a
        // prefix, so toolset keys cannot be taken for upstream entries.
        let mut toolsets: Vec<&ToolsetEntry> = self.toolsets.iter().collect();
        toolsets.sort_by(|a, b| a.id.cmp(&b.id));
        for e in toolsets {
            h.update(e.id.to_string().as_bytes());
            h.update([0]);
            h.update(e.hash.as_bytes());
            h.update([0]);
        }
        hex::encode(h.finalize())
    }
}

/// What one gateway replica serves, as it reports it back (the operator
/// counts the replicas serving each published version).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Served {
    /// [`Index::hash`] of the versions it serves.
    pub catalog_hash: String,
    /// Prefix → [`IndexEntry::hash`] of the version it serves.
    pub upstreams: std::collections::BTreeMap<String, String>,
}

/// The catalog the gateway serves from a set of decoded upstreams.
pub fn catalog_of(upstreams: &[PublishedUpstream]) -> Catalog {
    Catalog::new(upstreams.iter().map(|u| u.catalog.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PublishedUpstream {
        let spec = br#"{"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
          "paths": {"/pets": {"get": {"operationId": "listPets",
            "responses": {"200": {"description": "ok"}}}}}}"#;
        let options = crate::CompileOptions::default();
        let catalog = crate::compile_upstream(&crate::UpstreamSource {
            prefix: "pets",
            document: "t.json",
            spec,
            overlays: &[],
            options: &options,
        })
        .unwrap();
        PublishedUpstream {
            format: PUBLISHED_FORMAT.into(),
            source: "default/pets".into(),
            runtime: UpstreamConfig {
                base_url: Some("http://pets".into()),
                ..Default::default()
            },
            catalog,
        }
    }

    fn entry(u: &PublishedUpstream, e: &Encoded) -> IndexEntry {
        IndexEntry {
            prefix: u.catalog.prefix.clone(),
            source: u.source.clone(),
            hash: e.hash.clone(),
            catalog_hash: u.catalog.hash.clone(),
            tool_count: u.catalog.tools.len(),
            chunks: e
                .chunk_hashes
                .iter()
                .enumerate()
                .map(|(i, h)| ChunkRef {
                    name: format!("c{i}"),
                    sha256: h.clone(),
                    size: e.chunks[i].len(),
                })
                .collect(),
            credentials: vec![],
        }
    }

    #[test]
    fn round_trips_through_small_chunks_and_is_deterministic() {
        let u = sample();
        let e = encode(&u, 64);
        assert!(e.chunks.len() > 1);
        assert!(e.chunks.iter().all(|c| c.len() <= 64));
        assert_eq!(e, encode(&u, 64));
        let ix = entry(&u, &e);
        let parts: Vec<&[u8]> = e.chunks.iter().map(Vec::as_slice).collect();
        assert_eq!(decode(&ix, &parts).unwrap(), u);
    }

    #[test]
    fn a_chunk_from_another_version_is_refused() {
        let u = sample();
        let e = encode(&u, 64);
        let ix = entry(&u, &e);
        let mut parts: Vec<&[u8]> = e.chunks.iter().map(Vec::as_slice).collect();
        let other = b"not this".to_vec();
        parts[1] = &other;
        let err = decode(&ix, &parts).unwrap_err();
        assert!(err.message.contains("chunk c1"), "{err}");
    }

    #[test]
    fn index_text_round_trips_sorted() {
        let u = sample();
        let e = encode(&u, MAX_CHUNK_BYTES);
        let mut index = Index::default();
        let mut b = entry(&u, &e);
        b.prefix = "b".into();
        index.upsert(b);
        index.upsert(entry(&u, &e));
        let mut parsed = Index::parse(&index.to_text()).unwrap();
        assert_eq!(parsed.upstreams[0].prefix, "b");
        assert_eq!(parsed.upstreams[1].prefix, "pets");
        assert_eq!(parsed.hash(), index.hash());
        assert!(parsed.remove("b"));
        assert_ne!(parsed.hash(), index.hash());
        assert!(Index::parse("{\"format\": \"x\", \"upstreams\": []}").is_err());
    }

    fn toolset(name: &str) -> PublishedToolset {
        let mut t = Toolset::new(ToolsetName::new("team-a", name));
        t.upstreams.insert("pets".into());
        t.pinned = vec!["pets__list_pets".into()];
        PublishedToolset {
            format: PUBLISHED_FORMAT.into(),
            toolset: t,
        }
    }

    fn toolset_entry(t: &PublishedToolset, e: &Encoded) -> ToolsetEntry {
        ToolsetEntry {
            id: t.toolset.id.clone(),
            hash: e.hash.clone(),
            chunks: e
                .chunk_hashes
                .iter()
                .enumerate()
                .map(|(i, h)| ChunkRef {
                    name: format!("t{i}"),
                    sha256: h.clone(),
                    size: e.chunks[i].len(),
                })
                .collect(),
        }
    }

    #[test]
    fn toolsets_round_trip_through_chunks_and_are_checked_against_their_entry() {
        let t = toolset("readers");
        let e = encode_toolset(&t, 16);
        assert!(e.chunks.len() > 1);
        assert_eq!(e, encode_toolset(&t, 16));
        let entry = toolset_entry(&t, &e);
        let parts: Vec<&[u8]> = e.chunks.iter().map(Vec::as_slice).collect();
        assert_eq!(decode_toolset(&entry, &parts).unwrap(), t.toolset);
        // Another toolset's content under this entry's name is refused.
        let mut other = entry.clone();
        other.id = ToolsetName::new("team-a", "writers");
        let err = decode_toolset(&other, &parts).unwrap_err();
        assert!(
            err.message.contains("holds toolset team-a/readers"),
            "{err}"
        );
        let mut stale = entry.clone();
        stale.hash = "0".repeat(64);
        assert!(decode_toolset(&stale, &parts).is_err());
    }

    #[test]
    fn the_index_hash_covers_toolsets_and_is_unchanged_without_them() {
        let u = sample();
        let mut index = Index::default();
        index.upsert(entry(&u, &encode(&u, MAX_CHUNK_BYTES)));
        let without = index.hash();
        assert!(!index.to_text().contains("toolsets"));
        let t = toolset("readers");
        let te = toolset_entry(&t, &encode_toolset(&t, MAX_CHUNK_BYTES));
        index.upsert_toolset(te.clone());
        let with = index.hash();
        assert_ne!(with, without);
        let parsed = Index::parse(&index.to_text()).unwrap();
        assert_eq!(parsed.toolsets, index.toolsets);
        assert_eq!(parsed.hash(), with);
        assert!(parsed.chunk_names().any(|n| n == "t0"));
        let mut changed = t.clone();
        changed.toolset.tools.read_only = true;
        index.upsert_toolset(toolset_entry(
            &changed,
            &encode_toolset(&changed, MAX_CHUNK_BYTES),
        ));
        assert_eq!(index.toolsets.len(), 1);
        assert_ne!(index.hash(), with);
        index.toolsets.clear();
        assert_eq!(index.hash(), without);
    }
}
