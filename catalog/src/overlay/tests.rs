use super::*;
use crate::error::CompileError;
use serde_json::json;

fn overlay(yaml: &str) -> Overlay {
    match Overlay::parse("test.overlay.yaml", yaml.as_bytes(), false) {
        Ok(o) => o,
        Err(e) => panic!("overlay should parse: {e}"),
    }
}

fn parse_err(yaml: &str) -> OverlayError {
    match Overlay::parse("bad.overlay.yaml", yaml.as_bytes(), false) {
        Ok(o) => panic!("overlay should not parse: {o:?}"),
        Err(e) => e,
    }
}

fn pets() -> Value {
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Pets", "version": "1"},
        "paths": {
            "/pets": {
                "get": {"operationId": "listPets", "tags": ["pets", "read"], "parameters": [
                    {"name": "limit", "in": "query"},
                    {"name": "debug", "in": "query"},
                    {"name": "offset", "in": "query"},
                    {"name": "trace", "in": "header", "x-internal": true}
                ]},
                "post": {"operationId": "createPets"}
            },
            "/pets/{id}": {
                "get": {"operationId": "showPet"},
                "delete": {"operationId": "deletePet", "x-internal": true}
            }
        }
    })
}

const HEAD_10: &str = "overlay: 1.0.0\ninfo: {title: t, version: '1'}\n";
const HEAD_11: &str = "overlay: 1.1.0\ninfo: {title: t, version: '1'}\n";

#[test]
fn remove_deletes_the_matched_node_from_its_parent_object() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: \"$.paths['/pets/{{id}}'].delete\"\n    remove: true\n"
    ));
    let mut doc = pets();
    let warnings = o.apply(&mut doc).unwrap();
    assert!(warnings.is_empty());
    assert!(doc.pointer("/paths/~1pets~1{id}/delete").is_none());
    assert!(doc.pointer("/paths/~1pets~1{id}/get").is_some());
}

#[test]
fn update_merges_recursively_adding_keys_and_replacing_scalars() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.info\n    update:\n      title: New title\n      \
         description: added\n      contact: {{name: me}}\n"
    ));
    let mut doc = pets();
    doc["info"]["contact"] = json!({"email": "a@b.c"});
    o.apply(&mut doc).unwrap();
    assert_eq!(
        doc["info"],
        json!({"title": "New title", "version": "1",
               "contact": {"email": "a@b.c", "name": "me"}, "description": "added"})
    );
}

#[test]
fn update_concatenates_arrays_nested_in_the_merged_object() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.paths['/pets'].get\n    update: {{tags: [extra]}}\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert_eq!(
        doc["paths"]["/pets"]["get"]["tags"],
        json!(["pets", "read", "extra"])
    );
}

#[test]
fn update_on_an_array_target_appends_the_entry() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.paths['/pets'].get.parameters\n    \
         update: {{name: newParam, in: query}}\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    let params = doc["paths"]["/pets"]["get"]["parameters"]
        .as_array()
        .unwrap();
    assert_eq!(params.len(), 5);
    assert_eq!(params[4], json!({"name": "newParam", "in": "query"}));
}

#[test]
fn update_with_an_array_on_an_array_target_appends_each_value() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.paths['/pets'].get.tags\n    update: [a, b]\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert_eq!(
        doc["paths"]["/pets"]["get"]["tags"],
        json!(["pets", "read", "a", "b"])
    );
}

#[test]
fn update_on_a_primitive_target_replaces_it() {
    let o = overlay(&format!(
        "{HEAD_11}actions:\n  - target: $.info.title\n    update: Renamed\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert_eq!(doc["info"]["title"], json!("Renamed"));
}

#[test]
fn object_update_on_a_string_is_an_action_error_naming_the_expected_type() {
    let o = overlay(&format!(
        "{HEAD_11}actions:\n  - target: $.info\n    update: {{x-a: 1}}\n  \
         - target: $.info.title\n    update: {{a: 1}}\n"
    ));
    let err = o.apply(&mut pets()).unwrap_err();
    assert_eq!(err.action, Some(1));
    assert_eq!(err.target.as_deref(), Some("$.info.title"));
    let OverlayErrorKind::Action(msg) = &err.kind else {
        panic!("expected Action error, got {err:?}");
    };
    assert!(msg.contains("/info/title"), "{msg}");
    assert!(msg.contains("expected a primitive value"), "{msg}");
}

#[test]
fn nested_incompatible_merge_is_an_error_naming_the_pointer() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.paths['/pets'].get\n    update: {{tags: {{a: 1}}}}\n"
    ));
    let err = o.apply(&mut pets()).unwrap_err();
    let OverlayErrorKind::Action(msg) = &err.kind else {
        panic!("expected Action error, got {err:?}");
    };
    assert!(msg.contains("/paths/~1pets/get/tags"), "{msg}");
    assert!(
        msg.contains("has an object where the document has an array"),
        "{msg}"
    );
}

