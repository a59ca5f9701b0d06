//! Patches and field ownership: JSON merge patch, JSON patch, strategic
//! merge patch and server-side apply, plus `metadata.managedFields`.
//!
//! Faithful: RFC 7386 merge patch and RFC 6902 JSON patch (a failed `test`
//! is a 422; as in the real server's evanphx/json-patch, `test` of a missing
//! path against `null` passes — kube-runtime's finalizer helper relies on
//! it); server-side apply creates absent objects, merges the applied
//! configuration into the live object, records the manager with
//! `operation: Apply` (and `subresource: status` for `/status`), removes
//! fields the manager applied before but omits now unless another manager
//! owns them, and answers 409 Conflict when it would change a field another
//! manager owns — unless `force=true`, which takes the field over. Update,
//! patch and create record the fields they changed under `operation: Update`
//! and take those fields from other managers.
//! Simplified:
//! - strategic merge patch is a JSON merge patch (`$patch`/`$retainKeys`
//!   directives are dropped), so lists are replaced, not merged by key;
//! - every list is atomic for apply (no `x-kubernetes-list-type: map`
//!   merging by key): the applier owns and replaces the whole list;
//! - `fieldsV1` holds only `f:` entries (no `k:`/`v:`/`.` entries);
//! - managedFields in a request body are ignored, never used to reset
//!   ownership.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

pub(crate) type Path = Vec<String>;
pub(crate) type FieldSet = BTreeSet<Path>;

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The main resource; `status_separate` when the kind has a status
    /// subresource (then `status` is out of reach).
    Main {
        status_separate: bool,
    },
    Status,
}

impl Scope {
    pub fn subresource(self) -> Option<&'static str> {
        match self {
            Scope::Main { .. } => None,
            Scope::Status => Some("status"),
        }
    }

    fn contains(self, path: &[String]) -> bool {
        let Some(first) = path.first() else {
            return false;
        };
        match (first.as_str(), self) {
            ("apiVersion" | "kind", _) => false,
            ("status", Scope::Status) => true,
            (_, Scope::Status) => false,
            ("status", Scope::Main { status_separate }) => !status_separate,
            ("metadata", Scope::Main { .. }) => matches!(
                path.get(1).map(String::as_str),
                Some("labels" | "annotations" | "finalizers" | "ownerReferences")
            ),
            _ => true,
        }
    }
}

fn collect(v: &Value, path: &mut Path, scope: Scope, out: &mut FieldSet) {
    if let Value::Object(m) = v {
        if !m.is_empty() {
            for (k, child) in m {
                path.push(k.clone());
                collect(child, path, scope, out);
                path.pop();
            }
            return;
        }
    }
    // Metadata itself is not a field a manager owns, only its parts.
    if !v.is_null() && scope.contains(path) && !(path.len() == 1 && path[0] == "metadata") {
        out.insert(path.clone());
    }
}

/// Leaf fields set in `v` that `scope` may write; lists are leaves.
pub(crate) fn leaf_paths(v: &Value, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    collect(v, &mut Vec::new(), scope, &mut out);
    out
}

pub(crate) fn get_path<'a>(v: &'a Value, p: &[String]) -> Option<&'a Value> {
    p.iter().try_fold(v, |cur, k| cur.as_object()?.get(k))
}

fn set_path(v: &mut Value, p: &[String], val: Value) {
    let Some((last, parents)) = p.split_last() else {
        return;
    };
    let mut cur = v;
    for k in parents {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(m) = cur.as_object_mut() else { return };
        cur = m.entry(k.clone()).or_insert_with(|| json!({}));
    }
    if !cur.is_object() {
        *cur = json!({});
    }
    if let Some(m) = cur.as_object_mut() {
        m.insert(last.clone(), val);
    }
}

