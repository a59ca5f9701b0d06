//! What agents receive matches what the document says: required body
//! fields, request media types that fit the body, constant parameters,
//! and descriptions where the document has them (issue 13).

mod common;

use catalog::{
    BodyMode, BodySource, CompileOptions, Location, Overlay, ParamLocation, RejectReason,
    UpstreamCatalog, WarningCode,
};
use serde_json::{json, Value};

fn compile_with(spec: &Value, overlays: &[Overlay], options: &CompileOptions) -> UpstreamCatalog {
    common::compile_json(spec, overlays, options).unwrap()
}

fn compile(spec: &Value) -> UpstreamCatalog {
    compile_with(spec, &[], &CompileOptions::default())
}

fn nested() -> CompileOptions {
    let mut o = CompileOptions::default();
    o.schema.body_mode = BodyMode::Nested;
    o
}

fn doc30(paths: Value) -> Value {
    json!({"openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "paths": paths,
           "components": {"schemas": {
               "Pet": {"type": "object", "required": ["name"], "properties": {
                   "name": {"type": "string"}, "tag": {"type": "string"}}},
               "Note": {"type": "object", "properties": {"text": {"type": "string"}}},
               "Patch": {"type": "array", "items": {"type": "object"}}}}})
}

fn tool<'a>(u: &'a UpstreamCatalog, name: &str) -> &'a catalog::Tool {
    u.tools.iter().find(|t| t.name == name).unwrap_or_else(|| {
        panic!(
            "no tool {name}; have {:?} (rejected {:?})",
            u.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            u.rejected
        )
    })
}

fn required(t: &catalog::Tool) -> Vec<String> {
    serde_json::from_value(t.input_schema.to_value()["required"].clone()).unwrap_or_default()
}

fn post_body(body: Value) -> Value {
    doc30(
        json!({"/pets": {"post": {"operationId": "addPet", "requestBody": body,
        "responses": {"201": {"description": "ok"}}}}}),
    )
}

fn pet_body(extra: Value) -> Value {
    let mut b =
        json!({"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}});
    if let (Some(b), Some(extra)) = (b.as_object_mut(), extra.as_object()) {
        b.extend(extra.clone());
    }
    b
}

#[test]
fn a_body_with_required_properties_is_required_unless_written_optional() {
    // No `required` on the body: the schema's required fields are required
    // arguments, merged or nested.
    let doc = post_body(pet_body(json!({})));
    let t = tool(&compile(&doc), "t__add_pet").clone();
    assert_eq!(required(&t), ["name"]);
    let body = t.plan.body.as_ref().unwrap();
    assert!(body.required);
    assert!(matches!(body.source, BodySource::Merged { .. }));

    let t = tool(&compile_with(&doc, &[], &nested()), "t__add_pet").clone();
    assert_eq!(required(&t), ["body"]);
    assert_eq!(
        t.input_schema.to_value()["properties"]["body"]["required"],
        json!(["name"])
    );
    assert!(t.plan.body.as_ref().unwrap().required);

    // `required: false` written out keeps the body optional, with a warning
    // at that pointer.
    let doc = post_body(pet_body(json!({"required": false})));
    for options in [CompileOptions::default(), nested()] {
        let u = compile_with(&doc, &[], &options);
        let t = tool(&u, "t__add_pet");
        assert!(required(t).is_empty(), "{:?}", required(t));
        assert!(!t.plan.body.as_ref().unwrap().required);
        let w = u
            .warnings
            .iter()
            .find(|w| w.code == WarningCode::OptionalBodyRequiredProperties)
            .expect("a warning");
        assert_eq!(
            w.at,
            Some(Location::Document {
                pointer: "/paths/~1pets/post/requestBody/required".into()
            })
        );
    }

    // A body whose schema requires nothing stays optional, without a word.
    let doc = post_body(json!({"content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Note"}}}}));
    let u = compile(&doc);
    assert!(!tool(&u, "t__add_pet").plan.body.as_ref().unwrap().required);
    assert!(required(tool(&u, "t__add_pet")).is_empty());
    assert!(u.warnings.is_empty(), "{:?}", u.warnings);
}

#[test]
fn required_fields_in_all_of_parts_count_too() {
    let doc = post_body(
        json!({"content": {"application/json": {"schema": {"allOf": [
        {"$ref": "#/components/schemas/Note"},
        {"type": "object", "required": ["owner"], "properties": {"owner": {"type": "string"}}}]}}}}),
    );
    let t = tool(&compile(&doc), "t__add_pet").clone();
    assert_eq!(required(&t), ["owner"]);
    assert!(t.plan.body.as_ref().unwrap().required);
}

