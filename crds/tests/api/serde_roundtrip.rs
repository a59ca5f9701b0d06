//! The Rust types read and write the wire format the CRD describes: every
//! field survives a round trip, and the names on the wire are the camelCase
//! names of the issue.

use std::collections::BTreeMap;

use crds::{
    AuthSecretRef, AuthSpec, AuthType, ConfigMapKeyRef, HttpSpec, ListingSize, McpOverlay,
    McpOverlaySpec, McpOverlayStatus, McpUpstream, McpUpstreamSpec, McpUpstreamStatus,
    OpenApiSource, RejectedOperation, ResponseFailure, Scheme, SecretRef, ServiceRef,
    UnmatchedTarget, UpstreamRef, ValidationSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::json;

fn condition(type_: &str, status: &str, reason: &str) -> Condition {
    Condition {
        last_transition_time: Time("2026-11-30T12:00:00Z".parse().unwrap()),
        message: format!("{type_} is {status}"),
        observed_generation: Some(3),
        reason: reason.into(),
        status: status.into(),
        type_: type_.into(),
    }
}

/// An McpUpstream with every field set (both alternatives of the "exactly one"
/// pairs too: serde does not enforce CEL rules, the API server does).
fn full_upstream() -> McpUpstream {
    let mut u = McpUpstream::new(
        "petstore",
        McpUpstreamSpec {
            tool_prefix: "pets".into(),
            base_url: Some("https://petstore.example.com/api".into()),
            service_ref: Some(ServiceRef {
                name: "petstore".into(),
                port: 8081,
                scheme: Scheme::Https,
                path: Some("/api".into()),
            }),
            openapi: OpenApiSource {
                inline: Some("openapi: 3.0.3".into()),
                config_map_ref: Some(ConfigMapKeyRef {
                    name: "petstore-openapi".into(),
                    key: "openapi.yaml".into(),
                }),
                url: Some("https://petstore.example.com/openapi.json".into()),
                refresh_interval: Some("1h30m".into()),
                headers_from: Some(SecretRef {
                    name: "spec-fetch-headers".into(),
                }),
            },
            overlays: vec!["hide-deletes".into(), "rename".into()],
            naming: Some(catalog::NamingOptions {
                separator: "_".into(),
                max_length: 48,
                conflict_resolution: catalog::ConflictResolution::FirstWins,
                ..Default::default()
            }),
            tools: Some(catalog::ToolOptions {
                read_only: true,
                include_toolsets: vec!["pets".into()],
                exclude_toolsets: vec!["admin".into()],
                disabled: vec!["pets__delete_pet".into()],
                raw_request_tool: true,
                extra_parameters: vec![catalog::ExtraParameter {
                    name: "sudo".into(),
                    location: catalog::ParamLocation::Query,
                    required: false,
                    description: Some("Act as another user.".into()),
                    schema: Some(json!({"type": "string", "enum": ["alice", "bob"]})),
                }],
            }),
            schema: Some(catalog::SchemaOptions {
                body_mode: catalog::BodyMode::Nested,
                additional_properties: true,
                description_budget: 512,
                nested_examples: true,
                title_copies: true,
                refs: catalog::SchemaRefs::Defs,
            }),
            validation: Some(ValidationSpec {
                request: false,
                response: true,
                response_failure: ResponseFailure::Fail,
                success_status: vec![404],
                error_status: vec![202],
            }),
            auth: Some(AuthSpec {
                type_: AuthType::Oauth2ClientCredentials,
                secret_ref: Some(AuthSecretRef {
                    name: "petstore-oauth".into(),
                    key: Some("token".into()),
                    username_key: Some("user".into()),
                    password_key: Some("pass".into()),
                    client_id_key: Some("id".into()),
                    client_secret_key: Some("secret".into()),
                }),
                header: Some("X-API-Key".into()),
                query: Some("api_key".into()),
                token_url: Some("https://auth.example.com/token".into()),
                scopes: vec!["pets:read".into(), "pets:write".into()],
                audience: Some("pets-api".into()),
            }),
            http: Some(HttpSpec {
                timeout: Some("10s".into()),
                max_response_bytes: Some(1 << 20),
                headers: BTreeMap::from([("X-Tenant".into(), "demo".into())]),
            }),
            rate_limit: Some(catalog::access::RateLimit {
                requests_per_second: 2.5,
                burst: Some(5),
            }),
            forward_identity: Some(catalog::access::ForwardIdentity {
                header: "X-Forwarded-User".into(),
                issuer_header: Some("X-Forwarded-Issuer".into()),
            }),
            access: Some(catalog::access::AccessPolicy {
                rules: vec![
                    catalog::access::AccessRule {
                        scopes: vec!["pets.read".into()],
                        tools: vec!["get_*".into(), "list_*".into()],
                        read_only: true,
                        when: None,
                    },
                    catalog::access::AccessRule {
                        when: Some("\"sre\" in claims.groups".into()),
                        ..Default::default()
                    },
                ],
            }),
        },
    );
    u.status = Some(McpUpstreamStatus {
        observed_generation: Some(3),
        conditions: vec![
            condition("Ready", "True", "Published"),
            condition("PrefixAccepted", "True", "PrefixHeld"),
        ],
        tool_count: Some(4),
        warnings: vec!["OverlayTargetUnmatched: action 1 matched nothing".into()],
        warning_count: Some(1),
        rejected_operations: vec![RejectedOperation {
            method: "DELETE".into(),
            path: "/pets/{petId}".into(),
            reason: "Disabled".into(),
            message: Some("x-mcp-enabled: false".into()),
        }],
        rejected_count: Some(1),
        listing: Some(ListingSize {
            bytes: 4_001,
            tokens: 1_001,
        }),
        catalog_hash: Some("ab".repeat(32)),
        served_replicas: Some(2),
    });
    u
}

#[test]
fn upstream_with_every_field_round_trips() {
    let u = full_upstream();
    let json = serde_json::to_value(&u).unwrap();
    let back: McpUpstream = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, u);
    // And through YAML, the format users write.
    let yaml = yaml_serde::to_string(&u).unwrap();
    let back: McpUpstream = yaml_serde::from_str(&yaml).unwrap();
    assert_eq!(back, u);

    // Wire names are the issue's camelCase names.
    assert_eq!(json["apiVersion"], "toolgate.dev/v1alpha1");
    assert_eq!(json["kind"], "McpUpstream");
    let spec = &json["spec"];
    for key in [
        "toolPrefix",
        "baseUrl",
        "serviceRef",
        "openapi",
        "overlays",
        "naming",
        "tools",
        "schema",
        "validation",
        "auth",
        "http",
        "rateLimit",
        "forwardIdentity",
    ] {
        assert!(spec.get(key).is_some(), "spec.{key} missing in {spec:#}");
    }
    assert_eq!(spec["openapi"]["refreshInterval"], "1h30m");
    assert_eq!(spec["openapi"]["headersFrom"]["name"], "spec-fetch-headers");
    assert_eq!(spec["tools"]["extraParameters"][0]["in"], "query");
    assert_eq!(spec["validation"]["responseFailure"], "fail");
    assert_eq!(spec["validation"]["successStatus"], json!([404]));
    assert_eq!(spec["auth"]["type"], "oauth2ClientCredentials");
    assert_eq!(spec["auth"]["secretRef"]["clientSecretKey"], "secret");
    assert_eq!(spec["http"]["maxResponseBytes"], 1 << 20);
    assert_eq!(spec["auth"]["audience"], "pets-api");
    assert_eq!(
        spec["rateLimit"],
        json!({"requestsPerSecond": 2.5, "burst": 5})
    );
    assert_eq!(spec["forwardIdentity"]["header"], "X-Forwarded-User");
    let status = &json["status"];
    assert_eq!(status["conditions"][0]["type"], "Ready");
    assert_eq!(status["rejectedOperations"][0]["path"], "/pets/{petId}");
    assert_eq!(status["listing"], json!({"bytes": 4001, "tokens": 1001}));
    for key in [
        "observedGeneration",
        "toolCount",
        "warnings",
        "rejectedCount",
        "catalogHash",
        "servedReplicas",
    ] {
        assert!(
            status.get(key).is_some(),
            "status.{key} missing in {status:#}"
        );
    }
}

