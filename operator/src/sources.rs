//! Reading what an McpUpstream refers to. Every failure names the field and
//! the object (or URL and HTTP status) so the condition message says exactly
//! what to fix.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use crds::conditions::reasons;
use crds::{McpOverlay, McpUpstream};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::Api;
use kube::ResourceExt;

use crate::context::lock;
use crate::upstream::Failure;

/// Largest OpenAPI document fetched from a URL.
pub const MAX_SPEC_BYTES: usize = 64 << 20;
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The resolved OpenAPI document.
pub struct SpecBytes {
    /// For errors and `status`: `spec.openapi.inline`, `ConfigMap ns/name key`, the URL.
    pub document: String,
    pub bytes: Vec<u8>,
}

/// One overlay to apply, in order.
pub struct OverlaySource {
    pub name: String,
    pub bytes: Vec<u8>,
    pub strict: bool,
}

/// Conditional GET state per URL: the last ETag and body seen.
#[derive(Default)]
pub struct UrlCache(Mutex<HashMap<String, (String, Vec<u8>)>>);

fn not_found(message: String) -> Failure {
    Failure::new(reasons::SPEC_NOT_FOUND, message)
}

/// Reads a key of a ConfigMap, text or binary.
pub async fn config_map_key(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(cm) = api.get_opt(name).await? else {
        return Ok(None);
    };
    if let Some(v) = cm.data.as_ref().and_then(|d| d.get(key)) {
        return Ok(Some(v.clone().into_bytes()));
    }
    Ok(cm
        .binary_data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone()))
}

pub async fn spec(ctx: &crate::Context, u: &McpUpstream) -> Result<SpecBytes, Failure> {
    let ns = u.namespace().unwrap_or_default();
    let src = &u.spec.openapi;
    if let Some(text) = &src.inline {
        return Ok(SpecBytes {
            document: format!("McpUpstream {ns}/{} spec.openapi.inline", u.name_any()),
            bytes: text.clone().into_bytes(),
        });
    }
    if let Some(r) = &src.config_map_ref {
        let document = format!("ConfigMap {ns}/{} key {}", r.name, r.key);
        return match config_map_key(&ctx.client, &ns, &r.name, &r.key).await {
            Ok(Some(bytes)) => Ok(SpecBytes { document, bytes }),
            Ok(None) => Err(not_found(format!(
                "spec.openapi.configMapRef: ConfigMap {ns}/{} has no key {:?} (or does not exist)",
                r.name, r.key
            ))),
            Err(e) => Err(Failure::transient(format!(
                "spec.openapi.configMapRef: reading ConfigMap {ns}/{}: {e}",
                r.name
            ))),
        };
    }
    if let Some(url) = &src.url {
        let headers = match &src.headers_from {
            Some(s) => secret_data(&ctx.client, &ns, &s.name)
                .await
                .map_err(|e| Failure::transient(format!("spec.openapi.headersFrom: {e}")))?
                .ok_or_else(|| {
                    Failure::new(
                        reasons::SECRET_NOT_FOUND,
                        format!("spec.openapi.headersFrom: Secret {ns}/{} not found", s.name),
                    )
                })?,
            None => BTreeMap::new(),
        };
        let bytes = fetch(ctx, url, &headers).await?;
        return Ok(SpecBytes {
            document: url.clone(),
            bytes,
        });
    }
    Err(Failure::new(
        reasons::SPEC_INVALID,
        "spec.openapi: none of inline, configMapRef, url is set",
    ))
}

