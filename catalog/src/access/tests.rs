use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn policy(rules: serde_json::Value) -> AccessPolicy {
    serde_json::from_value(json!({ "rules": rules })).expect("policy parses")
}

fn compiled(rules: serde_json::Value) -> CompiledAccess {
    policy(rules)
        .compile(&PolicySite::McpUpstream)
        .expect("policy compiles")
}

fn principal(subject: &str, scopes: &[&str], claims: serde_json::Value) -> Principal {
    Principal {
        issuer: Some("https://idp.test".into()),
        subject: subject.into(),
        scopes: scopes
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>(),
        claims: match claims {
            serde_json::Value::Object(m) => m,
            other => panic!("claims must be an object, not {other}"),
        },
        ..Default::default()
    }
}

const GET: ToolInfo<'static> = ToolInfo {
    base_name: "get_pet",
    read_only: true,
};
const DELETE: ToolInfo<'static> = ToolInfo {
    base_name: "delete_pet",
    read_only: false,
};

fn when_error(when: &str) -> AccessError {
    policy(json!([{ "when": when }]))
        .compile(&PolicySite::McpUpstream)
        .expect_err("refused")
}

#[test]
fn a_bad_condition_names_the_field_as_written_at_its_site() {
    let p = policy(json!([{}, {}, { "when": "claims.groups.exists(g, " }]));
    let e = p.compile(&PolicySite::McpUpstream).expect_err("bad CEL");
    assert_eq!(
        e.field,
        AccessField {
            site: PolicySite::McpUpstream,
            rule: 2,
            field: RuleField::When
        }
    );
    assert!(
        e.to_string()
            .starts_with("spec.access.rules[2].when: invalid CEL:"),
        "{e}"
    );
    let e = p
        .compile(&PolicySite::GatewayConfig {
            prefix: "pets".into(),
        })
        .expect_err("bad CEL");
    assert!(
        e.to_string()
            .starts_with("upstreams.pets.access.rules[2].when: invalid CEL:"),
        "{e}"
    );
    let e = policy(json!([{ "tools": ["get_*", ""] }]))
        .compile(&PolicySite::McpUpstream)
        .expect_err("empty glob");
    assert_eq!(e.field.to_string(), "spec.access.rules[0].tools[1]");
}

#[test]
fn hostile_expressions_are_refused_before_the_parser_sees_them() {
    for c in ["(", "[", "{", "!", "-", "a ? "] {
        let e = when_error(&c.repeat(100_000));
        assert!(e.message.contains("bytes, over the limit"), "{c}: {e}");
    }
    // Within the length limit, nesting is what is refused.
    for (open, close) in [("(", ")"), ("[", "]"), ("{1: ", "}")] {
        let src = format!("{}true{}", open.repeat(1000), close.repeat(1000));
        let src = &src[..src.len().min(MAX_WHEN_BYTES)];
        let e = when_error(src);
        assert!(e.message.contains("levels deep"), "{open}: {e}");
    }
    let chain = "true ? true : ".repeat(200) + "true";
    assert!(when_error(&chain).message.contains("levels deep"));
    // Runs of unary operators are a loop in the grammar, not recursion.
    for c in ["!", "-"] {
        let src = format!("{}true", c.repeat(MAX_WHEN_BYTES - 4));
        let _ = policy(json!([{ "when": src }])).compile(&PolicySite::McpUpstream);
    }
    // Brackets inside strings do not count.
    let quoted = format!("subject == '{}'", "(".repeat(200));
    compiled(json!([{ "when": quoted }]));
    let quoted = format!("subject == \"\"\"{}\"\"\"", "[\"x".repeat(100));
    compiled(json!([{ "when": quoted }]));
}

#[test]
fn the_deepest_allowed_nesting_parses_and_evaluates_on_a_small_stack() {
    let deep = [
        format!(
            "{}true{}",
            "(".repeat(MAX_WHEN_NESTING),
            ")".repeat(MAX_WHEN_NESTING)
        ),
        format!(
            "{}true{} != []",
            "[".repeat(MAX_WHEN_NESTING),
            "]".repeat(MAX_WHEN_NESTING)
        ),
        format!(
            "{}1{} != {{}}",
            "{1: ".repeat(MAX_WHEN_NESTING),
            "}".repeat(MAX_WHEN_NESTING)
        ),
        "true ? false : ".repeat(MAX_WHEN_NESTING) + "true",
        format!(
            "{}!true{}",
            "(!".repeat(MAX_WHEN_NESTING),
            ")".repeat(MAX_WHEN_NESTING)
        ),
    ];
    // Tokio workers and test threads get 2 MiB; half of it must do.
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            for src in deep {
                let c = compiled(json!([{ "when": src }]));
                let _ = c.grants(Some(&principal("a", &[], json!({}))), &GET);
            }
        })
        .expect("thread");
    handle.join().expect("no stack overflow");
}

