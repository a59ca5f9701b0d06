//! The generated CRD schemas are ones Kubernetes accepts (structural, CEL
//! rules that compile within the cost budget) and enforce what the issue
//! asks: the formats, the "exactly one of" rules with messages naming the
//! fields, list-map conditions, printer columns and names.

use crate::support::{schema, validate, walk};
use serde_json::{json, Value};

const KINDS: [&str; 3] = ["McpUpstream", "McpOverlay", "McpToolset"];

fn upstream(spec: Value) -> Value {
    json!({
        "apiVersion": "toolgate.dev/v1alpha1",
        "kind": "McpUpstream",
        "metadata": {"name": "petstore", "namespace": "default"},
        "spec": spec,
    })
}

fn toolset(spec: Value) -> Value {
    json!({
        "apiVersion": "toolgate.dev/v1alpha1",
        "kind": "McpToolset",
        "metadata": {"name": "readers", "namespace": "default"},
        "spec": spec,
    })
}

fn overlay(spec: Value) -> Value {
    json!({
        "apiVersion": "toolgate.dev/v1alpha1",
        "kind": "McpOverlay",
        "metadata": {"name": "hide-deletes", "namespace": "default"},
        "spec": spec,
    })
}

/// A valid upstream spec with `patch` merged over it (`null` removes a key).
fn upstream_with(patch: Value) -> Value {
    let mut spec = json!({
        "toolPrefix": "pets",
        "baseUrl": "http://127.0.0.1:8081/api",
        "openapi": {"configMapRef": {"name": "petstore-openapi", "key": "openapi.yaml"}},
    });
    merge(&mut spec, patch);
    upstream(spec)
}

fn overlay_with(patch: Value) -> Value {
    let mut spec = json!({"upstreamRef": {"name": "petstore"}, "inline": "overlay: 1.0.0"});
    merge(&mut spec, patch);
    overlay(spec)
}

/// JSON merge patch (RFC 7396).
fn merge(target: &mut Value, patch: Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other,
    }
}

/// Asserts the object is refused with a message containing `message`.
#[track_caller]
fn assert_rejected(object: &Value, message: &str) {
    match validate(object) {
        Ok(()) => panic!("accepted, expected {message:?}:\n{:#}", object["spec"]),
        Err(errors) => assert!(
            errors.iter().any(|e| e.contains(message)),
            "expected {message:?}, got {errors:#?}"
        ),
    }
}

#[track_caller]
fn assert_accepted(object: &Value) {
    if let Err(errors) = validate(object) {
        panic!("refused {:#}: {errors:#?}", object["spec"]);
    }
}

#[test]
fn schemas_are_structural() {
    // https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema
    for kind in KINDS {
        let mut problems = Vec::new();
        walk(&schema(kind), "", &mut |path, node| {
            let at = if path.is_empty() { "<root>" } else { path };
            for forbidden in [
                "$ref",
                "anyOf",
                "oneOf",
                "allOf",
                "not",
                "definitions",
                "$defs",
            ] {
                if node.get(forbidden).is_some() {
                    problems.push(format!("{at}: has {forbidden}"));
                }
            }
            let preserve = node.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
            let int_or_string = node.get("x-kubernetes-int-or-string") == Some(&json!(true));
            if node.get("type").is_none() && !preserve && !int_or_string {
                problems.push(format!("{at}: no type"));
            }
            if node.get("properties").is_some() && node.get("additionalProperties").is_some() {
                problems.push(format!(
                    "{at}: properties and additionalProperties together"
                ));
            }
            if node
                .get("additionalProperties")
                .is_some_and(Value::is_boolean)
            {
                problems.push(format!("{at}: boolean additionalProperties"));
            }
            if let Some(keys) = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
            {
                let required = &node["items"]["required"];
                for key in keys {
                    if !required.as_array().is_some_and(|r| r.contains(key)) {
                        problems.push(format!("{at}: list-map key {key} not required"));
                    }
                }
            }
        });
        assert!(
            problems.is_empty(),
            "{kind} schema is not structural:\n{}",
            problems.join("\n")
        );
    }
}

