//! Compile settings. The same types are read from `toolgate compile --config`
//! and embedded in the `McpUpstream` spec, so one definition serves both.
//! Every field has a default; an empty document means "defaults".

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Everything that shapes how one upstream compiles.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct CompileOptions {
    pub naming: NamingOptions,
    pub tools: ToolOptions,
    pub schema: SchemaOptions,
    /// Allow `$ref`s outside the document. Not implemented: the compiler is
    /// pure and never fetches; with this off (the default) external refs are
    /// an error naming the ref.
    pub allow_external_refs: bool,
}

impl CompileOptions {
    /// The options of an upstream declared with optional `naming`, `tools`
    /// and `schema` blocks (`McpUpstream.spec`, an upstream of the gateway
    /// config): absent blocks at their defaults, external refs never
    /// allowed. Declared upstreams share a gateway, so their prefix and
    /// separator also go through [`crate::prefix::check_shared`].
    pub fn declared(
        naming: Option<&NamingOptions>,
        tools: Option<&ToolOptions>,
        schema: Option<&SchemaOptions>,
    ) -> CompileOptions {
        CompileOptions {
            naming: naming.cloned().unwrap_or_default(),
            tools: tools.cloned().unwrap_or_default(),
            schema: schema.cloned().unwrap_or_default(),
            allow_external_refs: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct NamingOptions {
    /// Between prefix and base name.
    pub separator: String,
    /// Maximum length of a full tool name (prefix included).
    pub max_length: usize,
    pub conflict_resolution: ConflictResolution,
    /// 0 disables truncation.
    pub description_max_length: usize,
    pub description_truncation_suffix: String,
    pub slug: SlugRules,
}

impl Default for NamingOptions {
    fn default() -> Self {
        NamingOptions {
            separator: "__".into(),
            max_length: 64,
            conflict_resolution: ConflictResolution::Error,
            description_max_length: 1024,
            description_truncation_suffix: "...".into(),
            slug: SlugRules::default(),
        }
    }
}

/// How operationIds and paths are turned into names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SlugRules {
    /// `/` → `_`.
    pub replace_slashes: bool,
    /// Drop `{` and `}`.
    pub replace_braces: bool,
    pub lowercase: bool,
    /// Runs of `_` become one.
    pub collapse_separators: bool,
    /// `fetchPet` → `fetch_Pet` (then `fetch_pet` with `lowercase`).
    pub split_camel_case: bool,
}

impl Default for SlugRules {
    fn default() -> Self {
        SlugRules {
            replace_slashes: true,
            replace_braces: true,
            lowercase: true,
            collapse_separators: true,
            split_camel_case: true,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ConflictResolution {
    /// Any two operations with one name fail the compile, listing every pair.
    #[default]
    Error,
    /// The first operation (document order) keeps the name; later ones are
    /// rejected.
    FirstWins,
    /// Every operation involved in a conflict is rejected.
    Skip,
    /// Every operation is kept: each colliding name is qualified by what
    /// tells its holders apart (first tag, else API version or group path
    /// segment, else method); see [`crate::naming::qualify`].
    Qualify,
}

impl ConflictResolution {
    /// The value as users write it (`firstWins`), for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictResolution::Error => "error",
            ConflictResolution::FirstWins => "firstWins",
            ConflictResolution::Skip => "skip",
            ConflictResolution::Qualify => "qualify",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ToolOptions {
    /// Only GET/HEAD operations (and those annotated `readOnlyHint: true`).
    pub read_only: bool,
    /// When non-empty, only operations in one of these toolsets.
    pub include_toolsets: Vec<String>,
    pub exclude_toolsets: Vec<String>,
    /// Tool names (full or base) not to publish.
    pub disabled: Vec<String>,
    /// Adds `{prefix}{separator}api_request`.
    pub raw_request_tool: bool,
    /// Parameters added to every tool.
    pub extra_parameters: Vec<ExtraParameter>,
}

/// A parameter added to every tool, e.g. an optional `sudo` query parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraParameter {
    pub name: String,
    #[serde(rename = "in")]
    pub location: crate::ParamLocation,
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the value; defaults to `{"type": "string"}`.
    // Any JSON value: a Kubernetes CRD schema must say so explicitly, or the
    // API server refuses the CRD as non-structural (see the `crds` crate).
    #[cfg_attr(
        feature = "schemars",
        schemars(extend("x-kubernetes-preserve-unknown-fields" = true))
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SchemaOptions {
    pub body_mode: BodyMode,
    /// Value of top-level `additionalProperties` in input schemas.
    pub additional_properties: bool,
    /// Bytes of descriptions below the top-level arguments that each listed
    /// schema (`inputSchema`, `outputSchema`) keeps; past it the deepest,
    /// then longest, are dropped. Top-level argument descriptions are kept
    /// whole. 0 keeps every description.
    pub description_budget: usize,
    /// Keep `examples` below the top-level arguments.
    pub nested_examples: bool,
    /// Keep a `title` that only repeats its property's name.
    pub title_copies: bool,
    pub refs: SchemaRefs,
}

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            body_mode: BodyMode::Auto,
            additional_properties: false,
            description_budget: DEFAULT_DESCRIPTION_BUDGET,
            nested_examples: false,
            title_copies: false,
            refs: SchemaRefs::Inline,
        }
    }
}

/// Default of [`SchemaOptions::description_budget`].
pub const DEFAULT_DESCRIPTION_BUDGET: usize = 2048;

/// How sub-schemas repeated within one listed schema are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum SchemaRefs {
    /// Every sub-schema written where it is used: no `$ref`, for clients
    /// that cannot follow one.
    #[default]
    Inline,
    /// Sub-schemas repeated within a schema written once under its
    /// `$defs` and referenced with `$ref` (`#/$defs/NAME`).
    Defs,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum BodyMode {
    /// Merge an object body into the arguments unless a name collides.
    #[default]
    Auto,
    /// Always merge object bodies; colliding body fields are renamed.
    Merge,
    /// Always under `body`.
    Nested,
}
