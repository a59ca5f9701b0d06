//! What a call came to, besides its result: the types the call pipeline
//! fills in and metrics, traces and the MCP handler read. A leaf, so that
//! each of them can depend on it without depending on the others.

use std::time::Duration;

/// Why an MCP request failed (`error_type`): a protocol error, or a
/// `tools/call` whose result is `isError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// Arguments that do not match the input schema, or cannot be put
    /// into the request.
    InvalidArguments,
    /// Over the upstream's per-caller `rateLimit`.
    RateLimited,
    /// A tool the endpoint does not serve to this caller.
    UnknownTool,
    /// The caller may not call this upstream (it needs a bearer token).
    Forbidden,
    /// The upstream answered with an error or unexpected status.
    UpstreamStatus,
    /// The upstream could not be reached, or the connection broke.
    UpstreamUnreachable,
    /// The upstream did not answer within its timeout.
    UpstreamTimeout,
    /// No token for the upstream could be had (OAuth2, token exchange).
    UpstreamAuth,
    /// The response broke its schema or outputSchema (`fail`).
    ResponseValidation,
    /// A jq request, response or error transform failed.
    Transform,
    /// `maxConcurrency` or the response memory budget held the call back
    /// for its whole timeout.
    Overloaded,
    /// The response was larger than `maxResponseBytes`.
    ResponseTooLarge,
    /// The client cancelled the call.
    Cancelled,
    /// Any other protocol error (bad params, a stale cursor).
    InvalidParams,
    /// A fault of the gateway or its catalog.
    Internal,
}

/// `ErrorType::as_str` and `ErrorType::ALL` from one list, so `ALL`
/// cannot miss a variant `as_str` names (its match is exhaustive).
macro_rules! error_types {
    ($($variant:ident => $text:literal),+ $(,)?) => {
        impl ErrorType {
            /// Every error type, for the metrics reference.
            pub const ALL: &'static [ErrorType] = &[$(ErrorType::$variant),+];

            /// The `error_type` label value.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $(ErrorType::$variant => $text),+
                }
            }
        }
    };
}

error_types!(
    InvalidArguments => "invalid_arguments",
    RateLimited => "rate_limited",
    UnknownTool => "unknown_tool",
    Forbidden => "forbidden",
    UpstreamStatus => "upstream_status",
    UpstreamUnreachable => "upstream_unreachable",
    UpstreamTimeout => "upstream_timeout",
    UpstreamAuth => "upstream_auth",
    ResponseValidation => "response_validation",
    Transform => "transform",
    Overloaded => "overloaded",
    ResponseTooLarge => "response_too_large",
    Cancelled => "cancelled",
    InvalidParams => "invalid_params",
    Internal => "internal",
);

impl ErrorType {
    /// The type of a protocol error the handler returned.
    pub(crate) fn of_protocol_error(e: &rmcp::ErrorData) -> ErrorType {
        if e.code == rmcp::model::ErrorCode::INVALID_PARAMS {
            ErrorType::InvalidParams
        } else {
            ErrorType::Internal
        }
    }
}

/// What a call did besides its result: for the metrics.
#[derive(Debug, Clone, Default)]
pub struct CallReport {
    /// Why the result is `isError`; `None` for a success.
    pub error: Option<ErrorType>,
    /// The arguments did not match the tool's input schema.
    pub invalid_arguments: bool,
    /// The upstream's response did not match its schema or the tool's
    /// outputSchema (returned anyway under `responseValidation: warn`).
    pub invalid_response: bool,
    /// The upstream call, if a request was sent.
    pub upstream: Option<UpstreamCall>,
}

/// One upstream request as the gateway made it.
#[derive(Debug, Clone)]
pub struct UpstreamCall {
    pub method: http::Method,
    /// `None`: no usable response (unreachable, timed out, too large).
    pub status: Option<u16>,
    /// From asking for a `maxConcurrency` slot to the end of the body.
    pub elapsed: Duration,
}
