//! The label values and label sets of the gateway's metrics: each value
//! known at compile time, so no series is named by what a client sends.

use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

use crate::outcome::ErrorType;

/// Writes a label value known at compile time.
macro_rules! label_value {
    ($ty:ty, $($variant:ident => $text:literal),+ $(,)?) => {
        impl $ty {
            /// Every value, for the metrics reference.
            #[allow(unreachable_pub, dead_code)]
            pub const ALL: &'static [$ty] = &[$(Self::$variant),+];

            /// The label value.
            // NB: as public as the type it is generated for.
            #[allow(unreachable_pub)]
            pub fn as_str(&self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }
        impl EncodeLabelValue for $ty {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                encoder.write_str(self.as_str())
            }
        }
    };
}

/// The JSON-RPC method of an MCP request (`mcp_method_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpMethod {
    Initialize,
    Ping,
    ToolsList,
    ToolsCall,
}

label_value!(McpMethod,
    Initialize => "initialize",
    Ping => "ping",
    ToolsList => "tools/list",
    ToolsCall => "tools/call",
);

impl EncodeLabelValue for ErrorType {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// An HTTP request method (`http_request_method`); others are `_OTHER`,
/// as the OpenTelemetry conventions say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum HttpMethod {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Connect,
    Options,
    Trace,
    Patch,
    Other,
}

label_value!(HttpMethod,
    Get => "GET",
    Head => "HEAD",
    Post => "POST",
    Put => "PUT",
    Delete => "DELETE",
    Connect => "CONNECT",
    Options => "OPTIONS",
    Trace => "TRACE",
    Patch => "PATCH",
    Other => "_OTHER",
);

impl From<&http::Method> for HttpMethod {
    fn from(m: &http::Method) -> Self {
        match *m {
            http::Method::GET => HttpMethod::Get,
            http::Method::HEAD => HttpMethod::Head,
            http::Method::POST => HttpMethod::Post,
            http::Method::PUT => HttpMethod::Put,
            http::Method::DELETE => HttpMethod::Delete,
            http::Method::CONNECT => HttpMethod::Connect,
            http::Method::OPTIONS => HttpMethod::Options,
            http::Method::TRACE => HttpMethod::Trace,
            http::Method::PATCH => HttpMethod::Patch,
            _ => HttpMethod::Other,
        }
    }
}

/// What came back from an upstream (`status_class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum StatusClass {
    S2xx,
    S3xx,
    S4xx,
    S5xx,
    /// No (usable) response: unreachable, timed out, too large.
    Error,
}

label_value!(StatusClass,
    S2xx => "2xx",
    S3xx => "3xx",
    S4xx => "4xx",
    S5xx => "5xx",
    Error => "error",
);

impl StatusClass {
    /// The class of a response status; `None`: no response.
    pub(crate) fn of(status: Option<u16>) -> StatusClass {
        match status {
            Some(200..=299) => StatusClass::S2xx,
            Some(300..=399) => StatusClass::S3xx,
            Some(400..=499) => StatusClass::S4xx,
            Some(500..=599) => StatusClass::S5xx,
            _ => StatusClass::Error,
        }
    }
}

/// Which side of a call failed its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Direction {
    Request,
    Response,
}

label_value!(Direction, Request => "request", Response => "response");

/// Outcome of a catalog load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReloadResult {
    Success,
    Failure,
}

label_value!(ReloadResult, Success => "success", Failure => "failure");

/// Why a request was refused before the MCP endpoint saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum DenialReason {
    /// No credentials.
    Missing,
    /// Credentials refused.
    Invalid,
    /// An expired token.
    Expired,
    /// The credentials could not be checked (the IdP is unreachable).
    Unavailable,
    /// Checking them would have asked the IdP past the introspection
    /// limits (`maxConcurrentRequests`, `maxRequestsPerSecond`).
    Throttled,
}

label_value!(DenialReason,
    Missing => "missing",
    Invalid => "invalid",
    Expired => "expired",
    Unavailable => "unavailable",
    Throttled => "throttled",
);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct OperationLabels {
    pub(crate) mcp_method_name: McpMethod,
    /// A catalog tool's name, or empty.
    pub(crate) gen_ai_tool_name: String,
    pub(crate) error_type: Option<ErrorType>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct UpstreamRequestLabels {
    pub(crate) upstream: String,
    pub(crate) http_request_method: HttpMethod,
    pub(crate) status_class: StatusClass,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ValidationLabels {
    pub(crate) direction: Direction,
    pub(crate) upstream: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ReloadLabels {
    pub(crate) result: ReloadResult,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct CatalogInfoLabels {
    pub(crate) hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct DenialLabels {
    pub(crate) reason: DenialReason,
}

/// Why a session was refused or evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SessionReason {
    /// The replica holds `--max-sessions`.
    ReplicaFull,
    /// The caller holds `--max-sessions-per-caller`.
    CallerQuota,
}

label_value!(SessionReason,
    ReplicaFull => "replica_full",
    CallerQuota => "caller_quota",
);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct SessionReasonLabels {
    pub(crate) reason: SessionReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct UpstreamLabels {
    pub(crate) upstream: String,
}
