//! Non-fatal findings of a compile, typed: what was found
//! ([`WarningCode`]) and where ([`Location`]), so that a program reading
//! them decides on the variants and leaves the message to people.
//!
//! # Serialised form
//!
//! A warning is part of the catalog, which is hashed and published to the
//! gateway, so its JSON stays what it was before warnings were typed:
//! `{"code", "message", "pointer"?}`, with `pointer` the document pointer
//! or `/actions/{i}` for an overlay's action. Only a warning about an
//! overlay adds `"overlay": "<name>"`, after the other fields.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A non-fatal finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub code: WarningCode,
    /// For people; programs read `code` and `at`.
    pub message: String,
    /// What the warning is about, if it is about one place.
    pub at: Option<Location>,
}

/// What a [`Warning`] reports. [`WarningCode::as_str`] is the code as
/// serialised.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WarningCode {
    /// An overlay action's target matched nothing; the action was skipped
    /// (a strict overlay fails instead).
    OverlayTargetUnmatched,
    /// A declared path parameter is not in the path template; it was left
    /// out of the arguments.
    PathParameterUnused,
    /// A schema nested deeper than the converter's depth limit was cut.
    SchemaTooDeep,
    /// A circular `$ref` was cut where it recurs.
    CircularRef,
    /// A schema passed the converter's node budget; further references
    /// were not expanded.
    SchemaTooLarge,
    /// A `$ref` that does not resolve was replaced by an open schema.
    DanglingRef,
    /// An invalid schema keyword (`type`, `required`) was dropped.
    SchemaKeywordDropped,
    /// A `pattern` that is not a valid ECMA-262 regex was dropped.
    PatternDropped,
    /// A request body written `required: false` has required properties;
    /// they were not made required arguments.
    OptionalBodyRequiredProperties,
    /// Under `conflictResolution: qualify`, an operation's tool name was
    /// shared with another and is qualified.
    NameQualified,
    /// A `{variable}` of the server URL has no default; it stays in the
    /// base URL as written.
    ServerVariableWithoutDefault,
    /// A GET, HEAD or DELETE operation declares a request body, which
    /// servers and proxies may ignore or refuse.
    RequestBodyOnMethod,
    /// A code this version does not know, as read.
    ///
    /// NB: catalogs cross versions (an operator publishes, a gateway of
    /// another version reads during a rollout), and a warning is only
    /// information: an unknown code must neither fail the read nor change
    /// the bytes when the catalog is written again, so it is kept as it
    /// was. The compiler never makes one.
    Other(String),
}

impl WarningCode {
    /// The codes the compiler makes, for [`WarningCode::parse`].
    const KNOWN: [WarningCode; 12] = [
        WarningCode::OverlayTargetUnmatched,
        WarningCode::PathParameterUnused,
        WarningCode::SchemaTooDeep,
        WarningCode::CircularRef,
        WarningCode::SchemaTooLarge,
        WarningCode::DanglingRef,
        WarningCode::SchemaKeywordDropped,
        WarningCode::PatternDropped,
        WarningCode::OptionalBodyRequiredProperties,
        WarningCode::NameQualified,
        WarningCode::ServerVariableWithoutDefault,
        WarningCode::RequestBodyOnMethod,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            Self::OverlayTargetUnmatched => "OverlayTargetUnmatched",
            Self::PathParameterUnused => "PathParameterUnused",
            Self::SchemaTooDeep => "SchemaTooDeep",
            Self::CircularRef => "CircularRef",
            Self::SchemaTooLarge => "SchemaTooLarge",
            Self::DanglingRef => "DanglingRef",
            Self::SchemaKeywordDropped => "SchemaKeywordDropped",
            Self::PatternDropped => "PatternDropped",
            Self::OptionalBodyRequiredProperties => "OptionalBodyRequiredProperties",
            Self::NameQualified => "NameQualified",
            Self::ServerVariableWithoutDefault => "ServerVariableWithoutDefault",
            Self::RequestBodyOnMethod => "RequestBodyOnMethod",
            Self::Other(code) => code,
        }
    }

    /// The code serialised as `code`; [`WarningCode::Other`] for one this
    /// version does not know.
    fn parse(code: String) -> WarningCode {
        Self::KNOWN
            .into_iter()
            .find(|known| known.as_str() == code)
            .unwrap_or(WarningCode::Other(code))
    }
}

impl fmt::Display for WarningCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a [`Warning`] points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A JSON pointer into the OpenAPI document (as the overlays left it).
    Document { pointer: String },
    /// An action of an overlay: the overlay's name (as in
    /// [`crate::Overlay::name`]) and the action's index, from 0.
    Overlay { name: String, action: u32 },
}

impl Location {
    /// The location as the `pointer` field serialises it: the document
    /// pointer, or `/actions/{i}` (a pointer into the overlay) for an
    /// overlay's action.
    pub fn pointer(&self) -> Cow<'_, str> {
        match self {
            Location::Document { pointer } => Cow::Borrowed(pointer),
            Location::Overlay { action, .. } => Cow::Owned(format!("/actions/{action}")),
        }
    }
}

