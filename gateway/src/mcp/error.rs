//! Whose problem is it? How each failure reaches an MCP client.
//!
//! | Failure                                         | Result                                   | Logged      |
//! |-------------------------------------------------|------------------------------------------|-------------|
//! | Unknown tool, or a tool outside `/mcp/{prefix}` | `Err(ErrorData::invalid_params)`         | no          |
//! | Bad pagination cursor: malformed, another endpoint's, or stale after a reload | `Err(ErrorData::invalid_params)` naming which | no |
//! | Search mode: `describe_tool`/`call_tool` of a tool the caller may not see | the direct call's `Err(ErrorData::invalid_params)` | no |
//! | Search mode: a meta-tool's arguments fail its schema or bounds | `Ok(isError)` naming them, like a tool's | no |
//! | Unknown `?mode=` on an MCP endpoint             | HTTP 400 naming the parameter            | no          |
//! | Arguments fail the inputSchema                  | `Ok(isError)` naming every failing field; the upstream is not called | debug |
//! | Arguments pass but cannot form a safe request (`..` path segment, CR/LF in a header, bad base64) | `Ok(isError)` naming the argument | debug |
//! | Request plan inconsistent (catalog defect)      | `Ok(isError)`                            | error       |
//! | Upstream unreachable, timeout, body over the cap, token endpoint failure | `Ok(isError)` in general terms | warn |
//! | No slot within the timeout (`maxConcurrency`), or no share of the response memory budget (`--max-response-memory-bytes`) within it, or more than the whole budget needed | `Ok(isError)` naming the limit | warn |
//! | Upstream status in `errorStatus`                | `Ok(isError)` with problem details / body | no         |
//! | Upstream status in neither list                 | `Ok(isError)` `unexpected HTTP n: excerpt` | no        |
//! | Response fails its schema, `fail` mode          | `Ok(isError)` with the violations        | no          |
//! | Response fails its schema, `warn` mode          | `Ok(success)` with the data              | warn        |
//! | jq transform fails, times out, output too large | `Ok(isError)`                            | no          |
//!
//! Why: a tool that ran and failed gives `Ok(CallToolResult::error)`,
//! which the model reads and can act on (MCP 2025-11-25 asks for input
//! validation errors as tool execution errors). `Err(ErrorData)` is kept
//! for requests that cannot be routed; clients show those opaquely.
//!
//! Messages never carry stack traces, file paths, environment variable
//! names, upstream URLs or credentials: upstream transport errors are
//! described in general terms ([`crate::net::describe_transport_error`])
//! and configuration problems are only logged.

use rmcp::ErrorData;

/// The error for a tool name that is not served at this endpoint.
pub(crate) fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown tool: {name}"), None)
}

/// The error for a `tools/list` cursor this endpoint cannot resume:
/// malformed, from another endpoint, or stale (the listing changed since
/// it was issued; the message tells the client to list again).
pub(crate) fn bad_cursor(why: crate::mcp::pages::CursorError) -> ErrorData {
    ErrorData::invalid_params(why.to_string(), None)
}
