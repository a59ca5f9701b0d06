//! Kind-specific behaviour of built-in kinds and of CustomResourceDefinitions.
//!
//! Faithful: empty `finalizers`, `labels`, `annotations` and
//! `ownerReferences` are not stored (ObjectMeta's `omitempty`); label keys
//! and values and annotation keys are validated
//! (qualified names, 63-character values, 256 KiB of annotations);
//! ConfigMap and Secret keys must be config keys and their payload at most
//! 1 MiB (base64 fields counted decoded); Secret `stringData` is folded
//! into base64 `data`; namespaces
//! get `status.phase: Active` and the `kubernetes.io/metadata.name` label;
//! CRDs are checked (group, names, scope, versions, schemas and CEL rules
//! compile), get `NamesAccepted` and `Established` conditions,
//! `acceptedNames` and `storedVersions`, and (un)register their kind;
//! custom resources are pruned,
//! defaulted and validated against their version's schema.
//! `events.k8s.io/v1` Events and core `v1` Events are one storage, each
//! served in its own shape (`regarding` is `involvedObject`, `note` is
//! `message`, …), so events a controller records show in `kubectl describe`.
//! Deleting a namespace or a CRD does what the namespace and CRD-cleanup
//! controllers do: its objects are deleted, it stays (`Terminating`) while
//! finalizers hold any of them, and no new objects go in meanwhile (403 in
//! a namespace, 405 for a CRD's kind).
//! Simplified: that cleanup happens within the DELETE request (and the one
//! that removes the last finalizer), not later; Services get a fake
//! `clusterIP` and no endpoints; CRD names are
//! accepted without checking conflicts with other CRDs. A Deployment's
//! `scale` subresource reads and writes `spec.replicas`; its selector is
//! `spec.selector.matchLabels` only.

use std::sync::LazyLock;

use base64::Engine;
use serde_json::{json, Value};

use super::discovery::{resource_type_from_crd, ResourceType};
use super::status::ApiError;
use super::store::{meta_str, now, ChangeKind, Store};

static QUALIFIED_NAME: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").expect("constant regex")
});
static LABEL_VALUE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").expect("constant regex")
});
pub(crate) static SUBDOMAIN: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
        .expect("constant regex")
});
static CONFIG_KEY: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^[-._a-zA-Z0-9]+$").expect("constant regex"));

/// The 1 MiB limit on ConfigMap and Secret payloads.
const MAX_DATA_BYTES: usize = 1 << 20;
const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

fn key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.len() > 253 || !SUBDOMAIN.is_match(p) {
            return Some("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".into());
        }
    }
    if name.is_empty() || name.len() > 63 || !QUALIFIED_NAME.is_match(name) {
        return Some("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character; at most 63 characters".into());
    }
    None
}

/// Label and annotation rules every kind shares.
fn validate_metadata(obj: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    if let Some(labels) = obj["metadata"]["labels"].as_object() {
        for (k, v) in labels {
            if let Some(p) = key_problem(k) {
                causes.push((
                    "metadata.labels".into(),
                    format!("Invalid value: {k:?}: {p}"),
                ));
            }
            let v = v.as_str().unwrap_or_default();
            if v.len() > 63 {
                causes.push((
                    format!("metadata.labels[{k}]"),
                    format!("Invalid value: {v:?}: must be no more than 63 characters"),
                ));
            } else if !LABEL_VALUE.is_match(v) {
                causes.push((format!("metadata.labels[{k}]"), format!("Invalid value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")));
            }
        }
    }
    if let Some(annotations) = obj["metadata"]["annotations"].as_object() {
        let mut total = 0;
        for (k, v) in annotations {
            if let Some(p) = key_problem(k) {
                causes.push((
                    "metadata.annotations".into(),
                    format!("Invalid value: {k:?}: {p}"),
                ));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > MAX_ANNOTATION_BYTES {
            causes.push((
                "metadata.annotations".into(),
                format!("Too long: must have at most {MAX_ANNOTATION_BYTES} bytes"),
            ));
        }
    }
    causes
}

fn decoded_len(b64: &str) -> usize {
    let pad = b64.bytes().rev().take_while(|b| *b == b'=').count();
    (b64.len() / 4 * 3).saturating_sub(pad)
}

/// ConfigMap/Secret keys and the 1 MiB total (base64 fields counted
/// decoded), as the real validation counts them.
fn validate_data(obj: &Value, fields: &[&str]) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let mut total = 0;
    let secret = fields.contains(&"stringData");
    for f in fields {
        let Some(m) = obj[*f].as_object() else {
            continue;
        };
        let base64 = *f == "binaryData" || (secret && *f == "data");
        for (k, v) in m {
            if !CONFIG_KEY.is_match(k) || k.len() > 253 {
                causes.push((format!("{f}[{k}]"), format!("Invalid value: {k:?}: a valid config key must consist of alphanumeric characters, '-', '_' or '.'")));
            }
            let s = v.as_str().unwrap_or_default();
            total += if base64 { decoded_len(s) } else { s.len() };
        }
    }
    if total > MAX_DATA_BYTES {
        causes.push((
            "[]".into(),
            format!("Too long: must have at most {MAX_DATA_BYTES} bytes"),
        ));
    }
    causes
}

/// events.k8s.io/v1 field names and their core/v1 counterparts.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn is_events_api(rt: &ResourceType) -> bool {
    rt.group == "events.k8s.io" && rt.plural == "events"
}

