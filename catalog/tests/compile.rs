//! Compiler behaviour through the public API: schemas, plans, overlays,
//! extensions, filters, conflicts.

mod common;

use catalog::{
    compile_upstream, BodyEncoding, BodySource, CompileError, CompileOptions, ConflictResolution,
    Location, OutputWrap, Overlay, ParamLocation, ParamStyle, RejectReason, UpstreamCatalog,
    UpstreamSource, WarningCode,
};
use serde_json::{json, Value};

fn compile_with(
    spec: &Value,
    overlays: &[Overlay],
    options: &CompileOptions,
) -> Result<UpstreamCatalog, CompileError> {
    common::compile_json(spec, overlays, options)
}

fn compile(spec: &Value) -> UpstreamCatalog {
    compile_with(spec, &[], &CompileOptions::default()).unwrap()
}

fn overlay(actions: Value) -> Overlay {
    let doc =
        json!({"overlay": "1.0.0", "info": {"title": "o", "version": "1"}, "actions": actions});
    Overlay::parse("test-overlay.yaml", doc.to_string().as_bytes(), false).unwrap()
}

fn doc30(paths: Value) -> Value {
    json!({"openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "paths": paths,
           "components": {"schemas": {
               "Pet": {"type": "object", "required": ["name"], "properties": {
                   "id": {"type": "integer", "readOnly": true},
                   "name": {"type": "string", "minLength": 1, "maxLength": 50, "description": "Pet name"},
                   "tag": {"type": "string", "nullable": true},
                   "kind": {"type": "string", "enum": ["cat", "dog"]},
                   "parent": {"$ref": "#/components/schemas/Pet"}}}}}})
}

fn tool<'a>(u: &'a UpstreamCatalog, name: &str) -> &'a catalog::Tool {
    u.tools.iter().find(|t| t.name == name).unwrap_or_else(|| {
        panic!(
            "no tool {name}; have {:?}",
            u.tools.iter().map(|t| &t.name).collect::<Vec<_>>()
        )
    })
}

#[test]
fn constraints_survive_into_the_input_schema() {
    let u = compile(&doc30(json!({"/pets/{petId}": {"get": {
        "operationId": "getPet",
        "parameters": [
            {"name": "petId", "in": "path", "required": true, "description": "The id",
             "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
            {"name": "code", "in": "query", "required": true,
             "schema": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2}},
            {"name": "kind", "in": "query", "schema": {"type": "string", "enum": ["a", "b"], "default": "a"}},
            {"name": "limit", "in": "query", "schema": {"type": "number", "minimum": 0, "exclusiveMinimum": true}},
            {"name": "note", "in": "query", "schema": {"type": "string", "nullable": true}}],
        "responses": {"200": {"description": "ok"}}}}})));
    let s = tool(&u, "t__get_pet").input_schema.to_value();
    assert_eq!(
        s["properties"]["petId"],
        json!({"type": "integer", "minimum": 1, "maximum": 1000, "description": "The id"})
    );
    assert_eq!(s["properties"]["code"]["pattern"], "^[a-z]+$");
    assert_eq!(s["properties"]["code"]["minLength"], 2);
    assert_eq!(s["properties"]["kind"]["enum"], json!(["a", "b"]));
    assert_eq!(s["properties"]["kind"]["default"], "a");
    assert_eq!(
        s["properties"]["limit"],
        json!({"type": "number", "exclusiveMinimum": 0})
    );
    assert_eq!(s["properties"]["note"]["type"], json!(["string", "null"]));
    assert_eq!(s["required"], json!(["petId", "code"]));
    assert_eq!(s["additionalProperties"], false);

    let v = jsonschema::draft202012::new(&s).unwrap();
    assert!(v.is_valid(&json!({"petId": 5, "code": "ab"})));
    assert!(!v.is_valid(&json!({"petId": 0, "code": "ab"})), "minimum");
    assert!(!v.is_valid(&json!({"petId": 5, "code": "AB"})), "pattern");
    assert!(!v.is_valid(&json!({"petId": 5, "code": "a"})), "minLength");
    assert!(!v.is_valid(&json!({"code": "ab"})), "required path param");
    assert!(
        !v.is_valid(&json!({"petId": 5, "code": "ab", "kind": "c"})),
        "enum"
    );
    assert!(
        !v.is_valid(&json!({"petId": 5, "code": "ab", "limit": 0})),
        "exclusive minimum"
    );
    assert!(
        v.is_valid(&json!({"petId": 5, "code": "ab", "note": null})),
        "nullable"
    );
    assert!(
        !v.is_valid(&json!({"petId": 5, "code": "ab", "bogus": 1})),
        "additionalProperties"
    );
}