#[test]
fn update_selecting_objects_and_arrays_together_is_an_error() {
    let o = overlay(&format!(
        "{HEAD_11}actions:\n  - target: $.*\n    update: {{x: 1}}\n"
    ));
    let err = o.apply(&mut json!({"a": {}, "b": []})).unwrap_err();
    assert!(
        matches!(&err.kind, OverlayErrorKind::Action(m) if m.contains("different kinds")),
        "{err}"
    );
}

#[test]
fn unmatched_target_is_a_warning_not_an_error() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.info\n    update: {{x-a: 1}}\n  \
         - target: $.paths['/nope'].get\n    update: {{x-b: 1}}\n"
    ));
    let mut doc = pets();
    let warnings = o.apply(&mut doc).unwrap();
    assert_eq!(warnings.len(), 1);
    let w = &warnings[0];
    assert_eq!(w.code, WarningCode::OverlayTargetUnmatched);
    let at = Location::Overlay {
        name: "test.overlay.yaml".into(),
        action: 1,
    };
    assert_eq!(w.at, Some(at));
    assert!(w.message.contains("test.overlay.yaml"), "{}", w.message);
    assert!(w.message.contains("action 1"), "{}", w.message);
    assert!(w.message.contains("$.paths['/nope'].get"), "{}", w.message);
    assert_eq!(doc["info"]["x-a"], json!(1));
}

#[test]
fn strict_mode_makes_an_unmatched_target_an_error() {
    let text = format!("{HEAD_10}actions:\n  - target: $.nothing\n    remove: true\n");
    let o = Overlay::parse("s.yaml", text.as_bytes(), true).unwrap();
    assert!(o.strict);
    let err = o.apply(&mut pets()).unwrap_err();
    assert_eq!(err.kind, OverlayErrorKind::UnmatchedTarget);
    assert_eq!(err.action, Some(0));
    assert_eq!(err.target.as_deref(), Some("$.nothing"));
    assert_eq!(err.overlay, "s.yaml");
}

#[test]
fn invalid_jsonpath_fails_parse_naming_action_index_and_target() {
    let err = parse_err(&format!(
        "{HEAD_10}actions:\n  - target: $.info\n    update: {{}}\n  \
         - target: $.paths[?@.x ==]\n    remove: true\n"
    ));
    assert_eq!(err.action, Some(1));
    assert_eq!(err.target.as_deref(), Some("$.paths[?@.x ==]"));
    let OverlayErrorKind::InvalidJsonPath(msg) = &err.kind else {
        panic!("expected InvalidJsonPath, got {err:?}");
    };
    assert!(msg.contains("position"), "{msg}");
    assert!(err.to_string().contains("/actions/1"), "{err}");
}

/// Runs `f` on a thread with a tokio worker's default stack (2 MiB), where
/// the operator parses McpOverlays; a stack overflow aborts the test run.
fn on_a_2_mib_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn a_target_with_1200_nested_parentheses_is_refused_without_overflowing_the_stack() {
    let target = format!("$[?{}@.a{}]", "(".repeat(1200), ")".repeat(1200));
    let text = format!("{HEAD_10}actions:\n  - target: \"{target}\"\n    remove: true\n");
    assert!(text.len() < 4200, "a 4 KB overlay: {}", text.len());
    let err = on_a_2_mib_stack(move || {
        Overlay::parse("mcpoverlay ns/deep", text.as_bytes(), false).unwrap_err()
    });
    assert_eq!(err.action, Some(0));
    assert_eq!(err.target.as_deref(), Some(target.as_str()));
    let OverlayErrorKind::InvalidJsonPath(msg) = &err.kind else {
        panic!("expected InvalidJsonPath, got {err:?}");
    };
    assert!(
        msg.contains("1201 deep") && msg.contains("limit of 10"),
        "{msg}"
    );
    let shown = err.to_string();
    assert!(shown.contains("mcpoverlay ns/deep: /actions/0"), "{shown}");
    assert_eq!(
        CompileError::from(err).reason(),
        crate::Reason::OverlayInvalid
    );
}

