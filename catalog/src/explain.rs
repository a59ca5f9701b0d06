//! `toolgate compile --explain TOOL`: the jq request expression equivalent to a
//! tool's request plan, a starting point for `x-mcp-request-transform`.
//!
//! # The `x-mcp-request-transform` contract
//!
//! A request transform is a jq program (see [`crate::transform`] for the
//! language and its limits). It receives the tool's **validated arguments**
//! (an object matching `inputSchema`) and must output one object:
//!
//! | key       | required | value |
//! |-----------|----------|-------|
//! | `path`    | yes      | string, relative to the upstream base URL (e.g. `/pets/12`); already percent-encoded |
//! | `method`  | no       | if present, must equal the operation's method (upper case) |
//! | `query`   | no       | object; values are strings, numbers, booleans or arrays of those (an array repeats the key) |
//! | `headers` | no       | object of strings |
//! | `cookies` | no       | object of strings |
//! | `body`    | no       | any JSON; encoded with the operation's body media type |
//!
//! Only the first output of the program is used.
//!
//! # What [`request_jq`] produces
//!
//! A readable program equivalent to the plan the gateway follows without jq:
//!
//! * `path`: the template with each `{param}` replaced by
//!   `(.arg | tostring | @uri)` (with the `.`/`;name=` prefix of the `label`
//!   and `matrix` styles);
//! * `query`, `headers`, `cookies`: objects from wire name to argument,
//!   with absent optional arguments dropped by
//!   `with_entries(select(.value != null))`; header and cookie values are
//!   stringified (arrays joined with `,`); non-exploded query arrays are
//!   joined with the style's delimiter and `deepObject` parameters are
//!   spread into `name[key]` entries;
//! * `body`: the nested argument, or an object rebuilt from the merged
//!   arguments under their wire names (absent ones dropped);
//! * for the raw request tool, the arguments passed through.
//!
//! Arguments that are explicitly `null` are treated like absent ones.
//!
//! Constant parameters ([`crate::model::ConstantParam`]: required header
//! or query parameters with one allowed value) are not arguments: the
//! program sends their value as a literal, and a comment line above it
//! names each one.

use std::fmt::Write as _;

use crate::model::{
    BodySource, ConstantParam, ParamBinding, ParamLocation, ParamStyle, RequestPlan,
};

/// jq keywords, which cannot follow `.` as a bare field name.
const KEYWORDS: &[&str] = &[
    "and", "or", "not", "if", "then", "elif", "else", "end", "as", "def", "reduce", "foreach",
    "try", "catch", "label", "import", "include", "__loc__",
];

/// A jq program that, given the tool arguments, builds
/// `{method, path, query, headers, cookies, body}`.
pub fn request_jq(plan: &RequestPlan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {} {}: equivalent of the generated request plan.",
        plan.method,
        plan.path.replace('\n', " ")
    );
    if plan.raw {
        out.push_str(
            "{\n  method: .method,\n  path: .path,\n  query: (.query // {}),\n  \
             headers: (.headers // {}),\n  cookies: {},\n  body: .body\n}\n",
        );
        return out;
    }

    for c in &plan.constants {
        let _ = writeln!(
            out,
            "# {} {} is always {}: the only value the document allows, so not an argument.",
            loc_name(c.location),
            c.name.replace('\n', " "),
            c.value
        );
    }
    let in_loc = |loc: ParamLocation| -> Vec<&ParamBinding> {
        plan.params.iter().filter(|p| p.location == loc).collect()
    };
    let fixed = |loc: ParamLocation| -> Vec<&ConstantParam> {
        plan.constants
            .iter()
            .filter(|c| c.location == loc)
            .collect()
    };
    let (headers, cookies) = (in_loc(ParamLocation::Header), in_loc(ParamLocation::Cookie));
    let (fixed_query, fixed_headers) = (fixed(ParamLocation::Query), fixed(ParamLocation::Header));
    if !headers.is_empty() || !cookies.is_empty() || !fixed_headers.is_empty() {
        out.push_str(
            "def wire: if type == \"array\" then join(\",\") \
             elif type == \"object\" then to_entries | map(\"\\(.key),\\(.value)\") | join(\",\") \
             else tostring end;\n",
        );
    }

    out.push_str("{\n");
    let _ = writeln!(out, "  method: {},", string(&plan.method));
    let _ = writeln!(out, "  path: {},", path_expr(plan));
    let _ = writeln!(
        out,
        "  query: {},",
        with_constants(query_expr(&in_loc(ParamLocation::Query)), &fixed_query)
    );
    let _ = writeln!(
        out,
        "  headers: {},",
        with_constants(strings_expr(&headers), &fixed_headers)
    );
    let _ = write!(out, "  cookies: {}", strings_expr(&cookies));
    if let Some(body) = &plan.body {
        let expr = match &body.source {
            BodySource::Nested { arg } => field(arg),
            BodySource::Merged { fields } => {
                let pairs: Vec<(String, String)> = fields
                    .iter()
                    .map(|f| (string(&f.name), field(&f.arg)))
                    .collect();
                compact_object(&pairs, "")
            }
        };
        let _ = write!(out, ",\n  body: {expr}");
    }
    out.push_str("\n}\n");
    out
}

