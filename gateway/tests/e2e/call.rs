use base64::Engine;
use serde_json::{json, Value};

use crate::support::*;
use crate::upstream::{TestUpstream, PNG};

async fn setup(pets_extra: &str) -> (TestUpstream, Gateway, Client) {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, pets_extra)).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    (up, gw, client)
}

#[tokio::test]
async fn invalid_args_never_reach_upstream() {
    let (up, _gw, client) = setup("").await;
    let cases = [
        (json!({}), "limit: is required"),
        (json!({"limit": "ten"}), "limit: "),
        (json!({"limit": 0}), "limit: "),
        (json!({"limit": 5, "name": "Rex"}), "name: "),
        (json!({"limit": 5, "name": "r"}), "name: "),
    ];
    for (arguments, expected) in cases {
        let r = call(&client, "pets__list_pets", arguments.clone()).await;
        assert!(is_error(&r), "{arguments} accepted");
        assert!(text(&r).contains(expected), "{arguments}: {}", text(&r));
    }
    // Every failing field at once.
    let r = call(
        &client,
        "pets__list_pets",
        json!({"limit": 0, "name": "R", "tags": [1]}),
    )
    .await;
    let t = text(&r);
    for field in ["limit: ", "name: ", "tags.0: "] {
        assert!(t.contains(field), "{field} missing from {t}");
    }
    assert_eq!(up.count(), 0, "the upstream was called");
    // And a valid call does reach it.
    let r = call(&client, "pets__list_pets", json!({"limit": 5})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.count(), 1);
}

#[tokio::test]
async fn problem_json_404_is_error_carrying_the_title() {
    let (_up, _gw, client) = setup("").await;
    let r = call(&client, "pets__get_pet", json!({"id": "404"})).await;
    assert!(is_error(&r));
    let v: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(
        v,
        json!({"error": "Pet not found", "detail": "no pet with id 404", "status": 404})
    );
}

#[tokio::test]
async fn non_problem_error_carries_status_and_body() {
    let (_up, _gw, client) = setup("").await;
    let r = call(&client, "pets__get_pet", json!({"id": "500"})).await;
    assert!(is_error(&r));
    let v: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(
        v,
        json!({"error": "upstream error: HTTP 500", "body": {"message": "boom"}})
    );
}