#[test]
fn unknown_fields_are_preserved_only_in_extra_parameter_schemas() {
    // Everywhere else unknown fields are pruned, so typos in a spec vanish
    // instead of being stored; an extra parameter's JSON Schema is free-form.
    let mut found = Vec::new();
    for kind in KINDS {
        walk(&schema(kind), kind, &mut |path, node| {
            if node.get("x-kubernetes-preserve-unknown-fields").is_some() {
                found.push(path.to_string());
            }
        });
    }
    assert_eq!(found, ["McpUpstream.spec.tools.extraParameters[].schema"]);
}

#[test]
fn every_cel_rule_names_the_fields_it_checks() {
    let mut rules = 0;
    for kind in KINDS {
        walk(&schema(kind), kind, &mut |path, node| {
            for rule in node
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                rules += 1;
                let message = rule["message"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{path}: rule without message"));
                assert!(
                    message.contains("spec."),
                    "{path}: message {message:?} names no field"
                );
            }
        });
    }
    assert!(rules >= 12, "only {rules} rules found");
}

#[test]
fn cel_rules_compile_and_use_only_self() {
    use kube::core::cel::{analyze_rule, compile_schema, ScopeContext, WarningKind};
    for kind in KINDS {
        walk(&schema(kind), kind, &mut |path, node| {
            let Some(rules) = node
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
            else {
                return;
            };
            let compiled = compile_schema(node);
            let errors = compiled.compilation_errors();
            assert!(errors.is_empty(), "{path}: {errors:?}");
            for rule in rules {
                let rule = rule["rule"].as_str().unwrap();
                let bound = macro_variables(rule);
                let warnings: Vec<_> = analyze_rule(rule, &compiled, ScopeContext::CrdValidation)
                    .into_iter()
                    // NB: kube-cel's scope check does not know comprehension
                    // variables (`s` in `list.all(s, ...)`); those are fine.
                    .filter(|w| {
                        !(w.kind == WarningKind::WrongScope
                            && bound.iter().any(|v| w.message.contains(&format!("'{v}'"))))
                    })
                    .collect();
                assert!(warnings.is_empty(), "{path}: {rule}: {warnings:?}");
            }
        });
    }
}

/// Variables bound by CEL macros (`all`, `exists`, `exists_one`, `map`,
/// `filter`) in `rule`.
fn macro_variables(rule: &str) -> Vec<String> {
    let mut vars = Vec::new();
    for m in [".all(", ".exists(", ".exists_one(", ".map(", ".filter("] {
        for (i, _) in rule.match_indices(m) {
            let rest = &rule[i + m.len()..];
            if let Some((var, _)) = rest.split_once(',') {
                vars.push(var.trim().to_string());
            }
        }
    }
    vars
}