fn rename(v: &mut Value, from_to: impl Iterator<Item = (&'static str, &'static str)>) {
    if let Some(m) = v.as_object_mut() {
        for (from, to) in from_to {
            if let Some(x) = m.remove(from) {
                m.insert(to.to_string(), x);
            }
        }
    }
}

/// The stored form of an object received for `rt`.
pub(crate) fn to_storage(rt: &ResourceType, v: &mut Value) {
    if is_events_api(rt) {
        rename(v, EVENT_FIELDS.iter().copied());
    }
}

/// The form `rt` serves a stored object in.
pub(crate) fn to_external(rt: &ResourceType, mut v: Value) -> Value {
    if is_events_api(rt) {
        rename(&mut v, EVENT_FIELDS.iter().map(|(a, b)| (*b, *a)));
    }
    v
}

/// `obj` as served at `version` of its kind.
pub(crate) fn present(obj: &Value, rt: &ResourceType, version: &str) -> Value {
    let mut o = to_external(rt, obj.clone());
    o["apiVersion"] = json!(rt.api_version(version));
    o["kind"] = json!(rt.kind);
    o
}

/// The `autoscaling/v1` Scale a Deployment's `scale` subresource serves.
pub(crate) fn scale_of(deployment: &Value) -> Value {
    let m = &deployment["metadata"];
    let selector: Vec<String> = deployment["spec"]["selector"]["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        // Defaulted to 1 by the real server when absent.
        "spec": {"replicas": deployment["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {
            "replicas": deployment["status"]["replicas"].as_i64().unwrap_or(0),
            "selector": selector.join(","),
        },
    })
}

/// The finalizer a CRD carries while its objects are deleted.
const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

fn is_crd(rt: &ResourceType) -> bool {
    rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions"
}

