//! Name conflicts through the public API: `conflictResolution: qualify`
//! and the `error` message.

mod common;

use catalog::{
    CompileError, CompileOptions, ConflictResolution, Location, RejectReason, UpstreamCatalog,
    UpstreamSource, WarningCode,
};
use serde_json::{json, Map, Value};

fn compile_with(spec: &Value, options: &CompileOptions) -> Result<UpstreamCatalog, CompileError> {
    common::compile_json(spec, &[], options)
}

fn qualify() -> CompileOptions {
    let mut o = CompileOptions::default();
    o.naming.conflict_resolution = ConflictResolution::Qualify;
    o
}

fn op(id: &str, tags: &[&str]) -> Value {
    json!({"operationId": id, "tags": tags, "responses": {"200": {"description": "ok"}}})
}

/// A document reusing operationIds across versions and groups, the way
/// large generated APIs do.
fn versions_and_groups() -> Vec<(&'static str, Value)> {
    vec![
        (
            "/api/v1/pods",
            json!({"get": op("listPods", &["core_v1"]), "post": op("createPod", &["core_v1"])}),
        ),
        ("/api/v2/pods", json!({"get": op("listPods", &["core_v2"])})),
        ("/apis/apps/v1/deployments", json!({"get": op("list", &[])})),
        ("/apis/batch/v1/jobs", json!({"get": op("list", &[])})),
        (
            "/things/{id}",
            json!({
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "get": op("thing", &["things"]), "delete": op("thing", &["things"])}),
        ),
        ("/unique", json!({"get": op("unique", &["misc"])})),
    ]
}