#[test]
fn formats_are_in_the_schema() {
    let s = schema("McpUpstream");
    let spec = &s["properties"]["spec"];
    assert_eq!(spec["required"], json!(["openapi", "toolPrefix"]));
    assert_eq!(
        spec["properties"]["toolPrefix"]["pattern"],
        "^[a-z](_?[a-z0-9])*$"
    );
    assert_eq!(spec["properties"]["toolPrefix"]["maxLength"], 30);
    assert_eq!(
        spec["properties"]["toolPrefix"]["pattern"],
        crds::TOOL_PREFIX_PATTERN
    );
    assert_eq!(
        spec["properties"]["baseUrl"]["pattern"],
        crds::HTTP_URL_PATTERN
    );
    assert_eq!(
        spec["properties"]["openapi"]["properties"]["refreshInterval"]["pattern"],
        crds::DURATION_PATTERN
    );
    assert_eq!(
        spec["properties"]["http"]["properties"]["timeout"]["pattern"],
        crds::DURATION_PATTERN
    );
    assert_eq!(
        spec["properties"]["serviceRef"]["properties"]["port"]["maximum"],
        json!(65535.0)
    );
    assert_eq!(
        spec["properties"]["validation"]["properties"]["successStatus"]["items"]["minimum"],
        json!(100.0)
    );
    assert_eq!(
        spec["properties"]["auth"]["properties"]["type"]["enum"],
        json!([
            "none",
            "bearer",
            "apiKey",
            "basic",
            "oauth2ClientCredentials",
            "tokenExchange"
        ])
    );
    let rate = &spec["properties"]["rateLimit"];
    assert_eq!(rate["required"], json!(["requestsPerSecond"]));
    let rps = &rate["properties"]["requestsPerSecond"];
    assert_eq!(
        (&rps["minimum"], &rps["exclusiveMinimum"], &rps["maximum"]),
        (&json!(0.0), &json!(true), &json!(1_000_000.0))
    );
    assert_eq!(rate["properties"]["burst"]["minimum"], json!(1.0));
    let header = &spec["properties"]["forwardIdentity"]["properties"]["header"];
    assert_eq!(header["pattern"], crds::HEADER_NAME_PATTERN);
    assert_eq!(header["maxLength"], 256);
    assert_eq!(
        spec["properties"]["validation"]["properties"]["responseFailure"]["enum"],
        json!(["warn", "fail"])
    );
    let status = &s["properties"]["status"]["properties"];
    assert_eq!(status["warnings"]["maxItems"], crds::MAX_STATUS_WARNINGS);
    assert_eq!(
        status["rejectedOperations"]["maxItems"],
        crds::MAX_STATUS_REJECTED
    );
    let o = schema("McpOverlay");
    assert_eq!(
        o["properties"]["status"]["properties"]["unmatchedTargets"]["maxItems"],
        crds::MAX_STATUS_UNMATCHED
    );
    assert_eq!(o["properties"]["spec"]["properties"]["order"]["default"], 0);
}

#[test]
fn patterns_accept_what_the_operator_accepts() {
    let re = |p: &str| regex::Regex::new(p).unwrap();
    let prefix = re(crds::TOOL_PREFIX_PATTERN);
    for ok in ["pets", "a", "github_v3", &format!("a{}", "b".repeat(29))] {
        assert!(prefix.is_match(ok), "{ok}");
    }
    for bad in [
        "", "Pets", "1pets", "_pets", "pets-v2", "pets.v2",
        // A `__` inside or a `_` at the end would let the prefix and
        // the separator of one upstream spell another's prefix.
        "pe__ts", "pets_",
    ] {
        assert!(!prefix.is_match(bad), "{bad}");
    }
    // The length (at most 30) is the schema's maxLength; the operator
    // checks the same grammar for objects stored before it.
    for ok in ["pets", "a", "github_v3", "a_b_c"] {
        assert!(catalog::prefix::check_shared(ok, "__").is_ok(), "{ok}");
    }
    for bad in ["pe__ts", "pets_", &format!("a{}", "b".repeat(30))] {
        assert!(catalog::prefix::check_shared(bad, "__").is_err(), "{bad}");
    }
    // Every prefix the schema accepts is a name the compiler accepts.
    assert!(catalog::naming::is_valid_name(&format!(
        "a{}",
        "b".repeat(29)
    )));

    let duration = re(crds::DURATION_PATTERN);
    for s in [
        "500ms",
        "30s",
        "1h30m",
        "1m1ms",
        "",
        "30",
        "1.5s",
        "-1s",
        "1d",
        "5mm",
        "1234567890s",
        "1 s",
    ] {
        assert_eq!(
            duration.is_match(s),
            crds::parse_duration(s).is_some(),
            "{s:?}"
        );
    }

    let url = re(crds::HTTP_URL_PATTERN);
    for ok in [
        "http://127.0.0.1:8081/api",
        "https://api.example.com",
        "https://x.example/v1?a=b",
    ] {
        assert!(url.is_match(ok), "{ok}");
    }
    for bad in [
        "ftp://x",
        "http://",
        "https:///path",
        "http://a b",
        "petstore:8081",
    ] {
        assert!(!url.is_match(bad), "{bad}");
    }
}