#[test]
fn scopes_must_all_be_held() {
    let c = compiled(json!([{ "scopes": ["pets.read", "pets.write"] }]));
    let both = principal("a", &["pets.read", "pets.write", "x"], json!({}));
    let one = principal("a", &["pets.read"], json!({}));
    assert!(c.grants(Some(&both), &GET));
    assert!(!c.grants(Some(&one), &GET));
    assert!(!c.grants(None, &GET));
}

#[test]
fn globs_match_the_name_without_the_prefix() {
    let c = compiled(json!([{ "tools": ["get_*", "list_?ets"] }]));
    let anyone = principal("a", &[], json!({}));
    assert!(c.grants(Some(&anyone), &GET));
    assert!(!c.grants(Some(&anyone), &DELETE));
    let list = ToolInfo {
        base_name: "list_pets",
        read_only: true,
    };
    assert!(c.grants(Some(&anyone), &list));

    // The base name comes from the catalog's prefix and separator.
    let upstream: crate::UpstreamCatalog = serde_json::from_value(json!({
        "prefix": "pets", "separator": "-", "hash": "",
        "source": {"openapiVersion": "3.0.3", "operationCount": 0}, "tools": []
    }))
    .expect("upstream");
    assert_eq!(upstream.base_name("pets-get_pet"), Some("get_pet"));
    assert_eq!(upstream.base_name("pets__get_pet"), None);
    assert_eq!(upstream.base_name("petsget_pet"), None);
    let default: crate::UpstreamCatalog = serde_json::from_value(json!({
        "prefix": "pets", "hash": "",
        "source": {"openapiVersion": "3.0.3", "operationCount": 0}, "tools": []
    }))
    .expect("upstream");
    assert_eq!(default.base_name("pets__get_pet"), Some("get_pet"));
    // The default separator is not written, so hashes stay as they were.
    assert!(serde_json::to_value(&default)
        .expect("json")
        .get("separator")
        .is_none());
}

#[test]
fn read_only_rules_grant_only_read_only_tools() {
    let c = compiled(json!([{ "readOnly": true }]));
    let anyone = principal("a", &[], json!({}));
    assert!(c.grants(Some(&anyone), &GET));
    assert!(!c.grants(Some(&anyone), &DELETE));
    // A second rule may grant more.
    let c = compiled(json!([{ "readOnly": true }, { "scopes": ["admin"] }]));
    let admin = principal("a", &["admin"], json!({}));
    assert!(c.grants(Some(&admin), &DELETE));
    assert!(!c.grants(Some(&anyone), &DELETE));
}

#[test]
fn conditions_see_subject_scopes_and_claims() {
    let c = compiled(json!([
        { "when": "\"sre\" in claims.groups", "tools": ["delete_*"] },
        { "when": "subject.startsWith('svc-') && 'pets.read' in scopes", "tools": ["get_*"] },
        { "when": "claims.groups.exists(g, g.endsWith('-admins'))", "tools": ["*"] },
    ]));
    let sre = principal("alice", &[], json!({"groups": ["dev", "sre"]}));
    assert!(c.grants(Some(&sre), &DELETE));
    assert!(!c.grants(Some(&sre), &GET));
    let svc = principal("svc-x", &["pets.read"], json!({}));
    assert!(c.grants(Some(&svc), &GET));
    assert!(!c.grants(Some(&svc), &DELETE));
    let admin = principal("bob", &[], json!({"groups": ["pets-admins"]}));
    assert!(c.grants(Some(&admin), &DELETE));
    let grants = c.grants_for(Some(&principal("eve", &[], json!({"groups": 3}))));
    assert!(grants.is_empty());
}

#[test]
fn conditions_that_fail_or_are_not_bool_grant_nothing() {
    let p = principal("alice", &[], json!({"n": 1}));
    for when in [
        "claims.groups.size() > 0", // no such claim
        "claims.n / 0 == 1",        // division by zero
        "subject",                  // a string
        "claims.n",                 // an int
        "1 == 1 ? 'yes' : 'no'",
    ] {
        let c = compiled(json!([{ "when": when }]));
        assert!(!c.grants(Some(&p), &GET), "{when}");
    }
    let c = compiled(json!([{ "when": "claims.n == 1" }]));
    assert!(c.grants(Some(&p), &GET));
}

