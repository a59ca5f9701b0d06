//! Lint findings about the document: what the compile works around and
//! the author should fix, as warnings with a code and a pointer into the
//! document as written.

mod common;

use catalog::{CompileOptions, Location, UpstreamCatalog, Warning, WarningCode};
use serde_json::{json, Value};

fn compile(spec: &Value) -> UpstreamCatalog {
    common::compile_json(spec, &[], &CompileOptions::default()).unwrap()
}

fn ok() -> Value {
    json!({"200": {"description": "ok"}})
}

/// `(code, pointer)` of every warning with `code`.
fn found(u: &UpstreamCatalog, code: WarningCode) -> Vec<(&Warning, String)> {
    u.warnings
        .iter()
        .filter(|w| w.code == code)
        .map(|w| {
            (
                w,
                w.at.as_ref()
                    .map(|l| l.pointer().into_owned())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn server_url_variables_without_a_default_are_findings() {
    let u = compile(&json!({
        "openapi": "3.0.3", "info": {"title": "T", "version": "1"},
        "servers": [{"url": "https://{siteUrl}/{base}/{region}/{siteUrl}", "variables": {
            "base": {"default": "api"},
            "region": {"enum": ["eu", "us"]}}}],
        "paths": {"/a": {"get": {"operationId": "a", "responses": ok()}}}}));
    let f = found(&u, WarningCode::ServerVariableWithoutDefault);
    let pointers: Vec<&str> = f.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(pointers, ["/servers/0/url", "/servers/0/variables/region"]);
    assert!(
        f[0].0.message.contains("{siteUrl}") && f[0].0.message.contains("baseUrl"),
        "{}",
        f[0].0.message
    );
    assert_eq!(
        u.default_base_url.as_deref(),
        Some("https://{siteUrl}/api/{region}/{siteUrl}")
    );
    // Every variable with a default: nothing to say.
    let u = compile(&json!({
        "openapi": "3.0.3", "info": {"title": "T", "version": "1"},
        "servers": [{"url": "https://{host}/v1", "variables": {"host": {"default": "x.example"}}}],
        "paths": {"/a": {"get": {"operationId": "a", "responses": ok()}}}}));
    assert!(found(&u, WarningCode::ServerVariableWithoutDefault).is_empty());
}

#[test]
fn get_head_and_delete_with_a_request_body_are_findings() {
    let body = json!({"content": {"application/json": {"schema": {"type": "object"}}}});
    let mut paths = serde_json::Map::new();
    for m in ["get", "head", "delete", "post", "put", "patch"] {
        paths.insert(
            format!("/{m}"),
            json!({m: {"operationId": m, "requestBody": body, "responses": ok()}}),
        );
    }
    let u = compile(
        &json!({"openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "paths": paths}),
    );
    let pointers: Vec<String> = found(&u, WarningCode::RequestBodyOnMethod)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(
        pointers,
        [
            "/paths/~1get/get/requestBody",
            "/paths/~1head/head/requestBody",
            "/paths/~1delete/delete/requestBody"
        ]
    );
    // Still a tool, still sending the body.
    assert_eq!(u.tools.len(), 6);
}

#[test]
fn unique_items_on_non_arrays_is_dropped_with_a_finding() {
    let u = compile(&json!({
        "openapi": "3.0.3", "info": {"title": "T", "version": "1"},
        "paths": {"/a": {"post": {"operationId": "a",
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}},
            "responses": ok()}}},
        "components": {"schemas": {"A": {"type": "object", "properties": {
            "name": {"type": "string", "uniqueItems": true},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "either": {"type": ["array", "null"], "uniqueItems": true},
            "untyped": {"uniqueItems": true}}}}}}));
    let f = found(&u, WarningCode::SchemaKeywordDropped);
    let pointers: Vec<&str> = f.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        pointers,
        ["/components/schemas/A/properties/name/uniqueItems"]
    );
    let props = &u.tools[0].input_schema.to_value()["properties"];
    assert!(props["name"].get("uniqueItems").is_none(), "{props}");
    for kept in ["tags", "either", "untyped"] {
        assert_eq!(props[kept]["uniqueItems"], json!(true), "{kept}: {props}");
    }
}

/// A Swagger 2.0 document: warnings point at `/definitions/...` and at
/// the parameters as written, not at the 3.0 conversion.
#[test]
fn swagger_2_warnings_point_at_the_document_as_written() {
    let u = compile(&json!({
        "swagger": "2.0", "info": {"title": "T", "version": "1"}, "host": "api.example",
        "paths": {
            "/pets": {"post": {"operationId": "addPet",
                "parameters": [
                    {"name": "X-Trace", "in": "header", "type": "string"},
                    {"name": "body", "in": "body", "schema": {"$ref": "#/definitions/Pet"}},
                    {"name": "q", "in": "query", "type": "string", "pattern": "(["}],
                "responses": {"200": {"description": "ok", "schema": {"$ref": "#/definitions/Pet"}}}}},
            "/form": {"post": {"operationId": "form", "consumes": ["application/x-www-form-urlencoded"],
                "parameters": [
                    {"name": "a", "in": "formData", "type": "string"},
                    {"name": "b", "in": "formData", "type": "string", "pattern": "(["}],
                "responses": {"200": {"description": "ok"}}}},
            "/global": {"post": {"operationId": "global",
                "parameters": [{"$ref": "#/parameters/Filter"}],
                "responses": {"200": {"description": "ok"}}}},
            "/search": {"get": {"operationId": "search",
                "parameters": [{"name": "filter", "in": "body", "schema": {"type": "object"}}],
                "responses": {"200": {"description": "ok"}}}}},
        "parameters": {"Filter": {"name": "filter", "in": "body", "schema": {
            "type": "object", "properties": {"q": {"type": "string", "pattern": "(["}}}}},
        "definitions": {"Pet": {"type": "object", "properties": {
            "name": {"type": "string", "pattern": "(["},
            "id": {"type": "integer", "uniqueItems": true},
            "parent": {"$ref": "#/definitions/Pet"}}}}}));
    let cycle = u
        .warnings
        .iter()
        .find(|w| w.code == WarningCode::CircularRef)
        .expect("the cycle through parent is cut");
    assert!(
        cycle.message.contains("#/definitions/Pet "),
        "{}",
        cycle.message
    );
    let mut pointers: Vec<String> = u
        .warnings
        .iter()
        .filter_map(|w| match &w.at {
            Some(Location::Document { pointer }) => Some(format!("{} {pointer}", w.code)),
            _ => None,
        })
        .collect();
    pointers.sort();
    assert_eq!(
        pointers,
        [
            "CircularRef /definitions/Pet/properties/parent",
            "PatternDropped /definitions/Pet/properties/name/pattern",
            "PatternDropped /parameters/Filter/schema/properties/q/pattern",
            "PatternDropped /paths/~1form/post/parameters/1/pattern",
            "PatternDropped /paths/~1pets/post/parameters/2/pattern",
            "RequestBodyOnMethod /paths/~1search/get/parameters/0",
            "SchemaKeywordDropped /definitions/Pet/properties/id/uniqueItems",
        ],
        "{:#?}",
        u.warnings
    );
}