#[test]
fn conditions_are_a_list_map_keyed_on_type() {
    for kind in KINDS {
        let conditions = &schema(kind)["properties"]["status"]["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map", "{kind}");
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            json!(["type"]),
            "{kind}"
        );
        assert_eq!(
            conditions["items"]["properties"]["lastTransitionTime"]["format"],
            "date-time"
        );
    }
}

#[test]
fn names_columns_and_subresources() {
    let all = crds::crds();
    let (u, o) = (&all[0], &all[1]);
    assert_eq!(
        u.metadata.name.as_deref(),
        Some("mcpupstreams.toolgate.dev")
    );
    assert_eq!(o.metadata.name.as_deref(), Some("mcpoverlays.toolgate.dev"));
    for (crd, short) in [(u, "mcpu"), (o, "mcpo")] {
        assert_eq!(crd.spec.group, "toolgate.dev");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec![short.to_string()]));
        assert_eq!(crd.spec.names.categories, Some(vec!["mcp".to_string()]));
        let v = &crd.spec.versions[0];
        assert_eq!(
            (v.name.as_str(), v.served, v.storage),
            ("v1alpha1", true, true)
        );
        assert!(v
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some());
    }
    let columns: Vec<(&str, &str, &str)> = u.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Prefix", "string", ".spec.toolPrefix"),
            ("Tools", "integer", ".status.toolCount"),
            ("Tokens", "integer", ".status.listing.tokens"),
            (
                "Ready",
                "string",
                r#".status.conditions[?(@.type=="Ready")].status"#
            ),
            (
                "Reason",
                "string",
                r#".status.conditions[?(@.type=="Ready")].reason"#
            ),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]
    );
}

#[test]
fn a_minimal_upstream_is_accepted() {
    assert_accepted(&upstream_with(json!({})));
    assert_accepted(&upstream_with(json!({
        "baseUrl": null,
        "serviceRef": {"name": "petstore", "port": 8081},
        "openapi": {"configMapRef": null, "url": "https://example.com/openapi.json", "refreshInterval": "5m",
                    "headersFrom": {"name": "fetch-headers"}},
    })));
}

#[test]
fn base_url_and_service_ref_are_exclusive() {
    let msg = "exactly one of spec.baseUrl or spec.serviceRef must be set";
    assert_rejected(
        &upstream_with(json!({"serviceRef": {"name": "petstore", "port": 8081}})),
        msg,
    );
    assert_rejected(&upstream_with(json!({"baseUrl": null})), msg);
}

#[test]
fn openapi_needs_exactly_one_source() {
    let msg = "exactly one of spec.openapi.inline, spec.openapi.configMapRef or spec.openapi.url must be set";
    assert_rejected(
        &upstream_with(json!({"openapi": {"inline": "openapi: 3.0.3"}})),
        msg,
    );
    assert_rejected(
        &upstream_with(json!({"openapi": {"configMapRef": null}})),
        msg,
    );
    assert_rejected(
        &upstream_with(
            json!({"openapi": {"configMapRef": null, "inline": "x", "url": "https://e.com/o.json"}}),
        ),
        msg,
    );
    assert_accepted(&upstream_with(
        json!({"openapi": {"configMapRef": null, "inline": "openapi: 3.0.3"}}),
    ));
}

#[test]
fn url_settings_need_a_url() {
    assert_rejected(
        &upstream_with(json!({"openapi": {"refreshInterval": "5m"}})),
        "spec.openapi.refreshInterval is only valid with spec.openapi.url",
    );
    assert_rejected(
        &upstream_with(json!({"openapi": {"headersFrom": {"name": "h"}}})),
        "spec.openapi.headersFrom is only valid with spec.openapi.url",
    );
}