#[test]
fn a_copy_source_with_deeply_nested_filters_is_refused_before_parsing() {
    // Nested filter queries cost the parser about twice as much per
    // level: 32 levels would parse for hours.
    let source = format!("${}{}", "[?@".repeat(32), "]".repeat(32));
    let err = on_a_2_mib_stack(move || {
        parse_err(&format!(
            "{HEAD_11}actions:\n  - target: $.info\n    update: {{}}\n  \
             - target: $.info\n    copy: \"{source}\"\n"
        ))
    });
    assert_eq!(err.action, Some(1));
    assert_eq!(err.target.as_deref(), Some("$.info"));
    assert!(
        matches!(&err.kind, OverlayErrorKind::InvalidJsonPath(m)
            if m.starts_with("`copy` \"$[?@") && m.contains("32 deep")),
        "{err}"
    );
}

#[test]
fn a_jsonpath_over_4_kib_is_refused() {
    let target = format!("${}", ".a".repeat(2100));
    let err = parse_err(&format!(
        "{HEAD_10}actions:\n  - target: {target}\n    remove: true\n"
    ));
    assert!(
        matches!(&err.kind, OverlayErrorKind::InvalidJsonPath(m)
            if m.contains("4201 bytes") && m.contains("limit of 4096")),
        "{err}"
    );
}

#[test]
fn a_second_descendant_segment_is_refused_before_it_multiplies_the_nodes_selected() {
    for (target, n) in [("$..*..*", 2), ("$..paths[?@..x == 1]", 2), ("$....a", 2)] {
        let err = parse_err(&format!(
            "{HEAD_10}actions:\n  - target: \"{target}\"\n    remove: true\n"
        ));
        assert!(
            matches!(&err.kind, OverlayErrorKind::InvalidJsonPath(m)
                if m.contains(&format!("has {n} descendant segments")) && m.contains("limit of 1")),
            "{target}: {err}"
        );
    }
    // In string literals `..` is a name, not a segment.
    overlay(&format!(
        "{HEAD_10}actions:\n  - target: \"$..['a..b'][?@.x == '..']\"\n    remove: true\n"
    ));
}

#[test]
fn regex_functions_are_refused_because_they_compile_once_per_node() {
    for target in [
        "$..[?match(@, '((a{1,30}){1,30}){1,30}')]",
        "$.paths.*.*[?search (@.operationId, 'admin')]",
    ] {
        let err = parse_err(&format!(
            "{HEAD_10}actions:\n  - target: \"{target}\"\n    remove: true\n"
        ));
        assert!(
            matches!(&err.kind, OverlayErrorKind::InvalidJsonPath(m) if m.contains("overlays do not support")),
            "{target}: {err}"
        );
    }
    // Other functions, and the words in strings or names, are fine.
    overlay(&format!(
        "{HEAD_10}actions:\n  - target: \"$.paths.*.*[?length(@.tags) > 1 && @.x == 'match(']\"\n    \
         remove: true\n  - target: $.match\n    remove: true\n"
    ));
}

#[test]
fn jsonpaths_nested_up_to_the_limit_still_parse() {
    // Brackets inside string literals do not count.
    let quoted = format!("$.paths[?@['{}']]", "([".repeat(40));
    let at_limit = format!("$[?{}@.a{}]", "(".repeat(9), ")".repeat(9));
    let filters = format!("${}{}", "[?@".repeat(10), "]".repeat(10));
    for target in [quoted, at_limit, filters] {
        overlay(&format!(
            "{HEAD_10}actions:\n  - target: \"{target}\"\n    remove: true\n"
        ));
    }
}

#[test]
fn nonstandard_jsonpath_is_rejected_at_parse() {
    // Jayway-style trailing functions such as `.length()` are not RFC 9535.
    let err = parse_err(&format!(
        "{HEAD_10}actions:\n  - target: $.paths.length()\n    remove: true\n"
    ));
    assert!(
        matches!(err.kind, OverlayErrorKind::InvalidJsonPath(_)),
        "{err:?}"
    );
    assert_eq!(err.action, Some(0));
}

