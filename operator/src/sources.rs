//! Reading what an McpUpstream refers to. Every failure names the field and
//! the object (or URL and HTTP status) so the condition message says exactly
//! what to fix.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crds::conditions::Reason;
use crds::{McpOverlay, McpUpstream};
use host::documents::{self, FetchError, Fetched, Validators};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::Api;
use kube::ResourceExt;
use tracing::field::Empty;
use tracing::Span;

use crate::error::Failure;
use crate::metrics::Metrics;
use crate::sync::lock;

/// Default for `--max-spec-bytes`: the largest OpenAPI document fetched
/// from a URL. The largest public descriptions (GitHub's, about 11 MB)
/// fit; a parsed document takes several times its size in memory, and two
/// compile at once within the operator's memory limit.
pub const DEFAULT_MAX_SPEC_BYTES: usize = 16 << 20;
/// Default for `--spec-fetch-timeout`: the whole GET, body included.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Reads upstreams' documents and overlays: the cluster, plus URLs with
/// conditional GETs.
pub struct Sources {
    client: kube::Client,
    /// `--secret-namespaces`.
    secret_access: SecretAccess,
    http: reqwest::Client,
    cache: UrlCache,
    /// `--max-spec-bytes`.
    max_spec_bytes: usize,
    /// `--spec-fetch-timeout`.
    fetch_timeout: Duration,
    metrics: Arc<Metrics>,
}

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

/// The last document fetched for each upstream that reads a URL, for
/// conditional GETs (`If-None-Match`).
///
/// Keyed by upstream (`namespace/name`), not by URL: two upstreams reading
/// one URL with different `headersFrom` credentials must never be served
/// each other's body, and an entry must go when its upstream does (or
/// stops reading that URL), or deleted upstreams' documents pile up.
#[derive(Default)]
struct UrlCache(Mutex<HashMap<String, Cached>>);

struct Cached {
    url: String,
    /// sha256 of the request headers sent (credentials included).
    headers: [u8; 32],
    validators: Validators,
    body: Vec<u8>,
}

impl UrlCache {
    fn get(&self, upstream: &str, url: &str, headers: &[u8; 32]) -> Option<(Validators, Vec<u8>)> {
        lock(&self.0)
            .get(upstream)
            .filter(|c| c.url == url && c.headers == *headers)
            .map(|c| (c.validators.clone(), c.body.clone()))
    }

    fn put(&self, upstream: &str, entry: Option<Cached>, metrics: &Metrics) {
        let mut map = lock(&self.0);
        match entry {
            Some(e) => map.insert(upstream.to_string(), e),
            None => map.remove(upstream),
        };
        metrics.set_document_cache(map.len(), map.values().map(|c| c.body.len()).sum());
    }

    fn forget(&self, upstream: &str, metrics: &Metrics) {
        self.put(upstream, None, metrics);
    }

    fn retain(&self, keep: impl Fn(&str) -> bool, metrics: &Metrics) {
        let mut map = lock(&self.0);
        map.retain(|k, _| keep(k));
        metrics.set_document_cache(map.len(), map.values().map(|c| c.body.len()).sum());
    }
}

/// `url` for a span's `url.full`: without user info (OpenTelemetry's HTTP
/// conventions forbid it) or query, which may carry a token; traces often
/// go where Secrets do not.
fn redacted(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            if !u.username().is_empty() || u.password().is_some() {
                let _ = u.set_username("REDACTED");
                let _ = u.set_password(None);
            }
            if u.query().is_some() {
                u.set_query(Some("REDACTED"));
            }
            u.to_string()
        }
        Err(_) => String::new(),
    }
}

