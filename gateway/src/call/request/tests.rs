use super::*;
use catalog::{BodyEncoding, BodySource, FieldBinding, ParamBinding};
use serde_json::json;

fn base() -> Url {
    Url::parse("http://up.test/api/v1").unwrap()
}

fn param(arg: &str, loc: ParamLocation, style: ParamStyle, explode: bool) -> ParamBinding {
    ParamBinding {
        arg: arg.into(),
        name: arg.into(),
        location: loc,
        style,
        explode,
        allow_reserved: false,
        required: loc == ParamLocation::Path,
    }
}

fn plan(path: &str, params: Vec<ParamBinding>) -> RequestPlan {
    RequestPlan {
        method: "GET".into(),
        path: path.into(),
        params,
        constants: vec![],
        body: None,
        raw: false,
    }
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn pet_plan() -> RequestPlan {
    plan(
        "/pets/{id}",
        vec![param("id", ParamLocation::Path, ParamStyle::Simple, false)],
    )
}

#[test]
fn path_parameter_is_one_encoded_segment() {
    let r = build(&pet_plan(), &args(json!({"id": "a/b?x=1#f"})), &base()).unwrap();
    assert_eq!(
        r.url.as_str(),
        "http://up.test/api/v1/pets/a%2Fb%3Fx%3D1%23f"
    );
}

#[test]
fn dot_dot_path_parameter_never_leaves_the_path() {
    for hostile in ["..", "."] {
        let e = build(&pet_plan(), &args(json!({ "id": hostile })), &base()).unwrap_err();
        assert!(
            matches!(e, RequestError::Argument { ref arg, .. } if arg == "id"),
            "{e}"
        );
    }
    let r = build(&pet_plan(), &args(json!({"id": "../../admin"})), &base()).unwrap();
    assert_eq!(r.url.path(), "/api/v1/pets/..%2F..%2Fadmin");
}

#[test]
fn empty_path_parameter_is_refused() {
    assert!(build(&pet_plan(), &args(json!({"id": ""})), &base()).is_err());
}

#[test]
fn numbers_and_booleans_in_path() {
    let r = build(&pet_plan(), &args(json!({"id": 42})), &base()).unwrap();
    assert_eq!(r.url.path(), "/api/v1/pets/42");
}

#[test]
fn label_and_matrix_path_styles() {
    let mut p = pet_plan();
    p.params[0].style = ParamStyle::Label;
    let r = build(&p, &args(json!({"id": ["a", "b"]})), &base()).unwrap();
    assert_eq!(r.url.path(), "/api/v1/pets/.a,b");
    p.params[0].style = ParamStyle::Matrix;
    p.params[0].explode = true;
    let r = build(&p, &args(json!({"id": ["a", "b"]})), &base()).unwrap();
    assert_eq!(r.url.path(), "/api/v1/pets/;id=a;id=b");
}

#[test]
fn query_styles_follow_openapi() {
    let cases = [
        (ParamStyle::Form, true, json!(["a", "b"]), "q=a&q=b"),
        (ParamStyle::Form, false, json!(["a", "b"]), "q=a,b"),
        (
            ParamStyle::SpaceDelimited,
            false,
            json!(["a", "b"]),
            "q=a%20b",
        ),
        (ParamStyle::PipeDelimited, false, json!(["a", "b"]), "q=a|b"),
        (ParamStyle::Form, true, json!({"x": 1, "y": "z"}), "x=1&y=z"),
        (
            ParamStyle::Form,
            false,
            json!({"x": 1, "y": "z"}),
            "q=x,1,y,z",
        ),
        (
            ParamStyle::DeepObject,
            true,
            json!({"x": 1, "y": {"z": true}}),
            "q[x]=1&q[y][z]=true",
        ),
        (ParamStyle::Form, true, json!("a b&c=d"), "q=a%20b%26c%3Dd"),
    ];
    for (style, explode, value, want) in cases {
        let p = plan("/s", vec![param("q", ParamLocation::Query, style, explode)]);
        let r = build(&p, &args(json!({ "q": value })), &base()).unwrap();
        assert_eq!(r.url.query(), Some(want), "{style:?} explode={explode}");
    }
}

#[test]
fn absent_and_null_arguments_are_not_sent() {
    let p = plan(
        "/s",
        vec![param("q", ParamLocation::Query, ParamStyle::Form, true)],
    );
    let r = build(&p, &args(json!({"q": null})), &base()).unwrap();
    assert_eq!(r.url.query(), None);
}

#[test]
fn allow_reserved_keeps_reserved_but_not_structure() {
    let mut b = param("q", ParamLocation::Query, ParamStyle::Form, true);
    b.allow_reserved = true;
    let r = build(
        &plan("/s", vec![b]),
        &args(json!({"q": "a/b:c&d"})),
        &base(),
    )
    .unwrap();
    assert_eq!(r.url.query(), Some("q=a/b:c%26d"));
}

#[test]
fn crlf_in_header_is_refused() {
    let p = plan(
        "/s",
        vec![param(
            "X-Trace",
            ParamLocation::Header,
            ParamStyle::Simple,
            false,
        )],
    );
    let e = build(&p, &args(json!({"X-Trace": "a\r\nX-Evil: 1"})), &base()).unwrap_err();
    assert!(e.to_string().contains("CR"), "{e}");
    let r = build(&p, &args(json!({"X-Trace": "ok"})), &base()).unwrap();
    assert_eq!(r.headers[0].0.as_str(), "x-trace");
}

#[test]
fn framing_headers_cannot_be_set() {
    let p = plan(
        "/s",
        vec![param(
            "Host",
            ParamLocation::Header,
            ParamStyle::Simple,
            false,
        )],
    );
    assert!(build(&p, &args(json!({"Host": "evil"})), &base()).is_err());
}

#[test]
fn cookies_are_joined_and_encoded() {
    let p = plan(
        "/s",
        vec![
            param("a", ParamLocation::Cookie, ParamStyle::Form, false),
            param("b", ParamLocation::Cookie, ParamStyle::Form, false),
        ],
    );
    let r = build(&p, &args(json!({"a": "1", "b": "x;y"})), &base()).unwrap();
    assert_eq!(r.headers[0].1.to_str().unwrap(), "a=1; b=x%3By");
}

fn body_plan(encoding: BodyEncoding, source: BodySource, ct: &str) -> BodyPlan {
    BodyPlan {
        content_type: ct.into(),
        encoding,
        required: true,
        source,
        binary_fields: vec![],
        base64: false,
    }
}

#[test]
fn json_body_from_merged_arguments() {
    let mut p = plan("/pets", vec![]);
    p.method = "POST".into();
    p.body = Some(body_plan(
        BodyEncoding::Json,
        BodySource::Merged {
            fields: vec![
                FieldBinding {
                    arg: "name".into(),
                    name: "name".into(),
                },
                FieldBinding {
                    arg: "body_id".into(),
                    name: "id".into(),
                },
            ],
        },
        "application/json",
    ));
    let r = build(&p, &args(json!({"name": "rex", "body_id": 7})), &base()).unwrap();
    let RequestBody::Bytes { content_type, data } = r.body else {
        panic!()
    };
    assert_eq!(content_type, "application/json");
    assert_eq!(
        serde_json::from_slice::<Value>(&data).unwrap(),
        json!({"name": "rex", "id": 7})
    );
}

#[test]
fn nested_body_absent_sends_nothing() {
    let mut p = plan("/pets", vec![]);
    p.body = Some(body_plan(
        BodyEncoding::Json,
        BodySource::Nested { arg: "body".into() },
        "application/json",
    ));
    let r = build(&p, &args(json!({})), &base()).unwrap();
    assert_eq!(r.body, RequestBody::Empty);
}

#[test]
fn form_body_is_urlencoded() {
    let mut p = plan("/f", vec![]);
    p.body = Some(body_plan(
        BodyEncoding::Form,
        BodySource::Nested { arg: "body".into() },
        "application/x-www-form-urlencoded",
    ));
    let r = build(
        &p,
        &args(json!({"body": {"a": "x y", "b": [1, 2]}})),
        &base(),
    )
    .unwrap();
    let RequestBody::Bytes { data, .. } = r.body else {
        panic!()
    };
    assert_eq!(String::from_utf8(data).unwrap(), "a=x%20y&b=1&b=2");
}

#[test]
fn multipart_binary_fields_are_decoded() {
    let mut p = plan("/upload", vec![]);
    let mut bp = body_plan(
        BodyEncoding::Multipart,
        BodySource::Nested { arg: "body".into() },
        "multipart/form-data",
    );
    bp.binary_fields = vec!["file".into()];
    p.body = Some(bp);
    let r = build(
        &p,
        &args(json!({"body": {"file": "AAEC/w==", "note": "hi"}})),
        &base(),
    )
    .unwrap();
    let RequestBody::Multipart(fields) = r.body else {
        panic!()
    };
    assert_eq!(fields[0].data, vec![0, 1, 2, 255]);
    assert_eq!(fields[0].filename.as_deref(), Some("file"));
    assert_eq!(fields[1].data, b"hi");
    let e = build(&p, &args(json!({"body": {"file": "%%%"}})), &base()).unwrap_err();
    assert!(matches!(e, RequestError::Argument { ref arg, .. } if arg == "file"));
}

#[test]
fn raw_base64_body_is_sent_as_bytes() {
    let mut p = plan("/blob", vec![]);
    let mut bp = body_plan(
        BodyEncoding::Raw,
        BodySource::Nested { arg: "body".into() },
        "application/octet-stream",
    );
    bp.base64 = true;
    p.body = Some(bp);
    let r = build(&p, &args(json!({"body": "AAEC"})), &base()).unwrap();
    assert_eq!(
        r.body,
        RequestBody::Bytes {
            content_type: "application/octet-stream".into(),
            data: vec![0, 1, 2]
        }
    );
}

#[test]
fn raw_tool_is_confined_to_the_base_url() {
    let ok = build_raw(
        &args(json!({"method": "get", "path": "/pets", "query": {"a": [1, 2]}})),
        &base(),
    )
    .unwrap();
    assert_eq!(ok.url.as_str(), "http://up.test/api/v1/pets?a=1&a=2");
    for bad in [
        "/../x",
        "/a/%2e%2e/x",
        "//evil.test/x",
        "pets",
        "/a?b=1",
        "/a#f",
        "/a/%2F/b",
        "/..;/x",
        "/a/..;jsessionid=1/x",
        "/a/%2e%2e%3b/x",
        "/.;/x",
    ] {
        assert!(
            build_raw(&args(json!({"method": "GET", "path": bad})), &base()).is_err(),
            "{bad} accepted"
        );
    }
}

#[test]
fn transform_output_becomes_a_request() {
    let p = plan("/ignored", vec![]);
    let out =
        json!({"path": "/pets/1", "query": {"x": "y"}, "headers": {"X-A": "b"}, "body": {"k": 1}});
    let r = from_transform(&out, &p, &base()).unwrap();
    assert_eq!(r.method, Method::GET);
    assert_eq!(r.url.as_str(), "http://up.test/api/v1/pets/1?x=y");
    assert_eq!(r.headers.len(), 1);
    assert!(
        matches!(r.body, RequestBody::Bytes { ref content_type, .. } if content_type == "application/json")
    );
}

#[test]
fn base_without_path_works() {
    let b = Url::parse("http://up.test").unwrap();
    let r = build(&pet_plan(), &args(json!({"id": "x"})), &b).unwrap();
    assert_eq!(r.url.as_str(), "http://up.test/pets/x");
}

#[test]
fn a_dot_dot_semicolon_path_parameter_is_refused() {
    // Encoded as one segment (`..%3B`) it is harmless to most servers, but
    // a servlet container decodes, then strips `;...`: refused like `..`.
    for hostile in ["..;", "..;x", ".;"] {
        let e = build(&pet_plan(), &args(json!({ "id": hostile })), &base());
        assert!(e.is_err(), "{hostile} accepted: {:?}", e.map(|r| r.url));
    }
    let ok = build(&pet_plan(), &args(json!({"id": "a;b"})), &base()).unwrap();
    assert_eq!(ok.url.path(), "/api/v1/pets/a%3Bb");
}

#[test]
fn a_plan_path_without_a_leading_slash_stays_below_the_base_path() {
    let r = build(&plan("no-slash", vec![]), &args(json!({})), &base()).unwrap();
    assert_eq!(r.url.as_str(), "http://up.test/api/v1/no-slash");
    let b = Url::parse("http://up.test/api").unwrap();
    let r = build(
        &plan(
            "x/{id}",
            vec![param("id", ParamLocation::Path, ParamStyle::Simple, false)],
        ),
        &args(json!({"id": "7"})),
        &b,
    )
    .unwrap();
    assert_eq!(r.url.path(), "/api/x/7");
}
