//! The HTTP edge: the router, health and status endpoints and graceful
//! shutdown ([`router`]), and what an MCP request passes before rmcp sees
//! it ([`intake`]: Host and Origin, authentication, the body limit, the
//! JSON-RPC envelope, the session cap). The top of the crate: it depends
//! on every room, none on it.

pub mod intake;
pub mod router;
