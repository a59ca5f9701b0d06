use super::*;
use proptest::prelude::*;
use serde_json::json;

fn assert_all_valid(schema: &Value) -> Vec<Value> {
    let validator = jsonschema::validator_for(schema).expect("test schema compiles");
    let out = instances(schema);
    assert!(!out.is_empty());
    for v in &out {
        let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{v} invalid for {schema}: {errors:?}");
    }
    out
}

#[test]
fn full_and_required_only_instances_come_first() {
    let schema = json!({
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": {"type": "integer", "minimum": 1},
            "name": {"type": "string"}
        }
    });
    let out = assert_all_valid(&schema);
    assert_eq!(
        out,
        vec![json!({"id": 1, "name": "example"}), json!({"id": 1})]
    );
}

#[test]
fn values_prefer_const_examples_default_enum() {
    let schema = json!({
        "type": "object",
        "properties": {
            "c": {"type": "string", "const": "fixed", "default": "other"},
            "x": {"type": "integer", "examples": [42], "example": 7, "default": 3},
            "y": {"type": "integer", "example": 7, "default": 3},
            "d": {"type": "integer", "default": 3, "enum": [3, 9]},
            "e": {"type": "string", "enum": ["red", "green"]}
        }
    });
    let out = assert_all_valid(&schema);
    assert_eq!(
        out[0],
        json!({"c": "fixed", "x": 42, "y": 7, "d": 3, "e": "red"})
    );
}

#[test]
fn numeric_bounds_and_multiples_are_respected() {
    for schema in [
        json!({"type": "integer", "minimum": 10, "maximum": 20}),
        json!({"type": "integer", "exclusiveMinimum": 5}),
        json!({"type": "integer", "maximum": -3}),
        json!({"type": "integer", "exclusiveMaximum": 0}),
        json!({"type": "integer", "minimum": 7, "multipleOf": 5}),
        json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5}),
        json!({"type": "number", "minimum": 0.25, "maximum": 0.75, "multipleOf": 0.25}),
        json!({"type": "number", "minimum": 1.5}),
    ] {
        assert_all_valid(&schema);
    }
}

#[test]
fn strings_respect_lengths_formats_and_simple_patterns() {
    for schema in [
        json!({"type": "string", "minLength": 12}),
        json!({"type": "string", "maxLength": 3}),
        json!({"type": "string", "pattern": "^[a-z]+$"}),
        json!({"type": "string", "pattern": "^[a-z]+$", "minLength": 10}),
        json!({"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"}),
        json!({"type": "string", "pattern": "^(foo|bar)_[0-9]+$"}),
        json!({"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+$"}),
        json!({"type": "string", "pattern": "^\\+?[1-9]\\d{1,14}$"}),
        json!({"type": "string", "format": "uuid", "pattern": "^[0-9a-f-]{36}$"}),
    ] {
        let out = assert_all_valid(&schema);
        let jsonschema_pattern = schema.get("pattern").and_then(Value::as_str);
        if let Some(p) = jsonschema_pattern {
            let check = jsonschema::validator_for(&json!({"pattern": p})).unwrap();
            assert!(check.is_valid(&out[0]), "{p}: {}", out[0]);
        }
    }
    let date = instances(&json!({"type": "string", "format": "date-time"}));
    assert_eq!(date[0], json!("2024-01-01T00:00:00Z"));
    let bytes = instances(&json!({"type": "string", "format": "byte"}));
    assert_eq!(bytes[0], json!("ZXhhbXBsZQ=="));
}

#[test]
fn nested_objects_and_arrays_with_min_items() {
    let schema = json!({
        "type": "object",
        "required": ["tags", "owner"],
        "properties": {
            "tags": {"type": "array", "minItems": 3, "uniqueItems": true,
                     "items": {"type": "string", "minLength": 2}},
            "owner": {
                "type": "object",
                "required": ["email"],
                "properties": {
                    "email": {"type": "string", "format": "email"},
                    "address": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}
                }
            },
            "matrix": {"type": "array", "items": {"type": "array", "minItems": 2, "items": {"type": "integer", "minimum": 3}}}
        }
    });
    let out = assert_all_valid(&schema);
    assert_eq!(out[0]["tags"].as_array().map(Vec::len), Some(3));
    assert_eq!(out[0]["owner"]["address"]["zip"], json!("00000"));
    assert_eq!(out[0]["matrix"], json!([[3, 3]]));
    assert_eq!(out[1]["owner"], json!({"email": "user@example.com"}));
}

