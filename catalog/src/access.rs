//! Who may see and call an upstream's tools, and how often: the data of
//! `McpUpstream.spec.access` / `spec.rateLimit` (and `upstreams.<prefix>`
//! of the gateway config), shared by the operator, which checks it, and
//! the gateway, which enforces it.
//!
//! The same types are embedded in the McpUpstream schema (feature
//! `schemars`), so the CRD and the gateway config read alike.
//!
//! **Deciding.** [`AccessPolicy::compile`] checks a policy once, when a
//! catalog or snapshot is built: each `when` is parsed as CEL (the `cel`
//! crate) into a program kept in the [`CompiledAccess`], so deciding never
//! parses. A decision then has two steps: [`CompiledAccess::grants_for`]
//! evaluates what depends on the caller alone (its scopes, each `when`)
//! once, and [`Grants::allows`] matches the resulting rules against each
//! tool (its name without the prefix, its `readOnlyHint`). A listing of a
//! thousand tools evaluates each `when` once, not a thousand times.
//!
//! **Failing closed.** A `when` that errors at evaluation (a claim the
//! token lacks, a type mismatch) or yields anything but `true` grants
//! nothing. A caller without identity (the gateway in open mode) is the
//! anonymous principal: no `subject` variable at all, no scopes, no claims,
//! so a rule that needs any of them never grants it.
//!
//! **Hostile input.** Policies are written by tenants of a shared gateway,
//! so an expression is bounded before it is parsed (length, nesting: the
//! parser recurses per nesting level) and after (comprehensions, which
//! are the only loops CEL has), and may only read its three variables.

mod cost;

pub use cost::{COST_TIERS, MAX_INPUT_UNITS, MAX_VALUE_UNITS, MAX_WHEN_COST};

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr};
use cel::objects::Value as CelValue;
use cel::parser::Expression;
use serde::{Deserialize, Serialize};

/// Rules granting callers access to an upstream's tools. A caller may see
/// and call a tool when at least one rule grants it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AccessPolicy {
    /// Any rule that matches grants its tools. Empty: nobody.
    #[cfg_attr(feature = "schemars", schemars(length(max = 64)))]
    pub rules: Vec<AccessRule>,
}

/// One grant: the tools `tools` (narrowed by `readOnly`) to callers that
/// hold every scope in `scopes` and for whom `when` is true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AccessRule {
    /// Scopes the caller must all hold. Empty: no scope needed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(max = 64), inner(length(min = 1, max = 256)))
    )]
    pub scopes: Vec<String>,
    /// Globs (`*`, `?`) over tool names without the prefix, e.g.
    /// `get_*` for `pets__get_pet`. Default: `["*"]`.
    #[cfg_attr(
        feature = "schemars",
        schemars(length(max = 256), inner(length(min = 1, max = 128)))
    )]
    pub tools: Vec<String>,
    /// Only tools annotated `readOnlyHint: true`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// A CEL expression over `subject`, `issuer` and `method` (strings:
    /// the caller's identity; `issuer` is `""` for API keys, `method` one
    /// of `jwt`, `apiKey`, `introspection`), `scopes` (list of strings)
    /// and `claims` (map) that must be true, e.g. `"sre" in
    /// claims.groups`. A subject names a person only together with its
    /// issuer: write `issuer == "https://idp.example" && subject ==
    /// "alice"`, or `method == "apiKey" && subject == "ci-bot"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schemars", schemars(length(max = 4096)))]
    pub when: Option<String>,
}

impl Default for AccessRule {
    fn default() -> Self {
        AccessRule {
            scopes: Vec::new(),
            tools: vec!["*".into()],
            read_only: false,
            when: None,
        }
    }
}

