//! Smaller listed schemas, no constraint lost (`schema.descriptionBudget`,
//! `nestedExamples`, `titleCopies`, `refs`): small documents for each
//! rule, and the corpus for "every validation keyword stays" and "`defs`,
//! expanded again, is the inline schema".

use catalog::size::SchemaBytes;
use catalog::slim::{slim, Listed};
use catalog::{compile_upstream, CompileOptions, SchemaOptions, SchemaRefs, UpstreamSource};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn compile_with(spec: &Value, schema: SchemaOptions) -> catalog::UpstreamCatalog {
    let options = CompileOptions {
        schema,
        ..Default::default()
    };
    compile_upstream(&UpstreamSource {
        prefix: "t",
        document: "t.json",
        spec: spec.to_string().as_bytes(),
        overlays: &[],
        options: &options,
    })
    .unwrap()
}

/// Settings that keep every schema as the converter made it.
fn keep_all() -> SchemaOptions {
    SchemaOptions {
        description_budget: 0,
        nested_examples: true,
        title_copies: true,
        refs: SchemaRefs::Inline,
        ..Default::default()
    }
}

/// One POST whose body has a top-level `address` argument with nested
/// fields, each with a 100-byte description, and a response of the same.
fn document() -> Value {
    let text = |c: char| c.to_string().repeat(100);
    let leaf = |c: char| {
        json!({"type": "string", "maxLength": 9, "description": text(c), "examples": ["x"],
               "title": "Street Name"})
    };
    let address = json!({
        "type": "object", "required": ["street_name"],
        "description": "Where to ship.", "examples": [{"street_name": "Main"}],
        "properties": {
            "street_name": leaf('a'),
            "city": leaf('b'),
            // A boolean schema before the descriptions: a position too.
            "geo": {"additionalProperties": false, "type": "object", "description": text('c'),
                    "properties": {"lat": {"type": "number", "minimum": -90,
                                           "description": text('d')}}},
        }
    });
    json!({
        "openapi": "3.1.0", "info": {"title": "t", "version": "1"},
        "paths": {"/orders": {"post": {
            "operationId": "createOrder",
            "requestBody": {"required": true, "content": {"application/json": {"schema": {
                "type": "object", "required": ["address"],
                "properties": {
                    "address": address,
                    "note": {"type": "string", "description": text('n'), "title": "Note"},
                    "billing": address,
                }
            }}}},
            "responses": {"200": {"description": "ok", "content": {"application/json": {
                "schema": {"type": "object", "properties": {"address": address}}}}}}
        }}}
    })
}

fn descriptions(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("description", Value::String(s)) => out.push(s.clone()),
                    _ => descriptions(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| descriptions(x, out)),
        _ => {}
    }
}

#[test]
fn the_nested_description_budget_cuts_the_deepest_first_and_keeps_top_level_ones() {
    let doc = document();
    let each = r#""description":""#.len() + 100 + 2; // with its comma
    let u = compile_with(
        &doc,
        SchemaOptions {
            // Three nested descriptions fit (of five per address).
            description_budget: 3 * each,
            ..keep_all()
        },
    );
    let input = u.tools[0].input_schema.to_value();
    let address = &input["properties"]["address"];
    // Top-level arguments keep theirs whole, over the budget or not.
    assert_eq!(address["description"], "Where to ship.");
    assert_eq!(input["properties"]["note"]["description"], "n".repeat(100));
    // `lat` (depth 4) goes first, then the longest at depth 3... all are
    // 100 bytes at depth 2 and 3: `geo.lat` and then the last in document
    // order at depth 2.
    let geo = &address["properties"]["geo"];
    assert!(
        geo["properties"]["lat"].get("description").is_none(),
        "{geo}"
    );
    let mut nested = Vec::new();
    descriptions(&address["properties"], &mut nested);
    descriptions(&input["properties"]["billing"]["properties"], &mut nested);
    let bytes: usize = nested.iter().map(|d| d.len() + each - 100).sum();
    assert!(bytes <= 3 * each, "{bytes} bytes kept: {nested:?}");
    assert_eq!(nested.len(), 3, "{nested:?}");
    // Validation keywords all stay.
    assert_eq!(geo["properties"]["lat"]["minimum"], -90);
    assert_eq!(address["properties"]["city"]["maxLength"], 9);
    // Output schemas have no arguments: every description below the root
    // is within the budget.
    let output = u.tools[0].output_schema.as_ref().unwrap().to_value();
    let mut out = Vec::new();
    descriptions(&output["properties"], &mut out);
    let bytes: usize = out.iter().map(|d| d.len() + each - 100).sum();
    assert!(bytes <= 3 * each, "{output}");
    assert_eq!(
        output["properties"]["address"]["properties"]["city"]["maxLength"],
        9
    );

    // 0 keeps every description.
    let all = compile_with(&doc, keep_all());
    let mut every = Vec::new();
    descriptions(&all.tools[0].input_schema.to_value(), &mut every);
    // Two addresses of five and the note.
    assert_eq!(every.len(), 11, "{every:?}");
}

