//! Resource types the server knows and the discovery documents describing
//! them (`/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}/{version}`).
//!
//! Faithful: the legacy (non-aggregated) discovery format kubectl and kube
//! read — `APIVersions`, `APIGroupList`, `APIResourceList` with verbs,
//! namespaced, kind, singularName, shortNames, categories and `x/status`
//! subresources (and `deployments/scale`). Custom resource definitions register and unregister their
//! kinds here, one entry per served version.
//! Simplified: aggregated discovery (`apidiscovery.k8s.io/v2`) is not served;
//! clients asking for it get the legacy document and fall back, as they do
//! against older servers. All versions of a CRD share one storage without
//! conversion (only `apiVersion` is rewritten).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::validation::Schema;

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone)]
pub(crate) struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub json_path: String,
    pub priority: i64,
}

/// A kind served under `/api` or `/apis`.
#[derive(Debug)]
pub(crate) struct ResourceType {
    pub group: String,
    /// Served versions, preferred (storage) first.
    pub versions: Vec<String>,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status: bool,
    /// Whether `metadata.generation` is maintained (CRDs and custom resources).
    pub generation: bool,
    pub custom: bool,
    pub printer_columns: BTreeMap<String, Vec<PrinterColumn>>,
    pub schemas: BTreeMap<String, Arc<Schema>>,
}

impl ResourceType {
    pub fn storage_version(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The key objects of this type are stored under, shared by all versions.
    pub fn storage_key(&self) -> String {
        if self.group == "events.k8s.io" && self.plural == "events" {
            // One storage for both Event APIs, as in the real server.
            return "/events".into();
        }
        format!("{}/{}", self.group, self.plural)
    }

    fn verbs(&self) -> Vec<&'static str> {
        let mut v = vec![
            "create", "delete", "get", "list", "patch", "update", "watch",
        ];
        if self.plural != "namespaces" {
            v.insert(1, "deletecollection");
        }
        v
    }
}

fn builtin(
    group: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
) -> ResourceType {
    ResourceType {
        group: group.into(),
        versions: vec!["v1".into()],
        plural: plural.into(),
        singular: kind.to_ascii_lowercase(),
        kind: kind.into(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: vec![],
        status,
        generation: plural == "customresourcedefinitions",
        custom: false,
        printer_columns: BTreeMap::new(),
        schemas: BTreeMap::new(),
    }
}

/// All served kinds, looked up by group, version and plural.
#[derive(Debug)]
pub(crate) struct Registry {
    types: Vec<Arc<ResourceType>>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let mut svc = builtin("", "services", "Service", true, &["svc"], true);
        svc.categories = vec!["all".into()];
        let mut crd = builtin(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            true,
        );
        crd.categories = vec!["api-extensions".into()];
        let mut deployments = builtin("apps", "deployments", "Deployment", true, &["deploy"], true);
        deployments.categories = vec!["all".into()];
        let mut hpa = builtin(
            "autoscaling",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            true,
            &["hpa"],
            true,
        );
        hpa.versions = vec!["v2".into()];
        let types = vec![
            builtin("", "namespaces", "Namespace", false, &["ns"], true),
            builtin("", "configmaps", "ConfigMap", true, &["cm"], false),
            // Stored as given, with no kubelet or controllers: tests that
            // model one create and delete them.
            builtin("", "pods", "Pod", true, &["po"], true),
            builtin("", "secrets", "Secret", true, &[], false),
            svc,
            builtin("", "events", "Event", true, &["ev"], false),
            builtin(
                "",
                "resourcequotas",
                "ResourceQuota",
                true,
                &["quota"],
                true,
            ),
            builtin("", "limitranges", "LimitRange", true, &["limits"], false),
            builtin(
                "",
                "serviceaccounts",
                "ServiceAccount",
                true,
                &["sa"],
                false,
            ),
            builtin("events.k8s.io", "events", "Event", true, &["ev"], false),
            builtin("coordination.k8s.io", "leases", "Lease", true, &[], false),
            // What an install (chart, kustomize base) creates; stored as
            // given: no controllers, defaults or schemas.
            deployments,
            builtin(
                "rbac.authorization.k8s.io",
                "roles",
                "Role",
                true,
                &[],
                false,
            ),
            builtin(
                "rbac.authorization.k8s.io",
                "rolebindings",
                "RoleBinding",
                true,
                &[],
                false,
            ),
            builtin(
                "rbac.authorization.k8s.io",
                "clusterroles",
                "ClusterRole",
                false,
                &[],
                false,
            ),
            builtin(
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                "ClusterRoleBinding",
                false,
                &[],
                false,
            ),
            builtin(
                "policy",
                "poddisruptionbudgets",
                "PodDisruptionBudget",
                true,
                &["pdb"],
                true,
            ),
            builtin(
                "networking.k8s.io",
                "ingresses",
                "Ingress",
                true,
                &["ing"],
                true,
            ),
            builtin(
                "networking.k8s.io",
                "networkpolicies",
                "NetworkPolicy",
                true,
                &["netpol"],
                false,
            ),
            hpa,
            crd,
        ];
        Registry {
            types: types.into_iter().map(Arc::new).collect(),
        }
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| {
                t.group == group && t.plural == plural && t.versions.iter().any(|v| v == version)
            })
            .cloned()
    }

    /// Registers (or replaces) the kind a CRD defines.
    pub fn register(&mut self, rt: ResourceType) {
        self.types
            .retain(|t| !(t.custom && t.group == rt.group && t.plural == rt.plural));
        self.types.push(Arc::new(rt));
    }

    pub fn unregister(&mut self, group: &str, plural: &str) {
        self.types
            .retain(|t| !(t.custom && t.group == group && t.plural == plural));
    }

    /// Every served (group, version) pair, the core group as "".
    pub fn group_versions(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .types
            .iter()
            .flat_map(|t| t.versions.iter().map(|v| (t.group.clone(), v.clone())))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    pub fn types_in(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.types
            .iter()
            .filter(|t| t.group == group && t.versions.iter().any(|v| v == version))
            .cloned()
            .collect()
    }

    fn groups(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for t in &self.types {
            if t.group.is_empty() {
                continue;
            }
            let versions = groups.entry(&t.group).or_default();
            for v in &t.versions {
                if !versions.contains(&v.as_str()) {
                    versions.push(v);
                }
            }
        }
        groups
    }

    pub fn api_versions(&self, server_address: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        })
    }

    fn group_doc(group: &str, versions: &[&str]) -> Value {
        let vs: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
            .collect();
        json!({
            "name": group,
            "versions": vs,
            "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
        })
    }

    pub fn api_group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .iter()
            .map(|(g, vs)| Self::group_doc(g, vs))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    pub fn api_group(&self, group: &str) -> Option<Value> {
        let groups = self.groups();
        let vs = groups.get(group)?;
        let mut doc = Self::group_doc(group, vs);
        doc["kind"] = json!("APIGroup");
        doc["apiVersion"] = json!("v1");
        Some(doc)
    }

    /// `APIResourceList` for one group version, or `None` if not served.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let mut resources = Vec::new();
        for t in &self.types {
            if t.group != group || !t.versions.iter().any(|v| v == version) {
                continue;
            }
            let mut r = json!({
                "name": t.plural,
                "singularName": t.singular,
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": t.verbs(),
            });
            if !t.short_names.is_empty() {
                r["shortNames"] = json!(t.short_names);
            }
            if !t.categories.is_empty() {
                r["categories"] = json!(t.categories);
            }
            if !group.is_empty() || t.plural != "events" {
                r["storageVersionHash"] = json!(format!("{:x}", fnv(&t.storage_key())));
            }
            resources.push(r);
            if t.group == "apps" && t.plural == "deployments" {
                resources.push(json!({
                    "name": "deployments/scale",
                    "singularName": "",
                    "namespaced": true,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }));
            }
            if t.status {
                resources.push(json!({
                    "name": format!("{}/status", t.plural),
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
        }
        if resources.is_empty() {
            return None;
        }
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": resources,
        }))
    }
}