/// Calls per caller (its subject, else its IP address) to one upstream,
/// as a token bucket, enforced by each gateway replica on its own: with N
/// replicas a caller may make up to N times the rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    /// Sustained rate, e.g. `0.5` (one call every two seconds). Required;
    /// more than 0, at most 1000000.
    #[cfg_attr(
        feature = "schemars",
        schemars(
            range(max = MAX_REQUESTS_PER_SECOND),
            extend("minimum" = 0, "exclusiveMinimum" = true)
        )
    )]
    pub requests_per_second: f64,
    /// Calls allowed at once above the rate. Optional; absent means the
    /// rate rounded up, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schemars", schemars(range(min = 1, max = MAX_BURST)))]
    pub burst: Option<u32>,
}

/// Upper bound of [`RateLimit::requests_per_second`]: beyond it a limit
/// limits nothing, and the bucket's period would round to zero.
pub const MAX_REQUESTS_PER_SECOND: f64 = 1_000_000.0;
/// Upper bound of [`RateLimit::burst`].
pub const MAX_BURST: u32 = 1_000_000;

/// A setting that is out of range, and which field (relative to the
/// setting, e.g. `requestsPerSecond`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SettingError {
    pub field: &'static str,
    pub message: String,
}

impl RateLimit {
    /// Checks the bounds the schema states, for configs that did not go
    /// through it (the gateway config file).
    pub fn check(&self) -> Result<(), SettingError> {
        let rps = self.requests_per_second;
        if !(rps.is_finite() && rps > 0.0 && rps <= MAX_REQUESTS_PER_SECOND) {
            return Err(SettingError {
                field: "requestsPerSecond",
                message: format!("{rps} is not more than 0 and at most {MAX_REQUESTS_PER_SECOND}"),
            });
        }
        if let Some(b) = self.burst {
            if !(1..=MAX_BURST).contains(&b) {
                return Err(SettingError {
                    field: "burst",
                    message: format!("{b} is not between 1 and {MAX_BURST}"),
                });
            }
        }
        Ok(())
    }

    /// The burst, default applied (after [`RateLimit::check`]).
    pub fn effective_burst(&self) -> u32 {
        self.burst
            .unwrap_or_else(|| self.requests_per_second.ceil().clamp(1.0, MAX_BURST as f64) as u32)
    }
}

/// Sends the verified caller's subject to the upstream in a header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardIdentity {
    /// The header, e.g. `X-Forwarded-User`. Whatever the client or the
    /// settings put in it is replaced, so a client cannot forge it; without
    /// a verified caller (no inbound authentication) it is removed. Not one
    /// of the headers the gateway sets itself (`Authorization`, `Host`,
    /// `Content-Type`, ...). Required.
    #[cfg_attr(
        feature = "schemars",
        schemars(length(min = 1, max = 256), pattern(HEADER_NAME_PATTERN))
    )]
    pub header: String,
    /// A second header carrying who vouched for the subject: the issuer's
    /// URL for JWTs and introspected tokens, `api-key` for API keys. A
    /// subject names a person only together with its issuer; set this
    /// whenever the gateway trusts more than one issuer (or issuers and
    /// API keys), and have the upstream key on both headers. Same rules
    /// as `header`, and not the same header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(min = 1, max = 256), pattern(HEADER_NAME_PATTERN))
    )]
    pub issuer_header: Option<String>,
}

/// What [`ForwardIdentity::issuer_header`] carries for an API key.
pub const API_KEY_ISSUER: &str = "api-key";

/// An HTTP header name (RFC 9110 `token`), as a schema `pattern`.
pub const HEADER_NAME_PATTERN: &str = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

