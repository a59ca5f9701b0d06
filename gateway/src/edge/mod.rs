//! The HTTP edge: the state every handler shares ([`state`]), the router
//! ([`router`]), health and status endpoints
//! ([`health`]), listening and graceful shutdown ([`shutdown`]), and what an MCP request passes before rmcp sees
//! it ([`intake`]: Host and Origin, authentication, the body limit, the
//! JSON-RPC envelope, the session cap). The top of the crate: it depends
//! on every room, none on it.

pub mod health;
pub mod intake;
pub mod router;
pub mod shutdown;
pub mod state;
