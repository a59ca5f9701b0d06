//! The MCP protocol side: the rmcp `ServerHandler` ([`handler`]:
//! `tools/list`, `tools/call`, `list_changed`) over the current snapshot,
//! `tools/list` pages and their cursors ([`pages`]), search mode's
//! meta-tools ([`search`]), sessions any replica accepts ([`session`]) and
//! how each failure reaches the client ([`error`], a table).

pub mod endpoint;
pub(crate) mod error;
pub mod handler;
pub mod pages;
pub(crate) mod search;
pub mod session;
pub mod shared;
pub mod view;