#[test]
fn the_anonymous_caller_meets_only_rules_that_ask_for_nothing() {
    let c = compiled(json!([
        { "scopes": ["pets.read"], "tools": ["get_*"] },
        { "when": "subject == ''", "tools": ["get_*"] },
        { "when": "subject != 'mallory'", "tools": ["get_*"] },
        { "when": "!('blocked' in claims.groups)", "tools": ["get_*"] },
        { "when": "size(scopes) == 0", "tools": ["delete_*"] },
    ]));
    assert!(!c.grants(None, &GET));
    // A condition about nothing the caller holds can still grant.
    assert!(c.grants(None, &DELETE));
    // An authenticated caller with an empty subject is not anonymous.
    assert!(c.grants(Some(&principal("", &[], json!({}))), &GET));
    assert!(compiled(json!([{}])).grants(None, &GET));
    assert!(!compiled(json!([])).grants(None, &GET));
}

#[test]
fn conditions_read_only_their_variables_and_loop_boundedly() {
    let e = when_error("group in claims.groups");
    assert!(e.message.contains("unknown variable \"group\""), "{e}");
    compiled(json!([{ "when": "type(subject) == string" }]));
    let e = when_error("claims.a.all(x, claims.b.exists(y, x == y))");
    assert!(e.message.contains("nest"), "{e}");
    let e = when_error(
        "[claims.a].map(x, x + x).map(x, x + x).map(x, x + x).map(x, x + x).map(x, x + x) != []",
    );
    assert!(e.message.contains("more than 4 comprehensions"), "{e}");
    let e = when_error("{'a': 1}.?a == 1");
    assert!(e.message.contains("invalid CEL"), "{e}");
    // The loop variable is out of scope after its comprehension.
    let e = when_error("claims.a.exists(x, x == 1) && x == 1");
    assert!(e.message.contains("unknown variable \"x\""), "{e}");
}

#[test]
fn rules_without_tools_default_to_every_tool() {
    let p = policy(json!([{ "scopes": ["a"] }]));
    assert_eq!(p.rules[0].tools, ["*"]);
}

/// The obvious exponential definition, as the reference.
fn naive(p: &[char], n: &[char]) -> bool {
    match (p.first(), n.first()) {
        (None, None) => true,
        (Some('*'), _) => naive(&p[1..], n) || (!n.is_empty() && naive(p, &n[1..])),
        (Some('?'), Some(_)) => naive(&p[1..], &n[1..]),
        (Some(a), Some(b)) if a == b => naive(&p[1..], &n[1..]),
        _ => false,
    }
}

proptest! {
    #[test]
    fn glob_agrees_with_the_definition(p in "[ab*?é]{0,8}", n in "[abé]{0,10}") {
        let pc: Vec<char> = p.chars().collect();
        let nc: Vec<char> = n.chars().collect();
        prop_assert_eq!(glob(&p, &n), naive(&pc, &nc));
    }
}

#[test]
fn glob_is_not_exponential_on_many_stars() {
    let p = "*a".repeat(50) + "b";
    let n = "a".repeat(200);
    assert!(!glob(&p, &n));
    assert!(glob("*", ""));
    assert!(!glob("?", ""));
    assert!(glob("get_*_by_?d", "get_pet_by_id"));
}

/// Issue 26, 1: a `when` inside every syntactic bound that allocated
/// gigabytes on the first listing is refused where it is loaded, naming
/// the field.
#[test]
fn a_when_over_the_cost_budget_is_refused_naming_the_field() {
    let zeros = vec!["0"; 900].join(",");
    let when = format!(
        "[{zeros}].map(x, [{zeros}]).map(y, y+y+y+y+y+y+y+y).map(z, z+z+z+z+z+z+z+z).size() > 0"
    );
    assert!(when.len() < MAX_WHEN_BYTES);
    let e = policy(json!([{"tools": ["*"]}, {"when": when}]))
        .compile(&PolicySite::McpUpstream)
        .expect_err("over budget");
    assert_eq!(e.field.to_string(), "spec.access.rules[1].when");
    assert!(e.message.contains("over the limit"), "{e}");
}

