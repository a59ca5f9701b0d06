//! HTTP routing: Kubernetes REST paths and query parameters to store
//! operations, and results to JSON responses.
//!
//! Faithful: `/api/v1[/namespaces/{ns}]/{plural}[/{name}[/status]]`
//! (and `deployments/{name}/scale`) and
//! `/apis/{group}/{version}/...`; cluster-wide lists and watches of
//! namespaced kinds; `watch=1|true`, `labelSelector`, `fieldSelector`,
//! `limit`, `continue`, `resourceVersion`, `allowWatchBookmarks`,
//! `sendInitialEvents`, `timeoutSeconds`, `fieldManager`, `force`,
//! `dryRun=All`, `includeObject`; patch content types (strategic merge patch
//! is refused for custom resources with 415, as the real server does);
//! create answers 201, delete 202 while finalizers hold the object; Table
//! responses when the Accept header asks `as=Table`, metadata-only ones for
//! `as=PartialObjectMetadata`. Responses are always JSON (clients that
//! prefer protobuf accept it); protobuf request bodies are decoded for the
//! kinds kubectl's generators send (see `protobuf`).
//! Simplified: no authentication or authorization (an impersonated user,
//! bearer token or basic user name is only recorded, as `RequestKey::user`;
//! tests can forbid chosen requests); OpenAPI documents are
//! minimal (see `openapi`); the legacy
//! `/api/v1/watch/...` paths are not served.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State as AxState;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

use super::discovery::version_doc;
use super::kinds::present;
use super::kinds::scale_of;
use super::openapi;
use super::patch::{json_patch, merge_patch};
use super::protobuf;
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::metadata_only;
use super::table::table;
use super::watch::{self, WatchRequest};
use super::write::{PatchBody, WriteCtx};
use super::{RequestKey, State};

pub(crate) fn router(state: Arc<State>) -> Router {
    // The real server refuses bodies over 3 MiB.
    Router::new()
        .fallback(handle)
        .layer(axum::extract::DefaultBodyLimit::max(3 << 20))
        .with_state(state)
}

/// Parses a JSON body through `Value`'s `FromStr`, which is compiled (and
/// optimised) inside serde_json; the generic `from_slice` would be
/// instantiated, unoptimised, in this crate and is ~10x slower on the
/// megabyte-sized catalog chunks the operator writes.
fn parse_json(body: &[u8]) -> Result<Value, String> {
    std::str::from_utf8(body)
        .map_err(|e| e.to_string())?
        .parse::<Value>()
        .map_err(|e| e.to_string())
}

fn json_response(code: u16, v: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}

async fn handle(
    AxState(state): AxState<Arc<State>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut delay = None;
    let response = match dispatch(&state, &method, &uri, &headers, &body, &mut delay) {
        Ok(r) => r,
        Err(e) => error_response(&e),
    };
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    response
}

/// A parsed resource path.
struct Target<'a> {
    group: &'a str,
    version: &'a str,
    namespace: Option<&'a str>,
    plural: &'a str,
    name: Option<&'a str>,
    sub: Option<&'a str>,
}

fn parse_resource<'a>(group: &'a str, version: &'a str, rest: &[&'a str]) -> Option<Target<'a>> {
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if *plural != "status" && *plural != "finalize" => {
            (Some(*ns), {
                let mut v = vec![*plural];
                v.extend_from_slice(tail);
                v
            })
        }
        _ => (None, rest.to_vec()),
    };
    let (plural, name, sub) = match rest.as_slice() {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(*n), None),
        [p, n, s] => (*p, Some(*n), Some(*s)),
        _ => return None,
    };
    Some(Target {
        group,
        version,
        namespace,
        plural,
        name,
        sub,
    })
}

