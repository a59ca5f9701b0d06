//! The upstream call: one pooled `reqwest` client per upstream, a timeout
//! covering the whole exchange, a hard cap on the response body, a limit on
//! calls in flight per upstream, and a gateway-wide budget for the response
//! bodies held in memory.
//!
//! The body is read chunk by chunk and the read stops as soon as it passes
//! the cap (the connection is dropped), so a hostile or broken upstream can
//! cost at most `maxResponseBytes` of memory per call. Redirects are not
//! followed: a 3xx could point outside the upstream's base URL, so it takes
//! the "unexpected status" path instead.
//!
//! **Memory.** A call holds its response body once, from the read until the
//! MCP client has received it ([`crate::call::payload`]); everything else it
//! builds is bounded by a small constant (validation messages, 64 KiB
//! output chunks), except jq transforms, which need the body as a tree
//! (charged separately, [`BudgetPermit::grow`]). Measured on the real
//! binary: a 10 MB JSON array raises the gateway's peak RSS by 1.1-1.2x
//! its size (`tests/e2e/memory.rs`; 36x before). So the bodies in memory at once
//! are what must fit the pod, and [`ResponseBudget`] bounds them: each
//! call reserves its body's `Content-Length` (or its cap, when the length
//! is unknown, trimmed to the actual size once read) before reading it, and
//! releases it when the response has been sent. Peak memory is then about
//! the idle gateway plus the budget: with the chart's 512 MiB limit the
//! default budget is 205 MiB (40% of the cgroup limit), room for 20
//! maximum-size (10 MiB) responses at once. A call that cannot get its
//! share within its timeout fails with a tool error naming the budget.
//!
//! Size: over 600 lines because this is one exchange with an upstream: its
//! client, limits and body reading share the call's state and are read in the
//! order they happen.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue};
use reqwest::Url;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::call::credentials::{Auth, AuthError};
use crate::call::request::{PreparedRequest, RequestBody};
use crate::config::{
    ResponseValidation, UpstreamConfig, DEFAULT_ERROR_STATUS, DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_SUCCESS_STATUS, DEFAULT_TIMEOUT_SECONDS,
};
use crate::identity::inbound::CallContext;
use crate::identity::rate_limit::{CallerLimiter, RateLimited};
use crate::net::{describe_transport_error, install_crypto_provider};
use crate::secret::SecretError;

/// Everything needed to call one upstream. Shared by snapshots: a reload
/// that leaves an upstream's settings alone keeps its connection pool and
/// its cached OAuth2 token.
#[derive(Debug)]
pub struct UpstreamRuntime {
    pub prefix: String,
    pub base_url: Url,
    client: reqwest::Client,
    auth: Auth,
    headers: HeaderMap,
    pub timeout: Duration,
    pub max_response_bytes: u64,
    /// Calls in flight to this upstream (`maxConcurrency`).
    pub max_concurrency: usize,
    semaphore: Arc<Semaphore>,
    success_status: Vec<u16>,
    error_status: Vec<u16>,
    pub response_validation: ResponseValidation,
    /// Success responses that did not match their schema and were returned
    /// anyway (`warn`), since this runtime was built: shown by `/status`.
    response_violations: AtomicU64,
    /// `rateLimit`: per caller, on this replica.
    rate_limit: Option<CallerLimiter>,
    /// `forwardIdentity`: the headers carrying the verified caller's
    /// subject and (optionally) its issuer.
    forward_identity: Option<(HeaderName, Option<HeaderName>)>,
}

/// A complete upstream response (body within the cap).
#[derive(Debug)]
pub struct UpstreamResponse {
    pub status: u16,
    /// `Content-Type` without parameters, lower-cased.
    pub media_type: Option<String>,
    pub body: Bytes,
    /// The body's share of the [`ResponseBudget`]: keep it as long as the
    /// body (or anything built from it) is held.
    pub permit: BudgetPermit,
    /// When the call's timeout runs out.
    pub deadline: Instant,
}

/// Where a status goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusClass {
    Success,
    Error,
    Unexpected,
}

