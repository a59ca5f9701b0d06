//! Write semantics: create, update, patch, apply and delete, with the
//! rules the real API server enforces around them.
//!
//! Faithful: `generateName` (5 random characters appended), `uid`,
//! `creationTimestamp`, `generation` (CRDs and custom resources: 1 on
//! create, +1 when anything outside metadata — and outside status when the
//! kind has a status subresource — changes); optimistic concurrency (a
//! stale `metadata.resourceVersion` is a 409 Conflict); status subresource
//! isolation (main writes keep the stored status, `/status` writes change
//! only status; create drops status); no-op writes keep the
//! resourceVersion and emit no event; deletion with finalizers sets
//! `deletionTimestamp` and keeps the object until an update empties
//! `metadata.finalizers`; namespaced objects need an existing namespace;
//! names must be DNS subdomains (namespaces: DNS labels); Secret
//! `stringData` is folded into base64 `data`; CRDs get `Established` and
//! `NamesAccepted` conditions, `acceptedNames` and `storedVersions`, and
//! (un)register their kind; deleting a namespace or a CRD deletes its
//! objects and keeps it `Terminating` while finalizers hold any (see
//! `kinds`).
//! Simplified: propagation policies, grace periods, owner-reference garbage
//! collection and admission plugins do not exist; Services get a fake
//! `clusterIP` and no endpoints.
//!
//! Size: over 600 lines because this is the write verbs of the fake API
//! server, which share the precondition, generation and field-manager rules
//! that make them faithful.

use serde_json::{json, Value};
use std::sync::{Arc, LazyLock};

use super::discovery::ResourceType;
use super::kinds;
use super::patch::{self, Scope, Writer};
use super::status::ApiError;
use super::store::{meta_str, now, ChangeKind, Store};

/// Who writes, at which version of the kind, and whether to persist.
pub(crate) struct WriteCtx<'a> {
    pub manager: &'a str,
    pub version: &'a str,
    pub dry_run: bool,
}

pub(crate) enum PatchBody<'a> {
    Merge(&'a Value),
    Strategic(&'a Value),
    Json(&'a Value),
    Apply { object: &'a Value, force: bool },
}

static LABEL: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").expect("constant regex")
});

fn scope(rt: &ResourceType, status: bool) -> Scope {
    match status {
        true => Scope::Status,
        false => Scope::Main {
            status_separate: rt.status,
        },
    }
}

fn invalid(rt: &ResourceType, name: &str, field: &str, msg: String) -> ApiError {
    ApiError::invalid(&rt.group, &rt.kind, name, &[(field.to_string(), msg)])
}

/// The part of an object whose change bumps `generation`.
fn spec_part(rt: &ResourceType, o: &Value) -> Value {
    let mut v = o.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        if rt.status {
            m.remove("status");
        }
    }
    v
}

fn without_volatile(o: &Value) -> Value {
    let mut v = o.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("resourceVersion");
        if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
            for e in entries {
                if let Some(e) = e.as_object_mut() {
                    e.remove("time");
                }
            }
        }
    }
    v
}

impl Store {
    fn after_commit(&mut self, rt: &ResourceType, defined: Option<ResourceType>) {
        if let Some(d) = defined {
            debug_assert!(rt.plural == "customresourcedefinitions");
            self.registry.register(d);
        }
    }

    pub fn create(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        body: Value,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        self.create_inner(rt, ns, body, ctx, true)
    }

