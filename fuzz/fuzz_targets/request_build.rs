//! The request builder: arguments → HTTP request. Whatever the arguments
//! (and whatever path template a document declares), the URL must stay on
//! the base URL's origin and below its path: [`assert_under_base`] panics
//! otherwise, so libFuzzer reports the input.
//!
//! Input: a mode byte (low 3 bits pick the base URL, the next 2 the mode),
//! then per mode:
//! - 0: a tool byte, then the arguments (JSON) for a tool of a fixed
//!   document that uses every parameter style and body encoding;
//! - 1: arguments of the raw request tool;
//! - 2: a tool byte, then a request transform's output (JSON);
//! - 3: `OpenAPI document \0 arguments`: plans from the real compiler on a
//!   fuzzed document, each built with the arguments.
#![no_main]

use std::sync::OnceLock;

use catalog::{CompileOptions, RequestPlan, UpstreamSource};
use gateway::call::request::{self, PreparedRequest};
use libfuzzer_sys::fuzz_target;
use reqwest::Url;
use serde_json::{Map, Value};
use toolgate_fuzz::{
    amplify, assert_under_base, json_object, json_or_string, split_nul, BASE_URLS,
};

const STYLES_DOC: &str = r#"
openapi: 3.0.3
info: {title: styles, version: "1"}
paths:
  /items/{id}:
    get:
      operationId: query_styles
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: q, in: query, schema: {type: string}}
        - {name: tags, in: query, style: form, explode: false, schema: {type: array, items: {type: string}}}
        - {name: many, in: query, style: form, explode: true, schema: {type: array, items: {type: string}}}
        - {name: sp, in: query, style: spaceDelimited, explode: false, schema: {type: array, items: {type: string}}}
        - {name: pp, in: query, style: pipeDelimited, explode: false, schema: {type: array, items: {type: string}}}
        - {name: deep, in: query, style: deepObject, explode: true, schema: {type: object}}
        - {name: obj, in: query, style: form, explode: false, schema: {type: object}}
        - {name: res, in: query, allowReserved: true, schema: {type: string}}
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: X-List, in: header, explode: true, schema: {type: object}}
        - {name: sess, in: cookie, schema: {type: string}}
      responses: {"200": {description: ok}}
  /label/{l}/matrix/{m}/{a}.{b}/x{c}y:
    get:
      operationId: path_styles
      parameters:
        - {name: l, in: path, required: true, style: label, explode: true, schema: {type: array, items: {type: string}}}
        - {name: m, in: path, required: true, style: matrix, explode: true, schema: {type: object}}
        - {name: a, in: path, required: true, schema: {type: string}}
        - {name: b, in: path, required: true, style: label, schema: {type: string}}
        - {name: c, in: path, required: true, style: matrix, schema: {type: array, items: {type: string}}}
      responses: {"200": {description: ok}}
  /{whole}:
    delete:
      operationId: whole_segment
      parameters:
        - {name: whole, in: path, required: true, schema: {type: string}}
      responses: {"204": {description: gone}}
  /upload:
    post:
      operationId: multipart
      requestBody:
        content:
          multipart/form-data:
            schema:
              type: object
              properties:
                file: {type: string, format: binary}
                meta: {type: object}
                note: {type: string}
      responses: {"201": {description: ok}}
  /form:
    post:
      operationId: form
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema: {type: object, properties: {a: {type: string}, b: {type: array, items: {type: string}}}}
      responses: {"200": {description: ok}}
  /raw/{id}:
    put:
      operationId: raw_bytes
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
      requestBody:
        required: true
        content:
          application/octet-stream:
            schema: {type: string, format: binary}
      responses: {"200": {description: ok}}
  /json/{id}:
    patch:
      operationId: json_body
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {id: {type: string}, name: {type: string}}}
      responses: {"200": {description: ok}}
"#;

fn styles_plans() -> &'static [RequestPlan] {
    static PLANS: OnceLock<Vec<RequestPlan>> = OnceLock::new();
    PLANS.get_or_init(|| {
        let mut options = CompileOptions::default();
        options.tools.raw_request_tool = true;
        let upstream = catalog::compile_upstream(&UpstreamSource {
            prefix: "fz",
            document: "styles.yaml",
            spec: STYLES_DOC.as_bytes(),
            overlays: &[],
            options: &options,
        })
        .expect("the fixed styles document compiles");
        assert!(upstream.rejected.is_empty(), "{:?}", upstream.rejected);
        upstream.tools.into_iter().map(|t| t.plan).collect()
    })
}

fn bases() -> &'static [Url] {
    static BASES: OnceLock<Vec<Url>> = OnceLock::new();
    BASES.get_or_init(|| {
        BASE_URLS
            .iter()
            .map(|u| Url::parse(u).expect("base URL"))
            .collect()
    })
}

fn check(base: &Url, built: Result<PreparedRequest, request::RequestError>, what: &str) {
    let Ok(req) = built else {
        return;
    };
    assert_under_base(base, &req.url, what);
    for (name, _) in &req.headers {
        assert!(
            !matches!(
                name.as_str(),
                "host" | "content-length" | "transfer-encoding" | "connection"
            ),
            "framing header {name} set by the caller [{what}]"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let base = &bases()[usize::from(mode & 7) % BASE_URLS.len()];
    let plans = styles_plans();
    match (mode >> 3) & 3 {
        0 | 2 => {
            let Some((&tool, rest)) = rest.split_first() else {
                return;
            };
            let plan = &plans[usize::from(tool) % plans.len()];
            if (mode >> 3) & 3 == 0 {
                if let Some(args) = json_object(&amplify(rest)) {
                    check(base, request::build(plan, &args, base), &plan.path);
                }
            } else {
                let output = json_or_string(&amplify(rest));
                check(
                    base,
                    request::from_transform(&output, plan, base),
                    "transform",
                );
            }
        }
        1 => {
            if let Some(args) = json_object(&amplify(rest)) {
                check(base, request::build_raw(&args, base), "raw tool");
            }
        }
        _ => {
            let (spec, args) = split_nul(rest);
            let args: Map<String, Value> = args.and_then(json_object).unwrap_or_default();
            let Ok(upstream) = catalog::compile_upstream(&UpstreamSource {
                prefix: "fz",
                document: "fuzz.yaml",
                spec,
                overlays: &[],
                options: &CompileOptions::default(),
            }) else {
                return;
            };
            for tool in &upstream.tools {
                let what = format!("document path {:?}", tool.plan.path);
                check(base, request::build(&tool.plan, &args, base), &what);
                // Arguments that satisfy the input schema reach the builder
                // in the gateway; synthesise some so path templates are
                // expanded even when the fuzzed arguments miss a name.
                let schema = tool.input_schema.to_value();
                for instance in catalog::synth::instances(&schema).into_iter().take(2) {
                    if let Value::Object(mut synth) = instance {
                        synth.extend(args.clone());
                        check(base, request::build(&tool.plan, &synth, base), &what);
                    }
                }
            }
        }
    }
});