#[test]
fn absent_optional_fields_stay_absent_on_the_wire() {
    // Skipped-when-None fields must not be sent as `null`: a `null` would
    // defeat schema defaults and count as "set" for server-side apply.
    let spec: McpUpstreamSpec = serde_json::from_value(json!({
        "toolPrefix": "pets",
        "baseUrl": "http://127.0.0.1:8081/api",
        "openapi": {"inline": "openapi: 3.0.3"},
    }))
    .unwrap();
    let json = serde_json::to_value(&spec).unwrap();
    assert_eq!(
        json,
        json!({"toolPrefix": "pets", "baseUrl": "http://127.0.0.1:8081/api", "openapi": {"inline": "openapi: 3.0.3"}})
    );
    let status = serde_json::to_value(McpUpstreamStatus::default()).unwrap();
    assert_eq!(status, json!({}));
}

#[test]
fn absent_blocks_mean_compiler_defaults() {
    let spec: McpUpstreamSpec = serde_json::from_value(json!({
        "toolPrefix": "pets",
        "baseUrl": "http://127.0.0.1:8081/api",
        "openapi": {"inline": "openapi: 3.0.3"},
    }))
    .unwrap();
    assert_eq!(spec.compile_options(), catalog::CompileOptions::default());

    // A partial block keeps the compiler's defaults for the rest.
    let spec: McpUpstreamSpec = serde_json::from_value(json!({
        "toolPrefix": "pets",
        "baseUrl": "http://127.0.0.1:8081/api",
        "openapi": {"inline": "openapi: 3.0.3"},
        "naming": {"separator": "_"},
        "validation": {"response": true},
    }))
    .unwrap();
    let options = spec.compile_options();
    assert_eq!(options.naming.separator, "_");
    assert_eq!(
        options.naming.max_length,
        catalog::NamingOptions::default().max_length
    );
    let validation = spec.validation.unwrap();
    assert!(validation.request, "request validation defaults to on");
    assert_eq!(validation.response_failure, ResponseFailure::Warn);
}