#[test]
fn copy_merges_the_single_source_node_into_the_target() {
    let o = overlay(&format!(
        "{HEAD_11}actions:\n  - target: $.paths\n    update: {{/copies: {{}}}}\n  \
         - target: $.paths['/copies']\n    copy: $.paths['/pets']\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert_eq!(doc["paths"]["/copies"], doc["paths"]["/pets"]);
    assert_eq!(
        doc["paths"]["/copies"]["get"]["operationId"],
        json!("listPets")
    );
}

#[test]
fn copy_then_remove_moves_a_node() {
    let o = overlay(&format!(
        "{HEAD_11}actions:\n  - target: $.paths\n    update: {{/animals: {{}}}}\n  \
         - target: $.paths['/animals']\n    copy: $.paths['/pets']\n  \
         - target: $.paths['/pets']\n    remove: true\n"
    ));
    let before = pets();
    let mut doc = before.clone();
    o.apply(&mut doc).unwrap();
    assert!(doc["paths"].get("/pets").is_none());
    assert_eq!(doc["paths"]["/animals"], before["paths"]["/pets"]);
}

#[test]
fn copy_source_must_select_exactly_one_node() {
    let many = overlay(&format!(
        "{HEAD_11}actions:\n  - target: $.info\n    copy: $.paths.*.get\n"
    ));
    let err = many.apply(&mut pets()).unwrap_err();
    assert!(
        matches!(&err.kind, OverlayErrorKind::Action(m) if m.contains("matched 2 nodes")),
        "{err}"
    );
    let none = overlay(&format!(
        "{HEAD_11}actions:\n  - target: $.info\n    copy: $.components\n"
    ));
    let err = none.apply(&mut pets()).unwrap_err();
    assert!(
        matches!(&err.kind, OverlayErrorKind::Action(m) if m.contains("matched nothing")),
        "{err}"
    );
}

#[test]
fn copy_is_rejected_in_an_overlay_1_0() {
    let err = parse_err(&format!(
        "{HEAD_10}actions:\n  - target: $.info\n    copy: $.paths\n"
    ));
    assert_eq!(err.action, Some(0));
    assert!(
        matches!(&err.kind, OverlayErrorKind::Invalid(m) if m.contains("1.1.0")),
        "{err}"
    );
}

#[test]
fn wildcard_target_updates_every_get_operation() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.paths.*.get\n    update: {{x-safe: true}}\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert_eq!(doc["paths"]["/pets"]["get"]["x-safe"], json!(true));
    assert_eq!(doc["paths"]["/pets/{id}"]["get"]["x-safe"], json!(true));
    assert!(doc["paths"]["/pets"]["post"].get("x-safe").is_none());
    assert!(doc["paths"]["/pets/{id}"]["delete"].get("x-safe").is_none());
}

#[test]
fn filter_target_sets_mcp_extensions_on_one_operation() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: \"$.paths.*[?(@.operationId == 'listPets')]\"\n    \
         update:\n      x-mcp-enabled: false\n      x-mcp-tool-name: list_all_pets\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    let op = &doc["paths"]["/pets"]["get"];
    assert_eq!(op["x-mcp-enabled"], json!(false));
    assert_eq!(op["x-mcp-tool-name"], json!("list_all_pets"));
    let others = ["/paths/~1pets/post", "/paths/~1pets~1{id}/get"];
    for p in others {
        assert!(
            doc.pointer(p).unwrap().get("x-mcp-enabled").is_none(),
            "{p}"
        );
    }
}

#[test]
fn second_overlay_sees_the_first_overlays_result() {
    let first = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.paths.*.get\n    update: {{x-mcp-enabled: false}}\n"
    ));
    let second = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.paths.*[?@['x-mcp-enabled'] == false]\n    \
         update: {{x-mcp-tool-name: hidden}}\n"
    ));
    let mut doc = pets();
    first.apply(&mut doc).unwrap();
    let warnings = second.apply(&mut doc).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(
        doc["paths"]["/pets"]["get"]["x-mcp-tool-name"],
        json!("hidden")
    );
    assert_eq!(
        doc["paths"]["/pets/{id}"]["get"]["x-mcp-tool-name"],
        json!("hidden")
    );
    assert!(doc["paths"]["/pets"]["post"]
        .get("x-mcp-tool-name")
        .is_none());
}