#[test]
fn nested_examples_and_titles_that_repeat_the_name_go_unless_kept() {
    let doc = document();
    let u = compile_with(&doc, SchemaOptions::default());
    let input = u.tools[0].input_schema.to_value();
    let address = &input["properties"]["address"];
    // A top-level argument keeps its examples; nested ones go.
    assert_eq!(address["examples"], json!([{"street_name": "Main"}]));
    let street = &address["properties"]["street_name"];
    assert!(street.get("examples").is_none(), "{street}");
    // `Street Name` repeats `street_name`; on `city` it says something.
    assert!(street.get("title").is_none(), "{street}");
    assert_eq!(address["properties"]["city"]["title"], "Street Name");
    // Top-level too: `Note` says no more than `note`.
    assert!(
        input["properties"]["note"].get("title").is_none(),
        "{input}"
    );
    let output = u.tools[0].output_schema.as_ref().unwrap().to_value();
    assert!(output["properties"]["address"].get("examples").is_none());

    let kept = compile_with(
        &doc,
        SchemaOptions {
            nested_examples: true,
            title_copies: true,
            ..Default::default()
        },
    );
    let input = kept.tools[0].input_schema.to_value();
    let street = &input["properties"]["address"]["properties"]["street_name"];
    assert_eq!(street["examples"], json!(["x"]));
    assert_eq!(street["title"], "Street Name");
}

#[test]
fn defs_writes_a_repeated_sub_schema_once_and_arguments_stay_in_place() {
    let doc = document();
    let options = SchemaOptions {
        refs: SchemaRefs::Defs,
        ..keep_all()
    };
    let u = compile_with(&doc, options.clone());
    let input = u.tools[0].input_schema.to_value();
    // `address` and `billing` are one schema, but arguments stay inline;
    // what repeats inside them is written once.
    let address = &input["properties"]["address"];
    assert_eq!(address["description"], "Where to ship.");
    let defs = input["$defs"].as_object().expect("$defs");
    assert!(!defs.is_empty(), "{input}");
    let street = &address["properties"]["street_name"];
    assert!(
        street["$ref"]
            .as_str()
            .is_some_and(|r| r.starts_with("#/$defs/")),
        "{input}"
    );
    assert_eq!(
        input["properties"]["billing"]["properties"]["street_name"],
        *street
    );
    assert_eq!(
        expand(&input),
        compile_with(&doc, keep_all()).tools[0]
            .input_schema
            .to_value()
    );
    assert!(
        input.to_string().len()
            < compile_with(&doc, keep_all()).tools[0]
                .input_schema
                .as_str()
                .len()
    );
}