fn remove_path(v: &mut Value, p: &[String]) {
    let Some((last, parents)) = p.split_last() else {
        return;
    };
    let mut cur = v;
    for k in parents {
        match cur.get_mut(k) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

fn is_empty_map(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.is_empty())
}

/// Whether writing field `p` (valued as in `p_doc`) touches field `q`
/// (valued as in `q_doc`): the same field, or one is an atomic value (not
/// an empty map, which only asserts existence) containing the other.
fn touches(p: &[String], q: &[String], p_doc: &Value, q_doc: &Value) -> bool {
    if p == q {
        return true;
    }
    let atomic = |doc: &Value, at: &[String]| get_path(doc, at).is_some_and(|v| !v.is_object());
    (q.starts_with(p) && atomic(p_doc, p)) || (p.starts_with(q) && atomic(q_doc, q))
}

fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for k in p {
            let next = cur.entry(format!("f:{k}")).or_insert_with(|| json!({}));
            let Some(m) = next.as_object_mut() else { break };
            cur = m;
        }
    }
    Value::Object(root)
}

fn from_fields_v1(v: &Value, path: &mut Path, out: &mut FieldSet) {
    let children: Vec<(&String, &Value)> = v
        .as_object()
        .map(|m| m.iter().filter(|(k, _)| k.starts_with("f:")).collect())
        .unwrap_or_default();
    if children.is_empty() {
        if !path.is_empty() {
            out.insert(path.clone());
        }
        return;
    }
    for (k, child) in children {
        path.push(k[2..].to_string());
        from_fields_v1(child, path, out);
        path.pop();
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Manager {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    fields: FieldSet,
}

fn read_managers(obj: &Value) -> Vec<Manager> {
    let empty = Vec::new();
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            let mut fields = FieldSet::new();
            from_fields_v1(&e["fieldsV1"], &mut Vec::new(), &mut fields);
            Manager {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: e["subresource"].as_str().map(String::from),
                fields,
            }
        })
        .collect()
}

fn write_managers(obj: &mut Value, mut managers: Vec<Manager>) {
    managers.retain(|m| !m.fields.is_empty());
    let entries: Vec<Value> = managers
        .iter()
        .map(|m| {
            let mut e = json!({
                "manager": m.manager,
                "operation": m.operation,
                "apiVersion": m.api_version,
                "time": m.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&m.fields),
            });
            if let Some(s) = &m.subresource {
                e["subresource"] = json!(s);
            }
            e
        })
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

/// Who is writing, for ownership bookkeeping.
#[derive(Debug, Clone)]
pub(crate) struct Writer<'a> {
    pub manager: &'a str,
    pub scope: Scope,
    pub api_version: &'a str,
    pub now: &'a str,
}

impl Writer<'_> {
    fn is(&self, m: &Manager, operation: &str) -> bool {
        m.manager == self.manager
            && m.operation == operation
            && m.subresource.as_deref() == self.scope.subresource()
    }

    fn entry<'m>(&self, managers: &'m mut Vec<Manager>, operation: &str) -> &'m mut Manager {
        let idx = match managers.iter().position(|m| self.is(m, operation)) {
            Some(i) => i,
            None => {
                managers.push(Manager {
                    manager: self.manager.to_string(),
                    operation: operation.to_string(),
                    api_version: self.api_version.to_string(),
                    time: self.now.to_string(),
                    subresource: self.scope.subresource().map(String::from),
                    fields: FieldSet::new(),
                });
                managers.len() - 1
            }
        };
        &mut managers[idx]
    }
}

fn drop_vanished(managers: &mut [Manager], obj: &Value) {
    for m in managers.iter_mut() {
        m.fields.retain(|p| get_path(obj, p).is_some());
    }
}