impl ForwardIdentity {
    /// Headers the gateway or the HTTP client set themselves (credentials,
    /// framing, the body's type): the subject must not replace them.
    pub const RESERVED: &'static [&'static str] = &[
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "content-length",
        "content-type",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
    ];

    /// Checks `header` and `issuerHeader` (the names' syntax, that they
    /// are not reserved, and that they differ).
    pub fn check(&self) -> Result<(), SettingError> {
        Self::check_name("header", &self.header)?;
        if let Some(i) = &self.issuer_header {
            Self::check_name("issuerHeader", i)?;
            if i.eq_ignore_ascii_case(&self.header) {
                return Err(SettingError {
                    field: "issuerHeader",
                    message: format!(
                        "{i} is also `header`: the subject and its issuer need two headers"
                    ),
                });
            }
        }
        Ok(())
    }

    fn check_name(field: &'static str, h: &str) -> Result<(), SettingError> {
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c);
        if h.is_empty() || h.len() > 256 || !h.chars().all(token) {
            return Err(SettingError {
                field,
                message: format!("{h:?} is not an HTTP header name"),
            });
        }
        if Self::RESERVED.iter().any(|r| r.eq_ignore_ascii_case(h)) {
            return Err(SettingError {
                field,
                message: format!("{h} is set by the gateway itself; choose another header, e.g. X-Forwarded-User"),
            });
        }
        Ok(())
    }
}

/// How a caller was verified: part of its identity, since each method
/// (and each issuer) names its callers in a namespace of its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AuthMethod {
    /// A JWT of a configured issuer.
    #[default]
    Jwt,
    /// An entry of the API key file.
    ApiKey,
    /// An opaque token the introspection endpoint called active.
    Introspection,
}

impl AuthMethod {
    /// The name access rules compare `method` with.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Jwt => "jwt",
            AuthMethod::ApiKey => "apiKey",
            AuthMethod::Introspection => "introspection",
        }
    }
}

impl fmt::Display for AuthMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verified caller, as access rules see it.
///
/// **Identity.** Who a caller is is the triple method + issuer + subject
/// ([`Principal::identity`]), never the subject alone: two issuers (or an
/// issuer and the API key file) may each have an `alice`, and they are
/// different people. Everything that keys state by caller or decides for
/// one (token-exchange cache, rate-limit buckets, session ownership,
/// access rules) goes by the identity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    pub method: AuthMethod,
    /// The issuer that vouched for the subject: a JWT's `iss`, an
    /// introspection answer's `iss` (else the introspection endpoint's
    /// URL). `None` for API keys, which the gateway issues itself.
    pub issuer: Option<String>,
    /// `sub` of a token, the name of an API key. For an introspection
    /// answer without a subject, its `username` or `client_id`, which
    /// [`Principal::subject_claim`] records.
    pub subject: String,
    /// The claim `subject` was read from when it is not the subject claim
    /// itself (`username`, `client_id`): a user and a client of one
    /// issuer may share a name.
    pub subject_claim: Option<String>,
    pub scopes: BTreeSet<String>,
    /// Every claim of the token (an API key has none).
    pub claims: serde_json::Map<String, serde_json::Value>,
}

impl Principal {
    /// The caller's identity, a string safe to key state by: its method,
    /// issuer, subject claim and subject, each one JSON-quoted so no
    /// choice of subject can spell another identity.
    pub fn identity(&self) -> String {
        serde_json::to_string(&(
            self.method.as_str(),
            self.issuer.as_deref().unwrap_or(""),
            self.subject_claim.as_deref().unwrap_or(""),
            &self.subject,
        ))
        .unwrap_or_default()
    }
}

/// Access to an upstream whose config has no `access` policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DefaultAccess {
    /// Every caller the gateway admitted.
    #[default]
    Allow,
    /// Nobody: each upstream must grant access itself.
    Deny,
}

/// Most rules in one policy (also the CRD's `maxItems`): [`Held`] keeps
/// one bit per rule.
pub const MAX_RULES: usize = 64;

/// Longest `when`, in bytes (also the CRD's `maxLength`).
pub const MAX_WHEN_BYTES: usize = 4096;
/// Deepest nesting of `(`, `[`, `{` and `? :` in a `when`. The parser
/// recurses through about a dozen grammar rules per level, so this is
/// what keeps a hostile expression from overflowing a thread's stack.
pub const MAX_WHEN_NESTING: usize = 24;
/// Comprehensions (`all`, `exists`, `exists_one`, `map`, `filter`) in one
/// `when`, and how deeply they may nest. Each loops over a list from a
/// token (bounded by the authenticator's token size cap); nesting them
/// multiplies the work, and chaining `map`s can double a value each time.
pub const MAX_COMPREHENSIONS: usize = 4;
pub const MAX_COMPREHENSION_NESTING: usize = 1;

