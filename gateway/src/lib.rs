//! toolgate's gateway: serves a [`catalog::Catalog`] over MCP (Streamable
//! HTTP), validating every call and calling the upstream REST APIs.
//!
//! Rooms, in the order a request passes them (ADR 0027 has the picture);
//! each depends only on the ones after it:
//!
//! 1. [`edge`]: the HTTP router, health, shutdown, and the intake of MCP
//!    requests.
//! 2. [`mcp`]: the protocol side: the rmcp handler, pages, search mode,
//!    sessions, errors.
//! 3. [`serving`]: the serving catalog: snapshots, reloads, the local and
//!    Kubernetes loaders, and access decisions per caller.
//! 4. [`call`]: the pipeline of one call and the ready tool it runs:
//!    validate → request or transform → upstream (with credentials) →
//!    response.
//! 5. [`identity`]: inbound authentication and rate limits.
//! 6. [`observe`]: metrics and traces.
//!
//! Leaves every room may use: [`config`] (the gateway config file),
//! [`outcome`] (what a call came to), [`net`] (outbound HTTP basics),
//! [`secret`] (reading secrets), [`file_watch`] (files that change under
//! the gateway). [`demo`] is the example pet store upstream and its
//! catalog (`toolgate demo`).

#![warn(unreachable_pub)]
// NB: the crate's docs are for those who work on it (`cargo doc
// --document-private-items`): they link freely to crate-private items.
#![allow(rustdoc::private_intra_doc_links)]

pub mod call;
pub mod config;
pub mod demo;
pub mod edge;
pub(crate) mod file_watch;
pub mod identity;
pub mod mcp;
pub mod net;
pub mod observe;
pub mod outcome;
pub mod secret;
pub mod serving;

pub use edge::router::app;
pub use edge::state::{AppState, EdgeOptions};
pub use serving::reload::CatalogStore;
