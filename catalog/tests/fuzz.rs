//! Property test: mutated real documents and random overlays never make the
//! compiler panic or hang; they compile or fail with an error.

use catalog::{compile_upstream, CompileOptions, Overlay, UpstreamSource};
use proptest::prelude::*;
use serde_json::{json, Value};

fn base_docs() -> Vec<Value> {
    [
        "swagger-petstore-v3.yaml",
        "oai-petstore-expanded-v2.json",
        "redocly-museum.yaml",
    ]
    .iter()
    .map(|f| {
        let bytes = toolgate_corpus::read(f);
        catalog::spec::parse_value(f, &bytes).expect("parse")
    })
    .collect()
}

fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                pointers(c, format!("{at}/{}", catalog::spec::escape_pointer(k)), out)
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                pointers(c, format!("{at}/{i}"), out)
            }
        }
        _ => {}
    }
}

/// Values that stress the compiler where a schema, parameter or operation
/// is expected.
fn nasty() -> Vec<Value> {
    vec![
        Value::Null,
        json!(-1),
        json!(""),
        json!("{x}/../%2e"),
        json!([]),
        json!({}),
        json!(true),
        json!({"$ref": "#/components/schemas/Pet"}),
        json!({"$ref": "#"}),
        json!({"$ref": "#/paths"}),
        json!({"$ref": "#/nope"}),
        json!({"type": "file"}),
        json!({"type": ["string", "bogus"], "nullable": true}),
        json!({"required": true, "pattern": "([", "minLength": -3}),
        json!({"name": "p", "in": "path"}),
        json!({"allOf": [{"$ref": "#/components/schemas/Pet"}, {"type": "array"}]}),
        json!({"x-mcp-tool-name": "bad name!", "x-mcp-response-format": "weird"}),
        json!({"x-mcp-request-transform": "def f: f; f"}),
    ]
}

fn compile(doc: &Value, overlays: &[Overlay]) {
    let bytes = serde_json::to_vec(doc).unwrap();
    let _ = compile_upstream(&UpstreamSource {
        prefix: "fz",
        document: "fuzz.json",
        spec: &bytes,
        overlays,
        options: &CompileOptions::default(),
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn mutated_documents_never_panic(doc_i in 0usize..3, edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..18, any::<bool>()), 1..6)) {
        let mut doc = base_docs().swap_remove(doc_i);
        for (at, with, delete) in edits {
            let mut ptrs = Vec::new();
            pointers(&doc, String::new(), &mut ptrs);
            let ptr = at.get(&ptrs).clone();
            if ptr.is_empty() { continue; }
            let (parent, key) = ptr.rsplit_once('/').unwrap();
            let key = key.replace("~1", "/").replace("~0", "~");
            match doc.pointer_mut(parent) {
                Some(Value::Object(m)) if delete => { m.shift_remove(&key); }
                Some(Value::Object(m)) => { m.insert(key, nasty()[with].clone()); }
                Some(Value::Array(a)) => {
                    if let Ok(i) = key.parse::<usize>() {
                        if i < a.len() { a[i] = nasty()[with].clone(); }
                    }
                }
                _ => {}
            }
        }
        compile(&doc, &[]);
    }

    #[test]
    fn random_overlays_never_panic(
        targets in prop::collection::vec(prop::sample::select(vec![
            "$", "$.paths", "$.paths.*", "$.paths.*.*", "$..schema", "$..properties", "$.components.schemas.*",
            "$..[?(@.type == 'string')]", "$.info", "$.paths['/pet'].put", "$..parameters[0]", "$..*",
        ]), 1..4),
        kinds in prop::collection::vec(0usize..3, 4),
        values in prop::collection::vec(0usize..18, 4),
    ) {
        let actions: Vec<Value> = targets.iter().enumerate().map(|(i, t)| match kinds[i] {
            0 => json!({"target": t, "remove": true}),
            1 => json!({"target": t, "update": nasty()[values[i]].clone()}),
            _ => json!({"target": t, "update": {"x-mcp-enabled": false, "description": "x"}}),
        }).collect();
        let doc = json!({"overlay": "1.0.0", "info": {"title": "f", "version": "1"}, "actions": actions});
        if let Ok(ov) = Overlay::parse("fuzz-overlay", doc.to_string().as_bytes(), false) {
            for base in base_docs() {
                compile(&base, std::slice::from_ref(&ov));
            }
        }
    }
}