#[test]
fn auth_fields_must_fit_the_auth_type() {
    let secret = json!({"name": "creds"});
    for (auth, msg) in [
        (json!({"type": "bearer"}), "spec.auth.secretRef is required unless spec.auth.type is none"),
        (json!({"type": "none", "secretRef": secret}), "spec.auth.secretRef must not be set when spec.auth.type is none"),
        (
            json!({"type": "apiKey", "secretRef": secret}),
            "spec.auth.type apiKey needs exactly one of spec.auth.header or spec.auth.query",
        ),
        (
            json!({"type": "apiKey", "secretRef": secret, "header": "X-Key", "query": "key"}),
            "spec.auth.type apiKey needs exactly one of spec.auth.header or spec.auth.query",
        ),
        (
            json!({"type": "bearer", "secretRef": secret, "header": "X-Key"}),
            "spec.auth.header and spec.auth.query are only valid with spec.auth.type apiKey",
        ),
        (
            json!({"type": "oauth2ClientCredentials", "secretRef": secret}),
            "spec.auth.tokenUrl is required when spec.auth.type is oauth2ClientCredentials or tokenExchange",
        ),
        (
            json!({"type": "tokenExchange", "secretRef": secret, "audience": "pets-api"}),
            "spec.auth.tokenUrl is required when spec.auth.type is oauth2ClientCredentials or tokenExchange",
        ),
        (
            json!({"type": "basic", "secretRef": secret, "scopes": ["read"]}),
            "spec.auth.tokenUrl and spec.auth.scopes are only valid with spec.auth.type oauth2ClientCredentials or tokenExchange",
        ),
        (
            json!({"type": "oauth2ClientCredentials", "secretRef": secret,
                   "tokenUrl": "https://auth.example.com/token", "audience": "pets-api"}),
            "spec.auth.audience is only valid with spec.auth.type tokenExchange",
        ),
    ] {
        assert_rejected(&upstream_with(json!({ "auth": auth })), msg);
    }
    for auth in [
        json!({"type": "none"}),
        json!({"type": "bearer", "secretRef": secret}),
        json!({"type": "basic", "secretRef": {"name": "creds", "usernameKey": "u", "passwordKey": "p"}}),
        json!({"type": "apiKey", "secretRef": secret, "query": "api_key"}),
        json!({"type": "oauth2ClientCredentials", "secretRef": secret,
               "tokenUrl": "https://auth.example.com/token", "scopes": ["pets:read"]}),
        json!({"type": "tokenExchange", "secretRef": secret,
               "tokenUrl": "https://auth.example.com/token", "audience": "pets-api",
               "scopes": ["pets:read"]}),
    ] {
        assert_accepted(&upstream_with(json!({ "auth": auth })));
    }
}

#[test]
fn a_status_code_is_either_success_or_error() {
    assert_rejected(
        &upstream_with(json!({"validation": {"successStatus": [404, 409], "errorStatus": [202, 409]}})),
        "spec.validation.successStatus and spec.validation.errorStatus must not share a status code",
    );
    assert_accepted(&upstream_with(
        json!({"validation": {"successStatus": [404], "errorStatus": [202]}}),
    ));
}

#[test]
fn overlay_needs_one_target_and_one_document() {
    assert_accepted(&overlay_with(json!({})));
    assert_accepted(&overlay_with(json!({
        "upstreamRef": null, "upstreamSelector": {"matchLabels": {"team": "pets"}},
        "inline": null, "configMapRef": {"name": "overlays", "key": "hide.yaml"},
    })));
    let target = "exactly one of spec.upstreamRef or spec.upstreamSelector must be set";
    assert_rejected(
        &overlay_with(json!({"upstreamSelector": {"matchLabels": {"team": "pets"}}})),
        target,
    );
    assert_rejected(&overlay_with(json!({"upstreamRef": null})), target);
    let document = "exactly one of spec.inline or spec.configMapRef must be set";
    assert_rejected(
        &overlay_with(json!({"configMapRef": {"name": "o", "key": "k"}})),
        document,
    );
    assert_rejected(&overlay_with(json!({"inline": null})), document);
    assert_rejected(
        &overlay_with(json!({"upstreamRef": null, "upstreamSelector": {"matchLabels": {}}})),
        "spec.upstreamSelector.matchLabels must name at least one label",
    );
}