/// The variables a `when` may read.
const VARIABLES: [&str; 5] = ["subject", "issuer", "method", "scopes", "claims"];
/// Type names a `when` may mention, as in `type(x) == string`.
const TYPE_NAMES: [&str; 11] = [
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
];

/// Where a policy was written, so errors name its fields the way the user
/// wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicySite {
    /// `spec.access` of an McpUpstream.
    McpUpstream,
    /// `upstreams.<prefix>.access` of the gateway config.
    GatewayConfig { prefix: String },
}

impl fmt::Display for PolicySite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySite::McpUpstream => f.write_str("spec.access"),
            PolicySite::GatewayConfig { prefix } => write!(f, "upstreams.{prefix}.access"),
        }
    }
}

/// A field of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleField {
    /// The rule as a whole.
    Rule,
    When,
    /// `tools[i]`.
    Tools(usize),
}

/// A field of a policy: `spec.access.rules[2].when`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessField {
    pub site: PolicySite,
    pub rule: usize,
    pub field: RuleField,
}

impl fmt::Display for AccessField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.rules[{}]", self.site, self.rule)?;
        match self.field {
            RuleField::Rule => Ok(()),
            RuleField::When => f.write_str(".when"),
            RuleField::Tools(i) => write!(f, ".tools[{i}]"),
        }
    }
}

/// A policy that cannot be enforced, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct AccessError {
    pub field: AccessField,
    pub message: String,
}

impl AccessPolicy {
    /// Checks every rule and compiles its `when`; the error names the
    /// first bad field as written at `site`.
    pub fn compile(&self, site: &PolicySite) -> Result<CompiledAccess, AccessError> {
        let err = |rule: usize, field: RuleField, message: String| AccessError {
            field: AccessField {
                site: site.clone(),
                rule,
                field,
            },
            message,
        };
        if self.rules.len() > MAX_RULES {
            return Err(err(
                MAX_RULES,
                RuleField::Rule,
                format!(
                    "a policy has at most {MAX_RULES} rules, this one {}",
                    self.rules.len()
                ),
            ));
        }
        let mut rules = Vec::with_capacity(self.rules.len());
        let mut costs = [0u64; COST_TIERS.len()];
        // One caller's decision evaluates every `when` of the policy, so
        // the budget is the policy's, not each rule's: 64 rules at the
        // limit would otherwise cost 64 times it.
        for (i, r) in self.rules.iter().enumerate() {
            for (j, g) in r.tools.iter().enumerate() {
                if g.is_empty() {
                    return Err(err(
                        i,
                        RuleField::Tools(j),
                        "an empty glob matches no tool".into(),
                    ));
                }
            }
            let when = match &r.when {
                None => None,
                Some(src) => {
                    let (when, cost) = compile_when(src).map_err(|m| err(i, RuleField::When, m))?;
                    for (sum, c) in costs.iter_mut().zip(cost) {
                        *sum = sum.saturating_add(c);
                    }
                    let spent = costs[COST_TIERS.len() - 1];
                    if spent > cost::MAX_WHEN_COST {
                        return Err(err(
                            i,
                            RuleField::When,
                            format!(
                                "the rules up to this one may cost up to {spent} steps together \
                                 on the largest claims the gateway admits, over the policy's \
                                 limit of {}: every `when` of a policy is evaluated for each \
                                 caller, so their costs add up",
                                cost::MAX_WHEN_COST
                            ),
                        ));
                    }
                    Some(when)
                }
            };
            rules.push(CompiledRule {
                scopes: r.scopes.clone(),
                tools: r.tools.clone(),
                read_only: r.read_only,
                when,
            });
        }
        Ok(CompiledAccess { rules, costs })
    }
}