pub(crate) fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

pub(crate) fn version_doc() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-toolgate-fake",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// Reads the kind a CRD defines; errors are `(field, message)` pairs for a
/// 422 Invalid.
pub(crate) fn resource_type_from_crd(crd: &Value) -> Result<ResourceType, Vec<(String, String)>> {
    let mut errors = Vec::new();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default().to_string();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default().to_string();
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    if group.is_empty() {
        errors.push(("spec.group".into(), "Required value".into()));
    }
    if plural.is_empty() {
        errors.push(("spec.names.plural".into(), "Required value".into()));
    }
    if kind.is_empty() {
        errors.push(("spec.names.kind".into(), "Required value".into()));
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        errors.push((
            "metadata.name".into(),
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = spec["scope"].as_str().unwrap_or_default();
    if scope != "Namespaced" && scope != "Cluster" {
        errors.push((
            "spec.scope".into(),
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let mut versions = Vec::new();
    let mut status = false;
    let mut printer_columns = BTreeMap::new();
    let mut schemas = BTreeMap::new();
    let empty = Vec::new();
    let declared = spec["versions"].as_array().unwrap_or(&empty);
    if declared.is_empty() {
        errors.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    for (i, v) in declared.iter().enumerate() {
        let Some(vname) = v["name"].as_str() else {
            errors.push((format!("spec.versions[{i}].name"), "Required value".into()));
            continue;
        };
        if v["served"].as_bool() == Some(false) {
            continue;
        }
        if v["storage"].as_bool() == Some(true) {
            versions.insert(0, vname.to_string());
        } else {
            versions.push(vname.to_string());
        }
        if v["subresources"].get("status").is_some() {
            status = true;
        }
        let cols = v["additionalPrinterColumns"]
            .as_array()
            .map(|cols| cols.iter().map(printer_column).collect())
            .unwrap_or_default();
        printer_columns.insert(vname.to_string(), cols);
        if let Some(s) = v["schema"].get("openAPIV3Schema") {
            match Schema::compile(s) {
                Ok(schema) => {
                    schemas.insert(vname.to_string(), Arc::new(schema));
                }
                Err(e) => errors.push((
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    format!("Invalid value: {e}"),
                )),
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(ResourceType {
        singular: names["singular"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| kind.to_ascii_lowercase()),
        short_names: strings(&names["shortNames"]),
        categories: strings(&names["categories"]),
        group,
        versions,
        plural,
        kind,
        namespaced: scope == "Namespaced",
        status,
        generation: true,
        custom: true,
        printer_columns,
        schemas,
    })
}

fn printer_column(c: &Value) -> PrinterColumn {
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    PrinterColumn {
        name: s("name"),
        type_: s("type"),
        format: s("format"),
        description: s("description"),
        json_path: s("jsonPath"),
        priority: c["priority"].as_i64().unwrap_or(0),
    }
}