#[test]
fn later_actions_see_earlier_actions_of_the_same_overlay() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.info\n    update: {{x-stage: one}}\n  \
         - target: $[?@['x-stage'] == 'one']\n    update: {{x-seen: true}}\n"
    ));
    let mut doc = pets();
    let warnings = o.apply(&mut doc).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(doc["info"]["x-seen"], json!(true));
}

#[test]
fn removing_several_array_elements_by_filter_removes_exactly_those() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: \"$.paths.*.get.parameters[?@.name == 'debug' || @['x-internal'] == true]\"\n    remove: true\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert_eq!(
        doc["paths"]["/pets"]["get"]["parameters"],
        json!([{"name": "limit", "in": "query"}, {"name": "offset", "in": "query"}])
    );
}

#[test]
fn removing_array_elements_listed_lowest_index_first_keeps_indices_valid() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.list[0,2]\n    remove: true\n  \
         - target: $.other[2,0]\n    remove: true\n"
    ));
    let mut doc = json!({"list": [0, 1, 2, 3], "other": [0, 1, 2, 3]});
    o.apply(&mut doc).unwrap();
    assert_eq!(doc, json!({"list": [1, 3], "other": [1, 3]}));
}

#[test]
fn a_node_selected_twice_is_acted_on_once() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $.lists[0,0]\n    update: 2\n  \
         - target: $.list[0,0]\n    remove: true\n"
    ));
    let mut doc = json!({"lists": [[1]], "list": [0, 1, 2]});
    o.apply(&mut doc).unwrap();
    assert_eq!(doc, json!({"lists": [[1, 2]], "list": [1, 2]}));
}

#[test]
fn removing_primitive_array_items_by_filter_works() {
    let o = overlay(&format!(
        "{HEAD_11}actions:\n  - target: \"$.paths.*.get.tags[?@ == 'read']\"\n    remove: true\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert_eq!(doc["paths"]["/pets"]["get"]["tags"], json!(["pets"]));
}

#[test]
fn removing_a_node_and_its_descendant_together_is_fine() {
    let o = overlay(&format!(
        "{HEAD_11}actions:\n  - target: $..['x-internal']\n    remove: true\n  \
         - target: \"$.paths[*][?@.operationId == 'deletePet']\"\n    remove: true\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert!(!doc.to_string().contains("x-internal"));
    assert!(doc.pointer("/paths/~1pets~1{id}/delete").is_none());
}

#[test]
fn removing_the_root_is_an_error() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $\n    remove: true\n"
    ));
    let err = o.apply(&mut pets()).unwrap_err();
    assert_eq!(err.action, Some(0));
    assert!(
        matches!(&err.kind, OverlayErrorKind::Action(m) if m.contains("root")),
        "{err}"
    );
}

#[test]
fn root_target_update_merges_into_the_document() {
    let o = overlay(&format!(
        "{HEAD_10}actions:\n  - target: $\n    update: {{info: {{x-overlay-applied: yes}}}}\n"
    ));
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert_eq!(doc["info"]["x-overlay-applied"], json!("yes"));
    assert_eq!(doc["info"]["title"], json!("Pets"));
}

#[test]
fn json_overlays_are_accepted() {
    let text = r#"{"overlay": "1.1.0", "info": {"title": "t", "version": "1"},
        "actions": [{"target": "$.info", "update": {"x-json": true}}]}"#;
    let o = Overlay::parse("o.json", text.as_bytes(), false).unwrap();
    let mut doc = pets();
    o.apply(&mut doc).unwrap();
    assert_eq!(doc["info"]["x-json"], json!(true));
}

