//! Where the operator publishes the catalog and the gateway finds it: object
//! names, keys and labels in the operator's namespace. The content of these
//! objects is `catalog::publish`'s format.
//!
//! - ConfigMap [`INDEX_NAME`], key [`INDEX_KEY`]: the `catalog::publish::Index`
//!   (JSON), naming every upstream's chunks.
//! - One ConfigMap per chunk, named by [`chunk_name`] (content-addressed, so
//!   a chunk is never rewritten: a new version is new objects), the gzip
//!   bytes in `binaryData` under [`CHUNK_KEY`]. Toolsets' chunks are named
//!   by [`toolset_chunk_name`] and labelled like upstreams' chunks, without
//!   a prefix.
//! - Secret [`CREDENTIALS_SECRET`]: the credentials the published upstreams
//!   reference, under keys made by [`credentials_key`].
//!
//! The other way, each gateway replica reports what it serves in an
//! `McpGatewayReplica` named by [`gateway_replica_name`].
//!
//! Everything carries the [`PART_OF`] label and a [`COMPONENT`] label, so
//! the gateway can watch exactly these objects and nothing else.

/// The index ConfigMap.
pub const INDEX_NAME: &str = "toolgate-catalog";
/// The index's data key.
pub const INDEX_KEY: &str = "index.json";
/// The data key (in `binaryData`) of a chunk ConfigMap.
pub const CHUNK_KEY: &str = "chunk.gz";
/// The Secret holding copied credentials.
pub const CREDENTIALS_SECRET: &str = "toolgate-credentials";

/// `app.kubernetes.io/part-of=toolgate` on everything published.
pub const PART_OF: (&str, &str) = ("app.kubernetes.io/part-of", "toolgate");
/// Label saying what a published object is: [`COMPONENT_INDEX`],
/// [`COMPONENT_CHUNK`] or [`COMPONENT_CREDENTIALS`].
pub const COMPONENT: &str = "toolgate.dev/component";
pub const COMPONENT_INDEX: &str = "catalog-index";
pub const COMPONENT_CHUNK: &str = "catalog-chunk";
pub const COMPONENT_CREDENTIALS: &str = "credentials";
/// Name of a gateway replica's `McpGatewayReplica` report: its replica id
/// (the Pod name in a cluster) made a valid object name.
pub fn gateway_replica_name(replica: &str) -> String {
    let mut name = replica.to_ascii_lowercase().replace(
        |c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'),
        "-",
    );
    name.truncate(253);
    let name = name.trim_matches(['-', '.']);
    if name.is_empty() {
        "gateway".to_string()
    } else {
        name.to_string()
    }
}
/// Label on a chunk: the tool prefix it belongs to.
pub const PREFIX_LABEL: &str = "toolgate.dev/prefix";
/// Label selector matching every chunk.
pub const CHUNK_SELECTOR: &str = "toolgate.dev/component=catalog-chunk";

/// Name of the chunk ConfigMap holding bytes with this sha256 (hex) for
/// this prefix. Prefixes are `[a-z][a-z0-9_]*`; `_` is not allowed in
/// object names, `-` is not allowed in prefixes, so the mapping is 1:1.
pub fn chunk_name(prefix: &str, sha256: &str) -> String {
    let short = sha256.get(..20).unwrap_or(sha256);
    format!("toolgate-chunk-{}-{short}", prefix.replace('_', "-"))
}

/// Name of the chunk ConfigMap holding toolset bytes with this sha256
/// (hex). Toolset names are up to 253 characters, too long to fit a chunk
/// name beside their namespace, so the content alone names it; the chunk's
/// `toolgate.dev/source` annotation says whose it is.
pub fn toolset_chunk_name(sha256: &str) -> String {
    let short = sha256.get(..20).unwrap_or(sha256);
    format!("toolgate-toolset-{short}")
}

/// Key in [`CREDENTIALS_SECRET`] for one key of an upstream's Secret.
/// Namespaces and Secret names never contain `_` and Secret keys are
/// `[-._a-zA-Z0-9]+`, so the first two `__` are the separators and the
/// result is itself a valid Secret key.
pub fn credentials_key(namespace: &str, secret: &str, key: &str) -> String {
    format!("{namespace}__{secret}__{key}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_names_are_object_names() {
        assert_eq!(
            gateway_replica_name("toolgate-gateway-7d9c-x2"),
            "toolgate-gateway-7d9c-x2"
        );
        assert_eq!(gateway_replica_name("Host_Name.local."), "host-name.local");
        assert_eq!(gateway_replica_name("--"), "gateway");
    }

    #[test]
    fn chunk_names_are_object_names() {
        let n = chunk_name("git_hub", &"ab".repeat(32));
        assert_eq!(n, "toolgate-chunk-git-hub-abababababababababab");
        assert!(n.len() <= 253);
        assert_eq!(
            toolset_chunk_name(&"cd".repeat(32)),
            "toolgate-toolset-cdcdcdcdcdcdcdcdcdcd"
        );
    }
}
