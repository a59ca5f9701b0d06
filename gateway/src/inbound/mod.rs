//! Who is calling: inbound authentication of the MCP endpoints.
//!
//! [`Inbound::admit`] runs on every request to `/mcp` and `/mcp/{prefix}`
//! after the Host and Origin checks and before anything else (the body,
//! the prefix lookup): it verifies the request's credentials and puts the
//! verified [`Caller`] into the request's extensions, where rmcp hands it
//! to the tool handlers ([`caller_of`]). A request it refuses is answered
//! `401` with the RFC 9728 `WWW-Authenticate` challenge.
//!
//! With no method configured every request is admitted without a caller
//! (open mode, today's behaviour; logged as a warning at start-up).

pub mod config;

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request};
use axum::response::Response;
use catalog::access::Principal;
use rmcp::service::RequestContext;
use rmcp::RoleServer;

/// A verified caller.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    /// How it was verified.
    pub method: AuthMethod,
    /// The bearer token it presented (a JWT or an opaque token checked by
    /// introspection), kept only to exchange it for an upstream's token
    /// (RFC 8693); never forwarded as is, never logged.
    pub token: Option<BearerToken>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    Jwt,
    ApiKey,
    Introspection,
}

/// A credential whose `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(Arc<str>);

impl BearerToken {
    pub fn new(token: &str) -> Self {
        BearerToken(Arc::from(token))
    }

    /// The token itself: only for sending it where it is meant to go.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// The inbound authentication of one gateway process.
#[derive(Debug, Default)]
pub struct Inbound {}

impl Inbound {
    /// No authentication: every request is admitted without a caller.
    pub fn open() -> Arc<Self> {
        Arc::new(Inbound::default())
    }

    /// Whether any method is configured.
    pub fn enabled(&self) -> bool {
        false
    }

    /// Verifies `req`'s credentials and records the [`Caller`] in its
    /// extensions; `Err` is the 401 that ends the request.
    #[allow(clippy::result_large_err)]
    pub async fn admit(&self, _req: &mut Request) -> Result<(), Response> {
        Ok(())
    }
}

/// What a tool handler knows of the request it serves.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// `None` in open mode.
    pub caller: Option<Arc<Caller>>,
    /// The TCP peer (the ingress, behind one).
    pub client_ip: Option<IpAddr>,
}

impl CallContext {
    /// The key per-caller limits count under: the subject, else the IP.
    pub fn caller_key(&self) -> Option<String> {
        match (&self.caller, self.client_ip) {
            (Some(c), _) => Some(format!("sub:{}", c.principal.subject)),
            (None, Some(ip)) => Some(format!("ip:{ip}")),
            (None, None) => None,
        }
    }
}

/// The context of the HTTP request behind an MCP request (rmcp puts the
/// request's `http::request::Parts` into the context's extensions).
pub fn caller_of(ctx: &RequestContext<RoleServer>) -> CallContext {
    let Some(parts) = ctx.extensions.get::<http::request::Parts>() else {
        return CallContext::default();
    };
    CallContext {
        caller: parts.extensions.get::<Arc<Caller>>().cloned(),
        client_ip: parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip()),
    }
}