/// Every `when` of a policy is evaluated for each caller, so the budget
/// is the policy's: rules each within it are refused once their sum is
/// not, naming the first rule past it.
#[test]
fn the_costs_of_a_policys_rules_add_up() {
    let tests = [r#"g.contains("7")"#; 6].join(" || ");
    let when = format!("claims.groups.filter(g, {tests}).size() > 0");
    compiled(json!([{"when": when}]));
    let rules: Vec<_> = (0..64).map(|_| json!({"when": when})).collect();
    let e = policy(json!(rules))
        .compile(&PolicySite::McpUpstream)
        .expect_err("64 of them are over the policy's budget");
    let field = e.field.to_string();
    assert!(
        field.starts_with("spec.access.rules[") && field != "spec.access.rules[0].when",
        "{field}"
    );
    assert!(e.message.contains("together"), "{e}");
    // Rules without `when` cost nothing.
    let plain: Vec<_> = (0..64).map(|_| json!({"tools": ["*"]})).collect();
    let c = compiled(json!(plain));
    assert!(!c.has_conditions());
    assert_eq!(c.cost_for(&CallerInputs::new(None)), 0);
}

#[test]
fn a_policy_has_at_most_64_rules_and_each_is_decided() {
    let mut rules: Vec<_> = (0..63).map(|_| json!({"scopes": ["never"]})).collect();
    rules.push(json!({"tools": ["get_*"]}));
    let c = compiled(json!(rules));
    let anyone = principal("a", &[], json!({}));
    // The 64th rule, the last bit, grants.
    assert!(c.grants(Some(&anyone), &GET));
    assert!(!c.grants(Some(&anyone), &DELETE));
    rules.push(json!({}));
    let e = policy(json!(rules))
        .compile(&PolicySite::GatewayConfig {
            prefix: "pets".into(),
        })
        .expect_err("65 rules");
    assert_eq!(
        e.to_string(),
        "upstreams.pets.access.rules[64]: a policy has at most 64 rules, this one 65"
    );
}

/// A decision is priced for the caller at hand: small claims, small cost;
/// the largest the gateway admits, the cost the policy was admitted with.
#[test]
fn a_decision_costs_what_the_callers_inputs_allow() {
    let c = compiled(json!([{"when": r#"claims.groups.exists(g, g.startsWith("team-"))"#}]));
    let small = principal("a", &[], json!({"groups": ["team-a"]}));
    let big = principal("a", &[], json!({"groups": ["x".repeat(60_000)]}));
    let too_big = principal("a", &[], json!({"groups": ["x".repeat(70_000)]}));
    let (small, big, too_big) = (
        c.cost_for(&CallerInputs::new(Some(&small))),
        c.cost_for(&CallerInputs::new(Some(&big))),
        c.cost_for(&CallerInputs::new(Some(&too_big))),
    );
    assert!(
        0 < small && small * 16 <= big && big <= MAX_WHEN_COST,
        "{small} {big}"
    );
    assert_eq!(too_big, 0, "nothing is evaluated for it");
    // One caller's inputs serve many policies.
    let member = principal("a", &[], json!({"groups": ["team-a"]}));
    let mut caller = CallerInputs::new(Some(&member));
    let held = c.held_by(&mut caller);
    assert!(c.grants_of(held).allows(&GET));
    assert_eq!(c.held_by(&mut caller), held);
}

/// A caller whose inputs exceed what the bound assumed gets no grant from
/// a `when`, so the bound holds for every caller.
#[test]
fn callers_beyond_the_cost_bounds_are_granted_nothing_by_a_when() {
    let c = compiled(json!([{"when": "size(claims) >= 0"}]));
    assert!(c.grants(Some(&principal("a", &[], json!({}))), &GET));
    let huge = "x".repeat(MAX_INPUT_UNITS as usize);
    assert!(!c.grants(Some(&principal("a", &[], json!({"big": huge}))), &GET));
}

/// Issue 26, 2: a caller's identity is method + issuer + subject.
#[test]
fn identities_differ_by_method_issuer_and_subject_claim() {
    let p = |method, issuer: Option<&str>, claim: Option<&str>| Principal {
        method,
        issuer: issuer.map(str::to_string),
        subject: "alice".into(),
        subject_claim: claim.map(str::to_string),
        ..Default::default()
    };
    let ids = [
        p(AuthMethod::Jwt, Some("https://a"), None),
        p(AuthMethod::Jwt, Some("https://b"), None),
        p(AuthMethod::ApiKey, None, None),
        p(AuthMethod::Introspection, Some("https://a"), None),
        p(
            AuthMethod::Introspection,
            Some("https://a"),
            Some("client_id"),
        ),
    ]
    .map(|p| p.identity());
    let distinct: BTreeSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "{ids:?}");
    // No subject can spell another identity.
    let tricky = Principal {
        issuer: Some("https://a\",\"".into()),
        subject: "alice".into(),
        ..Default::default()
    };
    assert_ne!(tricky.identity(), ids[0]);
}

/// Rules see the issuer and method, so one issuer's `alice` is not
/// another's.
#[test]
fn rules_can_name_the_issuer_and_method() {
    let c = compiled(json!([{"when": "issuer == \"https://idp.test\" && subject == \"alice\""}]));
    assert!(c.grants(Some(&principal("alice", &[], json!({}))), &GET));
    let other = Principal {
        issuer: Some("https://evil.test".into()),
        subject: "alice".into(),
        ..Default::default()
    };
    assert!(!c.grants(Some(&other), &GET));
    let key = compiled(json!([{"when": "method == \"apiKey\" && subject == \"ci-bot\""}]));
    let jwt_bot = principal("ci-bot", &[], json!({}));
    assert!(!key.grants(Some(&jwt_bot), &GET));
    let api_bot = Principal {
        method: AuthMethod::ApiKey,
        subject: "ci-bot".into(),
        ..Default::default()
    };
    assert!(key.grants(Some(&api_bot), &GET));
}