/// A policy ready to decide: see the module docs.
#[derive(Debug)]
pub struct CompiledAccess {
    /// At most [`MAX_RULES`].
    rules: Vec<CompiledRule>,
    /// The worst-case cost of evaluating every `when` for a caller whose
    /// inputs fit each of [`COST_TIERS`].
    costs: [u64; COST_TIERS.len()],
}

#[derive(Debug)]
struct CompiledRule {
    scopes: Vec<String>,
    tools: Vec<String>,
    read_only: bool,
    when: Option<When>,
}

/// A compiled `when`. The source is kept for the debug log of a failed
/// evaluation.
struct When {
    source: String,
    expr: Expression,
}

impl fmt::Debug for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("When").field(&self.source).finish()
    }
}

/// What access rules know of a tool.
#[derive(Debug, Clone, Copy)]
pub struct ToolInfo<'a> {
    /// The tool's name without `{prefix}{separator}`
    /// ([`crate::UpstreamCatalog::base_name`]).
    pub base_name: &'a str,
    /// Its `readOnlyHint`.
    pub read_only: bool,
}

impl<'a> ToolInfo<'a> {
    /// The view of `tool` of `upstream`. A name without the upstream's
    /// prefix (which the compiler never produces) is matched whole.
    pub fn of(upstream: &crate::UpstreamCatalog, tool: &'a crate::Tool) -> ToolInfo<'a> {
        ToolInfo {
            base_name: upstream.base_name(&tool.name).unwrap_or(&tool.name),
            read_only: tool.annotations.read_only_hint == Some(true),
        }
    }
}

impl CompiledAccess {
    /// The rules whose conditions `principal` (`None`: anonymous) meets.
    pub fn grants_for(&self, principal: Option<&Principal>) -> Grants<'_> {
        let held = self.held_by(&mut CallerInputs::new(principal));
        self.grants_of(held)
    }

    /// The rules whose conditions `caller` meets. To decide one caller for
    /// many policies, pass the same [`CallerInputs`]: its CEL values are
    /// built once.
    pub fn held_by(&self, caller: &mut CallerInputs<'_>) -> Held {
        let scopes = caller.principal.map(|p| &p.scopes);
        let mut held = 0u64;
        for (i, r) in self.rules.iter().enumerate() {
            let meets = r
                .scopes
                .iter()
                .all(|s| scopes.is_some_and(|have| have.contains(s)))
                && match &r.when {
                    None => true,
                    Some(w) => w.holds(caller.variables()),
                };
            if meets {
                held |= 1 << i;
            }
        }
        Held(held)
    }

    /// The grants of rules `held`, as [`CompiledAccess::held_by`] found.
    pub fn grants_of(&self, held: Held) -> Grants<'_> {
        Grants { policy: self, held }
    }

    /// The most [`CompiledAccess::held_by`] can cost for `caller`, in the
    /// units of [`MAX_WHEN_COST`]: what decides whether a decision may run
    /// on an async worker. `0` for a policy without `when`.
    pub fn cost_for(&self, caller: &CallerInputs<'_>) -> u64 {
        if caller.oversized {
            // No `when` is evaluated for it at all.
            return 0;
        }
        let tier = COST_TIERS
            .iter()
            .position(|&t| caller.units <= t)
            .unwrap_or(COST_TIERS.len() - 1);
        self.costs[tier]
    }

    /// Whether any rule has a `when`: without one, deciding is a few
    /// comparisons of scopes.
    pub fn has_conditions(&self) -> bool {
        self.costs[COST_TIERS.len() - 1] > 0
    }

    /// Whether `principal` may see and call `tool`. To decide for many
    /// tools, call [`CompiledAccess::grants_for`] once instead.
    pub fn grants(&self, principal: Option<&Principal>, tool: &ToolInfo<'_>) -> bool {
        self.grants_for(principal).allows(tool)
    }
}