/// A call that produced no usable response. Shown to callers: it says what
/// happened, never where (no URL, no address).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream did not answer within {0:?}")]
    Timeout(Duration),
    #[error("could not reach the upstream: {0}")]
    Unreachable(String),
    #[error("upstream response exceeds the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error(
        "upstream already has {limit} calls in flight (its maxConcurrency) and none \
         finished within {waited:?}"
    )]
    Busy { limit: usize, waited: Duration },
    #[error(
        "{what} needs {need} bytes of the gateway's response memory budget, which is \
         {budget} bytes in all (--max-response-memory-bytes)"
    )]
    OverBudget {
        what: &'static str,
        need: u64,
        budget: u64,
    },
    #[error(
        "the gateway's response memory budget ({budget} bytes, --max-response-memory-bytes) \
         stayed in use by other calls for {waited:?}; {what} needs {need} bytes of it"
    )]
    BudgetTimeout {
        what: &'static str,
        need: u64,
        budget: u64,
        waited: Duration,
    },
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("the caller's subject cannot be sent in the {0} header (it has control characters)")]
    Identity(HeaderName),
}

/// An upstream setting that is not usable. Never shown to MCP clients.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuntimeError {
    pub field: String,
    pub message: String,
}

impl From<SecretError> for RuntimeError {
    fn from(e: SecretError) -> Self {
        RuntimeError {
            field: e.field,
            message: e.message,
        }
    }
}

