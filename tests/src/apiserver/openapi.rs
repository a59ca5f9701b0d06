//! OpenAPI v3 documents (`/openapi/v3` and `/openapi/v3/{api/v1 | apis/g/v}`).
//!
//! kubectl asks them whether the server validates fields itself (the
//! `fieldValidation` query parameter on PATCH); when it finds the parameter
//! it leaves validation to the server instead of downloading the OpenAPI v2
//! document for client-side validation. Faithful: the root index with
//! `serverRelativeURL`s carrying a content hash, one path item per
//! resource with `x-kubernetes-group-version-kind` on its operations, and
//! custom resources' `openAPIV3Schema` under `components.schemas` (enough
//! for `kubectl explain` on them).
//! `/openapi/v2` is an empty Swagger document (protobuf or JSON, as asked):
//! kubectl falls back to it for kinds the v3 index lacks (a CRD applied in
//! the same command) and, finding no schema, leaves the error to kind
//! resolution ("ensure CRDs are installed first"), as against a real server.
//! Simplified: built-in kinds have no schemas; operations list only the
//! query parameters kubectl inspects.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::discovery::{fnv, Registry, ResourceType};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn schema_name(rt: &ResourceType, version: &str) -> String {
    let reversed: Vec<&str> = rt.group.split('.').rev().collect();
    let prefix = if rt.group.is_empty() {
        "io.k8s.api.core".to_string()
    } else {
        reversed.join(".")
    };
    format!("{prefix}.{version}.{}", rt.kind)
}

/// The document for one group version, or None if it is not served.
pub(crate) fn group_version_doc(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types = reg.types_in(group, version);
    if types.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for rt in &types {
        let gvk = json!({"group": rt.group, "version": version, "kind": rt.kind});
        let param = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let op = |action: &str, params: Vec<Value>| {
            json!({
                "operationId": format!("{action}{}", rt.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let base = format!("/{}", gv_path(group, version));
        let scope = if rt.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let write = || {
            vec![
                param("dryRun"),
                param("fieldManager"),
                param("fieldValidation"),
            ]
        };
        paths.insert(
            format!("{base}{scope}/{}", rt.plural),
            json!({"get": op("list", vec![param("labelSelector"), param("fieldSelector")]), "post": op("post", write())}),
        );
        let mut patch_params = write();
        patch_params.push(param("force"));
        paths.insert(
            format!("{base}{scope}/{}/{{name}}", rt.plural),
            json!({"get": op("get", vec![]), "put": op("put", write()), "patch": op("patch", patch_params), "delete": op("delete", vec![param("dryRun")])}),
        );
        if let Some(s) = rt.schemas.get(version) {
            let mut schema = s.raw().clone();
            schema["x-kubernetes-group-version-kind"] = json!([gvk]);
            schemas.insert(schema_name(rt, version), schema);
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The `/openapi/v3` index.
pub(crate) fn root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, v) in reg.group_versions() {
        let doc = group_version_doc(reg, &g, &v).unwrap_or(Value::Null);
        let hash = format!("{:016X}", fnv(&doc.to_string()));
        let p = gv_path(&g, &v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v2`: an empty document. In protobuf (gnostic's
/// `openapi_v2.Document`) an empty message is zero bytes.
pub(crate) fn v2(accept: &str) -> Response {
    if accept.contains("protobuf") {
        let ct = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
        return ([(header::CONTENT_TYPE, ct)], Vec::<u8>::new()).into_response();
    }
    let doc = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": {}, "definitions": {}});
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.to_string(),
    )
        .into_response()
}