/// Which rules of one policy a caller meets, as a bit per rule: small and
/// owned, so a decision made elsewhere (off the async workers, or by an
/// earlier request of the same caller) can be kept and reused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Held(u64);

/// The rules one caller meets; decides per tool.
#[derive(Debug, Clone, Copy)]
pub struct Grants<'a> {
    policy: &'a CompiledAccess,
    held: Held,
}

impl Grants<'_> {
    pub fn allows(&self, tool: &ToolInfo<'_>) -> bool {
        self.rules().any(|r| {
            (!r.read_only || tool.read_only) && r.tools.iter().any(|g| glob(g, tool.base_name))
        })
    }

    /// Whether no tool at all is granted.
    pub fn is_empty(&self) -> bool {
        self.held.0 == 0
    }

    fn rules(&self) -> impl Iterator<Item = &CompiledRule> + '_ {
        self.policy
            .rules
            .iter()
            .enumerate()
            .filter(|(i, _)| self.held.0 & (1 << i) != 0)
            .map(|(_, r)| r)
    }
}

/// One caller as rules see it, measured once and converted to CEL values
/// on the first `when` evaluated: what deciding it for many policies
/// shares.
pub struct CallerInputs<'p> {
    principal: Option<&'p Principal>,
    /// The size of its largest input, in the units of [`MAX_INPUT_UNITS`].
    units: u64,
    /// Over [`MAX_INPUT_UNITS`]: no `when` is evaluated for it.
    oversized: bool,
    vars: Option<Variables>,
}

impl<'p> CallerInputs<'p> {
    pub fn new(principal: Option<&'p Principal>) -> Self {
        let units = principal.map_or(0, input_units);
        CallerInputs {
            principal,
            units,
            oversized: units > MAX_INPUT_UNITS,
            vars: None,
        }
    }

    /// The caller decided for.
    pub fn principal(&self) -> Option<&'p Principal> {
        self.principal
    }

    fn variables(&mut self) -> &Variables {
        let (principal, oversized) = (self.principal, self.oversized);
        self.vars
            .get_or_insert_with(|| Variables::of(principal, oversized))
    }
}

/// The CEL values of one principal, converted once per decision.
struct Variables {
    /// `subject`, `issuer` (`""` for API keys) and `method`; none of
    /// them for the anonymous caller.
    identity: Option<[CelValue; 3]>,
    /// The caller's inputs exceed what the cost bounds assume.
    oversized: bool,
    scopes: CelValue,
    claims: CelValue,
}

impl Variables {
    fn of(principal: Option<&Principal>, oversized: bool) -> Variables {
        match principal {
            None => Variables {
                identity: None,
                oversized: false,
                scopes: CelValue::List(Arc::new(Vec::new())),
                claims: empty_map(),
            },
            // The cost bound of every `when` assumes inputs within
            // MAX_INPUT_UNITS; a caller beyond it gets no grant from one.
            Some(_) if oversized => Variables {
                identity: None,
                scopes: CelValue::List(Arc::new(Vec::new())),
                claims: empty_map(),
                oversized: true,
            },
            Some(p) => Variables {
                identity: Some([
                    CelValue::String(Arc::new(p.subject.clone())),
                    CelValue::String(Arc::new(p.issuer.clone().unwrap_or_default())),
                    CelValue::String(Arc::new(p.method.as_str().to_string())),
                ]),
                scopes: CelValue::List(Arc::new(
                    p.scopes
                        .iter()
                        .map(|s| CelValue::String(Arc::new(s.clone())))
                        .collect(),
                )),
                // Claims are JSON, which always converts; should it not,
                // rules reading claims fail (closed) on the empty map.
                claims: cel::to_value(&p.claims).unwrap_or_else(|_| empty_map()),
                oversized: false,
            },
        }
    }
}