#[tokio::test]
async fn status_418_is_unexpected_http_with_an_excerpt() {
    let (_up, _gw, client) = setup("").await;
    let r = call(&client, "pets__teapot", json!({})).await;
    assert!(is_error(&r));
    assert!(
        text(&r).starts_with("unexpected HTTP 418: I'm a teapot"),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn dot_dot_in_path_argument_never_leaves_the_path() {
    let (up, _gw, client) = setup("").await;
    let r = call(&client, "pets__get_pet", json!({"id": "../../admin"})).await;
    let _ = r;
    assert_eq!(up.last().path, "/pets/..%2F..%2Fadmin");
    let r = call(&client, "pets__get_pet", json!({"id": ".."})).await;
    assert!(is_error(&r));
    assert!(text(&r).contains("'id'"), "{}", text(&r));
    assert_eq!(up.count(), 1, "'..' reached the upstream");
}

#[tokio::test]
async fn reserved_characters_arrive_percent_encoded() {
    let (up, _gw, client) = setup("").await;
    call(&client, "pets__get_pet", json!({"id": "a/b?x=1#f"})).await;
    let rec = up.last();
    assert_eq!(rec.path, "/pets/a%2Fb%3Fx%3D1%23f");
    assert_eq!(rec.query, None);
}

#[tokio::test]
async fn crlf_in_header_argument_is_refused() {
    let (up, _gw, client) = setup("").await;
    let r = call(
        &client,
        "pets__list_pets",
        json!({"limit": 1, "X-Trace": "a\r\nX-Injected: 1"}),
    )
    .await;
    assert!(is_error(&r));
    assert!(text(&r).contains("CR"), "{}", text(&r));
    assert_eq!(up.count(), 0);
    call(
        &client,
        "pets__list_pets",
        json!({"limit": 1, "X-Trace": "abc", "tags": ["a", "b c"]}),
    )
    .await;
    let rec = up.last();
    assert_eq!(rec.header("x-trace"), Some("abc"));
    assert_eq!(rec.query.as_deref(), Some("limit=1&tags=a,b%20c"));
}

#[tokio::test]
async fn json_body_is_built_from_merged_arguments() {
    let (up, _gw, client) = setup("").await;
    let r = call(
        &client,
        "pets__create_pet",
        json!({"name": "rex", "tag": "dog"}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let rec = up.last();
    assert_eq!(rec.method, "POST");
    assert_eq!(rec.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_slice(&rec.body).unwrap();
    assert_eq!(body, json!({"name": "rex", "tag": "dog"}));
}

#[tokio::test]
async fn status_204_is_success_with_empty_text() {
    let (_up, _gw, client) = setup("").await;
    let r = call(&client, "pets__empty", json!({})).await;
    assert!(!is_error(&r));
    assert_eq!(text(&r), "");
}

#[tokio::test]
async fn unknown_tool_is_a_protocol_error() {
    let (up, _gw, client) = setup("").await;
    let e = try_call(&client, "pets__nope", json!({}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("unknown tool"), "{e}");
    assert_eq!(up.count(), 0);
}

#[tokio::test]
async fn json_success_has_structured_content_matching_output_schema() {
    let (_up, _gw, client) = setup("").await;
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r));
    assert_eq!(r.structured_content, Some(json!({"id": 7, "name": "rex"})));
}

/// Under `warn` no outputSchema is listed, so the data goes out
/// structured, matching or not.
#[tokio::test]
async fn schema_violation_is_returned_in_warn_mode_as_data() {
    let (_up, _gw, client) = setup("").await;
    let r = call(&client, "pets__get_pet", json!({"id": "bad"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(r.structured_content, Some(json!({"id": "not-an-integer"})));
    assert_eq!(
        serde_json::from_str::<Value>(&text(&r)).unwrap(),
        json!({"id": "not-an-integer"})
    );
}

#[tokio::test]
async fn schema_violation_is_error_in_fail_mode() {
    let (_up, _gw, client) = setup("    responseValidation: fail").await;
    let r = call(&client, "pets__get_pet", json!({"id": "bad"})).await;
    assert!(is_error(&r));
    assert!(text(&r).contains("id: "), "{}", text(&r));
    let ok = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&ok));
}

#[tokio::test]
async fn image_png_becomes_image_content_with_exact_bytes() {
    let (_up, _gw, client) = setup("").await;
    let r = call(&client, "pets__image", json!({})).await;
    assert!(!is_error(&r));
    let img = r.content[0].as_image().expect("image content");
    assert_eq!(img.mime_type, "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&img.data)
        .unwrap();
    assert_eq!(bytes, PNG);
}

#[tokio::test]
async fn oversized_body_is_error() {
    let (_up, _gw, client) = setup("").await;
    let r = call(&client, "pets__big", json!({})).await;
    assert!(is_error(&r));
    assert!(
        text(&r).contains("exceeds the limit of 10485760 bytes"),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn smaller_configured_cap_applies() {
    let (_up, _gw, client) = setup("    maxResponseBytes: 10").await;
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(is_error(&r));
    assert!(text(&r).contains("limit of 10 bytes"), "{}", text(&r));
}

#[tokio::test]
async fn unreachable_upstream_error_names_no_address() {
    let gw = start_gateway(&default_catalog(), config_for("http://127.0.0.1:9", "")).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(is_error(&r));
    let t = text(&r);
    assert!(t.contains("could not reach the upstream"), "{t}");
    assert!(!t.contains("127.0.0.1"), "address leaked: {t}");
}

fn extra_catalog() -> catalog::Catalog {
    let obj = json!({"type": "object"});
    catalog_of(vec![upstream(
        "x",
        vec![
            tool(
                "x__upload",
                "POST",
                "/upload",
                json!({"type": "object", "properties": {"body": {"type": "object"}}, "required": ["body"]}),
                json!([]),
                json!({"plan": {"method": "POST", "path": "/upload", "body": {
                    "contentType": "multipart/form-data", "encoding": "multipart", "required": true,
                    "source": {"kind": "nested", "arg": "body"}, "binaryFields": ["file"]}}}),
            ),
            tool("x__slow", "GET", "/slow", obj.clone(), json!([]), json!({})),
            // A spec path without its leading '/'.
            tool(
                "x__no_slash",
                "GET",
                "no-slash",
                obj.clone(),
                json!([]),
                json!({}),
            ),
            tool(
                "x__api_request",
                "*",
                "/",
                json!({"type": "object", "properties": {"method": {"type": "string"}, "path": {"type": "string"},
                       "query": {"type": "object"}, "headers": {"type": "object"}, "body": {}},
                       "required": ["method", "path"]}),
                json!([]),
                json!({"plan": {"method": "GET", "path": "/", "raw": true}}),
            ),
        ],
    )])
}

async fn extra(settings: &str) -> (TestUpstream, Gateway, Client) {
    let up = TestUpstream::start().await;
    let cfg = gateway::config::parse(&format!(
        "upstreams:\n  x:\n    baseUrl: {}/base\n{settings}\n",
        up.url
    ))
    .unwrap();
    let gw = start_gateway(&extra_catalog(), cfg).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    (up, gw, client)
}

#[tokio::test]
async fn multipart_file_field_arrives_as_exact_bytes() {
    let (up, _gw, client) = extra("").await;
    let file = base64::engine::general_purpose::STANDARD.encode(PNG);
    let r = call(
        &client,
        "x__upload",
        json!({"body": {"file": file, "note": "hello"}}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let rec = up.last();
    assert_eq!(rec.path, "/base/upload");
    let ct = rec.header("content-type").unwrap().to_string();
    assert!(ct.starts_with("multipart/form-data; boundary="), "{ct}");
    let body = &rec.body[..];
    let find = |needle: &[u8]| body.windows(needle.len()).position(|w| w == needle);
    assert!(find(b"name=\"file\"; filename=\"file\"").is_some());
    assert!(find(PNG).is_some(), "file bytes not found verbatim");
    assert!(find(b"hello").is_some());
}

#[tokio::test]
async fn upstream_timeout_is_error() {
    let (_up, _gw, client) = extra("    timeoutSeconds: 0.1").await;
    let r = call(&client, "x__slow", json!({})).await;
    assert!(is_error(&r));
    assert!(text(&r).contains("did not answer within"), "{}", text(&r));
}

#[tokio::test]
async fn concurrency_limit_queues_calls() {
    let (_up, _gw, client) = extra("    maxConcurrency: 1").await;
    let started = std::time::Instant::now();
    let calls: Vec<_> = (0..3)
        .map(|_| call(&client, "x__slow", json!({})))
        .collect();
    for r in futures::future::join_all(calls).await {
        assert!(!is_error(&r), "{}", text(&r));
    }
    // /slow takes 300 ms; one at a time means at least 900 ms.
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn raw_request_tool_stays_under_the_base_url() {
    let (up, _gw, client) = extra("").await;
    let r = call(
        &client,
        "x__api_request",
        json!({"method": "POST", "path": "/things/1", "query": {"a": "b c"}, "body": {"k": 1}}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let rec = up.last();
    assert_eq!(
        (rec.method.as_str(), rec.path.as_str()),
        ("POST", "/base/things/1")
    );
    assert_eq!(rec.query.as_deref(), Some("a=b%20c"));
    for bad in ["/../admin", "/%2e%2e/admin", "//evil.example/x"] {
        let r = call(
            &client,
            "x__api_request",
            json!({"method": "GET", "path": bad}),
        )
        .await;
        assert!(is_error(&r), "{bad} accepted");
    }
    assert_eq!(up.count(), 1);
}

/// Servlet containers and Spring strip `;...` from a segment before they
/// resolve dot segments: `/base/..;/admin` is `/admin` there.
#[tokio::test]
async fn a_dot_dot_semicolon_segment_never_reaches_the_upstream() {
    let (up, _gw, client) = extra("").await;
    for bad in [
        "/..;/admin",
        "/x/..;jsessionid=1/admin",
        "/%2e%2e;/admin",
        "/.;/x",
    ] {
        let r = call(
            &client,
            "x__api_request",
            json!({"method": "GET", "path": bad}),
        )
        .await;
        assert!(is_error(&r), "{bad} accepted");
        assert!(text(&r).contains("'..'"), "{bad}: {}", text(&r));
    }
    assert_eq!(up.count(), 0);
}

#[tokio::test]
async fn a_spec_path_without_a_leading_slash_stays_below_the_base_path() {
    let (up, _gw, client) = extra("").await;
    let r = call(&client, "x__no_slash", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.last().path, "/base/no-slash");
}
