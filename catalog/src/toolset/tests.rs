use serde_json::json;

use super::*;

/// Four tools: a read-only list tagged `pets`, a write tagged `pets` and
/// `admin` (via `x-mcp-toolsets`), a read-only untagged fetch, and a
/// delete.
fn pets(prefix: &str) -> UpstreamCatalog {
    let spec = json!({
        "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
        "paths": {
            "/pets": {
                "get": {"operationId": "listPets", "tags": ["pets"],
                        "responses": {"200": {"description": "ok"}}},
                "post": {"operationId": "addPet", "tags": ["pets"], "x-mcp-toolsets": ["admin"],
                         "responses": {"201": {"description": "ok"}}}
            },
            "/pets/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "get": {"operationId": "getPet", "responses": {"200": {"description": "ok"}}},
                "delete": {"operationId": "deletePet", "responses": {"204": {"description": "ok"}}}
            }
        }
    });
    let spec = serde_json::to_vec(&spec).unwrap();
    let options = crate::CompileOptions::default();
    crate::compile_upstream(&crate::UpstreamSource {
        prefix,
        document: "pets.json",
        spec: &spec,
        overlays: &[],
        options: &options,
    })
    .unwrap()
}

fn toolset(upstreams: &[&str], tools: serde_json::Value) -> Toolset {
    Toolset {
        upstreams: upstreams.iter().map(|p| p.to_string()).collect(),
        tools: serde_json::from_value(tools).expect("filter parses"),
        ..Toolset::new(ToolsetName::new("team-a", "t"))
    }
}

fn selected(t: &Toolset, u: &UpstreamCatalog) -> Vec<String> {
    u.tools
        .iter()
        .filter(|tool| t.selects(u, tool))
        .map(|tool| tool.name.clone())
        .collect()
}

#[test]
fn the_default_filter_selects_every_tool_of_its_upstreams_and_none_of_others() {
    let (a, b) = (pets("pets"), pets("other"));
    let t = toolset(&["pets"], json!({}));
    assert_eq!(
        selected(&t, &a),
        [
            "pets__list_pets",
            "pets__add_pet",
            "pets__get_pet",
            "pets__delete_pet"
        ]
    );
    assert!(selected(&t, &b).is_empty());
}

#[test]
fn globs_match_names_without_the_prefix_and_exclude_wins() {
    let u = pets("pets");
    let t = toolset(
        &["pets"],
        json!({"include": ["*_pet"], "exclude": ["delete_*"]}),
    );
    assert_eq!(selected(&t, &u), ["pets__add_pet", "pets__get_pet"]);
    // The prefix is not part of what globs see.
    let t = toolset(&["pets"], json!({"include": ["pets__*"]}));
    assert!(selected(&t, &u).is_empty());
}

#[test]
fn tags_match_openapi_tags_and_x_mcp_toolsets_any_of() {
    let u = pets("pets");
    let t = toolset(&["pets"], json!({"tags": ["admin"]}));
    assert_eq!(selected(&t, &u), ["pets__add_pet"]);
    let t = toolset(&["pets"], json!({"tags": ["nope", "pets"]}));
    assert_eq!(selected(&t, &u), ["pets__list_pets", "pets__add_pet"]);
}

#[test]
fn read_only_keeps_only_read_only_hinted_tools_and_filters_combine() {
    let u = pets("pets");
    let t = toolset(&["pets"], json!({"readOnly": true}));
    assert_eq!(selected(&t, &u), ["pets__list_pets", "pets__get_pet"]);
    let t = toolset(&["pets"], json!({"readOnly": true, "tags": ["pets"]}));
    assert_eq!(selected(&t, &u), ["pets__list_pets"]);
    let t = toolset(
        &["pets"],
        json!({"readOnly": true, "include": ["get_*", "add_*"]}),
    );
    assert_eq!(selected(&t, &u), ["pets__get_pet"]);
}

#[test]
fn checks_name_the_field_that_breaks_a_bound() {
    let field = |t: &Toolset| t.check().expect_err("refused").field;
    assert_eq!(
        field(&toolset(&["p"], json!({"include": []}))),
        "tools.include"
    );
    assert_eq!(
        field(&toolset(&["p"], json!({"exclude": ["a", ""]}))),
        "tools.exclude[1]"
    );
    let many: Vec<String> = (0..=MAX_GLOBS).map(|i| format!("g{i}")).collect();
    assert_eq!(
        field(&toolset(&["p"], json!({"include": many}))),
        "tools.include"
    );
    let long = "x".repeat(MAX_TAG_LEN + 1);
    assert_eq!(
        field(&toolset(&["p"], json!({"tags": [long]}))),
        "tools.tags[0]"
    );
    let mut t = toolset(&["p"], json!({}));
    t.pinned = (0..=MAX_PINNED).map(|i| format!("p__t{i}")).collect();
    assert_eq!(field(&t), "pinned");
    let mut t = toolset(&["p"], json!({}));
    t.descriptions.call_tool = Some(String::new());
    assert_eq!(field(&t), "metaToolDescriptions.callTool");
    let mut t = toolset(&["p"], json!({}));
    t.upstreams = (0..=MAX_UPSTREAMS).map(|i| format!("p{i}")).collect();
    assert_eq!(field(&t), "upstreams");
    assert!(toolset(&["p"], json!({"exclude": ["x"], "tags": ["y"]}))
        .check()
        .is_ok());
}

#[test]
fn the_published_form_round_trips_and_omits_defaults() {
    let mut t = toolset(&["pets", "a"], json!({"readOnly": true}));
    t.mode = ListMode::Search;
    t.pinned = vec!["pets__get_pet".into()];
    let text = serde_json::to_value(&t).unwrap();
    assert_eq!(
        text,
        json!({"namespace": "team-a", "name": "t", "upstreams": ["a", "pets"],
               "tools": {"include": ["*"], "readOnly": true}, "mode": "search",
               "pinned": ["pets__get_pet"]})
    );
    assert_eq!(serde_json::from_value::<Toolset>(text).unwrap(), t);
    assert_eq!(ToolsetName::new("ns", "n.x").to_string(), "ns/n.x");
}