/// The size of `p`'s largest variable, in the units [`cost`] assumes (a
/// string's bytes, the claims' JSON bytes), measured without copying.
fn input_units(p: &Principal) -> u64 {
    /// Counts what is written to it.
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len() as u64);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut claims = Count(0);
    // Claims are JSON and always serialise; should they not, they count
    // as too large to evaluate.
    let claims = match serde_json::to_writer(&mut claims, &p.claims) {
        Ok(()) => claims.0,
        Err(_) => u64::MAX,
    };
    let scopes: u64 = p.scopes.iter().map(|s| s.len() as u64 + 1).sum();
    [
        p.subject.len() as u64,
        p.issuer.as_ref().map_or(0, |i| i.len() as u64),
        scopes,
        claims,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
}

fn empty_map() -> CelValue {
    cel::to_value(serde_json::Map::new()).unwrap_or(CelValue::Null)
}

/// The standard library, without the optional syntax (`a.?b`): what a
/// `when` may use. Built once; programs do not depend on it after parsing.
static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
    Arc::new(
        cel::Env::default()
            .with_optional_support(false)
            .with_stdlib(),
    )
});

impl When {
    fn holds(&self, vars: &Variables) -> bool {
        if vars.oversized {
            tracing::debug!(when = %self.source, "the caller's claims exceed what access rules are bounded for: no grant");
            return false;
        }
        let mut ctx = cel::Context::with_env(ENV.clone());
        if let Some([subject, issuer, method]) = &vars.identity {
            ctx.add_variable_from_value("subject", subject.clone());
            ctx.add_variable_from_value("issuer", issuer.clone());
            ctx.add_variable_from_value("method", method.clone());
        }
        ctx.add_variable_from_value("scopes", vars.scopes.clone());
        ctx.add_variable_from_value("claims", vars.claims.clone());
        match CelValue::resolve(&self.expr, &ctx) {
            Ok(CelValue::Bool(b)) => b,
            Ok(other) => {
                tracing::debug!(when = %self.source, result = ?other.type_of(), "access rule condition is not a bool: no grant");
                false
            }
            Err(e) => {
                tracing::debug!(when = %self.source, error = %e, "access rule condition failed: no grant");
                false
            }
        }
    }
}

/// Bounds, parses and checks one `when`; with its worst-case cost at each
/// of [`COST_TIERS`].
fn compile_when(src: &str) -> Result<(When, [u64; COST_TIERS.len()]), String> {
    if src.len() > MAX_WHEN_BYTES {
        return Err(format!(
            "the expression is {} bytes, over the limit of {MAX_WHEN_BYTES}",
            src.len()
        ));
    }
    let depth = nesting(src);
    if depth > MAX_WHEN_NESTING {
        return Err(format!(
            "the expression nests {depth} levels deep, over the limit of {MAX_WHEN_NESTING}"
        ));
    }
    let expr = cel::Env::stdlib()
        .with_optional_support(false)
        .parser()
        // NB: the pre-check above counts tokens, the parser counts
        // grammar levels; both stop far below what overflows a stack.
        .max_recursion_depth(u16::try_from(MAX_WHEN_NESTING * 4).unwrap_or(u16::MAX))
        .parse(src)
        .map_err(|e| format!("invalid CEL: {e}"))?;
    let mut check = Check::default();
    check.walk(&expr, &mut Vec::new(), 0)?;
    let cost = cost::check(&expr)?;
    Ok((
        When {
            source: src.to_string(),
            expr,
        },
        cost,
    ))
}