#[test]
fn object_body_is_merged_read_only_fields_left_out_and_cycles_cut() {
    let u = compile(&doc30(json!({"/pets": {"post": {
        "operationId": "createPet",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}},
        "responses": {"201": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}}}})));
    assert!(
        u.warnings
            .iter()
            .any(|w| w.code == WarningCode::CircularRef),
        "{:?}",
        u.warnings
    );
    let t = tool(&u, "t__create_pet");
    let s = t.input_schema.to_value();
    assert!(
        s["properties"].get("id").is_none(),
        "readOnly id must not be an argument"
    );
    assert_eq!(s["properties"]["name"]["maxLength"], 50);
    assert_eq!(s["required"], json!(["name"]));
    assert!(s["properties"]["parent"]["description"]
        .as_str()
        .unwrap()
        .contains("Circular reference to Pet"));
    let body = t.plan.body.as_ref().unwrap();
    assert_eq!(body.encoding, BodyEncoding::Json);
    assert!(
        matches!(&body.source, BodySource::Merged { fields } if fields.iter().any(|f| f.arg == "name" && f.name == "name"))
    );
    // Responses keep readOnly fields and get an object outputSchema.
    let out = t.output_schema.as_ref().unwrap().to_value();
    assert!(out["properties"].get("id").is_some());
    assert_eq!(t.output_wrap, Some(OutputWrap::Body));
}

#[test]
fn colliding_body_field_nests_in_auto_and_is_renamed_in_merge_mode() {
    let spec = doc30(json!({"/pets/{name}": {"put": {
        "operationId": "renamePet",
        "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}},
        "responses": {"204": {"description": "ok"}}}}}));
    let u = compile(&spec);
    let t = tool(&u, "t__rename_pet");
    assert!(
        matches!(&t.plan.body.as_ref().unwrap().source, BodySource::Nested { arg } if arg == "body")
    );
    assert_eq!(
        t.input_schema.to_value()["required"],
        json!(["name", "body"])
    );

    let mut options = CompileOptions::default();
    options.schema.body_mode = catalog::BodyMode::Merge;
    let u = compile_with(&spec, &[], &options).unwrap();
    let t = tool(&u, "t__rename_pet");
    let BodySource::Merged { fields } = &t.plan.body.as_ref().unwrap().source else {
        panic!("expected merged body")
    };
    assert!(
        fields
            .iter()
            .any(|f| f.arg == "body_name" && f.name == "name"),
        "{fields:?}"
    );
    assert!(t.input_schema.to_value()["properties"]
        .get("body_name")
        .is_some());

    options.schema.body_mode = catalog::BodyMode::Nested;
    let u = compile_with(&spec, &[], &options).unwrap();
    assert!(matches!(
        &tool(&u, "t__rename_pet").plan.body.as_ref().unwrap().source,
        BodySource::Nested { .. }
    ));
}

#[test]
fn path_level_parameters_merge_and_operation_parameters_win() {
    let u = compile(&doc30(json!({"/items/{id}": {
        "parameters": [
            {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
            {"name": "verbose", "in": "query", "schema": {"type": "boolean"}}],
        "get": {"operationId": "getItem",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}},
                           {"name": "id", "in": "query", "schema": {"type": "string"}},
                           {"name": "tags", "in": "query", "style": "pipeDelimited", "schema": {"type": "array", "items": {"type": "string"}}}],
            "responses": {"200": {"description": "ok"}}}}})));
    let t = tool(&u, "t__get_item");
    assert_eq!(
        t.input_schema.to_value()["properties"]["id"]["type"],
        "integer"
    );
    let names: Vec<(&str, &str, ParamLocation)> = t
        .plan
        .params
        .iter()
        .map(|p| (p.arg.as_str(), p.name.as_str(), p.location))
        .collect();
    assert_eq!(
        names,
        vec![
            ("id", "id", ParamLocation::Path),
            ("verbose", "verbose", ParamLocation::Query),
            ("id_query", "id", ParamLocation::Query),
            ("tags", "tags", ParamLocation::Query)
        ]
    );
    let tags = t.plan.params.iter().find(|p| p.arg == "tags").unwrap();
    assert_eq!(
        (tags.style, tags.explode),
        (ParamStyle::PipeDelimited, false)
    );
}