/// GET with `If-None-Match`; a 304 reuses the cached body.
async fn fetch(
    ctx: &crate::Context,
    url: &str,
    headers: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<u8>, Failure> {
    let mut req = ctx.http.get(url).timeout(FETCH_TIMEOUT);
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_slice());
    }
    let cached = lock(&ctx.url_cache.0).get(url).cloned();
    if let Some((etag, _)) = &cached {
        req = req.header("If-None-Match", etag.as_str());
    }
    let resp = req
        .send()
        .await
        .map_err(|e| not_found(format!("spec.openapi.url: GET {url} failed: {e}")))?;
    let status = resp.status();
    if status == reqwest::StatusCode::NOT_MODIFIED {
        if let Some((_, body)) = cached {
            return Ok(body);
        }
    }
    if !status.is_success() {
        return Err(not_found(format!(
            "spec.openapi.url: GET {url} returned HTTP {status}"
        )));
    }
    let etag = resp
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = Vec::new();
    let mut resp = resp;
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        not_found(format!(
            "spec.openapi.url: GET {url}: reading the body: {e}"
        ))
    })? {
        if body.len() + chunk.len() > MAX_SPEC_BYTES {
            return Err(Failure::new(
                reasons::SPEC_INVALID,
                format!("spec.openapi.url: {url} is larger than {MAX_SPEC_BYTES} bytes"),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    if let Some(etag) = etag {
        lock(&ctx.url_cache.0).insert(url.to_string(), (etag, body.clone()));
    }
    Ok(body)
}

/// A Secret's data (stringData is folded in by the API server).
pub async fn secret_data(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    Ok(api.get_opt(name).await?.map(|s| {
        s.data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect()
    }))
}

pub async fn service_exists(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<bool, kube::Error> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    Ok(api.get_opt(name).await?.is_some())
}

/// Does this overlay (by its own spec) target this upstream?
pub fn targets(o: &McpOverlay, u: &McpUpstream) -> bool {
    if o.namespace() != u.namespace() {
        return false;
    }
    if let Some(r) = &o.spec.upstream_ref {
        return r.name == u.name_any();
    }
    o.spec
        .upstream_selector
        .as_ref()
        .is_some_and(|s| s.matches(Some(u.labels())))
}

/// The overlays of an upstream in application order: `spec.overlays` as
/// listed, then every other overlay targeting it by `order`, then name.
pub fn overlay_order(u: &McpUpstream, all: &[std::sync::Arc<McpOverlay>]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for n in &u.spec.overlays {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    let mut targeting: Vec<&McpOverlay> = all
        .iter()
        .map(|o| o.as_ref())
        .filter(|o| targets(o, u) && !names.contains(&o.name_any()))
        .collect();
    targeting.sort_by(|a, b| {
        a.spec
            .order
            .cmp(&b.spec.order)
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    names.extend(targeting.into_iter().map(|o| o.name_any()));
    names
}

/// Reads one overlay's document.
pub async fn overlay(
    ctx: &crate::Context,
    namespace: &str,
    o: &McpOverlay,
) -> Result<OverlaySource, Failure> {
    let name = o.name_any();
    let bytes = if let Some(text) = &o.spec.inline {
        text.clone().into_bytes()
    } else if let Some(r) = &o.spec.config_map_ref {
        match config_map_key(&ctx.client, namespace, &r.name, &r.key).await {
            Ok(Some(b)) => b,
            Ok(None) => {
                return Err(Failure::new(
                    reasons::OVERLAY_NOT_FOUND,
                    format!(
                        "McpOverlay {namespace}/{name}: spec.configMapRef: ConfigMap {namespace}/{} has no key {:?} (or does not exist)",
                        r.name, r.key
                    ),
                ))
            }
            Err(e) => {
                return Err(Failure::transient(format!(
                    "McpOverlay {namespace}/{name}: reading ConfigMap {namespace}/{}: {e}",
                    r.name
                )))
            }
        }
    } else {
        return Err(Failure::new(
            reasons::OVERLAY_INVALID,
            format!(
                "McpOverlay {namespace}/{name}: neither spec.inline nor spec.configMapRef is set"
            ),
        ));
    };
    Ok(OverlaySource {
        name,
        bytes,
        strict: o.spec.strict,
    })
}