/// Deepest nesting of brackets and conditionals outside string literals.
/// Errs high: an unbalanced closer never lowers it below zero, and a
/// conditional counts as one level from its `?` to the end.
fn nesting(src: &str) -> usize {
    let b = src.as_bytes();
    let (mut depth, mut max, mut cond) = (0usize, 0usize, 0usize);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'"' | b'\'') => {
                let raw = i > 0 && matches!(b[i - 1], b'r' | b'R');
                let triple = b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q);
                i += if triple { 3 } else { 1 };
                while i < b.len() {
                    if b[i] == b'\\' && !raw {
                        i += 2;
                        continue;
                    }
                    if b[i] == q
                        && (!triple || (b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q)))
                    {
                        i += if triple { 3 } else { 1 };
                        break;
                    }
                    i += 1;
                }
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'?' => cond += 1,
            _ => {}
        }
        max = max.max(depth + cond);
        i += 1;
    }
    max
}

/// What a parsed `when` may contain.
#[derive(Default)]
struct Check {
    comprehensions: usize,
}

impl Check {
    /// `bound`: comprehension variables in scope; `loops`: enclosing
    /// comprehensions. The parser's recursion limit bounds the depth.
    fn walk(
        &mut self,
        e: &Expression,
        bound: &mut Vec<String>,
        loops: usize,
    ) -> Result<(), String> {
        match &e.expr {
            Expr::Unspecified | Expr::Literal(_) => Ok(()),
            Expr::Ident(name) => {
                if VARIABLES.contains(&name.as_str())
                    || TYPE_NAMES.contains(&name.as_str())
                    || bound.iter().any(|b| b == name)
                {
                    Ok(())
                } else {
                    Err(format!(
                        "unknown variable {name:?}: a condition can read subject, issuer, method, scopes and claims"
                    ))
                }
            }
            Expr::Call(c) => {
                if let Some(t) = &c.target {
                    self.walk(t, bound, loops)?;
                }
                c.args.iter().try_for_each(|a| self.walk(a, bound, loops))
            }
            Expr::Select(s) => self.walk(&s.operand, bound, loops),
            Expr::List(l) => l
                .elements
                .iter()
                .try_for_each(|a| self.walk(a, bound, loops)),
            Expr::Map(m) => m.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => {
                    self.walk(&me.key, bound, loops)?;
                    self.walk(&me.value, bound, loops)
                }
                EntryExpr::StructField(f) => self.walk(&f.value, bound, loops),
            }),
            Expr::Struct(_) => Err("message construction is not supported".into()),
            Expr::Comprehension(c) => {
                self.comprehensions += 1;
                if self.comprehensions > MAX_COMPREHENSIONS {
                    return Err(format!(
                        "more than {MAX_COMPREHENSIONS} comprehensions (all, exists, exists_one, map, filter)"
                    ));
                }
                if loops + 1 > MAX_COMPREHENSION_NESTING {
                    return Err(format!(
                        "comprehensions (all, exists, exists_one, map, filter) nest more than {MAX_COMPREHENSION_NESTING} deep"
                    ));
                }
                self.walk(&c.iter_range, bound, loops)?;
                self.walk(&c.accu_init, bound, loops)?;
                let before = bound.len();
                bound.push(c.iter_var.clone());
                bound.extend(c.iter_var2.clone());
                bound.push(c.accu_var.clone());
                let inner = [&c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|x| self.walk(x, bound, loops + 1));
                bound.truncate(before);
                inner
            }
        }
    }
}

/// `*` (any run, also empty) and `?` (one character) over the whole of
/// `name`; everything else is literal. Iterative with one backtrack
/// point, so it is linear in practice and never worse than
/// `O(pattern × name)`.
pub fn glob(pattern: &str, name: &str) -> bool {
    // Tool names are ASCII; bytes then are characters, and nothing is
    // allocated per match.
    if pattern.is_ascii() && name.is_ascii() {
        return glob_in(pattern.as_bytes(), name.as_bytes(), b'*', b'?');
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    glob_in(&p, &n, '*', '?')
}

fn glob_in<T: PartialEq + Copy>(p: &[T], n: &[T], any_run: T, any_one: T) -> bool {
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some(&c) if c == any_run => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == any_one || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == any_run)
}

#[cfg(test)]
mod tests;
