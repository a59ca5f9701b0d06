//! Fixtures: hand-built catalogs, an in-process gateway on 127.0.0.1:0 and
//! an rmcp client over Streamable HTTP.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use catalog::{Catalog, UpstreamCatalog};
use gateway::config::GatewayConfig;
use gateway::serving::snapshot::Overrides;
use gateway::{AppState, CatalogStore, EdgeOptions};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Map, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub const WAIT: Duration = Duration::from_secs(10);

/// A tool in catalog JSON; `extra` is merged over the defaults.
pub fn tool(
    name: &str,
    method: &str,
    path: &str,
    input: Value,
    params: Value,
    extra: Value,
) -> Value {
    let mut t = json!({
        "name": name,
        "description": format!("{method} {path}"),
        "inputSchema": input,
        "annotations": {},
        "operation": {"method": method, "path": path, "pointer": format!("/paths/{}", path.replace('/', "~1"))},
        "plan": {"method": method, "path": path, "params": params},
        "responseFormat": "auto",
    });
    if let (Value::Object(t), Value::Object(e)) = (&mut t, extra) {
        for (k, v) in e {
            t.insert(k, v);
        }
    }
    t
}

fn path_param(arg: &str) -> Value {
    json!({"arg": arg, "name": arg, "in": "path", "style": "simple", "explode": false, "required": true})
}

pub fn upstream(prefix: &str, tools: Vec<Value>) -> UpstreamCatalog {
    let mut u: UpstreamCatalog = serde_json::from_value(json!({
        "prefix": prefix,
        "hash": "",
        "source": {"openapiVersion": "3.0.3", "operationCount": tools.len()},
        "tools": tools,
    }))
    .expect("fixture upstream parses");
    u.seal();
    u
}