/// Records an Update/Create by `w` that turned `old` into `new`.
pub(crate) fn record_update(old: Option<&Value>, new: &mut Value, w: &Writer) {
    let mut managers = old.map(read_managers).unwrap_or_default();
    let null = Value::Null;
    let changed: FieldSet = leaf_paths(new, w.scope)
        .into_iter()
        .filter(|p| get_path(old.unwrap_or(&null), p) != get_path(new, p))
        .collect();
    if !changed.is_empty() {
        for m in managers.iter_mut().filter(|m| !w.is(m, "Update")) {
            m.fields
                .retain(|q| !changed.iter().any(|p| touches(p, q, new, new)));
        }
        let e = w.entry(&mut managers, "Update");
        e.fields.extend(changed);
        e.time = w.now.to_string();
        e.api_version = w.api_version.to_string();
    }
    drop_vanished(&mut managers, new);
    write_managers(new, managers);
}

/// A field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApplyConflict {
    pub manager: String,
    pub field: String,
}

/// Server-side apply of `applied` onto `live` (or onto nothing, creating).
pub(crate) fn apply(
    live: Option<&Value>,
    applied: &Value,
    force: bool,
    w: &Writer,
) -> Result<Value, Vec<ApplyConflict>> {
    let mut managers = live.map(read_managers).unwrap_or_default();
    let applied_set = leaf_paths(applied, w.scope);
    let base = match live {
        Some(l) => l.clone(),
        None => json!({
            "apiVersion": applied["apiVersion"],
            "kind": applied["kind"],
            "metadata": {
                "name": applied["metadata"]["name"],
                "namespace": applied["metadata"]["namespace"],
            },
        }),
    };
    let clashes = |p: &Path, q: &Path| {
        let keeps_map = get_path(applied, p).is_some_and(is_empty_map)
            && get_path(&base, p).is_some_and(Value::is_object);
        !keeps_map && touches(p, q, applied, &base) && get_path(&base, p) != get_path(applied, p)
    };
    let mut conflicts = Vec::new();
    for m in managers.iter().filter(|m| !w.is(m, "Apply")) {
        for q in &m.fields {
            for p in applied_set.iter().filter(|p| clashes(p, q)) {
                conflicts.push(ApplyConflict {
                    manager: m.manager.clone(),
                    field: format!(".{}", p.join(".")),
                });
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(conflicts);
        }
        for m in managers.iter_mut().filter(|m| !w.is(m, "Apply")) {
            m.fields
                .retain(|q| !applied_set.iter().any(|p| clashes(p, q)));
        }
    }
    let mut result = base.clone();
    for p in &applied_set {
        if let Some(v) = get_path(applied, p) {
            // An empty map asserts the field exists; it must not wipe
            // entries others put there.
            if is_empty_map(v) && get_path(&result, p).is_some_and(Value::is_object) {
                continue;
            }
            set_path(&mut result, p, v.clone());
        }
    }
    let previous = managers
        .iter()
        .find(|m| w.is(m, "Apply"))
        .map(|m| m.fields.clone())
        .unwrap_or_default();
    for p in previous.difference(&applied_set) {
        let others_own = managers
            .iter()
            .filter(|m| !w.is(m, "Apply"))
            .any(|m| m.fields.iter().any(|q| touches(p, q, &base, &base)));
        let still_applied = applied_set.iter().any(|q| q.starts_with(p));
        if !others_own && !still_applied {
            remove_path(&mut result, p);
        }
    }
    let e = w.entry(&mut managers, "Apply");
    if e.fields != applied_set || live.is_none() {
        e.time = w.now.to_string();
    }
    e.fields = applied_set;
    e.api_version = w.api_version.to_string();
    drop_vanished(&mut managers, &result);
    write_managers(&mut result, managers);
    Ok(result)
}

/// JSON merge patch; also used for strategic merge patch, whose `$`
/// directives are dropped first.
pub(crate) fn merge_patch(doc: &mut Value, patch: &Value, strategic: bool) {
    if strategic {
        let mut p = patch.clone();
        strip_directives(&mut p);
        json_patch::merge(doc, &p);
    } else {
        json_patch::merge(doc, patch);
    }
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

/// RFC 6902 JSON patch; the error names the failing operation.
pub(crate) fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let mut ops: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| format!("invalid JSON patch: {e}"))?;
    // The API server's JSON patch library (evanphx/json-patch) treats a
    // `test` of a missing path against `null` as a match; kube-runtime's
    // finalizer helper relies on it (`test /metadata/finalizers null` before
    // adding the first finalizer). RFC 6902 says missing paths fail, as the
    // json-patch crate does, so such tests are dropped when the path is absent.
    ops.0.retain(|op| match op {
        json_patch::PatchOperation::Test(t) => {
            !(t.value.is_null() && doc.pointer(t.path.as_str()).is_none())
        }
        _ => true,
    });
    json_patch::patch(doc, &ops).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w<'a>(manager: &'a str) -> Writer<'a> {
        Writer {
            manager,
            scope: Scope::Main {
                status_separate: true,
            },
            api_version: "v1",
            now: "2025-01-01T00:00:00Z",
        }
    }

    #[test]
    fn apply_removes_fields_the_manager_no_longer_applies() {
        let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"a": "1", "b": "2"}});
        let live = apply(None, &first, false, &w("m")).unwrap();
        let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"a": "1"}});
        let out = apply(Some(&live), &second, false, &w("m")).unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
        assert!(out["metadata"]["labels"].get("x").is_none());
    }

    #[test]
    fn apply_conflicts_with_another_managers_field_unless_forced() {
        let live = apply(
            None,
            &json!({"metadata": {"name": "a"}, "data": {"a": "1"}}),
            false,
            &w("one"),
        )
        .unwrap();
        let change = json!({"metadata": {"name": "a"}, "data": {"a": "2"}});
        let err = apply(Some(&live), &change, false, &w("two")).unwrap_err();
        assert_eq!(
            err[0],
            ApplyConflict {
                manager: "one".into(),
                field: ".data.a".into()
            }
        );
        let forced = apply(Some(&live), &change, true, &w("two")).unwrap();
        assert_eq!(forced["data"]["a"], "2");
        assert_eq!(
            forced["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn apply_keeps_fields_another_manager_updated() {
        let live = apply(
            None,
            &json!({"metadata": {"name": "a"}, "data": {"a": "1", "b": "2"}}),
            false,
            &w("one"),
        )
        .unwrap();
        let mut edited = live.clone();
        edited["data"]["b"] = json!("3");
        record_update(Some(&live), &mut edited, &w("editor"));
        let out = apply(
            Some(&edited),
            &json!({"metadata": {"name": "a"}, "data": {"a": "1"}}),
            false,
            &w("one"),
        )
        .unwrap();
        assert_eq!(out["data"], json!({"a": "1", "b": "3"}));
    }

    #[test]
    fn status_scope_ignores_spec_and_main_scope_ignores_status() {
        let obj =
            json!({"metadata": {"name": "a", "uid": "u"}, "spec": {"x": 1}, "status": {"y": 2}});
        let main = leaf_paths(
            &obj,
            Scope::Main {
                status_separate: true,
            },
        );
        assert_eq!(main, FieldSet::from([vec!["spec".into(), "x".into()]]));
        let status = leaf_paths(&obj, Scope::Status);
        assert_eq!(status, FieldSet::from([vec!["status".into(), "y".into()]]));
    }

    #[test]
    fn json_patch_test_of_a_missing_path_against_null_passes_as_upstream() {
        let mut doc = json!({"metadata": {}});
        json_patch(
            &mut doc,
            &json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                    {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]),
        )
        .unwrap();
        assert_eq!(doc["metadata"]["finalizers"], json!(["f"]));
        // A present value still has to match.
        assert!(json_patch(
            &mut doc,
            &json!([{"op": "test", "path": "/metadata/finalizers", "value": null}])
        )
        .is_err());
    }

    #[test]
    fn json_patch_test_failure_is_reported() {
        let mut doc = json!({"a": 1});
        let err =
            json_patch(&mut doc, &json!([{"op": "test", "path": "/a", "value": 2}])).unwrap_err();
        assert!(err.contains("did not match"), "{err}");
    }
}