#[test]
fn lists_iterated_by_cel_rules_are_bounded() {
    // The API server estimates a rule's worst case from `maxItems`; an
    // unbounded list under `all(... in ...)` is estimated at millions of
    // elements and the CRD is refused. kube-cel's estimate is coarser than
    // the API server's, so the bound is asserted directly: 64 x 64 checks.
    let validation = &schema("McpUpstream")["properties"]["spec"]["properties"]["validation"];
    let rule = validation["x-kubernetes-validations"][0]["rule"]
        .as_str()
        .unwrap();
    assert!(rule.contains("self.successStatus.all(") && rule.contains("in self.errorStatus"));
    for list in ["successStatus", "errorStatus"] {
        assert_eq!(validation["properties"][list]["maxItems"], 64, "{list}");
    }
    // No other rule iterates.
    for kind in KINDS {
        walk(&schema(kind), kind, &mut |path, node| {
            for r in node
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let r = r["rule"].as_str().unwrap();
                if r != rule {
                    assert!(
                        macro_variables(r).is_empty(),
                        "{path}: {r} iterates; bound its lists"
                    );
                }
            }
        });
    }
}

#[test]
fn a_toolset_selects_each_upstream_by_exactly_one_of_name_and_selector() {
    assert_accepted(&toolset(json!({"upstreams": [
        {"name": "petstore"},
        {"name": "github", "namespaces": ["team-b"]},
        {"selector": {"matchLabels": {"team": "a"}}, "namespaces": ["team-a", "team-b"]},
        {"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}},
        {"selector": {}},
    ]})));
    let msg = "exactly one of spec.upstreams[].name or spec.upstreams[].selector must be set";
    assert_rejected(
        &toolset(json!({"upstreams": [{"name": "a", "selector": {}}]})),
        msg,
    );
    assert_rejected(&toolset(json!({"upstreams": [{"namespaces": ["x"]}]})), msg);
}

#[test]
fn toolset_lists_are_bounded_in_the_schema() {
    let s = schema("McpToolset");
    let spec = &s["properties"]["spec"]["properties"];
    assert_eq!(spec["upstreams"]["minItems"], 1);
    assert_eq!(spec["upstreams"]["maxItems"], crds::MAX_UPSTREAM_SELECTIONS);
    assert_eq!(
        spec["upstreams"]["items"]["properties"]["namespaces"]["maxItems"],
        crds::MAX_SELECTOR_NAMESPACES
    );
    let tools = &spec["tools"]["properties"];
    for (list, max) in [
        ("include", catalog::toolset::MAX_GLOBS),
        ("exclude", catalog::toolset::MAX_GLOBS),
        ("tags", catalog::toolset::MAX_TAGS),
    ] {
        assert_eq!(tools[list]["maxItems"], max, "{list}");
        assert!(tools[list]["items"]["maxLength"].is_number(), "{list}");
    }
    assert_eq!(tools["include"]["default"], json!(["*"]));
    assert_eq!(spec["pinned"]["maxItems"], catalog::toolset::MAX_PINNED);
    assert_eq!(spec["mode"]["enum"], json!(["all", "search"]));
    assert_eq!(spec["mode"]["default"], "all");
}

#[test]
fn toolset_columns_say_readiness_mode_size_and_age() {
    let crd = crds::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "McpToolset")
        .expect("the McpToolset CRD");
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("mcptoolsets.toolgate.dev")
    );
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.short_names, Some(vec!["mcpt".to_string()]));
    assert_eq!(crd.spec.names.categories, Some(vec!["mcp".to_string()]));
    let columns: Vec<(&str, &str)> = crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Ready", r#".status.conditions[?(@.type=="Ready")].status"#),
            ("Mode", ".spec.mode"),
            ("Tools", ".status.toolCount"),
            ("Tokens", ".status.listing.tokens"),
            ("Age", ".metadata.creationTimestamp"),
        ]
    );
}