impl UpstreamRuntime {
    /// Builds the runtime of upstream `prefix`, resolving its secrets.
    pub fn new(prefix: &str, base_url: Url, cfg: &UpstreamConfig) -> Result<Self, RuntimeError> {
        install_crypto_provider();
        let field = |f: &str| format!("upstreams.{prefix}.{f}");
        let bad = |f: &str, m: String| RuntimeError {
            field: field(f),
            message: m,
        };
        if !matches!(base_url.scheme(), "http" | "https") || base_url.cannot_be_a_base() {
            return Err(bad(
                "baseUrl",
                format!("{base_url} is not an http(s) base URL"),
            ));
        }
        let secs = cfg.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
            return Err(bad(
                "timeoutSeconds",
                format!("{secs} is not a positive duration"),
            ));
        }
        let timeout = Duration::from_secs_f64(secs);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(90))
            .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| bad("", format!("http client: {e}")))?;
        let auth = Auth::from_config(&cfg.auth, &field("auth"), client.clone())?;
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| bad("headers", format!("'{k}' is not a header name")))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| bad("headers", format!("value of '{k}' is not a header value")))?;
            headers.insert(name, value);
        }
        let max_concurrency = cfg.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY);
        if max_concurrency == 0 || max_concurrency > Semaphore::MAX_PERMITS {
            return Err(bad(
                "maxConcurrency",
                format!("must be between 1 and {}", Semaphore::MAX_PERMITS),
            ));
        }
        let rate_limit = match &cfg.rate_limit {
            None => None,
            Some(r) => {
                r.check()
                    .map_err(|e| bad(&format!("rateLimit.{}", e.field), e.message))?;
                Some(
                    CallerLimiter::new(r)
                        .ok_or_else(|| bad("rateLimit", "not a usable token bucket".to_string()))?,
                )
            }
        };
        let forward_identity = match &cfg.forward_identity {
            None => None,
            Some(f) => {
                f.check()
                    .map_err(|e| bad(&format!("forwardIdentity.{}", e.field), e.message))?;
                let header = |field: &str, value: &str| {
                    let name = HeaderName::from_bytes(value.as_bytes()).map_err(|_| {
                        bad(
                            &format!("forwardIdentity.{field}"),
                            format!("{value:?} is not an HTTP header name"),
                        )
                    })?;
                    if auth.header_name() == Some(&name) {
                        return Err(bad(
                            &format!("forwardIdentity.{field}"),
                            format!("{name} carries this upstream's credentials (auth)"),
                        ));
                    }
                    Ok(name)
                };
                let subject = header("header", &f.header)?;
                let issuer = match &f.issuer_header {
                    Some(i) => Some(header("issuerHeader", i)?),
                    None => None,
                };
                Some((subject, issuer))
            }
        };
        Ok(UpstreamRuntime {
            prefix: prefix.to_string(),
            base_url,
            client,
            auth,
            headers,
            timeout,
            max_response_bytes: cfg.max_response_bytes.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES),
            max_concurrency,
            semaphore: Arc::new(Semaphore::new(max_concurrency)),
            success_status: cfg
                .success_status
                .clone()
                .unwrap_or_else(|| DEFAULT_SUCCESS_STATUS.to_vec()),
            error_status: cfg
                .error_status
                .clone()
                .unwrap_or_else(|| DEFAULT_ERROR_STATUS.to_vec()),
            response_validation: cfg.response_validation,
            response_violations: AtomicU64::new(0),
            rate_limit,
            forward_identity,
        })
    }

    /// Takes one call from the caller's `rateLimit` bucket. Checked before
    /// anything else of a call (validation included), so every call made
    /// counts, as the ingress would count it.
    pub(crate) fn admit(&self, ctx: &CallContext) -> Result<(), RateLimited> {
        match &self.rate_limit {
            Some(l) => l.check(ctx),
            None => Ok(()),
        }
    }

    /// Counts a response returned although it does not match its schema.
    pub(crate) fn count_response_violation(&self) {
        self.response_violations.fetch_add(1, Ordering::Relaxed);
    }

    /// Responses returned although they did not match their schema.
    pub(crate) fn response_violations(&self) -> u64 {
        self.response_violations.load(Ordering::Relaxed)
    }

    pub(crate) fn classify(&self, status: u16) -> StatusClass {
        if self.success_status.contains(&status) {
            StatusClass::Success
        } else if self.error_status.contains(&status) {
            StatusClass::Error
        } else {
            StatusClass::Unexpected
        }
    }

    /// Sends the request and reads the whole body, within the cap and the
    /// response budget. Waiting for a slot (`maxConcurrency`) or for budget
    /// counts against the call's timeout.
    pub async fn send(
        &self,
        prepared: PreparedRequest,
        with_auth: bool,
        ctx: &CallContext,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let deadline = Instant::now() + self.timeout;
        let _slot = tokio::time::timeout_at(deadline, self.semaphore.clone().acquire_owned())
            .await
            .map_err(|_| UpstreamError::Busy {
                limit: self.max_concurrency,
                waited: self.timeout,
            })?
            .ok();
        let mut req = self.to_reqwest(prepared);
        *req.timeout_mut() = Some(deadline.saturating_duration_since(Instant::now()));
        // The caller's span (the call's client span) becomes the
        // upstream's parent; after the plan's headers, so no argument
        // can stand in for it.
        telemetry::propagation::inject(&tracing::Span::current(), req.headers_mut());
        if let Some((name, issuer_name)) = &self.forward_identity {
            // After the plan's and the settings' headers, so neither an
            // argument nor a configured value can stand in for them.
            let h = req.headers_mut();
            match &ctx.caller {
                Some(c) => {
                    let p = &c.principal;
                    let v = HeaderValue::from_bytes(p.subject.as_bytes())
                        .map_err(|_| UpstreamError::Identity(name.clone()))?;
                    h.insert(name.clone(), v);
                    if let Some(i) = issuer_name {
                        let issuer = p
                            .issuer
                            .as_deref()
                            .unwrap_or(catalog::access::API_KEY_ISSUER);
                        let v = HeaderValue::from_bytes(issuer.as_bytes())
                            .map_err(|_| UpstreamError::Identity(i.clone()))?;
                        h.insert(i.clone(), v);
                    }
                }
                None => {
                    h.remove(name);
                    if let Some(i) = issuer_name {
                        h.remove(i);
                    }
                }
            }
        }
        if with_auth {
            self.auth.apply(&mut req, ctx, deadline).await?;
        }
        let resp = self
            .client
            .execute(req)
            .await
            .map_err(|e| self.transport_error(&e))?;
        let status = resp.status().as_u16();
        let media_type = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|s| {
                s.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .filter(|s| !s.is_empty());
        let limit = self.max_response_bytes;
        let declared = resp.content_length();
        if declared.is_some_and(|n| n > limit) {
            return Err(UpstreamError::TooLarge { limit });
        }
        let budget = ResponseBudget::get();
        // Reserve the declared length, else as much as the body may grow
        // to (handed back once the real size is known).
        let need = declared.unwrap_or(limit).min(limit);
        let reserve = match declared {
            Some(_) => need,
            None => need.min(budget.total()),
        };
        let mut permit = budget.acquire("this response", reserve, deadline).await?;
        let mut resp = resp;
        let mut buf = BytesMut::with_capacity(declared.unwrap_or(0) as usize);
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.transport_error(&e))? {
            let len = (buf.len() + chunk.len()) as u64;
            if len > limit {
                return Err(UpstreamError::TooLarge { limit });
            }
            if len > permit.bytes() {
                // A body longer than it declared, or than the budget.
                permit
                    .grow("this response", len - permit.bytes(), deadline)
                    .await?;
            }
            buf.extend_from_slice(&chunk);
        }
        permit.shrink_to(buf.len() as u64);
        Ok(UpstreamResponse {
            status,
            media_type,
            body: buf.freeze(),
            permit,
            deadline,
        })
    }

    fn to_reqwest(&self, p: PreparedRequest) -> reqwest::Request {
        let mut req = reqwest::Request::new(p.method, p.url);
        let h = req.headers_mut();
        for (k, v) in p.headers {
            h.append(k, v);
        }
        for (k, v) in &self.headers {
            h.insert(k.clone(), v.clone());
        }
        match p.body {
            RequestBody::Empty => {}
            RequestBody::Bytes { content_type, data } => {
                if let Ok(ct) = HeaderValue::from_str(&content_type) {
                    h.insert(http::header::CONTENT_TYPE, ct);
                }
                *req.body_mut() = Some(data.into());
            }
            RequestBody::Multipart(fields) => {
                let mut form = reqwest::multipart::Form::new();
                for f in fields {
                    let mut part = reqwest::multipart::Part::bytes(f.data);
                    if let Some(name) = f.filename {
                        part = part.file_name(name);
                    }
                    if let Some(ct) = f.content_type {
                        part = match part.mime_str(&ct) {
                            Ok(p) => p,
                            Err(_) => reqwest::multipart::Part::bytes(Vec::new()),
                        };
                    }
                    form = form.part(f.name, part);
                }
                if let Ok(ct) = HeaderValue::from_str(&format!(
                    "multipart/form-data; boundary={}",
                    form.boundary()
                )) {
                    req.headers_mut().insert(http::header::CONTENT_TYPE, ct);
                }
                *req.body_mut() = Some(reqwest::Body::wrap_stream(form.into_stream()));
            }
        }
        req
    }

    fn transport_error(&self, e: &reqwest::Error) -> UpstreamError {
        if e.is_timeout() {
            UpstreamError::Timeout(self.timeout)
        } else {
            UpstreamError::Unreachable(describe_transport_error(e))
        }
    }
}

