use gateway::config::GatewayConfig;
use gateway::serving::snapshot::{Overrides, RuntimeCache, Snapshot};

/// Every corpus document that compiles, as upstream `c{i}` (`i`: its
/// place in the sorted corpus), all in one catalog; and the documents
/// that did not compile, with why.
pub fn corpus_catalog() -> (catalog::Catalog, Vec<String>) {
    let entries = toolgate_corpus::documents();
    let options = catalog::CompileOptions::default();
    let mut upstreams = Vec::new();
    let mut not_compiled = Vec::new();
    for (i, path) in entries.iter().enumerate() {
        let prefix = format!("c{i}");
        let spec = std::fs::read(path).unwrap();
        let document = path.display().to_string();
        match catalog::compile_upstream(&catalog::UpstreamSource {
            prefix: &prefix,
            document: &document,
            spec: &spec,
            overlays: &[],
            options: &options,
        }) {
            Ok(u) => upstreams.push(u),
            Err(e) => not_compiled.push(format!("{}: {e}", path.display())),
        }
    }
    (catalog::Catalog::new(upstreams), not_compiled)
}

/// Whatever the compiler emits for the real-world corpus, the gateway can
/// serve: every input/output/response schema compiles as a validator and
/// every transform compiles, in one snapshot of all documents together.
#[test]
fn every_compiled_corpus_catalog_builds_one_snapshot() {
    gateway::net::install_crypto_provider();
    let (catalog, not_compiled) = corpus_catalog();
    let mut overrides = Overrides::default();
    for u in &catalog.upstreams {
        overrides
            .base_urls
            .insert(u.prefix.clone(), "http://127.0.0.1:9/api".into());
    }
    assert!(
        catalog.upstreams.len() >= 10,
        "only {} documents compiled: {not_compiled:#?}",
        catalog.upstreams.len()
    );
    let snapshot = Snapshot::build(
        &catalog,
        &GatewayConfig::default(),
        &overrides,
        &mut RuntimeCache::default(),
    )
    .unwrap_or_else(|e| panic!("snapshot: {e}"));
    assert_eq!(snapshot.tool_count(), catalog.tool_count());
    assert!(
        snapshot.tool_count() > 1000,
        "{} tools",
        snapshot.tool_count()
    );
    eprintln!(
        "{} tools served; not compiled: {not_compiled:#?}",
        snapshot.tool_count()
    );
}
