//! Kept-alive connections survive a refusal sent before the request body
//! was read (issue 26, defect 7): the MCP OAuth flow (a 401, then the
//! retry with a token) and an ingress's connection pool depend on it.

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

const ROUNDS: usize = 1000;
const ACCEPT: &str = "application/json, text/event-stream";

async fn gateway() -> Gateway {
    start_gateway(&default_catalog(), config_for("http://127.0.0.1:9", "")).await
}

/// 1,000 refused-then-accepted requests over one pooled connection; the
/// refusals are 404 (unknown prefix), 403 (foreign Origin) and 400 (bad
/// `mode`), all answered before the body is read.
#[tokio::test]
async fn a_pooled_client_loses_no_request_after_refusals() {
    let gw = gateway().await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let mut failures = Vec::new();
    for i in 0..ROUNDS {
        let refused = match i % 3 {
            0 => http.post(format!("{}/mcp/nope", gw.url)),
            1 => http
                .post(format!("{}/mcp", gw.url))
                .header("origin", "http://evil.example"),
            _ => http.post(format!("{}/mcp?mode=bogus", gw.url)),
        };
        let refused = refused
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .body(body.clone())
            .send()
            .await;
        match refused {
            Ok(r) if [400, 403, 404].contains(&r.status().as_u16()) => {
                let _ = r.bytes().await;
            }
            other => failures.push(format!("refusal {i}: {other:?}")),
        }
        let accepted = http
            .get(format!("{}/healthz", gw.url))
            .send()
            .await
            .map(|r| r.status().as_u16());
        if !matches!(accepted, Ok(200)) {
            failures.push(format!("request {i} after the refusal: {accepted:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ROUNDS} rounds failed, e.g. {:?}",
        failures.len(),
        failures.first()
    );
}

/// Reads one response (headers and a `Content-Length` body); `None` when
/// the connection closed first.
async fn response(stream: &mut TcpStream) -> Option<(u16, bool)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(WAIT, stream.read(&mut byte)).await {
            Ok(Ok(1)) => buf.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let status = head.get(9..12)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    tokio::time::timeout(WAIT, stream.read_exact(&mut body))
        .await
        .ok()?
        .ok()?;
    Some((status, head.contains("connection: close")))
}

/// A client that sends the headers, then the body 2 ms later (as an
/// ingress forwarding a request does): the refusal comes before the body
/// is there, and the next request on the connection must still be served.
#[tokio::test]
async fn a_body_sent_after_the_refusal_does_not_cost_the_connection() {
    let gw = gateway().await;
    let addr = gw.url.trim_start_matches("http://").to_string();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let mut failures = 0;
    for i in 0..ROUNDS {
        let path = if i % 2 == 0 { "/mcp/nope" } else { "/mcp" };
        let origin = if i % 2 == 0 {
            ""
        } else {
            "origin: http://evil.example\r\n"
        };
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             accept: {ACCEPT}\r\n{origin}content-length: {}\r\n\r\n",
            body.len()
        );
        let sent = async {
            stream.write_all(head.as_bytes()).await?;
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            stream.write_all(body.as_bytes()).await
        }
        .await;
        let refused = match sent {
            Ok(()) => response(&mut stream).await,
            Err(_) => None,
        };
        let accepted = match refused {
            Some((403 | 404, false)) => {
                let get = stream
                    .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
                    .await;
                match get {
                    Ok(()) => response(&mut stream).await,
                    Err(_) => None,
                }
            }
            _ => None,
        };
        if !matches!(accepted, Some((200, _))) {
            failures += 1;
            stream = TcpStream::connect(&addr).await.unwrap();
        }
    }
    assert_eq!(failures, 0, "{failures} of {ROUNDS} rounds failed");
}

/// A body too large to drain is not read: the refusal says it closes the
/// connection, so the client does not send its next request into it.
#[tokio::test]
async fn a_large_unread_body_gets_connection_close() {
    let gw = gateway().await;
    let addr = gw.url.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /mcp/nope HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        10 * 1024 * 1024
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (status, close) = response(&mut stream).await.expect("a response");
    assert_eq!((status, close), (404, true));
}