/// `schema` with every `#/$defs/...` reference replaced by its definition,
/// and no `$defs`.
fn expand(schema: &Value) -> Value {
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    fn go(v: &Value, defs: &Value, depth: usize) -> Value {
        assert!(depth < 64, "reference cycle");
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    if let Some(name) = r.strip_prefix("#/$defs/") {
                        assert_eq!(m.len(), 1, "a $ref with siblings: {v}");
                        return go(&defs[name], defs, depth + 1);
                    }
                }
                Value::Object(
                    m.iter()
                        .filter(|(k, _)| depth > 0 || k.as_str() != "$defs")
                        .map(|(k, x)| (k.clone(), go(x, defs, depth + 1)))
                        .collect::<Map<_, _>>(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| go(x, defs, depth + 1)).collect()),
            v => v.clone(),
        }
    }
    go(schema, &defs, 0)
}

/// `schema` without annotations (`description`, `examples`, `title`):
/// what is left is what validates.
fn validation_only(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "description" | "examples" | "title"))
                .map(|(k, x)| {
                    // Data keywords are left alone: a `const` object may
                    // hold a key named `description`.
                    let x = match k.as_str() {
                        "const" | "enum" | "default" => x.clone(),
                        "properties" | "patternProperties" | "$defs" | "dependentSchemas" => {
                            Value::Object(
                                x.as_object()
                                    .into_iter()
                                    .flatten()
                                    .map(|(n, s)| (n.clone(), validation_only(s)))
                                    .collect(),
                            )
                        }
                        _ => validation_only(x),
                    };
                    (k.clone(), x)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(validation_only).collect()),
        v => v.clone(),
    }
}

/// Over the whole corpus: the default cuts keep every validation keyword
/// (the schemas without annotations are equal), and `defs`, expanded, is
/// the inline schema and validates the same synthetic instances.
#[test]
fn corpus_cuts_lose_no_validation_keyword_and_defs_expands_to_inline() {
    let full_options = CompileOptions {
        schema: keep_all(),
        ..Default::default()
    };
    let defs_options = CompileOptions {
        schema: SchemaOptions {
            refs: SchemaRefs::Defs,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut factored = 0;
    for path in toolgate_corpus::documents() {
        let spec = std::fs::read(&path).unwrap();
        let document = path.display().to_string();
        let compile = |options: &CompileOptions| {
            compile_upstream(&UpstreamSource {
                prefix: "c",
                document: &document,
                spec: &spec,
                overlays: &[],
                options,
            })
            .unwrap()
        };
        let full = compile(&full_options);
        let slimmed = compile(&CompileOptions::default());
        let defs = compile(&defs_options);
        assert_eq!(full.tools.len(), slimmed.tools.len(), "{document}");
        assert_eq!(full.tools.len(), defs.tools.len(), "{document}");
        for ((f, s), d) in full.tools.iter().zip(&slimmed.tools).zip(&defs.tools) {
            let t = f;
            let pairs = [
                (
                    Some(&f.input_schema),
                    Some(&s.input_schema),
                    Some(&d.input_schema),
                ),
                (
                    f.output_schema.as_ref(),
                    s.output_schema.as_ref(),
                    d.output_schema.as_ref(),
                ),
            ];
            for ((f, s, d), listed) in pairs.into_iter().zip([Listed::Input, Listed::Output]) {
                let (Some(f), Some(s), Some(d)) = (f, s, d) else {
                    assert!(f.is_none() && s.is_none() && d.is_none(), "{document}");
                    continue;
                };
                // The compiler cuts its own tree in place; the result is
                // what `slim` makes of the full schema, key order included.
                let by_value = slim(f.to_value(), listed, &SchemaOptions::default());
                assert_eq!(by_value.to_string(), s.as_str(), "{document}: {}", t.name);
                let (f, s, d) = (f.to_value(), s.to_value(), d.to_value());
                assert_eq!(
                    validation_only(&f),
                    validation_only(&s),
                    "{document}: a cut lost a keyword"
                );
                assert_eq!(
                    expand(&d),
                    s,
                    "{document}: $defs do not expand to the inline schema"
                );
                if d.get("$defs").is_some() {
                    factored += 1;
                    let by_defs = jsonschema::draft202012::new(&d).unwrap();
                    let by_inline = jsonschema::draft202012::new(&s).unwrap();
                    for instance in catalog::synth::instances(&s) {
                        assert_eq!(
                            by_defs.is_valid(&instance),
                            by_inline.is_valid(&instance),
                            "{document}: {instance}"
                        );
                    }
                }
                assert!(d.to_string().len() <= s.to_string().len());
            }
        }
    }
    assert!(factored > 100, "only {factored} schemas use $defs");
}

/// A schema built from a few shared parts, so that sub-schemas repeat.
fn schema_with_repeats() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        (0u64..5).prop_map(|n| json!({"type": "string", "maxLength": n, "description": "a long enough description"})),
        (0i64..5).prop_map(|n| json!({"type": "integer", "minimum": n, "examples": [n]})),
        Just(json!({"enum": ["a", "b"], "title": "Choice of two letters", "default": "a"})),
        Just(json!(false)),
    ];
    let tree = leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(|ps| {
                let props: Map<String, Value> = ps
                    .into_iter()
                    .enumerate()
                    .map(|(i, p)| (format!("p{i}"), p))
                    .collect();
                json!({"type": "object", "properties": props, "required": ["p0"]})
            }),
            inner
                .clone()
                .prop_map(|i| json!({"type": "array", "items": i, "minItems": 1})),
            prop::collection::vec(inner, 2..3).prop_map(|v| json!({"anyOf": v})),
        ]
    });
    prop::collection::vec(tree, 1..4).prop_map(|args| {
        let props: Map<String, Value> = args
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                (
                    format!("arg{i}"),
                    json!({"type": "object", "description": format!("argument {i}"),
                           "additionalProperties": true, "properties": {"x": a.clone(), "y": a}}),
                )
            })
            .collect();
        json!({"type": "object", "properties": props})
    })
}

