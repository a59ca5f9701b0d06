//! The examples in deploy/examples are valid typed resources, pass the CRD's
//! rules, carry exact copies of the demo documents they wrap, and compile to
//! the tools the README promises.

use crate::support;

use std::path::{Path, PathBuf};

use crds::{McpOverlay, McpUpstream};
use k8s_openapi::api::core::v1::ConfigMap;
use serde::Deserialize;
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples")
}

fn read(name: &str) -> String {
    let path = examples().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every document of a multi-document YAML file, as JSON.
fn documents(name: &str) -> Vec<Value> {
    let text = read(name);
    yaml_serde::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{name}: {e}")))
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn upstream_example() -> (ConfigMap, McpUpstream) {
    let docs = documents("petstore-upstream.yaml");
    assert_eq!(docs.len(), 2, "a ConfigMap and an McpUpstream");
    let cm: ConfigMap = serde_json::from_value(find(&docs, "ConfigMap").clone()).unwrap();
    let up: McpUpstream = serde_json::from_value(find(&docs, "McpUpstream").clone()).unwrap();
    (cm, up)
}

fn overlay_example() -> McpOverlay {
    let docs = documents("petstore-mcpoverlay.yaml");
    assert_eq!(docs.len(), 1);
    serde_json::from_value(docs[0].clone()).unwrap()
}

#[test]
fn petstore_examples_deserialize_as_typed_resources() {
    let (cm, up) = upstream_example();
    let reference = up
        .spec
        .openapi
        .config_map_ref
        .as_ref()
        .expect("the upstream reads a ConfigMap");
    assert_eq!(cm.metadata.name.as_deref(), Some(reference.name.as_str()));
    assert_eq!(
        cm.metadata.namespace, up.metadata.namespace,
        "references are same-namespace"
    );
    assert!(cm.data.as_ref().unwrap().contains_key(&reference.key));
    assert_eq!(up.spec.tool_prefix, "pets");

    let ov = overlay_example();
    assert_eq!(
        ov.spec.upstream_ref.as_ref().map(|r| r.name.as_str()),
        up.metadata.name.as_deref()
    );
    assert_eq!(ov.metadata.namespace, up.metadata.namespace);
}

#[test]
fn the_upstream_reaches_the_demo_service_in_the_cluster() {
    let (_, up) = upstream_example();
    let svc_ref = up
        .spec
        .service_ref
        .as_ref()
        .expect("the example runs in a cluster: serviceRef, not baseUrl");
    let docs = documents("petstore-demo.yaml");
    let svc = find(&docs, "Service");
    assert_eq!(svc["metadata"]["name"], svc_ref.name.as_str());
    assert_eq!(svc["metadata"]["namespace"], "default");
    assert!(
        svc["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["port"] == svc_ref.port),
        "the Service exposes port {}",
        svc_ref.port
    );
    let pod_labels = &find(&docs, "Deployment")["spec"]["template"]["metadata"]["labels"];
    let selector = svc["spec"]["selector"].as_object().unwrap();
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| &pod_labels[k] == v),
        "the Service selects the demo pods"
    );
}

/// `kubectl apply -f deploy/examples/` must find only Kubernetes objects
/// there: the plain OpenAPI/Overlay documents live in openapi/.
#[test]
fn every_example_file_holds_kubernetes_objects_only() {
    for entry in std::fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        for doc in documents(&name) {
            assert!(
                doc["apiVersion"].is_string() && doc["kind"].is_string(),
                "{name}: a document without apiVersion/kind"
            );
        }
    }
}

#[test]
fn examples_pass_the_crd_rules() {
    for doc in documents("petstore-upstream.yaml")
        .iter()
        .chain(&documents("petstore-mcpoverlay.yaml"))
        .chain(&documents("toolset.yaml"))
    {
        if doc["apiVersion"] == "toolgate.dev/v1alpha1" {
            support::validate(doc).unwrap_or_else(|e| panic!("{}: {e:#?}", doc["kind"]));
        }
    }
}

#[test]
fn examples_embed_the_demo_documents_unchanged() {
    let (cm, up) = upstream_example();
    let key = &up.spec.openapi.config_map_ref.as_ref().unwrap().key;
    assert_eq!(
        cm.data.unwrap()[key],
        read("openapi/petstore.yaml"),
        "ConfigMap differs from petstore.yaml"
    );
    assert_eq!(
        overlay_example().spec.inline.unwrap(),
        read("openapi/petstore-overlay.yaml"),
        "McpOverlay differs from petstore-overlay.yaml"
    );
}

/// The example's upstream (compiled with its overlay), as published.
fn compiled_petstore() -> catalog::UpstreamCatalog {
    let (cm, up) = upstream_example();
    let key = &up.spec.openapi.config_map_ref.as_ref().unwrap().key;
    let spec = cm.data.unwrap().remove(key).unwrap();
    let ov = overlay_example();
    let overlay = catalog::Overlay::parse(
        "petstore-agent-friendly",
        ov.spec.inline.unwrap().as_bytes(),
        ov.spec.strict,
    )
    .unwrap();
    let options = up.spec.compile_options();
    catalog::compile_upstream(&catalog::UpstreamSource {
        prefix: &up.spec.tool_prefix,
        document: "ConfigMap default/petstore-openapi",
        spec: spec.as_bytes(),
        overlays: &[overlay],
        options: &options,
    })
    .unwrap()
}

#[test]
fn the_toolset_example_selects_the_pet_store_and_pins_one_of_its_tools() {
    let docs = documents("toolset.yaml");
    assert_eq!(docs.len(), 1);
    let t: crds::McpToolset = serde_json::from_value(docs[0].clone()).unwrap();
    let (_, up) = upstream_example();
    assert_eq!(t.metadata.namespace, up.metadata.namespace);
    assert!(t
        .spec
        .upstreams
        .iter()
        .any(|s| s.name == up.metadata.name && s.namespaces.is_empty()));
    assert!(
        t.spec.upstreams.iter().any(|s| s.selector.is_some()),
        "it shows a label selector too"
    );
    assert_eq!(t.spec.mode, catalog::listing::ListMode::Search);
    // What the operator and the gateway would serve from it.
    let pets = compiled_petstore();
    let toolset = catalog::toolset::Toolset {
        upstreams: [pets.prefix.clone()].into(),
        tools: t.spec.tools.clone().unwrap_or_default(),
        pinned: t.spec.pinned.clone(),
        ..catalog::toolset::Toolset::new(t.id())
    };
    toolset.check().unwrap();
    let served: Vec<&str> = pets
        .tools
        .iter()
        .filter(|tool| toolset.selects(&pets, tool))
        .map(|tool| tool.name.as_str())
        .collect();
    assert!(served.contains(&"pets__find_pets"), "{served:?}");
    assert!(
        !served.contains(&"pets__create_pet"),
        "read-only: {served:?}"
    );
    for p in &toolset.pinned {
        assert!(served.contains(&p.as_str()), "pinned {p} is served");
    }
}

#[test]
fn petstore_example_compiles_with_its_overlay() {
    let compiled = compiled_petstore();
    let names: Vec<&str> = compiled.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"pets__find_pets"), "{names:?}");
    assert!(
        compiled
            .rejected
            .iter()
            .any(|r| r.method.eq_ignore_ascii_case("delete")),
        "delete is hidden"
    );
}