#[test]
fn operation_with_undeclared_path_parameter_is_rejected_with_reason() {
    let u = compile(&doc30(
        json!({"/a/{x}": {"get": {"operationId": "a", "responses": {"200": {"description": "ok"}}}},
                                   "/b": {"get": {"operationId": "b", "responses": {"200": {"description": "ok"}}}}}),
    ));
    assert_eq!(u.tools.len(), 1);
    assert_eq!(u.rejected.len(), 1);
    assert_eq!(u.rejected[0].reason, RejectReason::OperationInvalid);
    assert!(
        u.rejected[0].message.contains("{x}"),
        "{}",
        u.rejected[0].message
    );
    assert_eq!(u.rejected[0].pointer, "/paths/~1a~1{x}/get");
}

#[test]
fn external_refs_are_refused_naming_the_ref_and_pointer() {
    let spec =
        doc30(json!({"/a": {"get": {"responses": {"200": {"$ref": "other.yaml#/responses/ok"}}}}}));
    let err = compile_with(&spec, &[], &CompileOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("other.yaml#/responses/ok"), "{msg}");
    assert!(msg.contains("/paths/~1a/get/responses/200/$ref"), "{msg}");
    assert_eq!(err.reason(), catalog::Reason::SpecInvalid);
}

#[test]
fn arrays_are_wrapped_as_result_in_the_output_schema() {
    let u = compile(&doc30(
        json!({"/pets": {"get": {"operationId": "listPets", "responses": {"200": {"description": "ok",
        "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}}}}}}}}),
    ));
    let t = tool(&u, "t__list_pets");
    assert_eq!(t.output_wrap, Some(OutputWrap::Result));
    let out = t.output_schema.as_ref().unwrap().to_value();
    assert_eq!(out["type"], "object");
    assert_eq!(out["required"], json!(["result"]));
    assert_eq!(out["properties"]["result"]["type"], "array");
}

#[test]
fn annotations_follow_the_method_and_x_mcp_annotations_override() {
    let u = compile(&doc30(json!({"/p": {
        "get": {"operationId": "g", "summary": "Get it", "responses": {"200": {"description": "ok"}}},
        "delete": {"operationId": "d", "responses": {"204": {"description": "ok"}}},
        "post": {"operationId": "p", "x-mcp-annotations": {"readOnlyHint": true, "title": "Search"},
                 "responses": {"200": {"description": "ok"}}}}})));
    let g = &tool(&u, "t__g").annotations;
    assert_eq!(
        (
            g.read_only_hint,
            g.destructive_hint,
            g.idempotent_hint,
            g.open_world_hint
        ),
        (Some(true), Some(false), Some(true), Some(true))
    );
    assert_eq!(g.title.as_deref(), Some("Get it"));
    assert_eq!(tool(&u, "t__g").title.as_deref(), Some("Get it"));
    let d = &tool(&u, "t__d").annotations;
    assert_eq!(
        (d.read_only_hint, d.destructive_hint, d.idempotent_hint),
        (Some(false), Some(true), Some(true))
    );
    let p = &tool(&u, "t__p").annotations;
    assert_eq!(
        (p.read_only_hint, p.title.as_deref()),
        (Some(true), Some("Search"))
    );
}

fn three_ops() -> Value {
    doc30(json!({
        "/pets": {"get": {"operationId": "listPets", "tags": ["pets"], "responses": {"200": {"description": "ok"}}},
                  "post": {"operationId": "createPet", "tags": ["pets", "admin"], "responses": {"201": {"description": "ok"}}}},
        "/users": {"get": {"operationId": "listUsers", "tags": ["users"], "responses": {"200": {"description": "ok"}}}}}))
}

#[test]
fn overlay_can_disable_rename_and_remove_operations() {
    let ov = overlay(json!([
        {"target": "$.paths['/pets'].post", "update": {"x-mcp-enabled": false}},
        {"target": "$.paths['/pets'].get", "update": {"x-mcp-tool-name": "all_pets", "x-mcp-description": "Every pet."}},
        {"target": "$.paths['/users']", "remove": true},
        {"target": "$.paths['/nothing']", "update": {"x": 1}}]));
    let u = compile_with(&three_ops(), &[ov], &CompileOptions::default()).unwrap();
    assert_eq!(
        u.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        vec!["t__all_pets"]
    );
    assert_eq!(u.tools[0].description.as_deref(), Some("Every pet."));
    assert_eq!(u.rejected.len(), 1);
    assert_eq!(u.rejected[0].reason, RejectReason::Disabled);
    assert_eq!(
        u.source.operation_count, 2,
        "the removed path is not an operation any more"
    );
    let w = u
        .warnings
        .iter()
        .find(|w| w.code == WarningCode::OverlayTargetUnmatched)
        .expect("unmatched warning");
    assert!(w.message.contains("test-overlay.yaml"), "{}", w.message);
    let at = Location::Overlay {
        name: "test-overlay.yaml".into(),
        action: 3,
    };
    assert_eq!(w.at, Some(at));
}

#[test]
fn strict_overlay_with_unmatched_target_fails_the_compile() {
    let doc = json!({"overlay": "1.0.0", "info": {"title": "o", "version": "1"},
                     "actions": [{"target": "$.paths['/nothing']", "remove": true}]});
    let ov = Overlay::parse("strict.yaml", doc.to_string().as_bytes(), true).unwrap();
    let err = compile_with(&three_ops(), &[ov], &CompileOptions::default()).unwrap_err();
    assert_eq!(err.reason(), catalog::Reason::OverlayTargetUnmatched);
    assert!(err.to_string().contains("strict.yaml"), "{err}");
}

#[test]
fn an_overlay_that_breaks_the_document_is_blamed_not_the_document() {
    let fine = overlay(json!([{"target": "$.info", "update": {"description": "x"}}]));
    let breaks = Overlay::parse(
        "breaks.yaml",
        json!({"overlay": "1.0.0", "info": {"title": "o", "version": "1"},
               "actions": [{"target": "$", "update": {"openapi": "9.9.9"}}]})
        .to_string()
        .as_bytes(),
        false,
    )
    .unwrap();
    let err = compile_with(&three_ops(), &[fine, breaks], &CompileOptions::default()).unwrap_err();
    assert_eq!(err.reason(), catalog::Reason::OverlayInvalid, "{err}");
    let msg = err.to_string();
    assert!(msg.starts_with("overlay breaks.yaml"), "{msg}");
    assert!(msg.contains("9.9.9"), "{msg}");
    // A document that is invalid by itself is still the document's fault.
    let mut bad = three_ops();
    bad["openapi"] = json!("9.9.9");
    let fine = overlay(json!([{"target": "$.info", "update": {"description": "x"}}]));
    let err = compile_with(&bad, &[fine], &CompileOptions::default()).unwrap_err();
    assert_eq!(err.reason(), catalog::Reason::SpecInvalid, "{err}");
    assert!(err.to_string().contains("test.json"), "{err}");
}

#[test]
fn overlays_apply_in_the_given_order() {
    let first = overlay(
        json!([{"target": "$.paths['/pets'].get", "update": {"x-mcp-tool-name": "first"}}]),
    );
    let second = overlay(
        json!([{"target": "$.paths['/pets'].get", "update": {"x-mcp-tool-name": "second"}}]),
    );
    let u = compile_with(
        &three_ops(),
        &[first.clone(), second.clone()],
        &CompileOptions::default(),
    )
    .unwrap();
    assert!(u.tools.iter().any(|t| t.name == "t__second"));
    let u = compile_with(&three_ops(), &[second, first], &CompileOptions::default()).unwrap();
    assert!(u.tools.iter().any(|t| t.name == "t__first"));
}

#[test]
fn read_only_mode_toolsets_and_disabled_names_filter_with_reasons() {
    let mut o = CompileOptions::default();
    o.tools.read_only = true;
    let u = compile_with(&three_ops(), &[], &o).unwrap();
    assert_eq!(u.tools.len(), 2);
    assert_eq!(u.rejected[0].reason, RejectReason::ReadOnlyMode);

    let mut o = CompileOptions::default();
    o.tools.include_toolsets = vec!["pets".into()];
    o.tools.exclude_toolsets = vec!["admin".into()];
    let u = compile_with(&three_ops(), &[], &o).unwrap();
    assert_eq!(
        u.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        vec!["t__list_pets"]
    );
    assert!(u
        .rejected
        .iter()
        .all(|r| r.reason == RejectReason::ToolsetFiltered));

    let mut o = CompileOptions::default();
    o.tools.disabled = vec!["t__list_users".into(), "create_pet".into()];
    let u = compile_with(&three_ops(), &[], &o).unwrap();
    assert_eq!(u.tools.len(), 1);
    assert!(u
        .rejected
        .iter()
        .all(|r| r.reason == RejectReason::DisabledByConfig));
}

#[test]
fn extra_parameters_and_the_raw_request_tool_are_added() {
    let mut o = CompileOptions::default();
    o.tools.extra_parameters = vec![catalog::ExtraParameter {
        name: "sudo".into(),
        location: ParamLocation::Query,
        required: false,
        description: Some("Act as user".into()),
        schema: None,
    }];
    o.tools.raw_request_tool = true;
    let u = compile_with(&three_ops(), &[], &o).unwrap();
    for t in u.tools.iter().filter(|t| !t.plan.raw) {
        assert_eq!(
            t.input_schema.to_value()["properties"]["sudo"]["type"],
            "string",
            "{}",
            t.name
        );
        assert!(t
            .plan
            .params
            .iter()
            .any(|p| p.arg == "sudo" && p.location == ParamLocation::Query));
    }
    let raw = tool(&u, "t__api_request");
    assert!(raw.plan.raw);
    assert_eq!(
        raw.input_schema.to_value()["required"],
        json!(["method", "path"])
    );
}

fn clash() -> Value {
    doc30(json!({
        "/a": {"get": {"operationId": "same", "responses": {"200": {"description": "ok"}}}},
        "/b": {"get": {"operationId": "same", "responses": {"200": {"description": "ok"}}}},
        "/c": {"get": {"operationId": "other", "responses": {"200": {"description": "ok"}}}}}))
}

#[test]
fn name_conflicts_follow_conflict_resolution() {
    let err = compile_with(&clash(), &[], &CompileOptions::default()).unwrap_err();
    assert_eq!(err.reason(), catalog::Reason::NameConflict);
    let msg = err.to_string();
    assert!(
        msg.contains("GET /a") && msg.contains("GET /b") && msg.contains("t__same"),
        "{msg}"
    );

    let mut o = CompileOptions::default();
    o.naming.conflict_resolution = ConflictResolution::FirstWins;
    let u = compile_with(&clash(), &[], &o).unwrap();
    assert_eq!(
        u.tools
            .iter()
            .map(|t| t.operation.path.as_str())
            .collect::<Vec<_>>(),
        vec!["/a", "/c"]
    );
    assert_eq!(u.rejected[0].reason, RejectReason::NameConflict);
    assert_eq!(u.rejected[0].path, "/b");

    o.naming.conflict_resolution = ConflictResolution::Skip;
    let u = compile_with(&clash(), &[], &o).unwrap();
    assert_eq!(u.tools.len(), 1);
    assert_eq!(u.rejected.len(), 2);
}

#[test]
fn multipart_files_become_base64_and_form_bodies_are_supported() {
    let u = compile(&doc30(json!({
        "/upload": {"post": {"operationId": "upload", "requestBody": {"content": {"multipart/form-data": {"schema": {
            "type": "object", "required": ["file"], "properties": {"file": {"type": "string", "format": "binary"}, "note": {"type": "string"}}}}}},
            "responses": {"200": {"description": "ok"}}}},
        "/form": {"post": {"operationId": "form", "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {
            "type": "object", "properties": {"a": {"type": "string"}}}}}},
            "responses": {"200": {"description": "ok"}}}},
        "/raw": {"put": {"operationId": "raw", "requestBody": {"required": true, "content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}}},
            "responses": {"200": {"description": "ok"}}}}})));
    let up = tool(&u, "t__upload");
    let body = up.plan.body.as_ref().unwrap();
    assert_eq!(body.encoding, BodyEncoding::Multipart);
    assert_eq!(body.binary_fields, vec!["file".to_string()]);
    assert_eq!(
        up.input_schema.to_value()["properties"]["file"]["contentEncoding"],
        "base64"
    );
    assert_eq!(
        tool(&u, "t__form").plan.body.as_ref().unwrap().encoding,
        BodyEncoding::Form
    );
    let raw = tool(&u, "t__raw");
    let body = raw.plan.body.as_ref().unwrap();
    assert!(body.base64 && body.encoding == BodyEncoding::Raw && body.content_type == "image/jpeg");
    assert_eq!(raw.input_schema.to_value()["required"], json!(["body"]));
}

#[test]
fn bad_transform_rejects_only_that_tool_with_the_jq_error() {
    let u = compile(&doc30(json!({
        "/a": {"get": {"operationId": "a", "x-mcp-response-transform": ".items | map(", "responses": {"200": {"description": "ok"}}}},
        "/b": {"get": {"operationId": "b", "x-mcp-response-transform": "{n: .name}", "responses": {"200": {"description": "ok"}}}}})));
    assert_eq!(u.tools.len(), 1);
    let r = &u.rejected[0];
    assert_eq!(r.reason, RejectReason::TransformInvalid);
    assert!(
        r.message.contains("x-mcp-response-transform"),
        "{}",
        r.message
    );
    // A response transform changes the shape: no outputSchema advertised.
    assert!(tool(&u, "t__b").output_schema.is_none());
}

#[test]
fn descriptions_combine_summary_and_description_and_are_truncated() {
    let long = "x".repeat(2000);
    let u = compile(&doc30(
        json!({"/a": {"get": {"operationId": "a", "summary": "Short", "description": long,
                                                "responses": {"200": {"description": "ok"}}}}}),
    ));
    let d = u.tools[0].description.as_deref().unwrap();
    assert_eq!(d.chars().count(), 1024);
    assert!(d.starts_with("Short\n\n") && d.ends_with("..."));
}

#[test]
fn swagger_2_and_openapi_3_1_documents_compile() {
    let v2 = json!({"swagger": "2.0", "info": {"title": "T", "version": "1"}, "host": "api.example.com", "basePath": "/v1",
        "paths": {"/pets/{id}": {"get": {"operationId": "getPet", "produces": ["application/json"],
            "parameters": [{"name": "id", "in": "path", "required": true, "type": "integer", "minimum": 1}],
            "responses": {"200": {"description": "ok", "schema": {"$ref": "#/definitions/Pet"}}}}}},
        "definitions": {"Pet": {"type": "object", "properties": {"id": {"type": "integer"}}}}});
    let u = compile(&v2);
    assert_eq!(
        u.default_base_url.as_deref(),
        Some("https://api.example.com/v1")
    );
    let t = tool(&u, "t__get_pet");
    assert_eq!(t.input_schema.to_value()["properties"]["id"]["minimum"], 1);
    assert_eq!(
        t.output_schema.as_ref().unwrap().to_value()["properties"]["id"]["type"],
        "integer"
    );

    let v31 = json!({"openapi": "3.1.0", "info": {"title": "T", "version": "1"},
        "paths": {"/x": {"get": {"operationId": "x",
            "parameters": [{"name": "q", "in": "query", "schema": {"type": ["string", "null"], "exclusiveMinimum": 3}}],
            "responses": {"200": {"description": "ok"}}}}}});
    let u = compile(&v31);
    assert_eq!(
        u.tools[0].input_schema.to_value()["properties"]["q"]["type"],
        json!(["string", "null"])
    );
}

#[test]
fn bad_documents_fail_with_the_document_name_and_pointer() {
    let cases: Vec<(&[u8], &str)> = vec![
        (b"{not json", "JSON"),
        (b"openapi: [", "YAML"),
        (br#"{"openapi": "4.0.0", "paths": {}}"#, "/openapi"),
        (br#"{"info": {}}"#, "no `openapi` or `swagger`"),
        (br#"{"openapi": "3.0.0", "paths": []}"#, "/paths"),
    ];
    for (bytes, needle) in cases {
        let err = compile_upstream(&UpstreamSource {
            prefix: "t",
            document: "bad.yaml",
            spec: bytes,
            overlays: &[],
            options: &CompileOptions::default(),
        })
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("bad.yaml"), "{msg}");
        assert!(msg.contains(needle), "{msg} should mention {needle}");
    }
}

#[test]
fn declared_path_parameter_missing_from_the_template_is_left_out_with_a_warning() {
    let u = compile(&doc30(json!({"/": {"get": {"operationId": "root",
        "parameters": [{"name": "path", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok"}}}}})));
    let t = tool(&u, "t__root");
    assert!(t.input_schema.to_value()["properties"]
        .get("path")
        .is_none());
    assert!(t.plan.params.is_empty());
    let w = u
        .warnings
        .iter()
        .find(|w| w.code == WarningCode::PathParameterUnused)
        .expect("warning");
    let at = Location::Document {
        pointer: "/paths/~1/get".into(),
    };
    assert_eq!(w.at, Some(at));
}

#[test]
fn a_2xx_range_response_gives_the_output_schema() {
    let u = compile(&doc30(
        json!({"/r": {"get": {"operationId": "r", "responses": {"2XX": {"description": "ok",
        "content": {"application/json": {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}}}}),
    ));
    let t = tool(&u, "t__r");
    assert_eq!(
        t.output_schema.as_ref().unwrap().to_value()["properties"]["n"]["type"],
        "integer"
    );
    assert_eq!(t.responses[0].status, "2XX");
}

#[test]
fn an_extra_parameter_with_an_invalid_schema_is_a_settings_error_naming_it() {
    let mut o = CompileOptions::default();
    o.tools.extra_parameters = vec![catalog::ExtraParameter {
        name: "sudo".into(),
        location: ParamLocation::Query,
        required: false,
        description: None,
        schema: Some(json!({"type": "text"})),
    }];
    let e = compile_with(&three_ops(), &[], &o).unwrap_err();
    let CompileError::Options { field, message } = &e else {
        panic!("expected a settings error, got {e:?}")
    };
    assert_eq!(field, "tools.extraParameters[0].schema");
    assert!(message.contains("text"), "{message}");
}

#[test]
fn a_malformed_keyword_in_a_shared_component_is_dropped_not_fatal() {
    // `dependentRequired` lists must be unique strings; this component is
    // inlined into two tools, each of which must still compile.
    let mut spec = doc30(json!({
        "/a": {"post": {"operationId": "a", "requestBody": {"content": {"application/json":
            {"schema": {"$ref": "#/components/schemas/Odd"}}}},
            "responses": {"200": {"description": "ok"}}}},
        "/b": {"post": {"operationId": "b", "requestBody": {"content": {"application/json":
            {"schema": {"$ref": "#/components/schemas/Odd"}}}},
            "responses": {"200": {"description": "ok"}}}}}));
    spec["components"]["schemas"]["Odd"] = json!({"type": "object",
        "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
        "dependentRequired": {"x": ["y", "y"]}});
    let u = compile(&spec);
    assert_eq!(u.rejected, vec![], "nothing rejected");
    for name in ["t__a", "t__b"] {
        let s = tool(&u, name).input_schema.to_value();
        assert_eq!(s["properties"]["x"]["type"], "string", "{name}");
        assert!(s.get("dependentRequired").is_none(), "{name}: {s}");
    }
}

#[test]
fn a_catalog_round_trips_through_json_and_yaml_with_compact_schema_text() {
    let u = compile(&doc30(json!({"/pets": {"post": {"operationId": "add",
        "requestBody": {"content": {"application/json":
            {"schema": {"$ref": "#/components/schemas/Pet"}}}},
        "responses": {"200": {"description": "ok", "content": {"application/json":
            {"schema": {"$ref": "#/components/schemas/Pet"}}}}}}}})));
    let catalog = catalog::Catalog::new(vec![u]);
    let t = &catalog.upstreams[0].tools[0];
    // The text is the compact form of the value, and is what a catalog
    // file embeds.
    let input = t.input_schema.to_value();
    assert_eq!(t.input_schema.as_str(), input.to_string());
    let pretty = serde_json::to_string_pretty(&catalog).unwrap();
    assert!(pretty.contains(t.input_schema.as_str()));

    let from_json: catalog::Catalog = serde_json::from_str(&pretty).unwrap();
    assert_eq!(from_json, catalog);
    let yaml = yaml_serde::to_string(&serde_json::from_str::<Value>(&pretty).unwrap()).unwrap();
    let from_yaml: catalog::Catalog = yaml_serde::from_str(&yaml).unwrap();
    assert_eq!(from_yaml, catalog);
    // Re-sealing what was read gives the same hash: nothing changed.
    let mut again = from_yaml.upstreams[0].clone();
    again.seal();
    assert_eq!(again.hash, catalog.upstreams[0].hash);
}

#[test]
fn a_transform_that_never_finishes_is_dry_run_once_per_compile() {
    // One overlay puts the same endless filter on every operation: the
    // first tool's dry run times out, the others are rejected without
    // running it again.
    let ov = overlay(json!([{"target": "$.paths.*.*",
        "update": {"x-mcp-request-transform": "def f: f; f"}}]));
    let u = compile_with(&three_ops(), &[ov], &CompileOptions::default()).unwrap();
    assert!(u.tools.is_empty(), "{:?}", u.tools);
    assert_eq!(u.rejected.len(), 3);
    assert!(u
        .rejected
        .iter()
        .all(|r| r.reason == RejectReason::TransformInvalid));
    let first = &u.rejected[0];
    assert!(first.message.contains("timed out"), "{}", first.message);
    for r in &u.rejected[1..] {
        assert!(
            r.message.contains(
                "timed out on a synthetic input of t__list_pets (the same program); not run again"
            ),
            "{}",
            r.message
        );
    }
}

#[test]
fn a_deeply_nested_json_string_in_a_dry_run_sample_rejects_the_tool_not_the_process() {
    // The example becomes the dry run's sample; 1M levels of `[` overflowed
    // the jq worker's stack in jaq's recursive JSON parser and aborted the
    // compile's process.
    let deep = "[".repeat(1_000_000);
    let u = compile(&doc30(json!({
        "/x": {"post": {"operationId": "x",
            "x-mcp-request-transform": "{path: \"/x\", body: (.data | fromjson)}",
            "parameters": [{"name": "data", "in": "query", "required": true,
                            "schema": {"type": "string", "example": deep}}],
            "responses": {"200": {"description": "ok"}}}}})));
    assert!(u.tools.is_empty(), "{:?}", u.tools);
    let r = &u.rejected[0];
    assert_eq!(r.reason, RejectReason::TransformInvalid);
    assert!(
        r.message.contains("nested more than 512 levels deep"),
        "{}",
        r.message
    );
}

#[test]
fn a_filter_raising_timed_out_on_one_sample_is_not_taken_for_a_timeout() {
    // Two samples: one with the optional `p`, one without. An error on the
    // first used to be read as a timeout when its text began "timed out",
    // which rejected the tool; like any other error it is not.
    for raised in ["timed out", "boom"] {
        let transform = format!("if has(\"p\") then error(\"{raised}\") else {{path: \"/x\"}} end");
        let u = compile(&doc30(json!({
            "/x": {"get": {"operationId": "x",
                "x-mcp-request-transform": transform,
                "parameters": [
                    {"name": "q", "in": "query", "required": true, "schema": {"type": "string"}},
                    {"name": "p", "in": "query", "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok"}}}}})));
        assert!(u.rejected.is_empty(), "{raised}: {:?}", u.rejected);
        assert_eq!(u.tools.len(), 1, "{raised}");
    }
}