fn not_found(message: String) -> Failure {
    Failure::new(Reason::SpecNotFound, message)
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

impl Sources {
    pub fn new(
        client: kube::Client,
        secret_access: SecretAccess,
        max_spec_bytes: usize,
        fetch_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        Sources {
            client,
            secret_access,
            http: reqwest::Client::builder()
                .user_agent(concat!("toolgate-operator/", env!("CARGO_PKG_VERSION")))
                .redirect(host::documents::redirect_policy())
                .build()
                .unwrap_or_default(),
            cache: UrlCache::default(),
            max_spec_bytes,
            fetch_timeout,
            metrics,
        }
    }

    /// Forgets what was fetched for `upstream` (deleted, or no longer
    /// reading a URL).
    pub fn forget(&self, upstream: &str) {
        self.cache.forget(upstream, &self.metrics);
    }

    /// Forgets every upstream `keep` says no longer exists.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.cache.retain(keep, &self.metrics);
    }

    /// Reads the upstream's OpenAPI document.
    #[tracing::instrument(name = "fetch", skip_all, fields(toolgate.openapi.source = Empty))]
    pub async fn spec(&self, u: &McpUpstream) -> Result<SpecBytes, Failure> {
        let ns = u.namespace().unwrap_or_default();
        let src = &u.spec.openapi;
        let key = u.key();
        if src.url.is_none() {
            self.forget(&key);
        }
        if let Some(text) = &src.inline {
            Span::current().record("toolgate.openapi.source", "inline");
            return Ok(SpecBytes {
                document: format!("McpUpstream {ns}/{} spec.openapi.inline", u.name_any()),
                bytes: text.clone().into_bytes(),
            });
        }
        if let Some(r) = &src.config_map_ref {
            Span::current().record("toolgate.openapi.source", "configMap");
            let document = format!("ConfigMap {ns}/{} key {}", r.name, r.key);
            return match config_map_key(&self.client, &ns, &r.name, &r.key).await {
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
            Span::current().record("toolgate.openapi.source", "url");
            let headers = match &src.headers_from {
                Some(s) => {
                    read_secret(
                        &self.client,
                        &self.secret_access,
                        "spec.openapi.headersFrom",
                        &ns,
                        &s.name,
                    )
                    .await?
                }
                None => BTreeMap::new(),
            };
            let bytes = self.fetch(&key, url, &headers).await?;
            return Ok(SpecBytes {
                document: url.clone(),
                bytes,
            });
        }
        Err(Failure::new(
            Reason::SpecInvalid,
            "spec.openapi: none of inline, configMapRef, url is set",
        ))
    }

    /// GET with `If-None-Match` (or `If-Modified-Since`); a 304 reuses the
    /// cached body. Bounded in time (`--spec-fetch-timeout`, the body
    /// included) and size (`--max-spec-bytes`, checked as it streams).
    #[tracing::instrument(name = "GET", skip_all, fields(otel.kind = "client", http.request.method = "GET", url.full = %redacted(url), http.response.status_code = Empty))]
    async fn fetch(
        &self,
        upstream: &str,
        url: &str,
        headers: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Vec<u8>, Failure> {
        use sha2::{Digest, Sha256};
        let timeout = self.fetch_timeout;
        let max = self.max_spec_bytes;
        let mut digest = Sha256::new();
        let mut req = self.http.get(url).timeout(timeout);
        for (k, v) in headers {
            digest.update((k.len() as u64).to_le_bytes());
            digest.update(k.as_bytes());
            digest.update((v.len() as u64).to_le_bytes());
            digest.update(v);
            req = req.header(k.as_str(), v.as_slice());
        }
        let headers_digest: [u8; 32] = digest.finalize().into();
        let cached = self.cache.get(upstream, url, &headers_digest);
        let fetched = documents::get(req, cached.as_ref().map(|(v, _)| v), max).await;
        let (body, validators) = match fetched {
            Ok(Fetched::Document { body, validators }) => (body, validators),
            Ok(Fetched::NotModified) => match cached {
                Some((validators, body)) => (body, validators),
                // `get` takes a 304 only for a conditional GET.
                None => {
                    return Err(not_found(format!(
                        "spec.openapi.url: GET {url} returned HTTP 304"
                    )))
                }
            },
            Err(FetchError::TooLarge { max }) => {
                return Err(Failure::new(
                    Reason::SpecTooLarge,
                    format!(
                        "spec.openapi.url: {url} is larger than {max} bytes (--max-spec-bytes)"
                    ),
                ))
            }
            Err(FetchError::Timeout) => {
                return Err(not_found(format!(
                    "spec.openapi.url: GET {url} timed out after {} s (--spec-fetch-timeout)",
                    timeout.as_secs_f32()
                )))
            }
            Err(e) => return Err(not_found(format!("spec.openapi.url: GET {url} {e}"))),
        };
        let entry = (validators != Validators::default()).then(|| Cached {
            url: url.to_string(),
            headers: headers_digest,
            validators,
            body: body.clone(),
        });
        self.cache.put(upstream, entry, &self.metrics);
        Ok(body)
    }

    /// Reads one overlay's document.
    #[tracing::instrument(name = "fetch", skip_all, fields(toolgate.overlay = %o.name_any()))]
    pub async fn overlay(&self, namespace: &str, o: &McpOverlay) -> Result<OverlaySource, Failure> {
        let name = o.name_any();
        let bytes = if let Some(text) = &o.spec.inline {
            text.clone().into_bytes()
        } else if let Some(r) = &o.spec.config_map_ref {
            match config_map_key(&self.client, namespace, &r.name, &r.key).await {
            Ok(Some(b)) => b,
            Ok(None) => {
                return Err(Failure::new(
                    Reason::OverlayNotFound,
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
                Reason::OverlayInvalid,
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
}

/// Which namespaces' Secrets the operator may read (`--secret-namespaces`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SecretAccess {
    /// Every namespace (a ClusterRole; the chart's
    /// `operator.secrets.access: cluster`).
    #[default]
    Cluster,
    /// Only these, each of which has granted it (a RoleBinding there; the
    /// chart's `operator.secrets.access: namespaces`). The operator sends
    /// no request for a Secret anywhere else.
    Namespaces(BTreeSet<String>),
}

impl SecretAccess {
    /// From `--secret-namespaces`: `None` is [`SecretAccess::Cluster`];
    /// `Some("a,b")` the namespaces `a` and `b` (`Some("")`: none).
    pub fn from_list(list: Option<&str>) -> Self {
        match list {
            None => SecretAccess::Cluster,
            Some(list) => SecretAccess::Namespaces(
                list.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(String::from)
                    .collect(),
            ),
        }
    }
}

/// The data of Secret `namespace/name` (stringData is folded in by the API
/// server), which an upstream names at `field` (for the messages). A
/// namespace that has not granted access, by `access` or by the API server
/// answering 403, is the upstream's fault (`SecretAccessDenied`), not a
/// transient error: retrying cannot help until someone grants it.
pub async fn read_secret(
    client: &kube::Client,
    access: &SecretAccess,
    field: &str,
    namespace: &str,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, Failure> {
    if let SecretAccess::Namespaces(granted) = access {
        if !granted.contains(namespace) {
            let list = if granted.is_empty() {
                "none".to_string()
            } else {
                granted.iter().cloned().collect::<Vec<_>>().join(", ")
            };
            return Err(Failure::new(
                Reason::SecretAccessDenied,
                format!(
                    "{field}: namespace {namespace} has not granted the operator access to its Secrets, so Secret {namespace}/{name} is not read (granted: {list}; the chart's operator.secrets.namespaces)"
                ),
            ));
        }
    }
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(Some(s)) => Ok(s
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect()),
        Ok(None) => Err(Failure::new(
            Reason::SecretNotFound,
            format!("{field}: Secret {namespace}/{name} not found"),
        )),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(Failure::new(
            Reason::SecretAccessDenied,
            format!(
                "{field}: namespace {namespace} has not granted the operator access to Secret {namespace}/{name} (the API server answered 403 Forbidden: {})",
                status.message
            ),
        )),
        Err(e) => Err(Failure::transient(format!(
            "{field}: reading Secret {namespace}/{name}: {e}"
        ))),
    }
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

#[cfg(test)]
mod tests {
    use super::SecretAccess;

    #[test]
    fn span_urls_carry_no_credentials() {
        assert_eq!(
            super::redacted("https://user:pw@api.example.com/openapi.json?token=s3cret"),
            "https://REDACTED@api.example.com/openapi.json?REDACTED"
        );
        assert_eq!(
            super::redacted("http://specs:8080/openapi.yaml"),
            "http://specs:8080/openapi.yaml"
        );
    }

    #[test]
    fn secret_namespaces_are_a_comma_separated_list_and_empty_grants_none() {
        assert_eq!(SecretAccess::from_list(None), SecretAccess::Cluster);
        assert_eq!(
            SecretAccess::from_list(Some("team-a, team-b,,")),
            SecretAccess::Namespaces(["team-a".to_string(), "team-b".to_string()].into())
        );
        assert_eq!(
            SecretAccess::from_list(Some("")),
            SecretAccess::Namespaces(Default::default())
        );
    }
}
