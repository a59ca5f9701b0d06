//! End-to-end tests: a real rmcp client over Streamable HTTP, the gateway on
//! 127.0.0.1:0, and a recording upstream. Modules follow the call pipeline.

/// A round-robin reverse proxy in front of replicas.
mod proxy;
/// Catalog fixtures, the in-process gateway and the MCP client.
mod support;
/// The recording test upstream.
mod upstream;

/// Access rules per upstream: who sees and calls which tools.
mod access;
/// Outbound auth as the upstream sees it.
mod auth;
/// tools/call: validation, request building, status routing, formats.
mod call;
/// The spec corpus, compiled and served.
mod corpus;
/// The chart's dashboard and alerts query only metrics the binaries export.
mod dashboard;
/// `toolgate demo`: the example pet store, end to end.
mod demo;
/// `/mcp/{prefix}` scoping and the HTTP edge.
mod edge;
/// Outbound token exchange (RFC 8693) on behalf of the caller.
mod exchange;
/// Issue 13's compile rules as the client and the upstream see them.
mod fidelity;
/// A caller is method + issuer + subject: one name at two issuers and as an
/// API key is three callers.
mod identity;
/// The identity provider as an attack surface: introspection audience and
/// amplification, a slow or oversized JWKS.
mod idp_hardening;
/// Inbound authentication against the test identity provider.
mod inbound;
/// Before rmcp: Host, body limit, JSON-RPC errors, the session cap.
mod intake;
/// Runtime jq within the response memory budget, on the real binary.
mod jq_budget;
/// Kept-alive connections after refusals sent before the body was read.
mod keepalive;
/// `serve --kube`: the published catalog in a (fake) cluster.
mod kube;
/// What leaks past the answers: client strings in logs and spans, session
/// ids, hidden upstreams, `/status`, the metrics listener's host.
mod leaks;
/// Per-caller rate limits, `Mcp-Method`/`Mcp-Name`, forwardIdentity.
mod limits;
/// tools/list: schemas, constraints, pagination, protocol versions.
mod list;
/// `serve --config` compiling its upstreams' documents; `compile --config`.
mod local;
/// Peak memory of large responses, on the real binary.
mod memory;
/// `/metrics` on its own listener, parsed as Prometheus parses it.
mod metrics;
/// Token exchange, forwarded identity and rate limits with real tokens.
mod on_behalf;
/// The outputSchema contract through the official SDK clients and rmcp.
mod output_schema;
/// tools/list pages bounded by bytes; cursors across reloads, endpoints
/// and replicas; the corpus through rmcp and the official SDKs.
mod pages;

mod product;
/// Hot reload: list_changed, reload under load, the real binary.
mod reload;
/// Two `toolgate serve` replicas behind a round-robin proxy.
mod replicas;
/// A rolling restart behind nginx: the shutdown delay.
mod rollout;
/// Search mode: the meta-tools, access and scope, list_changed.
mod search;
/// The session key file: picked up when it appears, rotated with a grace.
mod session_key;
/// Sessions per caller: quotas, eviction of the own oldest, owners.
mod session_quota;
/// McpToolsets: the operator, `serve --kube` and a client on a toolset.
mod toolsets;
/// OpenTelemetry spans and trace context of the real binary; JSON logs.
mod traces;
/// jq request, response and error transforms at runtime.
mod transform;