fn document(paths: &[(&'static str, Value)]) -> Value {
    let mut m = Map::new();
    for (p, item) in paths {
        m.insert((*p).to_string(), item.clone());
    }
    json!({"openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "paths": m})
}

/// `(METHOD path, tool name)`, sorted.
fn names(u: &UpstreamCatalog) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = u
        .tools
        .iter()
        .map(|t| {
            (
                format!("{} {}", t.operation.method, t.operation.path),
                t.name.clone(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn qualify_keeps_every_operation_with_names_telling_them_apart() {
    let u = compile_with(&document(&versions_and_groups()), &qualify()).unwrap();
    assert!(u.rejected.is_empty(), "{:?}", u.rejected);
    let want = [
        ("DELETE /things/{id}", "t__delete_thing"),
        ("GET /api/v1/pods", "t__core_v1_list_pods"),
        ("GET /api/v2/pods", "t__core_v2_list_pods"),
        ("GET /apis/apps/v1/deployments", "t__apps_list"),
        ("GET /apis/batch/v1/jobs", "t__batch_list"),
        ("GET /things/{id}", "t__get_thing"),
        ("GET /unique", "t__unique"),
        ("POST /api/v1/pods", "t__create_pod"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(names(&u), want);
    // Each renamed operation says so, at its pointer, naming the others.
    let notes: Vec<_> = u
        .warnings
        .iter()
        .filter(|w| w.code == WarningCode::NameQualified)
        .collect();
    assert_eq!(notes.len(), 6, "{notes:?}");
    let pods = notes
        .iter()
        .find(|w| {
            w.at == Some(Location::Document {
                pointer: "/paths/~1api~1v1~1pods/get".into(),
            })
        })
        .expect("a note for GET /api/v1/pods");
    assert!(
        pods.message.contains("GET /api/v2/pods") && pods.message.contains("t__core_v1_list_pods"),
        "{}",
        pods.message
    );
}

#[test]
fn qualify_gives_the_same_names_whatever_the_path_order() {
    let paths = versions_and_groups();
    let expected = names(&compile_with(&document(&paths), &qualify()).unwrap());
    let n = paths.len();
    // Every rotation and the reversal of the path order.
    let mut orders: Vec<Vec<usize>> = (0..n)
        .map(|r| (0..n).map(|i| (i + r) % n).collect())
        .collect();
    orders.push((0..n).rev().collect());
    for order in orders {
        let shuffled: Vec<_> = order.iter().map(|&i| paths[i].clone()).collect();
        let u = compile_with(&document(&shuffled), &qualify()).unwrap();
        assert_eq!(names(&u), expected, "order {order:?}");
    }
}

#[test]
fn qualify_leaves_a_single_x_mcp_tool_name_and_the_raw_tool_their_names() {
    let mut named = op("other", &["b"]);
    named["x-mcp-tool-name"] = json!("list");
    let doc = document(&[
        ("/a", json!({"get": op("list", &["a"])})),
        ("/b", json!({"get": named})),
        ("/c", json!({"get": op("apiRequest", &["c"])})),
    ]);
    let mut o = qualify();
    o.tools.raw_request_tool = true;
    let u = compile_with(&doc, &o).unwrap();
    let got: Vec<String> = names(&u).into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        got,
        ["t__api_request", "t__a_list", "t__list", "t__c_api_request"],
        "{:?}",
        names(&u)
    );
}

#[test]
fn tools_disabled_applies_to_qualified_names() {
    let mut o = qualify();
    o.tools.disabled = vec!["core_v2_list_pods".into()];
    let u = compile_with(&document(&versions_and_groups()), &o).unwrap();
    assert!(u.tools.iter().all(|t| t.name != "t__core_v2_list_pods"));
    assert!(u.tools.iter().any(|t| t.name == "t__core_v1_list_pods"));
    assert_eq!(u.rejected.len(), 1);
    assert_eq!(u.rejected[0].reason, RejectReason::DisabledByConfig);
    assert_eq!(u.rejected[0].path, "/api/v2/pods");
}

#[test]
fn error_lists_one_conflict_a_line_capped_and_names_the_settings() {
    // 25 paths, each with GET and POST both named `same_{i}`.
    let paths: Vec<(&'static str, Value)> = (0..25)
        .map(|i| {
            let path: &'static str = Box::leak(format!("/p{i:02}").into_boxed_str());
            let id = format!("same{i:02}");
            (path, json!({"get": op(&id, &[]), "post": op(&id, &[])}))
        })
        .collect();
    let err = compile_with(&document(&paths), &CompileOptions::default()).unwrap_err();
    let msg = err.to_string();
    let lines: Vec<&str> = msg.lines().collect();
    assert_eq!(
        lines[0],
        "25 tool name conflicts (naming.conflictResolution: error):"
    );
    assert_eq!(lines[1], "  \"t__same00\": GET /p00 and POST /p00");
    assert_eq!(lines[20], "  \"t__same19\": GET /p19 and POST /p19");
    assert_eq!(lines[21], "  and 5 more");
    assert_eq!(lines.len(), 23, "{msg}");
    let hint = lines[22];
    for setting in [
        "naming.conflictResolution",
        "qualify",
        "firstWins",
        "skip",
        "x-mcp-tool-name",
    ] {
        assert!(hint.contains(setting), "{hint}");
    }
    assert!(!msg.contains("FirstWins"), "{msg}");
}

#[test]
fn rejections_spell_the_mode_as_users_write_it() {
    let doc = document(&[
        ("/a", json!({"get": op("same", &[])})),
        ("/b", json!({"get": op("same", &[])})),
    ]);
    let mut o = CompileOptions::default();
    o.naming.conflict_resolution = ConflictResolution::FirstWins;
    let u = compile_with(&doc, &o).unwrap();
    assert_eq!(u.rejected.len(), 1);
    assert!(
        u.rejected[0]
            .message
            .ends_with("(naming.conflictResolution: firstWins)"),
        "{}",
        u.rejected[0].message
    );
}

#[test]
fn qualify_is_read_from_settings_as_written() {
    let o: CompileOptions =
        serde_json::from_value(json!({"naming": {"conflictResolution": "qualify"}})).unwrap();
    assert_eq!(o.naming.conflict_resolution, ConflictResolution::Qualify);
}

#[test]
fn lint_upstream_returns_the_conflicts_error_refuses_with_the_qualified_catalog() {
    let spec = serde_json::to_vec(&document(&versions_and_groups())).unwrap();
    let options = CompileOptions::default();
    let src = UpstreamSource {
        prefix: "t",
        document: "test.json",
        spec: &spec,
        overlays: &[],
        options: &options,
    };
    let linted = catalog::lint_upstream(&src).unwrap();
    let refused = linted.refused.expect("error mode refuses the document");
    assert_eq!(refused.conflicts.len(), 3, "{refused}");
    let qualified = compile_with(&document(&versions_and_groups()), &qualify()).unwrap();
    assert_eq!(linted.catalog.hash, qualified.hash);
    // Without conflicts the lint is the compile.
    let fine = serde_json::to_vec(&document(&versions_and_groups()[5..])).unwrap();
    let linted = catalog::lint_upstream(&UpstreamSource { spec: &fine, ..src }).unwrap();
    assert!(linted.refused.is_none());
    assert_eq!(linted.catalog.tools.len(), 1);
}