/// The text of a body for messages: UTF-8 (lossy), at most `max` chars.
pub(crate) fn excerpt(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(max * 4)]);
    crate::call::validate::truncate(text.trim(), max)
}

// ---------------------------------------------------------------- budget

/// Default [`ResponseBudget`] when the gateway runs without a cgroup memory
/// limit: 256 MiB.
pub(crate) const DEFAULT_RESPONSE_MEMORY_BYTES: u64 = 256 * 1024 * 1024;

/// The budget's unit: permits are KiB, so a `u32` count covers terabytes.
const UNIT: u64 = 1024;

/// Response bytes the gateway holds at once, over all calls and upstreams:
/// `toolgate serve --max-response-memory-bytes`
/// (`TOOLGATE_MAX_RESPONSE_MEMORY_BYTES`); by default 40% of the container's
/// memory limit (cgroup v2 `memory.max` or v1 `memory.limit_in_bytes`),
/// else [`DEFAULT_RESPONSE_MEMORY_BYTES`].
///
/// Sizing: a call's peak is about 1.2x its body (measured; see the module
/// docs) and a jq transform's about twice the estimated tree of its input
/// ([`crate::call::rawjson::Document::tree_bytes`]), which is what it is charged.
/// So the budget takes `0.4 x 1.2 ≈ 48%` of the limit; the rest is for
/// the idle gateway with its catalog (57 MiB with the whole public corpus),
/// sessions (at most [`crate::mcp::session::DEFAULT_MAX_SESSIONS`] of ~60 KiB:
/// 23% of 512 MiB), jq runs and allocator slack.
#[derive(Clone, Debug)]
pub struct ResponseBudget {
    sem: Arc<Semaphore>,
    total: u64,
}

static BUDGET: OnceLock<ResponseBudget> = OnceLock::new();

impl ResponseBudget {
    /// Sets the budget, once, before the first call; later calls are
    /// ignored (false).
    pub fn configure(bytes: u64) -> bool {
        BUDGET.set(ResponseBudget::new(bytes)).is_ok()
    }

    /// The process's budget (the default if none was configured).
    pub fn get() -> &'static ResponseBudget {
        BUDGET.get_or_init(|| ResponseBudget::new(default_response_memory_bytes().0))
    }

    /// A budget of its own (tests); calls use [`ResponseBudget::get`].
    pub fn new(bytes: u64) -> Self {
        let units = (bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize) as u64);
        ResponseBudget {
            sem: Arc::new(Semaphore::new(units as usize)),
            total: units * UNIT,
        }
    }

    /// The whole budget, in bytes.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes not reserved by any call right now.
    pub fn available(&self) -> u64 {
        self.sem.available_permits() as u64 * UNIT
    }

    /// Reserves `bytes` for `what`, waiting until `deadline` at most.
    pub(crate) async fn acquire(
        &self,
        what: &'static str,
        bytes: u64,
        deadline: Instant,
    ) -> Result<BudgetPermit, UpstreamError> {
        let started = Instant::now();
        if bytes > self.total {
            return Err(UpstreamError::OverBudget {
                what,
                need: bytes,
                budget: self.total,
            });
        }
        let units = bytes.div_ceil(UNIT) as u32;
        let budget = self.clone();
        let permit = if units == 0 {
            None
        } else {
            let acquired =
                tokio::time::timeout_at(deadline, self.sem.clone().acquire_many_owned(units)).await;
            match acquired {
                Ok(Ok(p)) => Some(p),
                // The semaphore is never closed.
                Ok(Err(_)) => None,
                Err(_) => {
                    return Err(UpstreamError::BudgetTimeout {
                        what,
                        need: bytes,
                        budget: self.total,
                        waited: started.elapsed(),
                    })
                }
            }
        };
        Ok(BudgetPermit { budget, permit })
    }
}

