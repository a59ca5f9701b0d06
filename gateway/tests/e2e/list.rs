use rmcp::model::{PaginatedRequestParams, ProtocolVersion};
use serde_json::json;

use crate::support::*;
use crate::upstream::TestUpstream;

#[tokio::test]
async fn constraints_are_visible_in_tools_list() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let tools = tokio::time::timeout(WAIT, client.list_all_tools())
        .await
        .expect("timed out waiting for tools/list")
        .unwrap();
    assert_eq!(tools.len(), 9);
    let list = tools.iter().find(|t| t.name == "pets__list_pets").unwrap();
    let props = &list.input_schema["properties"];
    assert_eq!(props["limit"]["minimum"], json!(1));
    assert_eq!(props["limit"]["maximum"], json!(100));
    assert_eq!(props["name"]["pattern"], json!("^[a-z]+$"));
    assert_eq!(props["name"]["minLength"], json!(2));
    assert_eq!(list.input_schema["required"], json!(["limit"]));
    let get = tools.iter().find(|t| t.name == "pets__get_pet").unwrap();
    // Listed only under responseValidation `fail` (the default is `warn`).
    assert!(get.output_schema.is_none());
    assert_eq!(get.annotations.as_ref().unwrap().read_only_hint, Some(true));
}

#[tokio::test]
async fn tools_list_pages_with_a_cursor() {
    let up = TestUpstream::start().await;
    let edge = gateway::EdgeOptions {
        page_size: 4,
        ..Default::default()
    };
    let gw = start_gateway_with(&default_catalog(), config_for(&up.url, ""), edge).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let first = client.list_tools(None).await.unwrap();
    assert_eq!(first.tools.len(), 4);
    let cursor = first.next_cursor.clone().expect("a second page");
    let mut p = PaginatedRequestParams::default();
    p.cursor = Some(cursor);
    let second = client.list_tools(Some(p)).await.unwrap();
    assert_eq!(second.tools.len(), 4);
    assert_ne!(first.tools[0].name, second.tools[0].name);
    let all = client.list_all_tools().await.unwrap();
    assert_eq!(all.len(), 9);
    let mut bad = PaginatedRequestParams::default();
    bad.cursor = Some("not-a-cursor".into());
    assert!(client.list_tools(Some(bad)).await.is_err());
}

#[tokio::test]
async fn server_info_names_toolgate_and_every_supported_version_works() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    for v in [ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2025_11_25] {
        let client = connect_as(&format!("{}/mcp", gw.url), v.clone(), None).await;
        let info = client.peer_info().expect("server info after initialize");
        assert_eq!(
            info.server_info.as_ref().map(|s| s.name.as_str()),
            Some("toolgate")
        );
        assert_eq!(info.protocol_version, v);
        let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }
}