/// The `pets` upstream: one tool per behaviour under test.
pub fn pets_tools() -> Vec<Value> {
    let empty = json!({"type": "object", "properties": {}, "additionalProperties": false});
    vec![
        tool(
            "pets__get_pet",
            "GET",
            "/pets/{id}",
            json!({"type": "object",
                   "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 64}},
                   "required": ["id"], "additionalProperties": false}),
            json!([path_param("id")]),
            json!({
                "outputSchema": {"type": "object",
                                 "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                                 "required": ["id"]},
                "outputWrap": "body",
                "responses": [{"status": "200", "contentType": "application/json"}],
                "annotations": {"readOnlyHint": true},
            }),
        ),
        tool(
            "pets__list_pets",
            "GET",
            "/pets",
            json!({"type": "object",
                   "properties": {
                       "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                       "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
                       "tags": {"type": "array", "items": {"type": "string"}},
                       "X-Trace": {"type": "string"}},
                   "required": ["limit"], "additionalProperties": false}),
            json!([
                {"arg": "limit", "name": "limit", "in": "query", "style": "form", "explode": true, "required": true},
                {"arg": "name", "name": "name", "in": "query", "style": "form", "explode": true},
                {"arg": "tags", "name": "tags", "in": "query", "style": "form", "explode": false},
                {"arg": "X-Trace", "name": "X-Trace", "in": "header", "style": "simple", "explode": false},
            ]),
            json!({}),
        ),
        tool(
            "pets__create_pet",
            "POST",
            "/pets",
            json!({"type": "object",
                   "properties": {"name": {"type": "string"}, "tag": {"type": "string"}},
                   "required": ["name"], "additionalProperties": false}),
            json!([]),
            json!({"plan": {"method": "POST", "path": "/pets", "body": {
                "contentType": "application/json", "encoding": "json", "required": true,
                "source": {"kind": "merged", "fields": [{"arg": "name", "name": "name"}, {"arg": "tag", "name": "tag"}]}}}}),
        ),
        tool(
            "pets__teapot",
            "GET",
            "/teapot",
            empty.clone(),
            json!([]),
            json!({}),
        ),
        tool(
            "pets__empty",
            "DELETE",
            "/empty",
            empty.clone(),
            json!([]),
            json!({}),
        ),
        tool(
            "pets__image",
            "GET",
            "/image",
            empty.clone(),
            json!([]),
            json!({}),
        ),
        tool(
            "pets__big",
            "GET",
            "/big",
            empty.clone(),
            json!([]),
            json!({}),
        ),
        tool(
            "pets__public",
            "GET",
            "/public",
            empty.clone(),
            json!([]),
            json!({"authRequired": false}),
        ),
    ]
}

pub fn other_tools() -> Vec<Value> {
    vec![tool(
        "other__ping",
        "GET",
        "/ping",
        json!({"type": "object", "properties": {}}),
        json!([]),
        json!({}),
    )]
}

pub fn catalog_of(upstreams: Vec<UpstreamCatalog>) -> Catalog {
    Catalog::new(upstreams)
}

pub fn default_catalog() -> Catalog {
    catalog_of(vec![
        upstream("pets", pets_tools()),
        upstream("other", other_tools()),
    ])
}

/// Config pointing both upstreams at `base` (`other` under `/other-base`).
/// The default catalog plus `pets__slow` (300 ms upstream latency), so
/// calls are in flight when a replica is stopped.
pub fn catalog_with_slow() -> catalog::Catalog {
    let mut cat = default_catalog();
    cat.upstreams[1].tools.push(
        serde_json::from_value(tool(
            "pets__slow",
            "GET",
            "/slow",
            json!({"type": "object"}),
            json!([]),
            json!({}),
        ))
        .unwrap(),
    );
    cat.upstreams[1].seal();
    catalog_of(cat.upstreams)
}

/// Files for a `toolgate serve` process: [`catalog_with_slow`] as
/// `dir/catalog.json` and a config pointing both upstreams at `base`, as
/// `dir/gateway.yaml`. Returns (catalog, config).
pub fn write_slow_catalog_files(
    dir: &std::path::Path,
    base: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let catalog = dir.join("catalog.json");
    std::fs::write(&catalog, serde_json::to_vec(&catalog_with_slow()).unwrap()).unwrap();
    let config = dir.join("gateway.yaml");
    std::fs::write(
        &config,
        format!("upstreams:\n  pets: {{baseUrl: '{base}'}}\n  other: {{baseUrl: '{base}'}}\n"),
    )
    .unwrap();
    (catalog, config)
}

pub fn config_for(base: &str, pets_extra: &str) -> GatewayConfig {
    gateway::config::parse(&format!(
        "upstreams:\n  pets:\n    baseUrl: {base}\n{pets_extra}\n  other:\n    baseUrl: {base}/other-base\n"
    ))
    .expect("fixture config parses")
}

/// An in-process gateway on loopback.
pub struct Gateway {
    pub url: String,
    pub store: Arc<CatalogStore>,
    cancel: CancellationToken,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

pub async fn start_gateway(catalog: &Catalog, config: GatewayConfig) -> Gateway {
    start_gateway_with(catalog, config, EdgeOptions::default()).await
}

pub async fn start_gateway_with(
    catalog: &Catalog,
    config: GatewayConfig,
    edge: EdgeOptions,
) -> Gateway {
    gateway::net::install_crypto_provider();
    let store = CatalogStore::new(config, Overrides::default());
    store.install(catalog).expect("fixture catalog installs");
    serve_store(store, edge).await
}

/// An in-process gateway on loopback serving `store`.
pub async fn serve_store(store: Arc<CatalogStore>, mut edge: EdgeOptions) -> Gateway {
    let cancel = CancellationToken::new();
    edge.cancel = cancel.clone();
    let state = AppState::new(store.clone(), &edge);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let c = cancel.clone();
    tokio::spawn(gateway::edge::shutdown::serve(
        listener,
        state,
        cancel.clone(),
        futures::stream::once(async move { c.cancelled().await }),
        gateway::edge::shutdown::ShutdownTiming {
            drain_delay: Duration::ZERO,
            grace: Duration::from_secs(5),
        },
    ));
    Gateway { url, store, cancel }
}

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone)]
pub struct Recorder {
    pub list_changed: Arc<AtomicUsize>,
    pub notify: Arc<Notify>,
    pub version: ProtocolVersion,
}

impl Recorder {
    pub fn new(version: ProtocolVersion) -> Self {
        Recorder {
            list_changed: Arc::new(AtomicUsize::new(0)),
            notify: Arc::new(Notify::new()),
            version,
        }
    }