#[test]
fn one_instance_per_one_of_branch_top_level_and_nested() {
    let schema = json!({
        "oneOf": [
            {"type": "object", "required": ["cat"], "properties": {"cat": {"const": true}},
             "additionalProperties": false},
            {"type": "object", "required": ["dog"], "properties": {"dog": {"type": "string"}},
             "additionalProperties": false},
            {"type": "object", "required": ["pet"], "additionalProperties": false,
             "properties": {"pet": {"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 2}]}}}
        ]
    });
    let out = assert_all_valid(&schema);
    assert!(out.contains(&json!({"cat": true})));
    assert!(out.contains(&json!({"dog": "example"})));
    // Only reachable by switching the top-level choice, so the nested
    // `anyOf` stays on its first branch there.
    assert!(out.contains(&json!({"pet": 1})));

    let nested = json!({
        "type": "object",
        "properties": {
            "shape": {"anyOf": [
                {"type": "object", "required": ["r"], "properties": {"r": {"type": "number"}}},
                {"type": "object", "required": ["w", "h"], "properties": {"w": {"type": "integer"}, "h": {"type": "integer"}}}
            ]}
        }
    });
    let out = assert_all_valid(&nested);
    assert!(out.contains(&json!({"shape": {"r": 1}})), "{out:?}");
    assert!(out.contains(&json!({"shape": {"w": 1, "h": 1}})), "{out:?}");
}

#[test]
fn nullable_unions_pick_the_non_null_type() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": ["null", "string"], "minLength": 2},
        "b": {"type": ["integer", "null"]},
        "c": {"type": "null"},
        "d": {"anyOf": [{"type": "null"}, {"type": "boolean"}]}
    }});
    let out = assert_all_valid(&schema);
    assert_eq!(
        out[0],
        json!({"a": "example", "b": 1, "c": null, "d": null})
    );
    assert!(out.contains(&json!({"a": "example", "b": 1, "c": null, "d": true})));
}

#[test]
fn all_of_branches_are_merged() {
    let schema = json!({
        "allOf": [
            {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer", "minimum": 5}}},
            {"required": ["name"], "properties": {"name": {"type": "string", "maxLength": 4}, "id": {"maximum": 9}}},
            {"properties": {"extra": {"type": "boolean"}}}
        ]
    });
    let out = assert_all_valid(&schema);
    assert_eq!(out[0], json!({"id": 5, "name": "exam", "extra": true}));
    assert_eq!(out[1], json!({"id": 5, "name": "exam"}));
}

#[test]
fn local_refs_are_followed_and_cycles_terminate() {
    let schema = json!({
        "$defs": {"node": {"type": "object", "required": ["next"], "properties": {
            "value": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}}},
        "$ref": "#/$defs/node"
    });
    // An infinitely required chain cannot be valid; it must still end.
    let out = instances(&schema);
    assert!(!out.is_empty());
    let looped = json!({"$ref": "#"});
    assert_eq!(instances(&looped), vec![Value::Null]);
}

#[test]
fn output_is_deduplicated_and_capped() {
    let branches: Vec<Value> = (0..40).map(|i| json!({"const": i})).collect();
    let schema = json!({"oneOf": branches});
    let out = assert_all_valid(&schema);
    assert_eq!(out.len(), MAX_INSTANCES);
    let simple = instances(&json!({"type": "integer"}));
    assert_eq!(simple, vec![json!(1)]);
}

#[test]
fn invalid_examples_are_ignored() {
    let schema = json!({"type": "object", "properties": {
        "m": {"type": "object", "example": "{\"a\": 1}", "properties": {"a": {"type": "integer"}}},
        "e": {"type": "string", "enum": ["x", "y"], "example": "z", "default": "y"}
    }});
    let out = assert_all_valid(&schema);
    assert_eq!(out[0], json!({"m": {"a": 1}, "e": "y"}));
}

#[test]
fn overlapping_or_unsatisfiable_branches_fall_back_to_a_valid_one() {
    let schema = json!({"type": "object", "properties": {
        "v": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "number"}]},
        "d": {"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "string", "pattern": ".^"}]},
        "n": {"allOf": [{"type": "object"}, {"anyOf": [{}, {"type": "null"}]}]}
    }});
    assert_all_valid(&schema);
}

#[test]
fn unique_items_and_min_properties_are_met() {
    let schema = json!({"type": "object", "properties": {
        "ids": {"type": "array", "minItems": 3, "uniqueItems": true,
                "items": {"type": "string", "pattern": "^(0|[1-9][0-9]*)$"}},
        "labels": {"type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}}
    }});
    let out = assert_all_valid(&schema);
    assert_eq!(out[0]["labels"].as_object().map(Map::len), Some(2));
}

#[test]
fn deep_required_content_is_still_generated() {
    let mut schema =
        json!({"type": "object", "required": ["leaf"], "properties": {"leaf": {"type": "string"}}});
    for _ in 0..(MAX_DEPTH + 5) {
        schema = json!({"type": "object", "required": ["x"], "properties": {"x": schema, "opt": {"type": "integer"}}});
    }
    assert_all_valid(&schema);
}

#[test]
fn huge_counts_are_clamped() {
    let schema = json!({"type": "array", "minItems": 1_000_000_000u64,
        "items": {"type": "array", "minItems": 1000, "items": {"type": "string", "minLength": 1e12}}});
    let out = instances(&schema);
    assert!(out[0].to_string().len() < 50_000_000);
}

fn arb_schema() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "type",
        "properties",
        "required",
        "items",
        "oneOf",
        "anyOf",
        "allOf",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "$ref",
        "prefixItems",
        "a",
        "0",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-z(\\[\\]{}|*+?^$\\\\#/0-9-]{0,8}".prop_map(Value::String),
        prop::sample::select(vec![
            "object",
            "array",
            "string",
            "integer",
            "number",
            "null",
            "#",
            "#/properties"
        ])
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}

proptest! {
    #[test]
    fn never_panics_and_stays_small(schema in arb_schema()) {
        let out = instances(&schema);
        prop_assert!(!out.is_empty() && out.len() <= MAX_INSTANCES);
    }
}
