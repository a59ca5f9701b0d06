//! The Kubernetes API calls `toolgate-operator uninstall` makes — the
//! contract between the subcommand and the RBAC of the chart's pre-delete
//! hook (and `deploy/uninstall`). The operator suite checks that an
//! uninstall makes exactly these calls; the deploy suite checks that the
//! rendered hook RBAC grants exactly these.

/// Where a call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The operator's (release) namespace.
    Publish,
    /// Where McpUpstreams are watched: every namespace, or
    /// `operator.watchNamespace`.
    Watched,
}

/// One kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub verb: &'static str,
    pub group: &'static str,
    /// Plural resource name, with `/subresource` if any.
    pub resource: &'static str,
    pub scope: Scope,
    /// The one object it concerns, when the rule can name it (the chart's
    /// default names, release `toolgate`).
    pub name: Option<&'static str>,
}

const fn call(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    scope: Scope,
    name: Option<&'static str>,
) -> Call {
    Call {
        verb,
        group,
        resource,
        scope,
        name,
    }
}

/// Every call, in the order the subcommand makes them.
pub const CALLS: &[Call] = &[
    // 1. Stop the operator.
    call(
        "get",
        "apps",
        "deployments/scale",
        Scope::Publish,
        Some("toolgate-operator"),
    ),
    call(
        "patch",
        "apps",
        "deployments/scale",
        Scope::Publish,
        Some("toolgate-operator"),
    ),
    call("list", "", "pods", Scope::Publish, None),
    call(
        "get",
        "coordination.k8s.io",
        "leases",
        Scope::Publish,
        Some("toolgate-operator"),
    ),
    call(
        "delete",
        "coordination.k8s.io",
        "leases",
        Scope::Publish,
        Some("toolgate-operator"),
    ),
    // 2. Unpublish.
    call("list", "", "configmaps", Scope::Publish, None),
    call("delete", "", "configmaps", Scope::Publish, None),
    call(
        "get",
        "",
        "secrets",
        Scope::Publish,
        Some("toolgate-credentials"),
    ),
    call(
        "delete",
        "",
        "secrets",
        Scope::Publish,
        Some("toolgate-credentials"),
    ),
    // 3. Release the McpUpstreams.
    call("list", "toolgate.dev", "mcpupstreams", Scope::Watched, None),
    call(
        "patch",
        "toolgate.dev",
        "mcpupstreams",
        Scope::Watched,
        None,
    ),
];