#[test]
fn auth_secret_keys_default_per_type() {
    let r = AuthSecretRef {
        name: "creds".into(),
        key: None,
        username_key: Some("user".into()),
        password_key: None,
        client_id_key: None,
        client_secret_key: None,
    };
    assert_eq!(r.keys(AuthType::None), Vec::<&str>::new());
    assert_eq!(r.keys(AuthType::Bearer), ["token"]);
    assert_eq!(r.keys(AuthType::ApiKey), ["apiKey"]);
    assert_eq!(r.keys(AuthType::Basic), ["user", "password"]);
    assert_eq!(
        r.keys(AuthType::Oauth2ClientCredentials),
        ["clientId", "clientSecret"]
    );
    assert_eq!(
        r.keys(AuthType::TokenExchange),
        ["clientId", "clientSecret"]
    );
}

#[test]
fn overlay_with_every_field_round_trips() {
    let mut o = McpOverlay::new(
        "hide-deletes",
        McpOverlaySpec {
            upstream_ref: Some(UpstreamRef {
                name: "petstore".into(),
            }),
            upstream_selector: Some(crds::UpstreamSelector {
                match_labels: BTreeMap::from([("team".into(), "pets".into())]),
            }),
            order: -5,
            inline: Some("overlay: 1.0.0".into()),
            config_map_ref: Some(ConfigMapKeyRef {
                name: "overlays".into(),
                key: "hide.yaml".into(),
            }),
            strict: true,
        },
    );
    o.status = Some(McpOverlayStatus {
        observed_generation: Some(1),
        conditions: vec![condition("Ready", "False", "OverlayTargetUnmatched")],
        applied_to: vec!["petstore".into()],
        unmatched_targets: vec![UnmatchedTarget {
            upstream: "petstore".into(),
            action: 1,
            target: "$.paths['/nope'].get".into(),
        }],
    });
    let json = serde_json::to_value(&o).unwrap();
    let back: McpOverlay = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, o);
    assert_eq!(json["kind"], "McpOverlay");
    for key in [
        "upstreamRef",
        "upstreamSelector",
        "order",
        "inline",
        "configMapRef",
        "strict",
    ] {
        assert!(json["spec"].get(key).is_some(), "spec.{key} missing");
    }
    assert_eq!(
        json["spec"]["upstreamSelector"]["matchLabels"]["team"],
        "pets"
    );
    assert_eq!(json["status"]["appliedTo"], json!(["petstore"]));
    assert_eq!(json["status"]["unmatchedTargets"][0]["action"], 1);
}

