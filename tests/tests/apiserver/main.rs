//! The in-memory API server driven by the real `kube` client and
//! kube-runtime, over HTTP.

mod controllers;
mod crds;
mod crud;
mod deploy;
mod watch;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, ObjectMeta};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgate_tests::apiserver::{ApiServer, ApiServerHandle};

async fn server() -> (ApiServerHandle, Client) {
    let s = ApiServer::builder()
        .bookmark_interval(Duration::from_millis(200))
        .serve()
        .await
        .expect("server starts");
    let c = s.client().expect("client");
    (s, c)
}

fn cm(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn api_status(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.toolgate.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wdg",
    category = "mcp"
)]
#[kube(printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"))]
pub struct WidgetSpec {
    size: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    color: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    observed_generation: Option<i64>,
    ready: bool,
}

async fn install_widget(client: &Client) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Widget::crd())
        .await
        .unwrap()
}

fn gadget_api(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.toolgate.dev", "v1", "Gadget");
    Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "gadgets"),
    )
}

async fn install_gadget(client: &Client) {
    let crd: CustomResourceDefinition =
        yaml_serde::from_str(include_str!("../fixtures/gadget-crd.yaml")).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

async fn wait_for<F: Fn() -> Fut, Fut: std::future::Future<Output = bool>>(what: &str, f: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
