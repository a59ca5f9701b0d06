//! The public spec corpus (`shared/specs`, described by its INDEX.md):
//! every operation becomes a tool or a rejection with a reason, every name
//! is valid and unique, every schema compiles, and compiling is
//! deterministic.

use std::collections::BTreeSet;

use catalog::{compile_upstream, Catalog, CompileOptions, UpstreamCatalog, UpstreamSource};
use serde_json::Value;

/// `(file, ops)` rows of INDEX.md's first table.
fn index() -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(toolgate_corpus::specs_dir().join("INDEX.md"))
        .expect("corpus INDEX.md (set TOOLGATE_SPECS to the specs folder)");
    let mut rows = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 8 {
            continue;
        }
        let file = cells[1];
        if !(file.ends_with(".json") || file.ends_with(".yaml")) {
            continue;
        }
        if let Ok(ops) = cells[6].parse::<usize>() {
            if !rows.iter().any(|(f, _): &(String, usize)| f == file) {
                rows.push((file.to_string(), ops));
            }
        }
    }
    rows
}

fn compile(file: &str, options: &CompileOptions) -> UpstreamCatalog {
    let bytes = toolgate_corpus::read(file);
    compile_upstream(&UpstreamSource {
        prefix: "corpus",
        document: file,
        spec: &bytes,
        overlays: &[],
        options,
    })
    .unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn index_lists_the_whole_corpus() {
    let rows = index();
    assert_eq!(rows.len(), 17, "INDEX.md rows: {rows:?}");
}

/// `toolgate_corpus::PREFIXES` serves the corpus as one catalog: one
/// prefix per document, each valid on a shared gateway and owned by one.
#[test]
fn every_corpus_document_has_its_own_valid_prefix() {
    let documents: BTreeSet<String> = index().into_iter().map(|(f, _)| f).collect();
    let listed: BTreeSet<String> = toolgate_corpus::PREFIXES
        .iter()
        .map(|(d, _)| d.to_string())
        .collect();
    assert_eq!(listed, documents, "PREFIXES against INDEX.md");
    assert_eq!(
        listed.len(),
        toolgate_corpus::PREFIXES.len(),
        "a document listed twice"
    );
    let mut seen = BTreeSet::new();
    for (document, prefix) in toolgate_corpus::PREFIXES {
        catalog::prefix::check_shared(prefix, "__")
            .unwrap_or_else(|e| panic!("{document}: prefix {prefix:?}: {e}"));
        assert!(seen.insert(prefix), "{document}: prefix {prefix} is taken");
    }
}

#[test]
fn every_operation_becomes_a_tool_or_a_reasoned_rejection() {
    let options = CompileOptions::default();
    for (file, ops) in index() {
        let u = compile(&file, &options);
        assert_eq!(u.source.operation_count, ops, "{file}: operations seen");
        let from_ops = u.tools.iter().filter(|t| !t.plan.raw).count();
        assert_eq!(
            from_ops + u.rejected.len(),
            ops,
            "{file}: {from_ops} tools + {} rejected != {ops} operations",
            u.rejected.len()
        );
        for r in &u.rejected {
            assert!(
                !r.message.is_empty(),
                "{file}: rejection without reason: {r:?}"
            );
        }
    }
}

#[test]
fn names_are_unique_valid_and_at_most_64_characters() {
    let options = CompileOptions::default();
    let mut all = 0;
    for (file, _) in index() {
        let u = compile(&file, &options);
        let mut seen = std::collections::HashSet::new();
        for t in &u.tools {
            assert!(
                t.name.len() <= 64,
                "{file}: {} is {} long",
                t.name,
                t.name.len()
            );
            assert!(
                t.name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)),
                "{file}: invalid name {:?}",
                t.name
            );
            assert!(t.name.starts_with("corpus__"), "{file}: {}", t.name);
            assert!(seen.insert(t.name.clone()), "{file}: duplicate {}", t.name);
        }
        all += u.tools.len();
    }
    assert!(all > 2000, "only {all} tools over the corpus");
}

fn compiles(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::draft202012::new(schema).map_err(|e| e.to_string())
}

#[test]
fn every_emitted_schema_compiles_and_accepts_its_synthetic_instances() {
    let options = CompileOptions::default();
    for (file, _) in index() {
        let u = compile(&file, &options);
        for t in &u.tools {
            let input = t.input_schema.to_value();
            assert_eq!(input["type"], "object", "{file}: {}", t.name);
            let v =
                compiles(&input).unwrap_or_else(|e| panic!("{file}: {} inputSchema: {e}", t.name));
            assert!(
                !contains_ref(&input),
                "{file}: {} inputSchema has a $ref",
                t.name
            );
            for instance in catalog::synth::instances(&input) {
                let errors: Vec<String> = v.iter_errors(&instance).map(|e| e.to_string()).collect();
                assert!(
                    errors.is_empty(),
                    "{file}: {}: synthetic instance {instance} rejected: {errors:?}",
                    t.name
                );
            }
            if let Some(out) = &t.output_schema {
                let out = out.to_value();
                assert_eq!(out["type"], "object", "{file}: {} outputSchema", t.name);
                compiles(&out).unwrap_or_else(|e| panic!("{file}: {} outputSchema: {e}", t.name));
                assert!(
                    !contains_ref(&out),
                    "{file}: {} outputSchema has a $ref",
                    t.name
                );
            }
            for r in &t.responses {
                if let Some(s) = &r.schema {
                    compiles(&s.to_value()).unwrap_or_else(|e| {
                        panic!("{file}: {} response {}: {e}", t.name, r.status)
                    });
                }
            }
        }
    }
}

fn contains_ref(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("$ref") || m.values().any(contains_ref),
        Value::Array(a) => a.iter().any(contains_ref),
        _ => false,
    }
}

#[test]
fn gitea_yields_exactly_471_tools_with_default_settings() {
    let u = compile("gitea-v1.26.3-swagger.json", &CompileOptions::default());
    assert_eq!(u.tools.len(), 471, "rejected: {:#?}", u.rejected);
    assert!(u.rejected.is_empty());
}

#[test]
fn compiling_twice_gives_identical_bytes() {
    let options = CompileOptions::default();
    for file in [
        "discord-openapi.json",
        "harbor-swagger.yaml",
        "frigate-api.yaml",
    ] {
        let a = serde_json::to_vec(&Catalog::new(vec![compile(file, &options)])).unwrap();
        let b = serde_json::to_vec(&Catalog::new(vec![compile(file, &options)])).unwrap();
        assert!(a == b, "{file}: two compiles differ");
        let c: Catalog = serde_json::from_slice(&a).unwrap();
        assert_eq!(
            serde_json::to_vec(&c).unwrap(),
            a,
            "{file}: catalog does not round-trip"
        );
    }
}