#[test]
fn swagger2_body_parameters_follow_the_same_rule() {
    let doc = |body_param: Value| {
        json!({"swagger": "2.0", "info": {"title": "T", "version": "1"},
            "consumes": ["application/json"],
            "paths": {"/pets": {"post": {"operationId": "addPet",
                "parameters": [body_param], "responses": {"201": {"description": "ok"}}}}},
            "definitions": {"Pet": {"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}}}}})
    };
    let implicit = doc(json!({"name": "pet", "in": "body",
        "schema": {"$ref": "#/definitions/Pet"}}));
    let t = tool(&compile(&implicit), "t__add_pet").clone();
    assert_eq!(required(&t), ["name"]);
    assert!(t.plan.body.as_ref().unwrap().required);

    let explicit = doc(json!({"name": "pet", "in": "body", "required": false,
        "schema": {"$ref": "#/definitions/Pet"}}));
    let u = compile(&explicit);
    assert!(required(tool(&u, "t__add_pet")).is_empty());
    assert!(u
        .warnings
        .iter()
        .any(|w| w.code == WarningCode::OptionalBodyRequiredProperties));
}

fn patch_doc(content: Value) -> Value {
    doc30(json!({"/pets/{id}": {"patch": {"operationId": "patchPet",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "requestBody": {"required": true, "content": content},
        "responses": {"200": {"description": "ok"}}}}}))
}

fn content_type(u: &UpstreamCatalog) -> String {
    tool(u, "t__patch_pet")
        .plan
        .body
        .as_ref()
        .unwrap()
        .content_type
        .clone()
}

#[test]
fn the_request_media_type_fits_the_body_schema() {
    let pet = json!({"schema": {"$ref": "#/components/schemas/Pet"}});
    let patch = json!({"schema": {"$ref": "#/components/schemas/Patch"}});
    // An object is not a JSON Patch: the merge patch is sent instead.
    let u = compile(&patch_doc(json!({
        "application/json-patch+json": pet, "application/merge-patch+json": pet})));
    assert_eq!(content_type(&u), "application/merge-patch+json");
    // application/json first among JSON types, whatever the order.
    let u = compile(&patch_doc(json!({
        "application/vnd.pets+json": pet, "application/merge-patch+json": pet,
        "application/json": pet})));
    assert_eq!(content_type(&u), "application/json");
    // An object body goes as a form rather than as a JSON Patch.
    let u = compile(&patch_doc(json!({
        "application/json-patch+json": pet, "application/x-www-form-urlencoded": pet})));
    assert_eq!(content_type(&u), "application/x-www-form-urlencoded");
    // An array body may be a JSON Patch.
    let u = compile(&patch_doc(json!({
        "application/json-patch+json": patch, "text/plain": {"schema": {"type": "string"}}})));
    assert_eq!(content_type(&u), "application/json-patch+json");
    // With nothing else offered, the only media type is used.
    let u = compile(&patch_doc(json!({"application/json-patch+json": pet})));
    assert_eq!(content_type(&u), "application/json-patch+json");
}

fn overlay(actions: Value) -> Overlay {
    let doc =
        json!({"overlay": "1.0.0", "info": {"title": "o", "version": "1"}, "actions": actions});
    Overlay::parse("choose.yaml", doc.to_string().as_bytes(), false).unwrap()
}

#[test]
fn an_overlay_chooses_the_request_media_type() {
    let patch = json!({"schema": {"$ref": "#/components/schemas/Patch"}});
    let pet = json!({"schema": {"$ref": "#/components/schemas/Pet"}});
    let doc = patch_doc(json!({"application/json": pet, "application/json-patch+json": patch}));
    assert_eq!(content_type(&compile(&doc)), "application/json");
    let choose = |media: &str| {
        overlay(json!([{"target": "$.paths['/pets/{id}'].patch",
            "update": {"x-mcp-request-content-type": media}}]))
    };
    let u = compile_with(
        &doc,
        &[choose("application/json-patch+json")],
        &CompileOptions::default(),
    );
    assert_eq!(content_type(&u), "application/json-patch+json");
    let body = tool(&u, "t__patch_pet").input_schema.to_value()["properties"]["body"].clone();
    assert_eq!(body["type"], "array", "{body}");

    // A media type the operation does not have rejects it, naming where.
    let u = compile_with(
        &doc,
        &[choose("application/xml")],
        &CompileOptions::default(),
    );
    let r = u
        .rejected
        .iter()
        .find(|r| r.path == "/pets/{id}")
        .expect("rejected");
    assert_eq!(r.reason, RejectReason::OperationInvalid);
    assert!(
        r.message
            .contains("/paths/~1pets~1{id}/patch/x-mcp-request-content-type")
            && r.message.contains("application/xml"),
        "{}",
        r.message
    );
}

#[test]
fn required_single_valued_headers_and_queries_are_constants() {
    let doc = json!({"openapi": "3.1.0", "info": {"title": "T", "version": "1"},
        "paths": {"/pets": {"get": {"operationId": "listPets", "parameters": [
            {"name": "X-Api-Version", "in": "header", "required": true,
             "schema": {"type": "string", "enum": ["2024-01-01"]}},
            {"name": "format", "in": "query", "required": true, "schema": {"const": "json"}},
            {"name": "X-Optional", "in": "header", "schema": {"type": "string", "enum": ["x"]}},
            {"name": "mode", "in": "query", "required": true,
             "schema": {"type": "string", "enum": ["a", "b"]}}],
        "responses": {"200": {"description": "ok"}}}}}});
    let t = tool(&compile(&doc), "t__list_pets").clone();
    let input = t.input_schema.to_value();
    let props: Vec<&String> = input["properties"].as_object().unwrap().keys().collect();
    assert_eq!(props, ["mode", "X-Optional"]);
    assert_eq!(required(&t), ["mode"]);
    let constants: Vec<(&str, ParamLocation, &Value)> = t
        .plan
        .constants
        .iter()
        .map(|c| (c.name.as_str(), c.location, &c.value))
        .collect();
    assert_eq!(
        constants,
        [
            ("format", ParamLocation::Query, &json!("json")),
            ("X-Api-Version", ParamLocation::Header, &json!("2024-01-01")),
        ]
    );
    let jq = catalog::explain::request_jq(&t.plan);
    assert!(
        jq.contains("# header X-Api-Version is always \"2024-01-01\""),
        "{jq}"
    );
}

fn texts(u: &UpstreamCatalog, name: &str) -> (Option<String>, Option<String>) {
    let t = tool(u, name);
    assert_eq!(t.title, t.annotations.title);
    (t.title.clone(), t.description.clone())
}

#[test]
fn empty_texts_fall_back_to_the_path_item_then_method_and_path() {
    let doc = doc30(json!({
        "/pets/{id}": {
            "summary": "One pet", "description": "A pet by its id.",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "get": {"operationId": "getPet", "responses": {"200": {"description": "ok"}}},
            "delete": {"operationId": "deletePet", "summary": " ", "description": "Removes it.",
                       "responses": {"204": {"description": "gone"}}}},
        "/toys#v2": {"get": {"operationId": "listToys", "responses": {"200": {"description": "ok"}}}}}));
    let u = compile(&doc);
    assert_eq!(
        texts(&u, "t__get_pet"),
        (
            Some("One pet".into()),
            Some("One pet\n\nA pet by its id.".into())
        )
    );
    assert_eq!(
        texts(&u, "t__delete_pet"),
        (
            Some("One pet".into()),
            Some("One pet\n\nRemoves it.".into())
        )
    );
    assert_eq!(
        texts(&u, "t__list_toys"),
        (Some("GET /toys".into()), Some("GET /toys".into()))
    );
}

#[test]
fn html_is_reduced_to_text_before_the_length_limit() {
    let long_html = format!(
        "<p>Lists <b>pets</b> &amp; toys.</p><ul><li>{}</li></ul>",
        "<span class=\"x\">fast</span> ".repeat(20)
    );
    let doc = doc30(json!({"/pets": {"get": {"operationId": "listPets",
        "summary": "<code>GET</code> pets", "description": long_html,
        "responses": {"200": {"description": "ok"}}}}}));
    let u = compile(&doc);
    let (title, description) = texts(&u, "t__list_pets");
    assert_eq!(title.as_deref(), Some("`GET` pets"));
    let d = description.unwrap();
    assert!(
        d.starts_with("`GET` pets\n\nLists pets & toys.\n\n- fast fast"),
        "{d}"
    );
    assert!(!d.contains('<'), "{d}");

    // The limit counts text: 130 characters of it fit in 200 though the
    // HTML is over 600.
    let mut options = CompileOptions::default();
    options.naming.description_max_length = 200;
    let u = compile_with(&doc, &[], &options);
    let d = tool(&u, "t__list_pets").description.clone().unwrap();
    assert!(long_html.len() > 600);
    assert!(!d.ends_with("..."), "{d}");
    assert!(d.ends_with("fast"), "{d}");
}
