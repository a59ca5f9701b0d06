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
mod glob;
mod settings;
mod when;

pub use cost::{COST_TIERS, MAX_INPUT_UNITS, MAX_VALUE_UNITS, MAX_WHEN_COST};
pub use glob::glob;
pub use settings::{
    ForwardIdentity, RateLimit, SettingError, API_KEY_ISSUER, HEADER_NAME_PATTERN, MAX_BURST,
    MAX_REQUESTS_PER_SECOND,
};
use when::{compile_when, input_units, Variables, When};
pub use when::{MAX_COMPREHENSIONS, MAX_COMPREHENSION_NESTING, MAX_WHEN_BYTES, MAX_WHEN_NESTING};

use std::collections::BTreeSet;
use std::fmt;

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
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
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
        // NB: before measuring the caller, which serialises its claims:
        // most policies have no `when`, and a call pays for nothing then.
        if !self.has_conditions() {
            return 0;
        }
        let units = caller.units();
        if units > MAX_INPUT_UNITS {
            // No `when` is evaluated for it at all.
            return 0;
        }
        let tier = COST_TIERS
            .iter()
            .position(|&t| units <= t)
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

/// One caller as rules see it, measured and converted to CEL values on
/// the first `when` that needs it (never, for policies without one): what
/// deciding it for many policies shares.
pub struct CallerInputs<'p> {
    principal: Option<&'p Principal>,
    /// The size of its largest input, in the units of [`MAX_INPUT_UNITS`];
    /// over that, no `when` is evaluated for it.
    units: std::cell::OnceCell<u64>,
    vars: Option<Variables>,
}

impl<'p> CallerInputs<'p> {
    pub fn new(principal: Option<&'p Principal>) -> Self {
        CallerInputs {
            principal,
            units: std::cell::OnceCell::new(),
            vars: None,
        }
    }

    fn units(&self) -> u64 {
        *self
            .units
            .get_or_init(|| self.principal.map_or(0, input_units))
    }

    /// The caller decided for.
    pub fn principal(&self) -> Option<&'p Principal> {
        self.principal
    }

    fn variables(&mut self) -> &Variables {
        let (principal, oversized) = (self.principal, self.units() > MAX_INPUT_UNITS);
        self.vars
            .get_or_insert_with(|| Variables::of(principal, oversized))
    }
}

#[cfg(test)]
mod tests;
