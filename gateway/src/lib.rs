//! toolgate's gateway: serves a [`catalog::Catalog`] over MCP (Streamable
//! HTTP), validating every call and calling the upstream REST APIs.
//!
//! One module per stage of a call, in order:
//!
//! 1. [`server`]: the rmcp `ServerHandler` (tools/list, tools/call,
//!    list_changed) over the current snapshot; [`pages`]: where a
//!    `tools/list` page ends and its cursor.
//! 2. [`reload`]: the `ArcSwap<Snapshot>` and the catalog file watcher.
//! 3. [`snapshot`]: a catalog prepared for serving (validators, jq, HTTP
//!    clients), built whole or not at all; its schemas are kept deflated
//!    and shared ([`schema_text`]).
//! 4. [`call`]: the pipeline of one call, using [`rate_limit`] →
//!    [`validate`] → [`request`] (or [`transform`]) → [`upstream`] (with
//!    [`auth`]) → [`response`]. Response bodies are read in place
//!    ([`rawjson`]) and sent by reference ([`payload`]), never as trees.
//! 5. [`error`]: how each failure reaches the client (a table).
//! 6. [`ops`]: the router, health endpoints and graceful shutdown;
//!    [`intake`]: what an MCP request passes before rmcp sees it (Host and
//!    Origin, the body limit, the JSON-RPC envelope, the session cap).
//!
//! [`kubernetes`] is `serve --kube`: the catalog and upstream settings
//! published by the operator, watched and hot-swapped. [`session`] makes
//! session ids any replica accepts.
//!
//! [`file_watch`] follows files that change under the gateway (the
//! catalog of `--catalog`, the session key).
//!
//! [`metrics`] are the Prometheus metrics, on a listener of their own.
//!
//! [`inbound`] authenticates MCP clients (JWTs, API keys, introspection)
//! and answers RFC 9728 metadata.
//!
//! [`config`] is the gateway config file: base URLs, credentials
//! references, limits; [`local`] compiles the catalog from its upstreams'
//! documents when there is no `--catalog`. [`demo`] is the example pet store upstream and its
//! catalog (`toolgate demo`).

pub mod access;
pub mod auth;
pub mod call;
pub mod config;
pub mod demo;
pub mod error;
pub mod file_watch;
pub mod inbound;
pub mod intake;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub mod listing_version;
pub mod local;
pub mod metrics;
pub mod net;
pub mod ops;
pub mod outcome;
pub mod output_schema;
pub mod pages;
pub mod payload;
pub mod rate_limit;
pub mod rawjson;
pub mod reload;
pub mod request;
pub mod response;
pub mod schema_text;
pub mod search;
pub mod secret;
pub mod server;
pub mod session;
pub mod snapshot;
pub mod tool;
pub mod trace;
pub mod transform;
pub mod upstream;
pub mod validate;

pub use ops::{app, AppState, EdgeOptions};
pub use reload::CatalogStore;