proptest! {
    /// `defs`, expanded, is exactly what `inline` lists, for input and
    /// output schemas alike, and is never larger.
    #[test]
    fn slimming_keeps_every_constraint_and_defs_expand_to_inline(schema in schema_with_repeats(), budget in 0usize..400) {
        for listed in [Listed::Input, Listed::Output] {
            let inline = slim(schema.clone(), listed, &SchemaOptions { description_budget: budget, ..Default::default() });
            let defs = slim(schema.clone(), listed, &SchemaOptions {
                description_budget: budget,
                refs: SchemaRefs::Defs,
                ..Default::default()
            });
            prop_assert_eq!(expand(&defs), inline.clone());
            prop_assert!(defs.to_string().len() <= inline.to_string().len());
            prop_assert!(jsonschema::draft202012::meta::is_valid(&defs));
            prop_assert_eq!(validation_only(&inline), validation_only(&schema));
        }
        // Top-level argument descriptions stay whole; the nested ones
        // left fit the budget.
        let before = SchemaBytes::of(&schema);
        let after = SchemaBytes::of(&slim(schema.clone(), Listed::Input, &SchemaOptions {
            description_budget: budget,
            ..Default::default()
        }));
        prop_assert_eq!(after.top_descriptions, before.top_descriptions);
        if budget > 0 {
            prop_assert!(after.nested_descriptions <= budget as u64);
        }
    }
}

/// Issue 13's goal, where it is reachable: Box's `tools/list` with output
/// schemas at most half of FastMCP 4.2.3's (5.73 MB), under the defaults.
#[test]
fn box_lists_at_most_half_of_fastmcps_bytes_with_output_schemas() {
    let spec = toolgate_corpus::read("box-openapi.json");
    let u = compile_upstream(&UpstreamSource {
        prefix: "box",
        document: "box-openapi.json",
        spec: &spec,
        overlays: &[],
        options: &CompileOptions::default(),
    })
    .unwrap();
    let with_output = catalog::listing::size_of(&u.tools, true).bytes;
    assert!(with_output <= 5_730_000 / 2, "{with_output}");
}
