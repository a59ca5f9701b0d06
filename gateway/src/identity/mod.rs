//! Who is calling, and how often: inbound authentication of MCP clients
//! (JWTs, API keys, introspection, RFC 9728 metadata: [`inbound`]) and
//! per-caller rate limits ([`rate_limit`]). What each caller may see is
//! decided on the serving catalog ([`crate::serving::access`]); the
//! credentials calls carry to upstreams are the call pipeline's
//! ([`crate::call::credentials`]).

pub mod inbound;
pub(crate) mod rate_limit;