/// `(group, plural)` of the kind a CRD object defines.
fn crd_kind(crd: &Value) -> (String, String) {
    (
        crd["spec"]["group"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        crd["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

fn mark_crd_terminating(crd: &mut Value) {
    let terminating = json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
        "message": "CustomResource deletion is in progress", "lastTransitionTime": now()});
    match crd["status"]["conditions"].as_array_mut() {
        Some(c) => {
            c.retain(|c| c["type"] != "Terminating");
            c.push(terminating);
        }
        None => crd["status"]["conditions"] = json!([terminating]),
    }
}

impl Store {
    /// Kind-specific normalisation and admission shared by create and
    /// update; returns the kind a CRD defines, to register after commit.
    pub(crate) fn admit(
        &mut self,
        rt: &ResourceType,
        obj: &mut Value,
        old: Option<&Value>,
        version: &str,
    ) -> Result<Option<ResourceType>, ApiError> {
        // ObjectMeta is typed in the real server: its empty lists and maps
        // are `omitempty`, so a patch that removes the last finalizer
        // leaves no `finalizers` at all (kube-runtime's finalizer helper
        // tests for exactly that before adding one again).
        if let Some(meta) = obj["metadata"].as_object_mut() {
            meta.retain(|k, v| {
                !(matches!(
                    k.as_str(),
                    "finalizers" | "labels" | "annotations" | "ownerReferences"
                ) && (v.is_null()
                    || v.as_array().is_some_and(Vec::is_empty)
                    || v.as_object().is_some_and(|m| m.is_empty())))
            });
        }
        let name = meta_str(obj, "name").to_string();
        let mut causes = validate_metadata(obj);
        match (rt.group.as_str(), rt.plural.as_str()) {
            ("", "configmaps") => causes.extend(validate_data(obj, &["data", "binaryData"])),
            ("", "secrets") => causes.extend(validate_data(obj, &["data", "stringData"])),
            _ => {}
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &causes));
        }
        match (rt.group.as_str(), rt.plural.as_str()) {
            ("", "secrets") => {
                if let Some(Value::Object(sd)) =
                    obj.as_object_mut().and_then(|m| m.remove("stringData"))
                {
                    for (k, v) in sd {
                        let enc = base64::engine::general_purpose::STANDARD
                            .encode(v.as_str().unwrap_or_default());
                        obj["data"][k] = json!(enc);
                    }
                }
            }
            ("", "services") => {
                let ty = obj["spec"]["type"]
                    .as_str()
                    .unwrap_or("ClusterIP")
                    .to_string();
                obj["spec"]["type"] = json!(ty);
                if ty != "ExternalName" && obj["spec"]["clusterIP"].as_str().is_none() {
                    let n = self.rv() % 65000 + 10;
                    obj["spec"]["clusterIP"] = json!(format!("10.96.{}.{}", n / 250, n % 250 + 1));
                }
            }
            ("", "namespaces") => {
                let phase = if obj["metadata"]["deletionTimestamp"].is_string() {
                    "Terminating"
                } else {
                    "Active"
                };
                obj["status"]["phase"] = json!(phase);
                obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
            }
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                let defined = resource_type_from_crd(obj)
                    .map_err(|causes| ApiError::invalid(&rt.group, &rt.kind, &name, &causes))?;
                let then = old
                    .and_then(|o| o["status"]["conditions"][0]["lastTransitionTime"].as_str())
                    .map(String::from)
                    .unwrap_or_else(now);
                let mut accepted = obj["spec"]["names"].clone();
                accepted["singular"] = json!(defined.singular);
                accepted["listKind"] = json!(format!("{}List", defined.kind));
                obj["status"] = json!({
                    "conditions": [
                        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": then},
                        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": then},
                    ],
                    "acceptedNames": accepted,
                    "storedVersions": [defined.storage_version()],
                });
                if obj["metadata"]["deletionTimestamp"].is_string() {
                    mark_crd_terminating(obj);
                }
                return Ok(Some(defined));
            }
            _ => {}
        }
        if rt.custom {
            if let Some(schema) = rt
                .schemas
                .get(version)
                .or_else(|| rt.schemas.get(rt.storage_version()))
            {
                schema
                    .admit(obj, old)
                    .map_err(|causes| ApiError::invalid(&rt.group, &rt.kind, &name, &causes))?;
            }
        }
        Ok(None)
    }

    /// Deletes `obj` for good; a CRD's kind stops being served. Then a
    /// terminating namespace or CRD this emptied goes too ([`Self::reap`]).
    pub(crate) fn remove(&mut self, rt: &ResourceType, obj: Value, old: Value) -> Value {
        if is_crd(rt) {
            let (group, plural) = crd_kind(&obj);
            self.registry.unregister(&group, &plural);
        }
        let gone = self.commit(&rt.storage_key(), ChangeKind::Deleted, obj, Some(old));
        self.reap(rt, &gone);
        gone
    }

    /// DELETE of a namespace or a CRD, as the API server and its
    /// controllers do it together: the object is marked (`deletionTimestamp`;
    /// a namespace's phase becomes `Terminating`; a CRD gets the
    /// `customresourcecleanup.apiextensions.k8s.io` finalizer and a
    /// `Terminating` condition), everything it holds is deleted (objects
    /// with finalizers only get a `deletionTimestamp`), and it goes once
    /// nothing is left: now, or when the last finalizer holding one of its
    /// objects is removed. Returns the object and whether it is gone.
    pub(crate) fn terminate(&mut self, rt: &ResourceType, old: Value) -> (Value, bool) {
        let stamp = now();
        let contents: Vec<(String, Value)> = if is_crd(rt) {
            let (group, plural) = crd_kind(&old);
            let key = format!("{group}/{plural}");
            self.all(&key)
                .into_iter()
                .map(|o| (key.clone(), o))
                .collect()
        } else {
            self.all_in_namespace(meta_str(&old, "name"))
        };
        let mut held = false;
        for (k, o) in contents {
            if o["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty())
            {
                held = true;
                if !o["metadata"]["deletionTimestamp"].is_string() {
                    let mut n = o.clone();
                    n["metadata"]["deletionTimestamp"] = json!(stamp);
                    n["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                    self.commit(&k, ChangeKind::Modified, n, Some(o));
                }
            } else {
                self.commit(&k, ChangeKind::Deleted, o.clone(), Some(o));
            }
        }
        let own_finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f != CRD_CLEANUP));
        if !held && !own_finalizers {
            let gone = self.remove(rt, old.clone(), old);
            return (gone, true);
        }
        if old["metadata"]["deletionTimestamp"].is_string() {
            return (old, false);
        }
        let mut n = old.clone();
        n["metadata"]["deletionTimestamp"] = json!(stamp);
        n["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if is_crd(rt) {
            let fins = n["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if held && !fins.iter().any(|f| f == CRD_CLEANUP) {
                let mut fins = fins;
                fins.push(json!(CRD_CLEANUP));
                n["metadata"]["finalizers"] = json!(fins);
            }
            mark_crd_terminating(&mut n);
        } else {
            n["status"]["phase"] = json!("Terminating");
        }
        let stored = self.commit(&rt.storage_key(), ChangeKind::Modified, n, Some(old));
        (stored, false)
    }

    /// After `gone` (of kind `rt`) was deleted: its namespace, or its CRD,
    /// if terminating and now empty, goes too (a CRD once finalizers others
    /// put on it are gone as well).
    fn reap(&mut self, rt: &ResourceType, gone: &Value) {
        let ns = meta_str(gone, "namespace");
        if rt.namespaced && !ns.is_empty() {
            let ns_type = self.namespace_type();
            if let Some(namespace) = self.get_raw(&ns_type, "", ns).cloned() {
                if namespace["metadata"]["deletionTimestamp"].is_string()
                    && self.all_in_namespace(ns).is_empty()
                {
                    self.remove(&ns_type, namespace.clone(), namespace);
                }
            }
        }
        if rt.custom {
            let crd_type = self.crd_type();
            let crd_name = format!("{}.{}", rt.plural, rt.group);
            let Some(crd) = self.get_raw(&crd_type, "", &crd_name).cloned() else {
                return;
            };
            if !crd["metadata"]["deletionTimestamp"].is_string()
                || !self.all(&rt.storage_key()).is_empty()
            {
                return;
            }
            let mut n = crd.clone();
            let rest: Vec<Value> = crd["metadata"]["finalizers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| *f != CRD_CLEANUP)
                .cloned()
                .collect();
            if rest.is_empty() {
                self.remove(&crd_type, n, crd);
            } else {
                n["metadata"]["finalizers"] = json!(rest);
                self.commit(&crd_type.storage_key(), ChangeKind::Modified, n, Some(crd));
            }
        }
    }

    fn namespace_type(&self) -> std::sync::Arc<ResourceType> {
        self.registry
            .find("", "v1", "namespaces")
            .expect("namespaces are built in")
    }

    fn crd_type(&self) -> std::sync::Arc<ResourceType> {
        self.registry
            .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .expect("CRDs are built in")
    }

    /// Whether namespace `ns` is being deleted (no new objects go in).
    pub(crate) fn namespace_terminating(&self, ns: &str) -> bool {
        self.get_raw(&self.namespace_type(), "", ns)
            .is_some_and(|n| n["metadata"]["deletionTimestamp"].is_string())
    }

    /// Whether the CRD defining custom kind `rt` is being deleted.
    pub(crate) fn crd_terminating(&self, rt: &ResourceType) -> bool {
        rt.custom
            && self
                .get_raw(&self.crd_type(), "", &format!("{}.{}", rt.plural, rt.group))
                .is_some_and(|c| c["metadata"]["deletionTimestamp"].is_string())
    }
}