/// A call's share of a [`ResponseBudget`], returned when dropped.
#[derive(Debug)]
pub struct BudgetPermit {
    budget: ResponseBudget,
    permit: Option<OwnedSemaphorePermit>,
}

impl BudgetPermit {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.permit
            .as_ref()
            .map_or(0, |p| p.num_permits() as u64 * UNIT)
    }

    /// Reserves `extra` bytes more, waiting until `deadline` at most.
    pub async fn grow(
        &mut self,
        what: &'static str,
        extra: u64,
        deadline: Instant,
    ) -> Result<(), UpstreamError> {
        let need = self.bytes() + extra;
        if need > self.budget.total {
            return Err(UpstreamError::OverBudget {
                what,
                need,
                budget: self.budget.total,
            });
        }
        let more = self.budget.acquire(what, extra, deadline).await?;
        match (&mut self.permit, more.permit) {
            (Some(p), Some(m)) => p.merge(m),
            (p @ None, m) => *p = m,
            (Some(_), None) => {}
        }
        Ok(())
    }

    /// Hands back everything above `bytes`.
    pub(crate) fn shrink_to(&mut self, bytes: u64) {
        let keep = bytes.div_ceil(UNIT) as usize;
        if let Some(p) = &mut self.permit {
            let excess = p.num_permits().saturating_sub(keep);
            if excess > 0 {
                drop(p.split(excess));
            }
        }
    }
}

/// The default budget and where it came from (for the start-up log).
pub fn default_response_memory_bytes() -> (u64, &'static str) {
    match host::cgroup_memory_limit() {
        Some(limit) => (limit / 5 * 2, "40% of the cgroup memory limit"),
        None => (DEFAULT_RESPONSE_MEMORY_BYTES, "default"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_concurrency_defaults_to_32_and_zero_is_refused() {
        let url = Url::parse("http://127.0.0.1:9/").unwrap();
        let rt = UpstreamRuntime::new("p", url.clone(), &UpstreamConfig::default()).unwrap();
        assert_eq!(rt.max_concurrency, 32);
        let zero = UpstreamConfig {
            max_concurrency: Some(0),
            ..UpstreamConfig::default()
        };
        let e = UpstreamRuntime::new("p", url, &zero).unwrap_err();
        assert_eq!(e.field, "upstreams.p.maxConcurrency");
    }

    #[tokio::test]
    async fn budget_shares_wait_grow_shrink_and_come_back() {
        let budget = ResponseBudget::new(10 * UNIT);
        let soon = || Instant::now() + Duration::from_millis(50);
        let mut a = budget.acquire("a", 6 * UNIT, soon()).await.unwrap();
        assert_eq!(budget.available(), 4 * UNIT);
        // More than is left: waits, then names the budget.
        let e = budget.acquire("b", 5 * UNIT, soon()).await.unwrap_err();
        assert!(
            matches!(e, UpstreamError::BudgetTimeout { need, budget: b, .. } if need == 5 * UNIT && b == 10 * UNIT),
            "{e}"
        );
        assert!(e.to_string().contains("--max-response-memory-bytes"), "{e}");
        // More than all of it: refused at once.
        let e = a.grow("a", 5 * UNIT, soon()).await.unwrap_err();
        assert!(
            matches!(e, UpstreamError::OverBudget { need, .. } if need == 11 * UNIT),
            "{e}"
        );
        a.grow("a", 2 * UNIT, soon()).await.unwrap();
        assert_eq!((a.bytes(), budget.available()), (8 * UNIT, 2 * UNIT));
        a.shrink_to(UNIT + 1);
        assert_eq!((a.bytes(), budget.available()), (2 * UNIT, 8 * UNIT));
        drop(a);
        assert_eq!(budget.available(), 10 * UNIT);
    }
}