/// The identity a request claims; nothing is verified.
fn user_of(authorization: &str) -> String {
    if let Some(token) = authorization.strip_prefix("Bearer ") {
        return token.trim().to_string();
    }
    if let Some(basic) = authorization.strip_prefix("Basic ") {
        use base64::Engine;
        if let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(basic.trim()) {
            let text = String::from_utf8_lossy(&raw);
            return text.split(':').next().unwrap_or_default().to_string();
        }
    }
    String::new()
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn dispatch(
    state: &Arc<State>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
    delay: &mut Option<Duration>,
) -> Result<Response, ApiError> {
    let path = uri.path();
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let discovery = |v: Option<Value>| {
        v.map(|d| json_response(200, &d))
            .ok_or_else(|| ApiError::no_route(path))
    };
    if *method == Method::GET {
        match segs.as_slice() {
            ["version"] => return Ok(json_response(200, &version_doc())),
            ["healthz"] | ["readyz"] | ["livez"] => {
                return Ok((StatusCode::OK, "ok").into_response())
            }
            ["api"] => return discovery(Some(state.lock().registry.api_versions(state.addr()))),
            ["api", v] => return discovery(state.lock().registry.resource_list("", v)),
            ["apis"] => return discovery(Some(state.lock().registry.api_group_list())),
            ["apis", g] => return discovery(state.lock().registry.api_group(g)),
            ["apis", g, v] => return discovery(state.lock().registry.resource_list(g, v)),
            ["openapi", "v2"] => return Ok(openapi::v2(header_str(headers, header::ACCEPT))),
            ["openapi", "v3"] => return discovery(Some(openapi::root(&state.lock().registry))),
            ["openapi", "v3", "api", v] => {
                return discovery(openapi::group_version_doc(&state.lock().registry, "", v))
            }
            ["openapi", "v3", "apis", g, v] => {
                return discovery(openapi::group_version_doc(&state.lock().registry, g, v))
            }
            _ => {}
        }
    }
    let target = match segs.as_slice() {
        ["api", v, rest @ ..] => parse_resource("", v, rest),
        ["apis", g, v, rest @ ..] => parse_resource(g, v, rest),
        _ => None,
    }
    .ok_or_else(|| ApiError::no_route(path))?;
    let query: HashMap<String, String> =
        serde_urlencoded::from_str::<Vec<(String, String)>>(uri.query().unwrap_or_default())
            .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?
            .into_iter()
            .collect();
    let q = |k: &str| query.get(k).map(String::as_str).unwrap_or_default();
    let flag = |k: &str| matches!(q(k), "1" | "true" | "True");
    let watching = *method == Method::GET && target.name.is_none() && flag("watch");
    let verb = match (method.as_str(), target.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watching => "watch",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method} {path})"
            )))
        }
    };
    let user_agent = header_str(headers, header::USER_AGENT);
    let manager = match q("fieldManager") {
        "" => user_agent.split('/').next().unwrap_or_default().to_string(),
        m => m.to_string(),
    };
    let name = match target.name {
        Some(n) => n.to_string(),
        None if matches!(verb, "list" | "watch") => FieldSelector::parse(q("fieldSelector"))
            .ok()
            .and_then(|f| f.exact_name().map(String::from))
            .unwrap_or_default(),
        None => String::new(),
    };
    let key = RequestKey {
        verb: verb.into(),
        group: target.group.into(),
        resource: target.plural.into(),
        subresource: target.sub.unwrap_or_default().into(),
        namespace: target.namespace.unwrap_or_default().into(),
        name,
        field_manager: if matches!(verb, "create" | "update" | "patch") {
            manager.clone()
        } else {
            String::new()
        },
        user_agent: user_agent.into(),
        user: match headers
            .get("impersonate-user")
            .and_then(|v| v.to_str().ok())
        {
            Some(u) => u.to_string(),
            None => user_of(header_str(headers, header::AUTHORIZATION)),
        },
    };
    let denied = state.forbids(&key).then(|| {
        ApiError::forbidden(
            &key.user,
            &key.verb,
            &key.group,
            &key.resource,
            &key.name,
            &key.namespace,
        )
    });
    *delay = state.count(key);
    if let Some(e) = denied {
        return Err(e);
    }

    let rt = state
        .lock()
        .registry
        .find(target.group, target.version, target.plural)
        .ok_or_else(|| ApiError::no_route(path))?;
    let collection_only = matches!(verb, "list" | "watch");
    if (!rt.namespaced && target.namespace.is_some())
        || (rt.namespaced && target.namespace.is_none() && !collection_only)
    {
        return Err(ApiError::no_route(path));
    }
    let scale_sub = target.sub == Some("scale") && rt.group == "apps" && rt.plural == "deployments";
    let status_sub = match target.sub {
        None => false,
        Some("status") if rt.status => true,
        Some("scale") if scale_sub => false,
        Some(_) => return Err(ApiError::no_route(path)),
    };
    let ns = target.namespace.unwrap_or_default();
    let version = target.version;
    let labels = LabelSelector::parse(q("labelSelector"))?;
    let fields = FieldSelector::parse(q("fieldSelector"))?;
    let accept = header_str(headers, header::ACCEPT);
    let as_table = accept.contains("as=Table");
    let as_metadata = accept.contains("as=PartialObjectMetadata");
    let include = match q("includeObject") {
        "" => "Metadata",
        other => other,
    };
    let ctx = WriteCtx {
        manager: &manager,
        version,
        dry_run: q("dryRun") == "All",
    };
    let content_type = header_str(headers, header::CONTENT_TYPE);
    let read_body = || -> Result<Value, ApiError> {
        if content_type.starts_with("application/vnd.kubernetes.protobuf") {
            return protobuf::decode(body)
                .map_err(|e| ApiError::new(415, "UnsupportedMediaType", e));
        }
        parse_json(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
    };

    match verb {
        "get" => {
            let name = target.name.unwrap_or_default();
            if scale_sub {
                let deployment = state.lock().get(&rt, ns, name)?;
                return Ok(json_response(200, &scale_of(&deployment)));
            }
            let obj = present(&state.lock().get(&rt, ns, name)?, &rt, version);
            if as_table {
                let rv = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                return Ok(json_response(
                    200,
                    &table(&rt, version, &[obj], &rv, include),
                ));
            }
            if as_metadata {
                return Ok(json_response(200, &metadata_only(&obj)));
            }
            Ok(json_response(200, &obj))
        }
        "list" => {
            let limit = q("limit").parse::<usize>().ok();
            let page = state.lock().list(
                &rt,
                target.namespace,
                &labels,
                &fields,
                limit,
                query.get("continue").map(String::as_str),
            )?;
            let items: Vec<Value> = page
                .items
                .iter()
                .map(|o| present(o, &rt, version))
                .collect();
            let rv = page.rv.to_string();
            if as_table {
                let mut t = table(&rt, version, &items, &rv, include);
                if let Some(c) = &page.next {
                    t["metadata"]["continue"] = json!(c);
                }
                return Ok(json_response(200, &t));
            }
            let mut meta = json!({"resourceVersion": rv});
            if let Some(c) = page.next {
                meta["continue"] = json!(c);
                meta["remainingItemCount"] = json!(page.remaining);
            }
            if as_metadata {
                let items: Vec<Value> = items.iter().map(metadata_only).collect();
                return Ok(json_response(
                    200,
                    &json!({
                        "kind": "PartialObjectMetadataList",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": meta,
                        "items": items,
                    }),
                ));
            }
            Ok(json_response(
                200,
                &json!({
                    "kind": format!("{}List", rt.kind),
                    "apiVersion": rt.api_version(version),
                    "metadata": meta,
                    "items": items,
                }),
            ))
        }
        "watch" => {
            let resource_version = match q("resourceVersion") {
                "" | "0" => None,
                rv => Some(rv.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?),
            };
            let req = WatchRequest {
                rt: rt.clone(),
                version: version.to_string(),
                namespace: target.namespace.map(String::from),
                labels,
                fields,
                resource_version,
                bookmarks: flag("allowWatchBookmarks"),
                send_initial: flag("sendInitialEvents"),
                timeout: q("timeoutSeconds")
                    .parse::<u64>()
                    .ok()
                    .map(Duration::from_secs),
                metadata_only: as_metadata,
                table: as_table.then(|| include.to_string()),
            };
            let body = watch::start(state.clone(), req);
            Ok(Response::builder()
                .status(200)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CACHE_CONTROL, "no-cache, private")
                .body(body)
                .unwrap_or_else(|_| Body::empty().into_response()))
        }
        "create" => {
            if target.sub.is_some() {
                return Err(ApiError::method_not_allowed(
                    "create is not allowed on subresources",
                ));
            }
            let obj = state.lock().create(&rt, ns, read_body()?, &ctx)?;
            Ok(json_response(201, &present(&obj, &rt, version)))
        }
        "update" => {
            let name = target.name.unwrap_or_default();
            if scale_sub {
                let wanted = read_body()?;
                let scale = state
                    .lock()
                    .write_scale(&rt, ns, name, |_| Ok(wanted), &ctx)?;
                return Ok(json_response(200, &scale));
            }
            let obj = state
                .lock()
                .update(&rt, ns, name, read_body()?, status_sub, &ctx)?;
            Ok(json_response(200, &present(&obj, &rt, version)))
        }
        "patch" => {
            let name = target.name.unwrap_or_default();
            let media = content_type.split(';').next().unwrap_or_default().trim();
            let patch_value = if media == "application/apply-patch+yaml" {
                match parse_json(body) {
                    Ok(v) => v,
                    Err(_) => yaml_serde::from_slice::<Value>(body)
                        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
                }
            } else {
                read_body()?
            };
            let force = flag("force");
            let body = match media {
                "application/merge-patch+json" => PatchBody::Merge(&patch_value),
                "application/json-patch+json" => PatchBody::Json(&patch_value),
                "application/strategic-merge-patch+json" if !rt.custom => {
                    PatchBody::Strategic(&patch_value)
                }
                "application/apply-patch+yaml" => {
                    if q("fieldManager").is_empty() {
                        return Err(ApiError::bad_request("PATCH, application/apply-patch+yaml requests must include the fieldManager query parameter"));
                    }
                    PatchBody::Apply {
                        object: &patch_value,
                        force,
                    }
                }
                other => return Err(ApiError::unsupported_media_type(other)),
            };
            if scale_sub {
                let scale = state.lock().write_scale(
                    &rt,
                    ns,
                    name,
                    |mut scale| {
                        match body {
                            PatchBody::Merge(p) | PatchBody::Strategic(p) => {
                                merge_patch(&mut scale, p, matches!(body, PatchBody::Strategic(_)))
                            }
                            PatchBody::Json(p) => json_patch(&mut scale, p).map_err(|e| {
                                ApiError::new(422, "Invalid", format!("the server rejected our request due to an error in our request: {e}"))
                            })?,
                            PatchBody::Apply { .. } => {
                                return Err(ApiError::unsupported_media_type(media))
                            }
                        }
                        Ok(scale)
                    },
                    &ctx,
                )?;
                return Ok(json_response(200, &scale));
            }
            let existed = state.lock().get_raw(&rt, ns, name).is_some();
            let obj = state.lock().patch(&rt, ns, name, body, status_sub, &ctx)?;
            Ok(json_response(
                if existed { 200 } else { 201 },
                &present(&obj, &rt, version),
            ))
        }
        "delete" => {
            let name = target.name.unwrap_or_default();
            let opts: Value = if body.is_empty() {
                json!({})
            } else {
                read_body()?
            };
            let (obj, gone) = state
                .lock()
                .delete(&rt, ns, name, &opts["preconditions"], &ctx)?;
            Ok(json_response(
                if gone { 200 } else { 202 },
                &present(&obj, &rt, version),
            ))
        }
        "deletecollection" => {
            let mut store = state.lock();
            let page = store.list(&rt, target.namespace, &labels, &fields, None, None)?;
            let mut deleted = Vec::new();
            for o in page.items {
                let (ons, oname) = super::store::obj_key(&o);
                let (obj, _) = store.delete(&rt, &ons, &oname, &Value::Null, &ctx)?;
                deleted.push(present(&obj, &rt, version));
            }
            Ok(json_response(
                200,
                &json!({
                    "kind": format!("{}List", rt.kind),
                    "apiVersion": rt.api_version(version),
                    "metadata": {"resourceVersion": store.rv().to_string()},
                    "items": deleted,
                }),
            ))
        }
        _ => Err(ApiError::no_route(path)),
    }
}