#[test]
fn overlay_order_and_strict_default_when_absent() {
    let spec: McpOverlaySpec = serde_json::from_value(json!({
        "upstreamRef": {"name": "petstore"},
        "inline": "overlay: 1.0.0",
    }))
    .unwrap();
    assert_eq!(spec.order, 0);
    assert!(!spec.strict);
}

#[test]
fn upstream_selector_needs_every_label() {
    let sel = crds::UpstreamSelector {
        match_labels: BTreeMap::from([
            ("team".into(), "pets".into()),
            ("tier".into(), "public".into()),
        ]),
    };
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(sel.matches(Some(&labels(&[
        ("team", "pets"),
        ("tier", "public"),
        ("x", "y")
    ]))));
    assert!(!sel.matches(Some(&labels(&[("team", "pets")]))));
    assert!(!sel.matches(None));
    let empty = crds::UpstreamSelector {
        match_labels: BTreeMap::new(),
    };
    assert!(
        !empty.matches(Some(&labels(&[("team", "pets")]))),
        "an empty selector matches nothing"
    );
}

#[test]
fn rejected_operation_from_catalog_keeps_method_path_and_reason() {
    let r = catalog::Rejected {
        method: "delete".into(),
        path: "/pets/{petId}".into(),
        operation_id: Some("deletePet".into()),
        pointer: "/paths/~1pets~1{petId}/delete".into(),
        reason: catalog::RejectReason::ReadOnlyMode,
        message: String::new(),
    };
    assert_eq!(
        RejectedOperation::from(&r),
        RejectedOperation {
            method: "DELETE".into(),
            path: "/pets/{petId}".into(),
            reason: "ReadOnlyMode".into(),
            message: None,
        }
    );
}

#[test]
fn recorded_catalog_lists_are_capped_with_full_counts() {
    let spec = br#"{"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
      "paths": {"/pets": {"get": {"operationId": "listPets", "responses": {"200": {"description": "ok"}}}}}}"#;
    let options = catalog::CompileOptions::default();
    let mut compiled = catalog::compile_upstream(&catalog::UpstreamSource {
        prefix: "pets",
        document: "inline",
        spec,
        overlays: &[],
        options: &options,
    })
    .unwrap();
    let rejected = catalog::Rejected {
        method: "delete".into(),
        path: "/pets/{petId}".into(),
        operation_id: None,
        pointer: "/paths/~1pets~1{petId}/delete".into(),
        reason: catalog::RejectReason::Disabled,
        message: "x-mcp-enabled: false".into(),
    };
    compiled.rejected = vec![rejected; crds::MAX_STATUS_REJECTED + 7];
    compiled.warnings = (0..crds::MAX_STATUS_WARNINGS + 3)
        .map(|i| catalog::Warning {
            code: catalog::WarningCode::OverlayTargetUnmatched,
            message: format!("action {i} matched nothing"),
            at: (i == 0).then(|| catalog::Location::Overlay {
                name: "o".into(),
                action: 0,
            }),
        })
        .collect();

    let mut status = McpUpstreamStatus::default();
    status.record_catalog(&compiled);
    assert_eq!(status.tool_count, Some(1));
    assert_eq!(status.catalog_hash.as_deref(), Some(compiled.hash.as_str()));
    assert_eq!(status.rejected_operations.len(), crds::MAX_STATUS_REJECTED);
    assert_eq!(
        status.rejected_count,
        Some(crds::MAX_STATUS_REJECTED as u32 + 7)
    );
    assert_eq!(status.rejected_operations[0].method, "DELETE");
    assert_eq!(status.warnings.len(), crds::MAX_STATUS_WARNINGS);
    assert_eq!(
        status.warning_count,
        Some(crds::MAX_STATUS_WARNINGS as u32 + 3)
    );
    assert_eq!(
        status.warnings[0],
        "OverlayTargetUnmatched: action 0 matched nothing (at /actions/0)"
    );
}