    fn create_inner(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        mut obj: Value,
        ctx: &WriteCtx,
        record: bool,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        kinds::to_storage(rt, &mut obj);
        if let Some(k) = obj["kind"]
            .as_str()
            .filter(|k| !k.is_empty() && *k != rt.kind)
        {
            return Err(ApiError::bad_request(format!(
                "the kind {k:?} does not match the resource {:?}",
                rt.plural
            )));
        }
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        if self.crd_terminating(rt) {
            return Err(ApiError::method_not_allowed(
                "create not allowed while custom resource definition is terminating",
            ));
        }
        if rt.namespaced {
            let body_ns = meta_str(&obj, "namespace");
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
            }
            obj["metadata"]["namespace"] = json!(ns);
            if !self.namespace_exists(ns) {
                return Err(ApiError::not_found("", "namespaces", ns));
            }
            if self.namespace_terminating(ns) {
                return Err(ApiError::refused(
                    &rt.group,
                    &rt.plural,
                    meta_str(&obj, "name"),
                    &format!("unable to create new content in namespace {ns} because it is being terminated"),
                ));
            }
        } else if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        let mut name = meta_str(&obj, "name").to_string();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName").to_string();
            if prefix.is_empty() {
                return Err(invalid(
                    rt,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required".into(),
                ));
            }
            name = format!("{prefix}{}", self.name_suffix());
            obj["metadata"]["name"] = json!(name);
        }
        let (re, max) = if rt.plural == "namespaces" {
            (&*LABEL, 63)
        } else {
            (&*kinds::SUBDOMAIN, 253)
        };
        if name.len() > max || !re.is_match(&name) {
            return Err(invalid(rt, &name, "metadata.name", format!("Invalid value: {name:?}: a lowercase RFC 1123 name must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")));
        }
        if self.get_raw(rt, ns, &name).is_some() {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
        }
        obj["apiVersion"] = json!(rt.api_version(rt.storage_version()));
        obj["kind"] = json!(rt.kind);
        if let Some(m) = obj["metadata"].as_object_mut() {
            for k in [
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
            ] {
                m.remove(k);
            }
            if !record {
                // Apply has already computed managedFields.
            } else {
                m.remove("managedFields");
            }
        }
        let uid = self.uid();
        obj["metadata"]["uid"] = json!(uid);
        obj["metadata"]["creationTimestamp"] = json!(now());
        if rt.generation {
            obj["metadata"]["generation"] = json!(1);
        } else if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("generation");
        }
        if rt.status && rt.plural != "namespaces" {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        let defined = self.admit(rt, &mut obj, None, ctx.version)?;
        if record {
            let av = rt.api_version(ctx.version);
            let now = now();
            let w = Writer {
                manager: ctx.manager,
                scope: scope(rt, false),
                api_version: &av,
                now: &now,
            };
            patch::record_update(None, &mut obj, &w);
        }
        if ctx.dry_run {
            return Ok(obj);
        }
        let stored = self.commit(&rt.storage_key(), ChangeKind::Added, obj, None);
        self.after_commit(rt, defined);
        Ok(stored)
    }

    /// PUT: replaces the object (or its status), honouring resourceVersion.
    pub fn update(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        body: Value,
        status: bool,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        let body_name = meta_str(&body, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let old = self.get(rt, ns, name)?;
        let mut body = body;
        kinds::to_storage(rt, &mut body);
        self.finish(rt, old, body, status, ctx, false)
    }

    pub fn patch(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        body: PatchBody,
        status: bool,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        let old = self.get_raw(rt, ns, name).cloned();
        let av = rt.api_version(ctx.version);
        let now = now();
        let w = Writer {
            manager: ctx.manager,
            scope: scope(rt, status),
            api_version: &av,
            now: &now,
        };
        let apply_err = |conflicts: Vec<patch::ApplyConflict>| {
            let list: Vec<String> = conflicts
                .iter()
                .map(|c| format!("conflict with {:?}: {}", c.manager, c.field))
                .collect();
            let mut e = ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "{} conflict{}: {}",
                    list.len(),
                    if list.len() == 1 { "" } else { "s" },
                    list.join(", ")
                ),
            );
            e.message = format!(
                "Apply failed with {}",
                e.message.split_once(": ").map(|x| x.1).unwrap_or_default()
            );
            e.details = Some(json!({"name": name, "group": rt.group, "kind": rt.plural,
                "causes": conflicts.iter().map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {:?}", c.manager), "field": c.field})).collect::<Vec<_>>()}));
            e
        };
        let Some(old) = old else {
            return match body {
                PatchBody::Apply { object, force } => {
                    if status {
                        return Err(ApiError::not_found(&rt.group, &rt.plural, name));
                    }
                    let mut applied = object.clone();
                    applied["metadata"]["name"] = json!(name);
                    if rt.namespaced {
                        applied["metadata"]["namespace"] = json!(ns);
                    }
                    let mut created = patch::apply(None, &applied, force, &w).map_err(apply_err)?;
                    if let Some(m) = created["metadata"].as_object_mut() {
                        for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
                            if let Some(v) = applied["metadata"].get(k) {
                                m.insert(k.into(), v.clone());
                            }
                        }
                    }
                    self.create_inner(rt, ns, created, ctx, false)
                }
                _ => Err(ApiError::not_found(&rt.group, &rt.plural, name)),
            };
        };
        // Patches address the served shape, which may differ from storage.
        let served = kinds::to_external(rt, old.clone());
        let (mut candidate, record) = match body {
            PatchBody::Merge(p) | PatchBody::Strategic(p) => {
                if !p.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                let mut c = served;
                patch::merge_patch(&mut c, p, matches!(body, PatchBody::Strategic(_)));
                (c, true)
            }
            PatchBody::Json(p) => {
                let mut c = served;
                patch::json_patch(&mut c, p).map_err(|e| {
                    ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?;
                (c, true)
            }
            PatchBody::Apply { object, force } => {
                // A resourceVersion in the applied configuration is a
                // precondition, as for updates.
                if let Some(rv) = object["metadata"]["resourceVersion"].as_str() {
                    if rv != meta_str(&old, "resourceVersion") {
                        return Err(ApiError::modified(&rt.group, &rt.plural, name));
                    }
                }
                if let Some(k) = object["kind"].as_str().filter(|k| *k != rt.kind) {
                    return Err(ApiError::bad_request(format!(
                        "the kind {k:?} does not match the resource {:?}",
                        rt.plural
                    )));
                }
                (
                    patch::apply(Some(&served), object, force, &w).map_err(apply_err)?,
                    false,
                )
            }
        };
        kinds::to_storage(rt, &mut candidate);
        self.finish(rt, old, candidate, status, ctx, !record)
    }

    /// The common tail of update and patch: scope the change, keep system
    /// fields, admit, bump generation, and commit unless nothing changed.
    fn finish(
        &mut self,
        rt: &Arc<ResourceType>,
        old: Value,
        candidate: Value,
        status: bool,
        ctx: &WriteCtx,
        applied: bool,
    ) -> Result<Value, ApiError> {
        let name = meta_str(&old, "name").to_string();
        let ns = meta_str(&old, "namespace").to_string();
        if let Some(rv) = candidate["metadata"]["resourceVersion"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            if rv != meta_str(&old, "resourceVersion") {
                return Err(ApiError::modified(&rt.group, &rt.plural, &name));
            }
        }
        let sc = scope(rt, status);
        let mut new = match sc {
            Scope::Status => {
                let mut n = old.clone();
                n["status"] = candidate.get("status").cloned().unwrap_or(Value::Null);
                if let Some(mf) = candidate["metadata"]
                    .get("managedFields")
                    .filter(|_| applied)
                {
                    n["metadata"]["managedFields"] = mf.clone();
                }
                if n["status"].is_null() {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
                n
            }
            Scope::Main { status_separate } => {
                let mut n = candidate;
                if !n.is_object() || !n["metadata"].is_object() {
                    return Err(ApiError::bad_request(
                        "the request body must be an object with metadata",
                    ));
                }
                if status_separate {
                    match old.get("status") {
                        Some(s) => n["status"] = s.clone(),
                        None => {
                            if let Some(m) = n.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                }
                n
            }
        };
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old["metadata"].get(k) {
                Some(v) => new["metadata"][k] = v.clone(),
                None => {
                    if let Some(m) = new["metadata"].as_object_mut() {
                        m.remove(k);
                    }
                }
            }
        }
        if !applied {
            let keep = old["metadata"].get("managedFields").cloned();
            match keep {
                Some(mf) => new["metadata"]["managedFields"] = mf,
                None => {
                    if let Some(m) = new["metadata"].as_object_mut() {
                        m.remove("managedFields");
                    }
                }
            }
        }
        new["apiVersion"] = old["apiVersion"].clone();
        new["kind"] = old["kind"].clone();
        if old["metadata"]["deletionTimestamp"].is_string() {
            let before = old["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let after = new["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if after.iter().any(|f| !before.contains(f)) {
                return Err(invalid(
                    rt,
                    &name,
                    "metadata.finalizers",
                    "Forbidden: no new finalizers can be added if the object is being deleted"
                        .into(),
                ));
            }
        }
        let defined = self.admit(rt, &mut new, Some(&old), ctx.version)?;
        if !applied {
            let av = rt.api_version(ctx.version);
            let now = now();
            let w = Writer {
                manager: ctx.manager,
                scope: sc,
                api_version: &av,
                now: &now,
            };
            patch::record_update(Some(&old), &mut new, &w);
        }
        if rt.generation && spec_part(rt, &old) != spec_part(rt, &new) {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(0);
            new["metadata"]["generation"] = json!(g + 1);
        }
        if without_volatile(&old) == without_volatile(&new) {
            return Ok(old);
        }
        if ctx.dry_run {
            return Ok(new);
        }
        let key = rt.storage_key();
        let finalizers_done = new["metadata"]["finalizers"]
            .as_array()
            .is_none_or(|f| f.is_empty());
        if new["metadata"]["deletionTimestamp"].is_string() && finalizers_done {
            let _ = ns;
            return Ok(self.remove(rt, new, old));
        }
        let stored = self.commit(&key, ChangeKind::Modified, new, Some(old));
        self.after_commit(rt, defined);
        Ok(stored)
    }

    /// DELETE: returns the object and whether it is gone (false while
    /// finalizers hold it).
    pub fn delete(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        preconditions: &Value,
        ctx: &WriteCtx,
    ) -> Result<(Value, bool), ApiError> {
        let old = self.get(rt, ns, name)?;
        for (k, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            if let Some(want) = preconditions[k].as_str() {
                let have = meta_str(&old, k);
                if want != have {
                    return Err(ApiError::conflict(&rt.group, &rt.plural, name, &format!("Precondition failed: {label} in precondition: {want}, {label} in object meta: {have}")));
                }
            }
        }
        if !ctx.dry_run
            && ((rt.group.is_empty() && rt.plural == "namespaces")
                || (rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions"))
        {
            return Ok(self.terminate(rt, old));
        }
        let has_finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if old["metadata"]["deletionTimestamp"].is_string() {
                return Ok((old, false));
            }
            let mut n = old.clone();
            n["metadata"]["deletionTimestamp"] = json!(now());
            n["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if rt.generation {
                let g = old["metadata"]["generation"].as_i64().unwrap_or(0);
                n["metadata"]["generation"] = json!(g + 1);
            }
            if ctx.dry_run {
                return Ok((n, false));
            }
            let stored = self.commit(&rt.storage_key(), ChangeKind::Modified, n, Some(old));
            return Ok((stored, false));
        }
        if ctx.dry_run {
            return Ok((old, true));
        }
        let gone = self.remove(rt, old.clone(), old);
        Ok((gone, true))
    }
}

impl Store {
    /// PUT or PATCH of a Deployment's `scale`: `change` turns the current
    /// Scale into the wanted one, of which `spec.replicas` is written (a
    /// `metadata.resourceVersion` in it is a precondition). Returns the new
    /// Scale.
    pub(crate) fn write_scale(
        &mut self,
        rt: &std::sync::Arc<ResourceType>,
        ns: &str,
        name: &str,
        change: impl FnOnce(Value) -> Result<Value, ApiError>,
        ctx: &WriteCtx,
    ) -> Result<Value, ApiError> {
        let old = self.get(rt, ns, name)?;
        let wanted = change(kinds::scale_of(&old))?;
        if let Some(rv) = wanted["metadata"]["resourceVersion"]
            .as_str()
            .filter(|rv| !rv.is_empty())
        {
            if rv != meta_str(&old, "resourceVersion") {
                return Err(ApiError::modified(&rt.group, &rt.plural, name));
            }
        }
        let replicas = wanted["spec"]["replicas"]
            .as_i64()
            .filter(|r| *r >= 0)
            .ok_or_else(|| {
                ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    &[(
                        "spec.replicas".into(),
                        format!(
                            "Invalid value: {}: must be greater than or equal to 0",
                            wanted["spec"]["replicas"]
                        ),
                    )],
                )
            })?;
        let mut new = old;
        new["spec"]["replicas"] = json!(replicas);
        let stored = self.update(rt, ns, name, new, false, ctx)?;
        Ok(kinds::scale_of(&stored))
    }
}
