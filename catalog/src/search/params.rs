//! What a tool's input schema says of its parameters, read shallowly for indexing (names, descriptions, a level of properties).

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

/// The properties of an input schema, name and description: the
/// top-level ones (the operation's parameters and its body) and those one
/// level down, inside an object parameter or the body, also through
/// `allOf`/`anyOf`/`oneOf` and an array's `items` (what a request body
/// says it holds). Reads only those from the schema text, skipping
/// everything else.
#[derive(Default)]
pub(super) struct Params {
    pub(super) top: Vec<(String, Option<String>)>,
    pub(super) nested: Vec<(String, Option<String>)>,
}

impl Params {
    pub(super) fn of(schema: &str) -> Params {
        #[derive(Deserialize, Default)]
        struct Top {
            #[serde(default)]
            properties: Option<PropMap>,
        }
        let Some(props) = serde_json::from_str::<Top>(schema)
            .ok()
            .and_then(|t| t.properties)
        else {
            return Params::default();
        };
        let mut params = Params::default();
        for (name, p) in props.0 {
            params.top.push((name, p.description));
            params.nested.extend(p.nested);
        }
        params
    }
}

/// `properties` as `(name, property)`, whatever each schema is.
pub(super) struct PropMap(Vec<(String, Property)>);

impl<'de> Deserialize<'de> for PropMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PropMap, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PropMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of schemas")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PropMap, A::Error> {
                let mut out = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    out.push((name, map.next_value()?));
                }
                Ok(PropMap(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// `properties` one level down: `(name, description)`.
pub(super) struct ShallowMap(Vec<(String, Option<String>)>);

impl<'de> Deserialize<'de> for ShallowMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ShallowMap, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ShallowMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of schemas")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ShallowMap, A::Error> {
                let mut out = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    let Description(d) = map.next_value()?;
                    out.push((name, d));
                }
                Ok(ShallowMap(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A top-level property: its description, and the properties its schema
/// holds one level down.
pub(super) struct Property {
    pub(super) description: Option<String>,
    pub(super) nested: Vec<(String, Option<String>)>,
}

impl<'de> Deserialize<'de> for Property {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Property, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Property;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a schema")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Property, A::Error> {
                let mut description = None;
                let mut nested = Vec::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match &*key {
                        "description" if description.is_none() => {
                            let v = map.next_value::<serde_json::Value>()?;
                            description = v.as_str().map(str::to_string);
                        }
                        "properties" => nested.extend(map.next_value::<ShallowMap>()?.0),
                        "allOf" | "anyOf" | "oneOf" => {
                            for m in map.next_value::<Vec<Member>>()? {
                                nested.extend(m.0);
                            }
                        }
                        "items" => nested.extend(map.next_value::<Member>()?.0),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Property {
                    description,
                    nested,
                })
            }
            fn visit_bool<E>(self, _: bool) -> Result<Property, E> {
                Ok(Property {
                    description: None,
                    nested: Vec::new(),
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A member of `allOf`/`anyOf`/`oneOf` or an array's `items`: the
/// properties it holds.
pub(super) struct Member(Vec<(String, Option<String>)>);

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Member, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Member;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a schema")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Member, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "properties" {
                        out.extend(map.next_value::<ShallowMap>()?.0);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Member(out))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Member, E> {
                Ok(Member(Vec::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A schema's `description`, or `None` for a schema without one (or a
/// boolean schema).
pub(super) struct Description(Option<String>);

impl<'de> Deserialize<'de> for Description {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Description, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Description;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a schema")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Description, A::Error> {
                let mut description = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "description" && description.is_none() {
                        // Any JSON: a description that is not a string
                        // is skipped, not an error.
                        let v = map.next_value::<serde_json::Value>()?;
                        description = v.as_str().map(str::to_string);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Description(description))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Description, E> {
                Ok(Description(None))
            }
        }
        d.deserialize_any(V)
    }
}
