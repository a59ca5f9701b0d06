//! Step 3: the JSON-RPC message, checked before rmcp parses it, and the
//! JSON-RPC errors intake answers with.

#![allow(clippy::result_large_err)]

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData,
    InitializeRequestParams, JsonRpcMessage, PaginatedRequestParams, RequestId,
    ServerJsonRpcMessage,
};
use serde::Deserialize;

/// Methods the gateway serves: for these, parameters rmcp cannot read are
/// the caller's mistake (-32602), not an unknown method.
pub(super) const SERVED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "subscriptions/listen",
];

/// Parses one JSON-RPC message, answering the error the JSON-RPC spec
/// names when it is not one rmcp can serve.
pub(super) fn check_message(bytes: &[u8]) -> Result<ClientJsonRpcMessage, Response> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        return Err(jsonrpc_error(
            StatusCode::BAD_REQUEST,
            None,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: JSON-RPC batches are not supported; send one message per POST",
        ));
    }
    let message = match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(m) => m,
        Err(e) => {
            if let Err(syntax) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                return Err(jsonrpc_error(
                    StatusCode::BAD_REQUEST,
                    None,
                    ErrorCode::PARSE_ERROR,
                    format!("Parse error: {syntax}"),
                ));
            }
            return Err(jsonrpc_error(
                StatusCode::BAD_REQUEST,
                lenient_id(bytes),
                ErrorCode::INVALID_REQUEST,
                format!(
                    "Invalid Request: not a JSON-RPC 2.0 request, notification or response: {e}"
                ),
            ));
        }
    };
    if let JsonRpcMessage::Request(r) = &message {
        if let ClientRequest::CustomRequest(c) = &r.request {
            if SERVED_METHODS.contains(&c.method.as_str()) {
                let detail = params_error(&c.method, c.params.as_ref());
                // NB: a request-level error, so HTTP 200 like any other
                // JSON-RPC response (rmcp maps -32602 the same way).
                return Err(jsonrpc_error(
                    StatusCode::OK,
                    Some(r.id.clone()),
                    ErrorCode::INVALID_PARAMS,
                    format!("Invalid params for {}: {detail}", c.method),
                ));
            }
        }
    }
    Ok(message)
}

/// Why `params` do not fit `method`, in serde's words.
pub(super) fn params_error(method: &str, params: Option<&serde_json::Value>) -> String {
    fn why<T: serde::de::DeserializeOwned>(p: Option<&serde_json::Value>) -> Option<String> {
        let p = p.cloned().unwrap_or(serde_json::Value::Null);
        serde_json::from_value::<T>(p).err().map(|e| e.to_string())
    }
    let detail = match method {
        "tools/call" => why::<CallToolRequestParams>(params),
        "initialize" => why::<InitializeRequestParams>(params),
        "tools/list" => why::<Option<PaginatedRequestParams>>(params),
        _ => None,
    };
    detail.unwrap_or_else(|| "the parameters do not have the shape this method takes".into())
}

/// The `id` of a message that is not otherwise valid, when it has a usable one.
pub(super) fn lenient_id(bytes: &[u8]) -> Option<RequestId> {
    #[derive(Deserialize)]
    struct Id {
        id: Option<RequestId>,
    }
    serde_json::from_slice::<Id>(bytes).ok().and_then(|i| i.id)
}

pub(super) fn jsonrpc_error(
    status: StatusCode,
    id: Option<RequestId>,
    code: ErrorCode,
    message: impl Into<String>,
) -> Response {
    let msg = ServerJsonRpcMessage::error(ErrorData::new(code, message.into(), None), id);
    let body = serde_json::to_vec(&msg).unwrap_or_default();
    (
        status,
        [(http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn code(bytes: &[u8]) -> (u16, i64) {
        let r = check_message(bytes).unwrap_err();
        let status = r.status().as_u16();
        let body = futures::executor::block_on(r.into_body().collect())
            .unwrap()
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        (status, v["error"]["code"].as_i64().unwrap())
    }

    #[test]
    fn malformed_messages_get_the_json_rpc_codes() {
        assert_eq!(code(b"{\"jsonrpc\": \"2.0\", "), (400, -32700));
        assert_eq!(
            code(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            (400, -32600)
        );
        assert_eq!(code(b"42"), (400, -32600));
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":1}"#), (400, -32600));
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#),
            (200, -32602)
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#),
            (200, -32602)
        );
        assert!(check_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        assert!(check_message(br#"{"jsonrpc":"2.0","id":1,"method":"nope/nope"}"#).is_ok());
    }
}