/// The serialised form (see the module doc), borrowed for writing.
#[derive(Serialize)]
struct WireOut<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pointer: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    overlay: Option<&'a str>,
}

/// The serialised form (see the module doc), owned for reading.
#[derive(Deserialize)]
struct WireIn {
    code: String,
    message: String,
    #[serde(default)]
    pointer: Option<String>,
    #[serde(default)]
    overlay: Option<String>,
}

impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireOut {
            code: self.code.as_str(),
            message: &self.message,
            pointer: self.at.as_ref().map(Location::pointer),
            overlay: match &self.at {
                Some(Location::Overlay { name, .. }) => Some(name),
                _ => None,
            },
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Warning {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireIn::deserialize(deserializer)?;
        let at = match (wire.pointer, wire.overlay) {
            (None, _) => None,
            (Some(pointer), Some(name)) => match action_index(&pointer) {
                Some(action) => Some(Location::Overlay { name, action }),
                // NB: a form this version never writes (an overlay without
                // an action). Read leniently, without the overlay, for the
                // reason given on `WarningCode::Other`.
                None => Some(Location::Document { pointer }),
            },
            (Some(pointer), None) => Some(Location::Document { pointer }),
        };
        Ok(Warning {
            code: WarningCode::parse(wire.code),
            message: wire.message,
            at,
        })
    }
}

/// `i` of `/actions/{i}`, written the way [`Location::pointer`] writes it
/// (so that reading and writing again gives the same bytes).
fn action_index(pointer: &str) -> Option<u32> {
    let digits = pointer.strip_prefix("/actions/")?;
    let i: u32 = digits.parse().ok()?;
    (i.to_string() == digits).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn overlay_warning() -> Warning {
        Warning {
            code: WarningCode::OverlayTargetUnmatched,
            message: "overlay o.yaml: action 2: target \"$.x\" matched nothing".into(),
            at: Some(Location::Overlay {
                name: "o.yaml".into(),
                action: 2,
            }),
        }
    }

    #[test]
    fn serialises_as_before_plus_the_overlay_name() {
        let doc = Warning {
            code: WarningCode::CircularRef,
            message: "m".into(),
            at: Some(Location::Document {
                pointer: "/paths/~1a/get".into(),
            }),
        };
        assert_eq!(
            serde_json::to_string(&doc).unwrap(),
            r#"{"code":"CircularRef","message":"m","pointer":"/paths/~1a/get"}"#
        );
        let nowhere = Warning { at: None, ..doc };
        assert_eq!(
            serde_json::to_string(&nowhere).unwrap(),
            r#"{"code":"CircularRef","message":"m"}"#
        );
        let text = serde_json::to_string(&overlay_warning()).unwrap();
        assert!(
            text.ends_with(r#","pointer":"/actions/2","overlay":"o.yaml"}"#),
            "{text}"
        );
    }

    #[test]
    fn every_form_reads_back_to_the_same_bytes() {
        let forms = [
            json!({"code": "CircularRef", "message": "m", "pointer": "/components/schemas/A"}),
            json!({"code": "PatternDropped", "message": "m"}),
            json!({"code": "OverlayTargetUnmatched", "message": "m", "pointer": "/actions/0", "overlay": "a"}),
            // Written by a version that did not name the overlay.
            json!({"code": "OverlayTargetUnmatched", "message": "m", "pointer": "/actions/0"}),
            // A code from a newer version.
            json!({"code": "SomethingNew", "message": "m", "pointer": "/x"}),
        ];
        for form in forms {
            let w: Warning = serde_json::from_value(form.clone()).unwrap();
            assert_eq!(serde_json::to_value(&w).unwrap(), form);
        }
    }

    #[test]
    fn reading_gives_the_typed_code_and_location() {
        let w: Warning = serde_json::from_value(
            json!({"code": "OverlayTargetUnmatched", "message": "m", "pointer": "/actions/7", "overlay": "o"}),
        )
        .unwrap();
        assert_eq!(w.code, WarningCode::OverlayTargetUnmatched);
        let at = Location::Overlay {
            name: "o".into(),
            action: 7,
        };
        assert_eq!(w.at, Some(at));
        let w: Warning =
            serde_json::from_value(json!({"code": "SomethingNew", "message": "m"})).unwrap();
        assert_eq!(w.code, WarningCode::Other("SomethingNew".into()));
        assert_eq!(w.code.as_str(), "SomethingNew");
        assert_eq!(
            serde_json::to_value(overlay_warning()).unwrap()["overlay"],
            "o.yaml"
        );
    }

    #[test]
    fn an_overlay_without_an_action_is_read_without_failing() {
        for pointer in ["/actions/x", "/actions/01", "/info"] {
            let w: Warning = serde_json::from_value(
                json!({"code": "OverlayTargetUnmatched", "message": "m", "pointer": pointer, "overlay": "o"}),
            )
            .unwrap();
            let at = Location::Document {
                pointer: pointer.into(),
            };
            assert_eq!(w.at, Some(at), "{pointer}");
        }
    }

    #[test]
    fn every_known_code_parses_to_itself() {
        for code in WarningCode::KNOWN {
            assert_eq!(WarningCode::parse(code.as_str().to_string()), code);
        }
    }
}