#[test]
fn structure_errors_name_the_problem() {
    let cases: &[(&str, Option<usize>, &str)] = &[
        (
            "info: {title: t, version: '1'}\nactions: []\n",
            None,
            "`overlay`",
        ),
        (
            "overlay: 1.0.0\nactions:\n  - {target: $, update: {}}\n",
            None,
            "`info`",
        ),
        (
            "overlay: 1.0.0\ninfo: {title: t}\nactions:\n  - {target: $, update: {}}\n",
            None,
            "`version`",
        ),
        (HEAD_10, None, "`actions`"),
        (&format!("{HEAD_10}actions: []\n"), None, "at least one"),
        (
            &format!("{HEAD_10}actions:\n  - {{update: {{}}}}\n"),
            Some(0),
            "`target`",
        ),
        (
            &format!("{HEAD_10}actions:\n  - {{target: paths, update: {{}}}}\n"),
            Some(0),
            "`$`",
        ),
        (
            &format!("{HEAD_10}actions:\n  - {{target: $.a, remove: true, update: {{}}}}\n"),
            Some(0),
            "found `remove: true` and `update`",
        ),
        (
            &format!("{HEAD_10}actions:\n  - {{target: $.a}}\n"),
            Some(0),
            "found none",
        ),
        (
            &format!("{HEAD_10}actions:\n  - {{target: $.a, remove: false}}\n"),
            Some(0),
            "found none",
        ),
        (
            &format!("{HEAD_10}actions:\n  - {{target: $.a, remove: 'yes'}}\n"),
            Some(0),
            "boolean",
        ),
        (
            &format!("{HEAD_10}actions:\n  - {{target: $.a, updates: {{}}}}\n"),
            Some(0),
            "unknown field `updates`",
        ),
        (
            &format!("{HEAD_11}actions:\n  - {{target: $.a, copy: $.b, update: {{}}}}\n"),
            Some(0),
            "`update` and `copy`",
        ),
        (
            &format!("{HEAD_10}action:\n  - {{target: $.a, update: {{}}}}\n"),
            None,
            "unknown field `action`",
        ),
    ];
    for (text, action, needle) in cases {
        let err = parse_err(text);
        assert!(
            matches!(err.kind, OverlayErrorKind::Invalid(_)),
            "{text}: {err:?}"
        );
        assert_eq!(err.action, *action, "{text}: {err}");
        assert!(err.to_string().contains(needle), "{text}: {err}");
        assert!(err.to_string().contains("bad.overlay.yaml"), "{err}");
    }
}

#[test]
fn unsupported_versions_are_rejected() {
    for v in ["2.0.0", "1.2.0", "'1.0'", "1.1", "1.0.0-beta"] {
        let err = parse_err(&format!(
            "overlay: {v}\ninfo: {{title: t, version: '1'}}\nactions:\n  - {{target: $, update: {{}}}}\n"
        ));
        assert!(
            matches!(err.kind, OverlayErrorKind::UnsupportedVersion(_)),
            "{v}: {err:?}"
        );
    }
    overlay(
        "overlay: 1.0.7\ninfo: {title: t, version: '1'}\nactions:\n  - {target: $, update: {}}\n",
    );
}

#[test]
fn unparsable_text_is_a_parse_error() {
    let err = parse_err("overlay: [1.0.0\n");
    assert!(matches!(err.kind, OverlayErrorKind::Parse(_)), "{err:?}");
    assert_eq!(err.overlay, "bad.overlay.yaml");
}

#[test]
fn overlay_applies_to_the_corpus_petstore() {
    let bytes = toolgate_corpus::read("oai-petstore-v3.yaml");
    let mut doc = crate::spec::parse_value("oai-petstore-v3.yaml", &bytes).unwrap();
    let o = overlay(&format!(
        "{HEAD_11}actions:\n\
         \x20 - target: \"$.paths.*[?@.operationId == 'createPets']\"\n    update: {{x-mcp-enabled: false}}\n\
         \x20 - target: \"$.paths['/pets'].get\"\n    update: {{x-mcp-tool-name: list_pets, summary: Lists pets}}\n\
         \x20 - target: \"$.paths.*.*.parameters[?@.in == 'query']\"\n    remove: true\n\
         \x20 - target: $.paths.*.*.responses.default\n    remove: true\n"
    ));
    let warnings = o.apply(&mut doc).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let pets = &doc["paths"]["/pets"];
    assert_eq!(pets["post"]["x-mcp-enabled"], json!(false));
    assert_eq!(pets["get"]["x-mcp-tool-name"], json!("list_pets"));
    assert_eq!(pets["get"]["summary"], json!("Lists pets"));
    assert_eq!(pets["get"]["operationId"], json!("listPets"));
    assert_eq!(pets["get"]["parameters"], json!([]));
    assert_eq!(
        doc["paths"]["/pets/{petId}"]["get"]["parameters"][0]["name"],
        json!("petId")
    );
    let text = doc.to_string();
    assert!(
        !text.contains("\"default\""),
        "default responses should be gone"
    );
    assert!(doc["components"]["schemas"]["Error"].is_object());
}