fn path_expr(plan: &RequestPlan) -> String {
    let mut lit = String::from("\"");
    let mut rest = plan.path.as_str();
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        let name = &rest[open + 1..close];
        let binding = plan
            .params
            .iter()
            .find(|p| p.location == ParamLocation::Path && p.name == name);
        lit.push_str(&escape(&rest[..open]));
        match binding {
            Some(p) => {
                match p.style {
                    ParamStyle::Label => lit.push('.'),
                    ParamStyle::Matrix => {
                        let _ = write!(lit, ";{}=", escape(&p.name));
                    }
                    _ => {}
                }
                let _ = write!(lit, "\\({} | tostring | @uri)", field(&p.arg));
            }
            None => lit.push_str(&escape(&rest[open..=close])),
        }
        rest = &rest[close + 1..];
    }
    lit.push_str(&escape(rest));
    lit.push('"');
    lit
}

fn query_expr(params: &[&ParamBinding]) -> String {
    let mut pairs = Vec::new();
    let mut spread = Vec::new();
    for p in params {
        let arg = field(&p.arg);
        let delimiter = match p.style {
            _ if p.explode => None,
            ParamStyle::SpaceDelimited => Some(" "),
            ParamStyle::PipeDelimited => Some("|"),
            _ => Some(","),
        };
        if p.style == ParamStyle::DeepObject {
            spread.push(format!(
                "({arg} // {{}} | with_entries(.key = {}))",
                string_with_key(&p.name)
            ));
        } else if let Some(d) = delimiter {
            pairs.push((
                string(&p.name),
                format!(
                    "({arg} | if type == \"array\" then join({}) else . end)",
                    string(d)
                ),
            ));
        } else {
            pairs.push((string(&p.name), arg));
        }
    }
    let mut expr = if pairs.is_empty() && spread.is_empty() {
        return "{}".to_string();
    } else {
        object(&pairs)
    };
    for s in spread {
        expr = format!("{expr} + {s}");
    }
    format!("({expr} | with_entries(select(.value != null)))")
}

fn strings_expr(params: &[&ParamBinding]) -> String {
    let pairs: Vec<(String, String)> = params
        .iter()
        .map(|p| (string(&p.name), field(&p.arg)))
        .collect();
    compact_object(&pairs, " | .value |= wire")
}

fn loc_name(location: ParamLocation) -> &'static str {
    match location {
        ParamLocation::Path => "path parameter",
        ParamLocation::Query => "query parameter",
        ParamLocation::Header => "header",
        ParamLocation::Cookie => "cookie",
    }
}

/// `expr` with the constants added as literals (JSON is jq). Header
/// values go through `wire` like argument ones.
fn with_constants(expr: String, constants: &[&ConstantParam]) -> String {
    if constants.is_empty() {
        return expr;
    }
    let pairs: Vec<(String, String)> = constants
        .iter()
        .map(|c| {
            let literal = c.value.to_string();
            match c.location {
                ParamLocation::Header => (string(&c.name), format!("({literal} | wire)")),
                _ => (string(&c.name), literal),
            }
        })
        .collect();
    let constants = object(&pairs);
    if expr == "{}" {
        constants
    } else {
        format!("({expr} + {constants})")
    }
}

