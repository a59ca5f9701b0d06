//! Hostile documents and overlays fail fast with an error naming the input,
//! on a stack as small as a tokio worker's, instead of overflowing the
//! stack, running for minutes or allocating gigabytes.

use std::time::{Duration, Instant};

use catalog::error::{OverlayErrorKind, SpecErrorKind};
use catalog::{compile_upstream, CompileError, CompileOptions, Overlay, UpstreamSource};

/// Runs `f` on a thread with a tokio worker's default stack (2 MiB); a
/// stack overflow aborts the whole test binary.
fn on_a_2_mib_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn compile(spec: &[u8], overlays: &[Overlay]) -> Result<catalog::UpstreamCatalog, CompileError> {
    compile_upstream(&UpstreamSource {
        prefix: "t",
        document: "hostile.yaml",
        spec,
        overlays,
        options: &CompileOptions::default(),
    })
}

#[test]
fn a_yaml_document_nested_a_million_flow_levels_is_refused_at_once() {
    // Without the pre-scan libyaml reads every level before yaml_serde's
    // depth limit applies: minutes in a debug build.
    let spec = format!(
        "openapi: 3.1.0\ninfo: {{title: t, version: '1'}}\npaths: {}{}\n",
        "[".repeat(1_000_000),
        "]".repeat(1_000_000)
    );
    let started = Instant::now();
    let err = on_a_2_mib_stack(move || compile(spec.as_bytes(), &[]).unwrap_err());
    let CompileError::Spec(e) = &err else {
        panic!("expected a spec error, got {err}");
    };
    assert_eq!(e.document, "hostile.yaml");
    assert!(
        matches!(&e.kind, SpecErrorKind::Parse(m)
            if m.contains("nested deeper than 128 levels at line 3 column 136")),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn an_overlay_nested_a_million_flow_levels_is_a_parse_error() {
    let text = format!(
        "overlay: 1.1.0\ninfo: {{title: t, version: '1'}}\nactions:\n  - target: $.info\n    update: {}{}\n",
        "{a: ".repeat(1_000_000),
        "}".repeat(1_000_000)
    );
    let err = on_a_2_mib_stack(move || {
        Overlay::parse("McpOverlay ns/deep", text.as_bytes(), false).unwrap_err()
    });
    assert_eq!(err.overlay, "McpOverlay ns/deep");
    assert!(
        matches!(&err.kind, OverlayErrorKind::Parse(m) if m.contains("nested deeper than 128")),
        "{err}"
    );
}

const SPEC: &str = "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths: {}\n";

fn overlay(name: &str, actions: &str) -> Overlay {
    let text = format!("overlay: 1.1.0\ninfo: {{title: t, version: '1'}}\nactions:\n{actions}");
    Overlay::parse(name, text.as_bytes(), false).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn forty_copies_of_a_node_into_itself_stop_at_the_size_limit() {
    // Each copy concatenates the array with itself: 2^40 elements without
    // a bound (the issue's 2.8 KB overlay took 3.5 GB and aborted).
    let mut actions = format!(
        "  - target: $.info\n    update: {{x-a: [{}]}}\n",
        vec!["\"0123456789abcdef\""; 64].join(", ")
    );
    for _ in 0..40 {
        actions.push_str("  - target: $.info['x-a']\n    copy: $.info['x-a']\n");
    }
    let o = overlay("McpOverlay ns/doubling", &actions);
    let err = compile(SPEC.as_bytes(), &[o]).unwrap_err();
    assert_eq!(err.reason(), catalog::Reason::OverlayInvalid);
    let CompileError::Overlay(e) = &err else {
        panic!("expected an overlay error, got {err}");
    };
    assert_eq!(e.overlay, "McpOverlay ns/doubling");
    // 64 × ~100 bytes doubles past 16 MiB at about the 12th copy.
    assert!(
        matches!(e.action, Some(i) if (8..=16).contains(&i)),
        "{err}"
    );
    assert_eq!(e.target.as_deref(), Some("$.info['x-a']"));
    assert!(
        matches!(&e.kind, OverlayErrorKind::TooLarge(m)
            if m.contains("the copy of") && m.contains("over the limit of")),
        "{err}"
    );
    assert!(err.to_string().contains("/actions/"), "{err}");
}

#[test]
fn the_size_limit_is_shared_by_all_overlays_of_a_compile() {
    // Each overlay alone stays under the limit; together they do not.
    let big = "x".repeat(1 << 20);
    let one = |i: usize| {
        overlay(
            &format!("o{i}"),
            &format!("  - target: $.info\n    update: {{x-{i}: {big}}}\n"),
        )
    };
    let overlays: Vec<Overlay> = (0..20).map(one).collect();
    let err = compile(SPEC.as_bytes(), &overlays).unwrap_err();
    let CompileError::Overlay(e) = &err else {
        panic!("expected an overlay error, got {err}");
    };
    assert!(matches!(e.kind, OverlayErrorKind::TooLarge(_)), "{err}");
    assert!(e.overlay == "o15" || e.overlay == "o16", "{err}");
    // A few together apply.
    compile(SPEC.as_bytes(), &overlays[..3]).unwrap();
}

#[test]
fn copying_a_node_into_its_own_child_stops_at_the_depth_limit() {
    // Each copy nests the document one level deeper.
    let mut actions = String::from("  - target: $.info\n    update: {x-a: {}}\n");
    for _ in 0..300 {
        actions.push_str("  - target: $.info['x-a']\n    copy: $.info\n");
    }
    let o = overlay("deepening", &actions);
    let err = on_a_2_mib_stack(move || compile(SPEC.as_bytes(), &[o]).unwrap_err());
    let CompileError::Overlay(e) = &err else {
        panic!("expected an overlay error, got {err}");
    };
    assert!(
        matches!(&e.kind, OverlayErrorKind::TooLarge(m)
            if m.contains("at /info/x-a") && m.contains("129 levels deep, over the limit of 128")),
        "{err}"
    );
    assert!(matches!(e.action, Some(100..=130)), "{err}");
}

/// One 5,000-property schema referenced by the request body and the
/// response of `ops` operations (the issue's document: 800 operations).
fn one_big_schema_in_every_operation(ops: usize) -> String {
    let props: Vec<String> = (0..5000)
        .map(|i| format!(r#""p{i:04}":{{"type":"string","maxLength":64}}"#))
        .collect();
    let r = r##"{"$ref":"#/components/schemas/Big"}"##;
    let paths: Vec<String> = (0..ops)
        .map(|i| {
            format!(
                r#""/r{i}":{{"post":{{"operationId":"op{i}","requestBody":{{"content":{{"application/json":{{"schema":{r}}}}}}},"responses":{{"200":{{"description":"ok","content":{{"application/json":{{"schema":{r}}}}}}}}}}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"openapi":"3.1.0","info":{{"title":"t","version":"1"}},"paths":{{{}}},"components":{{"schemas":{{"Big":{{"type":"object","properties":{{{}}}}}}}}}}}"#,
        paths.join(","),
        props.join(",")
    )
}

#[test]
fn one_big_schema_referenced_by_800_operations_fails_fast_with_catalog_too_large() {
    // Unbounded, this 400 KB document compiled to a 450 MB catalog (1.3 GB
    // RSS, 110 s in a debug build).
    let spec = one_big_schema_in_every_operation(800);
    assert!(spec.len() < 420_000, "{}", spec.len());
    let started = Instant::now();
    let err = compile(spec.as_bytes(), &[]).unwrap_err();
    assert_eq!(err.reason(), catalog::Reason::CatalogTooLarge);
    let CompileError::CatalogTooLarge {
        document,
        limit,
        tools,
        method,
        path,
    } = &err
    else {
        panic!("expected CatalogTooLarge, got {err}");
    };
    assert_eq!(document, "hostile.yaml");
    assert_eq!(
        *limit,
        catalog::CompileLimits::default().max_catalog_schema_bytes
    );
    assert_eq!(*limit, 64 << 20);
    // Each tool emits the schema twice (arguments and result): ~400 KB.
    assert!((100..300).contains(tools), "{err}");
    assert_eq!(method, "POST");
    assert_eq!(path, &format!("/r{tools}"));
    let shown = err.to_string();
    assert!(
        shown.starts_with(
            "hostile.yaml: the catalog's schemas would pass the limit of 67108864 bytes"
        ),
        "{shown}"
    );
    eprintln!("CatalogTooLarge after {:?}", started.elapsed());
}

#[test]
fn the_catalog_limit_counts_every_tools_schemas_and_is_configurable() {
    let spec = one_big_schema_in_every_operation(20);
    let with = |max_catalog_schema_bytes| {
        catalog::compile_upstream_with_limits(
            &UpstreamSource {
                prefix: "t",
                document: "big.json",
                spec: spec.as_bytes(),
                overlays: &[],
                options: &CompileOptions::default(),
            },
            &catalog::CompileLimits {
                max_catalog_schema_bytes,
                ..Default::default()
            },
        )
    };
    let u = with(64 << 20).unwrap();
    assert_eq!(u.tools.len(), 20);
    let emitted: usize = u
        .tools
        .iter()
        .map(|t| {
            t.input_schema.as_str().len() + t.output_schema.as_ref().map_or(0, |s| s.as_str().len())
        })
        .sum();
    // What is charged is the emitted text plus the shared expansion's
    // text, kept once: the emitted total alone does not fit.
    let per_tool = emitted / 20;
    let err = with(emitted).unwrap_err();
    assert!(
        matches!(err, CompileError::CatalogTooLarge { tools, .. } if tools >= 18),
        "{err}"
    );
    let err = with(3 * per_tool).unwrap_err();
    assert!(
        matches!(&err, CompileError::CatalogTooLarge { tools: 2, path, .. } if path == "/r2"),
        "{err}"
    );
}

#[test]
fn a_tool_whose_schemas_pass_the_per_tool_limit_is_rejected_and_the_rest_compile() {
    // 100 properties that each reference a 1 MB enum: 200 nodes, well
    // inside the node budget of ADR 0002, but 100 MB of schema text.
    let values: Vec<String> = (0..20_000).map(|i| format!("\"{i:045}\"")).collect();
    let props: Vec<String> = (0..100)
        .map(|i| format!(r##""p{i}":{{"$ref":"#/components/schemas/E"}}"##))
        .collect();
    let spec = format!(
        r##"{{"openapi":"3.1.0","info":{{"title":"t","version":"1"}},
        "paths":{{
          "/big":{{"post":{{"operationId":"big","requestBody":{{"content":{{"application/json":{{"schema":{{"$ref":"#/components/schemas/X"}}}}}}}},"responses":{{"200":{{"description":"ok"}}}}}}}},
          "/small":{{"get":{{"operationId":"small","responses":{{"200":{{"description":"ok"}}}}}}}}}},
        "components":{{"schemas":{{
          "E":{{"type":"string","enum":[{}]}},
          "X":{{"type":"object","properties":{{{}}}}}}}}}}}"##,
        values.join(","),
        props.join(",")
    );
    let u = compile(spec.as_bytes(), &[]).unwrap();
    assert_eq!(u.tools.len(), 1);
    assert_eq!(u.tools[0].name, "t__small");
    let r = &u.rejected[0];
    assert_eq!(r.path, "/big");
    assert_eq!(r.reason, catalog::RejectReason::SchemaTooLarge);
    assert!(
        r.message.contains("over the limit of 4194304 per tool"),
        "{}",
        r.message
    );
}

#[test]
fn an_operation_with_50000_parameters_compiles() {
    // The operation's parameters repeat the path item's: each replaces
    // the one of the same name and location (a linear scan per parameter
    // made this quadratic: minutes at 50,000).
    let n = 50_000;
    let params: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"name":"p{i}","in":"query","required":true,"schema":{{"type":"string"}}}}"#
            )
        })
        .collect();
    let path_params: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"name":"p{i}","in":"query","schema":{{"type":"integer"}}}}"#))
        .collect();
    let spec = format!(
        r#"{{"openapi":"3.0.3","info":{{"title":"t","version":"1"}},"paths":{{"/x/{{id}}":{{"parameters":[{},{{"name":"id","in":"path","required":true}}],"get":{{"operationId":"x","parameters":[{}],"responses":{{"200":{{"description":"ok"}}}}}}}}}}}}"#,
        path_params.join(","),
        params.join(",")
    );
    let started = Instant::now();
    let u = compile(spec.as_bytes(), &[]).unwrap();
    let tool = &u.tools[0];
    assert_eq!(tool.plan.params.len(), n + 1);
    let input = tool.input_schema.to_value();
    assert_eq!(input["properties"]["p49999"]["type"], "string");
    assert_eq!(input["required"].as_array().map(Vec::len), Some(n + 1));
    eprintln!("{n} parameters compiled in {:?}", started.elapsed());
}

#[test]
fn a_form_body_of_50000_required_fields_compiles() {
    // Swagger 2.0 formData fields become one merged body: the required
    // list was deduplicated and matched pairwise.
    let n = 50_000;
    let fields: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"name":"f{i}","in":"formData","required":true,"type":"string"}}"#))
        .collect();
    let spec = format!(
        r#"{{"swagger":"2.0","info":{{"title":"t","version":"1"}},"paths":{{"/x":{{"parameters":[{{"name":"f0","in":"formData","type":"integer"}}],"post":{{"operationId":"x","consumes":["application/x-www-form-urlencoded"],"parameters":[{}],"responses":{{"200":{{"description":"ok"}}}}}}}}}}}}"#,
        fields.join(",")
    );
    let started = Instant::now();
    let u = compile(spec.as_bytes(), &[]).unwrap();
    let input = u.tools[0].input_schema.to_value();
    assert_eq!(input["required"].as_array().map(Vec::len), Some(n));
    assert_eq!(input["properties"]["f0"]["type"], "string");
    eprintln!("{n} form fields compiled in {:?}", started.elapsed());
}