    pub fn changes(&self) -> usize {
        self.list_changed.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` list_changed notifications arrived.
    pub async fn wait_changes(&self, n: usize) {
        tokio::time::timeout(WAIT, async {
            loop {
                let notified = self.notify.notified();
                if self.changes() >= n {
                    return;
                }
                notified.await;
            }
        })
        .await
        .expect("timed out waiting for tools/list_changed");
    }
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        let mut c = ClientConfig::default();
        c.protocol_version = self.version.clone();
        c
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

pub async fn connect(url: &str) -> Client {
    connect_as(url, ProtocolVersion::V_2025_11_25, None).await
}

pub async fn connect_as(url: &str, version: ProtocolVersion, auth: Option<&str>) -> Client {
    gateway::net::install_crypto_provider();
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(a) = auth {
        cfg = cfg.auth_header(a.to_string());
    }
    let transport = StreamableHttpClientTransport::from_config(cfg);
    tokio::time::timeout(WAIT, Recorder::new(version).serve(transport))
        .await
        .expect("timed out connecting the MCP client")
        .expect("MCP client connects")
}

/// A client whose HTTP connections are kept alive between requests, as
/// httpx (Python SDK) and undici (TypeScript SDK) do. rmcp's own default
/// opens a connection per request.
pub async fn connect_pooled(url: &str) -> Client {
    gateway::net::install_crypto_provider();
    connect_over(url, reqwest::Client::new()).await
}

/// A 2025-11-25 client sending its requests with `http`.
pub async fn connect_over(url: &str, http: reqwest::Client) -> Client {
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.to_string()),
    );
    tokio::time::timeout(
        WAIT,
        Recorder::new(ProtocolVersion::V_2025_11_25).serve(transport),
    )
    .await
    .expect("timed out connecting the MCP client")
    .expect("MCP client connects")
}

/// A 2026-07-28 client: `server/discover`, no session.
pub async fn connect_stateless(url: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    tokio::time::timeout(
        WAIT,
        Recorder::new(ProtocolVersion::V_2026_07_28).serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        ),
    )
    .await
    .expect("timed out connecting a 2026-07-28 client")
    .expect("2026-07-28 client connects")
}

pub fn args(v: Value) -> Map<String, Value> {
    v.as_object().expect("arguments are an object").clone()
}

/// Calls a tool; panics on protocol errors (not on isError).
pub async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    try_call(client, name, arguments)
        .await
        .expect("tools/call answered")
}

pub async fn try_call(
    client: &Client,
    name: &str,
    arguments: Value,
) -> Result<CallToolResult, rmcp::ServiceError> {
    let mut p = CallToolRequestParams::new(name.to_string());
    p.arguments = Some(args(arguments));
    tokio::time::timeout(WAIT, client.call_tool(p))
        .await
        .expect("timed out waiting for tools/call")
}

/// All text content of a result, joined.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn is_error(r: &CallToolResult) -> bool {
    r.is_error == Some(true)
}

/// A gateway serving `catalog` with `config` that admits tokens of `idp`
/// for audience `toolgate` (resource `https://mcp.example.com/mcp`), with
/// `defaultAccess` `default_access`.
pub async fn start_gateway_trusting(
    idp: &toolgate_tests::idp::Idp,
    catalog: &Catalog,
    config: GatewayConfig,
    default_access: &str,
) -> Gateway {
    let file = gateway::config::parse_file(&format!(
        "inbound:\n  resource: https://mcp.example.com/mcp\n  defaultAccess: {default_access}\n  jwt:\n    - issuer: {}\n      audiences: [toolgate]\n",
        idp.issuer()
    ))
    .expect("fixture inbound config parses");
    let inbound =
        gateway::identity::inbound::Inbound::from_config(&file.inbound, Default::default())
            .await
            .expect("fixture inbound config is valid");
    let edge = EdgeOptions {
        inbound,
        default_access: file.inbound.default_access,
        ..EdgeOptions::default()
    };
    start_gateway_with(catalog, config, edge).await
}

/// What a tool handler would know of a caller verified as `subject` by
/// `method`, presenting `token`, from loopback.
pub fn verified_caller(
    subject: &str,
    method: gateway::identity::inbound::AuthMethod,
    token: Option<gateway::identity::inbound::BearerToken>,
) -> gateway::identity::inbound::CallContext {
    gateway::identity::inbound::CallContext {
        caller: Some(Arc::new(gateway::identity::inbound::Caller {
            principal: catalog::access::Principal {
                method,
                issuer: (method != gateway::identity::inbound::AuthMethod::ApiKey)
                    .then(|| "https://idp.test".to_string()),
                subject: subject.into(),
                ..Default::default()
            },
            token,
        })),
        client_ip: Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
    }
}