/// `({k: v, ...} | with_entries(select(.value != null)<then>))`, or `{}`.
fn compact_object(pairs: &[(String, String)], then: &str) -> String {
    if pairs.is_empty() {
        return "{}".to_string();
    }
    format!(
        "({} | with_entries(select(.value != null){then}))",
        object(pairs)
    )
}

fn object(pairs: &[(String, String)]) -> String {
    let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", body.join(", "))
}

/// `"name[\(.key)]"` for deepObject keys.
fn string_with_key(name: &str) -> String {
    format!("\"{}[\\(.key)]\"", escape(name))
}

/// Access to an argument: `.name`, or `.["odd-name"]`.
fn field(arg: &str) -> String {
    let mut chars = arg.chars();
    let simple = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&arg);
    if simple {
        format!(".{arg}")
    } else {
        format!(".[{}]", string(arg))
    }
}

fn string(s: &str) -> String {
    format!("\"{}\"", escape(s))
}

/// Escapes text for the inside of a jq string literal.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BodyEncoding, BodyPlan, FieldBinding};
    use crate::transform::JqProgram;
    use serde_json::{json, Value};

    fn param(arg: &str, name: &str, location: ParamLocation, required: bool) -> ParamBinding {
        let (style, explode) = match location {
            ParamLocation::Query | ParamLocation::Cookie => (ParamStyle::Form, true),
            _ => (ParamStyle::Simple, false),
        };
        ParamBinding {
            arg: arg.into(),
            name: name.into(),
            location,
            style,
            explode,
            allow_reserved: false,
            required,
        }
    }

    fn body(source: BodySource) -> Option<BodyPlan> {
        Some(BodyPlan {
            content_type: "application/json".into(),
            encoding: BodyEncoding::Json,
            required: true,
            source,
            binary_fields: vec![],
            base64: false,
        })
    }

    fn run(plan: &RequestPlan, args: Value) -> Value {
        let src = request_jq(plan);
        let program = JqProgram::compile(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        program.run(args).unwrap_or_else(|e| panic!("{e}\n{src}"))
    }

    fn pet_plan() -> RequestPlan {
        RequestPlan {
            method: "PUT".into(),
            path: "/stores/{storeId}/pets/{petId}".into(),
            params: vec![
                param("storeId", "storeId", ParamLocation::Path, true),
                param("petId", "petId", ParamLocation::Path, true),
                param("limit", "limit", ParamLocation::Query, false),
                param("tags", "tag", ParamLocation::Query, false),
                param("requestId", "X-Request-Id", ParamLocation::Header, false),
                param("session", "session", ParamLocation::Cookie, false),
            ],
            body: body(BodySource::Merged {
                fields: vec![
                    FieldBinding {
                        arg: "name".into(),
                        name: "name".into(),
                    },
                    FieldBinding {
                        arg: "body_limit".into(),
                        name: "limit".into(),
                    },
                    FieldBinding {
                        arg: "nickName".into(),
                        name: "nick-name".into(),
                    },
                ],
            }),
            constants: vec![],
            raw: false,
        }
    }

    #[test]
    fn explained_plan_builds_the_request_from_arguments() {
        let args = json!({
            "storeId": "north/1", "petId": 12, "limit": 5, "tags": ["a", "b"],
            "requestId": 99, "name": "Rex", "body_limit": 3
        });
        let out = run(&pet_plan(), args);
        assert_eq!(
            out,
            json!({
                "method": "PUT",
                "path": "/stores/north%2F1/pets/12",
                "query": {"limit": 5, "tag": ["a", "b"]},
                "headers": {"X-Request-Id": "99"},
                "cookies": {},
                "body": {"name": "Rex", "limit": 3}
            })
        );
    }

    #[test]
    fn absent_optional_arguments_are_left_out() {
        let out = run(&pet_plan(), json!({"storeId": 1, "petId": 2}));
        assert_eq!(out["query"], json!({}));
        assert_eq!(out["headers"], json!({}));
        assert_eq!(out["body"], json!({}));
        let out = run(
            &pet_plan(),
            json!({"storeId": 1, "petId": 2, "session": "s", "nickName": "R"}),
        );
        assert_eq!(out["cookies"], json!({"session": "s"}));
        assert_eq!(out["body"], json!({"nick-name": "R"}));
    }

    #[test]
    fn nested_body_and_no_body() {
        let mut plan = pet_plan();
        plan.body = body(BodySource::Nested { arg: "body".into() });
        let out = run(
            &plan,
            json!({"storeId": 1, "petId": 2, "body": [1, {"a": null}]}),
        );
        assert_eq!(out["body"], json!([1, {"a": null}]));
        plan.body = None;
        let out = run(&plan, json!({"storeId": 1, "petId": 2}));
        assert!(out.get("body").is_none(), "{out}");
    }

    #[test]
    fn styles_and_odd_names() {
        let mut label = param("id", "id", ParamLocation::Path, true);
        label.style = ParamStyle::Label;
        let mut matrix = param("v", "ver", ParamLocation::Path, true);
        matrix.style = ParamStyle::Matrix;
        let mut csv = param("ids", "ids", ParamLocation::Query, false);
        csv.explode = false;
        let mut pipes = param("p", "p", ParamLocation::Query, false);
        pipes.style = ParamStyle::PipeDelimited;
        pipes.explode = false;
        let mut deep = param("filter", "filter", ParamLocation::Query, false);
        deep.style = ParamStyle::DeepObject;
        let plan = RequestPlan {
            method: "GET".into(),
            path: "/a/{id}/b{ver}/\"q\"/{unbound}".into(),
            params: vec![
                label,
                matrix,
                csv,
                pipes,
                deep,
                param("if", "x-if", ParamLocation::Header, false),
                param("odd-arg", "Odd", ParamLocation::Header, false),
            ],
            constants: vec![],
            body: None,
            raw: false,
        };
        let args = json!({
            "id": 7, "v": "1 2", "ids": [1, 2], "p": ["x", "y"],
            "filter": {"color": "red", "size": 2}, "if": true, "odd-arg": [1, 2]
        });
        let out = run(&plan, args);
        assert_eq!(out["path"], json!("/a/.7/b;ver=1%202/\"q\"/{unbound}"));
        assert_eq!(
            out["query"],
            json!({"ids": "1,2", "p": "x|y", "filter[color]": "red", "filter[size]": 2})
        );
        assert_eq!(out["headers"], json!({"x-if": "true", "Odd": "1,2"}));
    }

    #[test]
    fn constants_are_sent_as_literals_and_named_in_a_comment() {
        let constant = |name: &str, location, value| ConstantParam {
            name: name.into(),
            location,
            style: ParamStyle::Simple,
            explode: false,
            value,
        };
        let mut plan = pet_plan();
        plan.constants = vec![
            constant("X-Api-Version", ParamLocation::Header, json!(2)),
            constant("format", ParamLocation::Query, json!("json")),
        ];
        let src = request_jq(&plan);
        assert!(
            src.contains("# header X-Api-Version is always 2: the only value the document allows"),
            "{src}"
        );
        let out = run(&plan, json!({"storeId": 1, "petId": 2, "requestId": "r"}));
        assert_eq!(
            out["headers"],
            json!({"X-Request-Id": "r", "X-Api-Version": "2"})
        );
        assert_eq!(out["query"], json!({"format": "json"}));
        plan.params.clear();
        plan.path = "/pets".into();
        let out = run(&plan, json!({}));
        assert_eq!(out["headers"], json!({"X-Api-Version": "2"}));
    }

    #[test]
    fn raw_tool_passes_arguments_through() {
        let plan = RequestPlan {
            method: "*".into(),
            path: "/".into(),
            params: vec![],
            constants: vec![],
            body: None,
            raw: true,
        };
        let out = run(
            &plan,
            json!({"method": "POST", "path": "/x", "body": {"a": 1}}),
        );
        assert_eq!(
            out,
            json!({"method": "POST", "path": "/x", "query": {}, "headers": {}, "cookies": {}, "body": {"a": 1}})
        );
    }

    #[test]
    fn output_is_readable_one_key_per_line() {
        let src = request_jq(&pet_plan());
        assert!(src.contains("\n  path: \"/stores/\\(.storeId | tostring | @uri)/pets/\\(.petId | tostring | @uri)\",\n"), "{src}");
        assert!(src.contains("\n  method: \"PUT\",\n"), "{src}");
    }
}
