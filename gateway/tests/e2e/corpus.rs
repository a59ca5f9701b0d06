use gateway::config::GatewayConfig;
use gateway::snapshot::{Overrides, RuntimeCache, Snapshot};

/// Whatever the compiler emits for the real-world corpus, the gateway can
/// serve: every input/output/response schema compiles as a validator and
/// every transform compiles, in one snapshot of all documents together.
#[test]
fn every_compiled_corpus_catalog_builds_one_snapshot() {
    gateway::upstream::install_crypto_provider();
    let entries = toolgate_corpus::documents();
    let options = catalog::CompileOptions::default();
    let mut upstreams = Vec::new();
    let mut overrides = Overrides::default();
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
            Ok(u) => {
                overrides
                    .base_urls
                    .insert(prefix, "http://127.0.0.1:9/api".into());
                upstreams.push(u);
            }
            Err(e) => not_compiled.push(format!("{}: {e}", path.display())),
        }
    }
    assert!(
        upstreams.len() >= 10,
        "only {} documents compiled: {not_compiled:#?}",
        upstreams.len()
    );
    let catalog = catalog::Catalog::new(upstreams);
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
