//! `serve --config` compiling its own catalog: upstreams from document
//! files and a URL, with overlays and McpUpstream settings, hot-reloaded;
//! `compile --config` and `lint --config`. All on the real binary.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::reload::{serve, tempdir, Served};
use crate::support::*;
use crate::upstream::TestUpstream;

/// An OpenAPI 3.0 document (JSON, which is YAML) with one operation per
/// `(method, path, operationId)`; `{id}` in a path is a string parameter.
fn spec(title: &str, ops: &[(&str, &str, &str)]) -> String {
    let mut paths = serde_json::Map::new();
    for (method, path, id) in ops {
        let params = if path.contains("{id}") {
            json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}])
        } else {
            json!([])
        };
        let op = json!({
            "operationId": id,
            "parameters": params,
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}},
        });
        paths
            .entry(path.to_string())
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .unwrap()
            .insert(method.to_string(), op);
    }
    json!({"openapi": "3.0.3", "info": {"title": title, "version": "1"}, "paths": paths})
        .to_string()
}

/// An overlay giving operation `op` of `path` the tool name `name`.
fn rename(path: &str, method: &str, name: &str) -> String {
    json!({
        "overlay": "1.0.0",
        "info": {"title": "rename", "version": "1"},
        "actions": [{"target": format!("$.paths['{path}'].{method}"), "update": {"x-mcp-tool-name": name}}],
    })
    .to_string()
}

/// Writes `text` to `path` in one step (a rename), as editors do, so a
/// watcher never reads half of it.
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Serves one OpenAPI document at `/openapi.json` (with an ETag, and 304
/// for a matching `If-None-Match`) and counts the GETs.
struct SpecServer {
    url: String,
    body: Arc<Mutex<String>>,
    gets: Arc<AtomicUsize>,
    not_modified: Arc<AtomicUsize>,
}

impl SpecServer {
    async fn start(body: String) -> SpecServer {
        let body = Arc::new(Mutex::new(body));
        let gets = Arc::new(AtomicUsize::new(0));
        let not_modified = Arc::new(AtomicUsize::new(0));
        let (b, g, n) = (body.clone(), gets.clone(), not_modified.clone());
        let app = axum::Router::new().route(
            "/openapi.json",
            axum::routing::get(move |headers: HeaderMap| {
                let (b, g, n) = (b.clone(), g.clone(), n.clone());
                async move {
                    g.fetch_add(1, Ordering::SeqCst);
                    let body = b.lock().unwrap().clone();
                    let etag = format!(
                        "\"{}\"",
                        body.len() as u64 * 31 + body.bytes().map(u64::from).sum::<u64>()
                    );
                    if headers.get("if-none-match").and_then(|v| v.to_str().ok())
                        == Some(etag.as_str())
                    {
                        n.fetch_add(1, Ordering::SeqCst);
                        return StatusCode::NOT_MODIFIED.into_response();
                    }
                    let resp: Response = (
                        [
                            ("content-type", "application/json"),
                            ("etag", etag.as_str()),
                        ],
                        body,
                    )
                        .into_response();
                    resp
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SpecServer {
            url,
            body,
            gets,
            not_modified,
        }
    }

    fn document_url(&self) -> String {
        format!("{}/openapi.json", self.url)
    }

    fn set(&self, body: String) {
        *self.body.lock().unwrap() = body;
    }
}

/// Runs `toolgate ARGS` to its exit, off the runtime (the test's own
/// servers must keep answering it); its status, stdout and stderr.
async fn run_to_exit(args: &[&str]) -> (ExitStatus, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || run_blocking(&args))
        .await
        .unwrap()
}

fn run_blocking(args: &[String]) -> (ExitStatus, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .env("RUST_LOG", "info")
        .env("TOOLGATE_METRICS_ADDR", "off")
        .env_remove("TOOLGATE_LOG_FORMAT")
        .env_remove("POD_NAMESPACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolgate starts");
    let read = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = from.read_to_string(&mut s);
            s
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("toolgate {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, stdout.join().unwrap(), stderr.join().unwrap())
}

async fn tool_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

async fn status(served: &Served) -> Value {
    reqwest::get(format!("{}/status", served.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Three upstreams of one local gateway: `alpha` and `beta` from files
/// (beta with an overlay and `naming`/`tools` settings), `gamma` from a URL.
struct Local {
    dir: PathBuf,
    config: PathBuf,
    alpha: PathBuf,
    overlay: PathBuf,
    up: TestUpstream,
    docs: SpecServer,
}

fn alpha_v1() -> String {
    spec(
        "alpha",
        &[
            ("get", "/pets/{id}", "getPet"),
            ("get", "/items", "listItems"),
        ],
    )
}

fn beta() -> String {
    spec(
        "beta",
        &[
            ("get", "/things", "listThings"),
            ("get", "/things/{id}", "getThing"),
            ("post", "/things", "createThing"),
        ],
    )
}

impl Local {
    async fn new(name: &str) -> Local {
        let dir = tempdir(name);
        std::fs::create_dir_all(dir.join("specs")).unwrap();
        let up = TestUpstream::start().await;
        let docs = SpecServer::start(spec("gamma", &[("get", "/status", "getStatus")])).await;
        let local = Local {
            config: dir.join("toolgate.yaml"),
            alpha: dir.join("specs/alpha.yaml"),
            overlay: dir.join("beta-overlay.yaml"),
            dir,
            up,
            docs,
        };
        write(&local.alpha, &alpha_v1());
        write(&local.dir.join("specs/beta.yaml"), &beta());
        write(
            &local.overlay,
            &rename("/things/{id}", "get", "fetch_thing"),
        );
        write(&local.config, &local.config_text(false));
        local
    }

    /// The config; relative paths are relative to it. `split` is beta's
    /// `naming.slug.splitCamelCase`.
    fn config_text(&self, split: bool) -> String {
        format!(
            "upstreams:
  alpha:
    openapi: {{file: specs/alpha.yaml}}
    baseUrl: '{up}/base'
    # 404 is a success too, and 200 stays one.
    validation: {{successStatus: [404]}}
  beta:
    openapi: {{file: specs/beta.yaml}}
    overlays: [beta-overlay.yaml]
    naming: {{slug: {{splitCamelCase: {split}}}}}
    tools: {{readOnly: true}}
    baseUrl: '{up}/beta'
  gamma:
    openapi: {{url: '{doc}'}}
    baseUrl: '{up}/gamma'
",
            up = self.up.url,
            doc = self.docs.document_url(),
        )
    }

    fn serve(&self) -> Served {
        serve(&["--config", self.config.to_str().unwrap()])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_upstreams_from_files_and_a_url_serve_and_hot_reload() {
    let l = Local::new("local-reload").await;
    let served = l.serve();
    let client = connect(&format!("{}/mcp", served.url)).await;
    // The overlay renamed getThing; `naming` kept listThings in one word;
    // `tools.readOnly` dropped createThing.
    assert_eq!(
        tool_names(&client).await,
        [
            "alpha__get_pet",
            "alpha__list_items",
            "beta__fetch_thing",
            "beta__listthings",
            "gamma__get_status",
        ]
    );
    let s = status(&served).await;
    let sources: Vec<&str> = s["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["source"].as_str().unwrap())
        .collect();
    assert!(sources[0].ends_with("specs/alpha.yaml"), "{sources:?}");
    assert_eq!(sources[2], l.docs.document_url());

    // Each call reaches its own upstream.
    for (tool, args, path) in [
        ("alpha__list_items", json!({}), "/base/items"),
        ("beta__fetch_thing", json!({"id": "2"}), "/beta/things/2"),
        ("gamma__get_status", json!({}), "/gamma/status"),
    ] {
        let r = call(&client, tool, args).await;
        assert!(!is_error(&r), "{tool}: {}", text(&r));
        assert_eq!(l.up.last().path, path, "{tool}");
    }
    // `validation.successStatus` as the McpUpstream documents it.
    for id in ["7", "404"] {
        let r = call(&client, "alpha__get_pet", json!({"id": id})).await;
        assert!(!is_error(&r), "pet {id}: {}", text(&r));
    }

    // A document file changes.
    let n = client.service().changes();
    write(
        &l.alpha,
        &spec(
            "alpha",
            &[
                ("get", "/pets/{id}", "getPet"),
                ("get", "/items", "listItems"),
                ("get", "/items/{id}/tags", "listItemTags"),
            ],
        ),
    );
    client.service().wait_changes(n + 1).await;
    assert!(tool_names(&client)
        .await
        .contains(&"alpha__list_item_tags".to_string()));

    // The overlay changes.
    let n = client.service().changes();
    write(&l.overlay, &rename("/things/{id}", "get", "grab_thing"));
    client.service().wait_changes(n + 1).await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"beta__grab_thing".to_string()), "{names:?}");
    assert!(
        !names.contains(&"beta__fetch_thing".to_string()),
        "{names:?}"
    );

    // The config changes: beta's naming, and the URL is fetched again.
    let gets = l.docs.gets.load(Ordering::SeqCst);
    l.docs.set(spec(
        "gamma",
        &[
            ("get", "/status", "getStatus"),
            ("get", "/version", "getVersion"),
        ],
    ));
    let n = client.service().changes();
    write(&l.config, &l.config_text(true));
    client.service().wait_changes(n + 1).await;
    let names = tool_names(&client).await;
    assert!(
        names.contains(&"beta__list_things".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"gamma__get_version".to_string()),
        "{names:?}"
    );
    assert!(l.docs.gets.load(Ordering::SeqCst) > gets);

    // A bad edit to one document, a good one to another upstream's
    // overlay: the good one loads, the bad one keeps its last good tools
    // and the log names the file.
    let before = served.log_count();
    let n = client.service().changes();
    write(&l.alpha, "openapi: 3.0.3\npaths: [\n");
    write(&l.overlay, &rename("/things/{id}", "get", "take_thing"));
    client.service().wait_changes(n + 1).await;
    let line = served
        .wait_log(
            before,
            &["upstream alpha", "alpha.yaml", "last good version"],
        )
        .await;
    assert!(line.contains("ERROR"), "{line}");
    let names = tool_names(&client).await;
    assert!(names.contains(&"beta__take_thing".to_string()), "{names:?}");
    assert!(
        names.contains(&"alpha__list_item_tags".to_string()),
        "{names:?}"
    );
    let r = call(&client, "alpha__list_items", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));

    // A config that does not parse changes nothing, and says so.
    let before = served.log_count();
    write(&l.config, "upstreams: [\n");
    let config = l.config.display().to_string();
    served
        .wait_log(before, &[config.as_str(), "config not reloaded"])
        .await;
    assert_eq!(tool_names(&client).await, names);

    // Fixed again: alpha is reloaded with the config.
    let n = client.service().changes();
    write(&l.alpha, &alpha_v1());
    write(&l.config, &l.config_text(true));
    client.service().wait_changes(n + 1).await;
    let names = tool_names(&client).await;
    assert!(
        !names.contains(&"alpha__list_item_tags".to_string()),
        "{names:?}"
    );
    served.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_document_is_fetched_again_every_refresh_interval() {
    let l = Local::new("local-refresh").await;
    let config = format!(
        "upstreams:\n  gamma:\n    openapi: {{url: '{}', refreshInterval: 100ms}}\n    baseUrl: '{}'\n",
        l.docs.document_url(),
        l.up.url
    );
    write(&l.config, &config);
    let served = l.serve();
    let client = connect(&format!("{}/mcp", served.url)).await;
    assert_eq!(tool_names(&client).await, ["gamma__get_status"]);
    // Unchanged documents cost a 304, not a download.
    tokio::time::timeout(WAIT, async {
        while l.docs.not_modified.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("timed out waiting for a conditional GET");
    let n = client.service().changes();
    l.docs.set(spec(
        "gamma",
        &[
            ("get", "/status", "getStatus"),
            ("get", "/health", "getHealth"),
        ],
    ));
    client.service().wait_changes(n + 1).await;
    assert_eq!(
        tool_names(&client).await,
        ["gamma__get_health", "gamma__get_status"]
    );
    served.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compile_config_writes_the_catalog_serve_serves() {
    let l = Local::new("local-compile").await;
    let out = l.dir.join("catalog.json");
    let (st, _, err) = run_to_exit(&[
        "compile",
        "--config",
        l.config.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ])
    .await;
    assert!(st.success(), "{err}");
    let compiled: catalog::Catalog = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let prefixes: Vec<&str> = compiled
        .upstreams
        .iter()
        .map(|u| u.prefix.as_str())
        .collect();
    assert_eq!(prefixes, ["alpha", "beta", "gamma"]);

    let served = l.serve();
    assert_eq!(status(&served).await["catalogHash"], compiled.hash.as_str());
    let client = connect(&format!("{}/mcp", served.url)).await;
    let from_config = client.list_all_tools().await.unwrap();
    // And `serve --catalog` of that file, with the same config for the
    // upstream settings, lists exactly the same tools.
    let from_file = serve(&[
        "--catalog",
        out.to_str().unwrap(),
        "--config",
        l.config.to_str().unwrap(),
    ]);
    let other = connect(&format!("{}/mcp", from_file.url)).await;
    assert_eq!(other.list_all_tools().await.unwrap(), from_config);

    // `--check` agrees; `lint` summarises each upstream.
    let (st, _, err) = run_to_exit(&[
        "compile",
        "--config",
        l.config.to_str().unwrap(),
        "--check",
        out.to_str().unwrap(),
    ])
    .await;
    assert!(st.success(), "{err}");
    let (st, lint, err) = run_to_exit(&["lint", "--config", l.config.to_str().unwrap()]).await;
    assert!(st.success(), "{err}");
    for prefix in ["upstream alpha (", "upstream beta (", "upstream gamma ("] {
        assert!(lint.contains(prefix), "{lint}");
    }
    assert!(
        lint.contains("createThing") || lint.contains("POST /things"),
        "{lint}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_upstream_at_start_up_fails_naming_the_file_and_field() {
    let l = Local::new("local-bad").await;
    let config = l.config.to_str().unwrap();
    let serve_args = ["serve", "--listen", "127.0.0.1:0", "--config", config];

    // A document with an external $ref: the file and the JSON pointer.
    let mut doc: Value = serde_json::from_str(&alpha_v1()).unwrap();
    doc["paths"]["/items"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] =
        json!({"$ref": "other.yaml#/Missing"});
    write(&l.alpha, &doc.to_string());
    let (st, _, err) = run_to_exit(&serve_args).await;
    assert!(!st.success());
    let alpha = l.alpha.display().to_string();
    assert!(
        err.contains("upstream alpha") && err.contains(&alpha),
        "{err}"
    );
    assert!(err.contains("/paths/~1items/get"), "{err}");
    // A transform that does not work refuses the upstream, as the
    // operator does, instead of serving it without that tool.
    let mut doc: Value = serde_json::from_str(&alpha_v1()).unwrap();
    doc["paths"]["/items"]["get"]["x-mcp-response-transform"] = json!("{{{");
    write(&l.alpha, &doc.to_string());
    let (st, _, err) = run_to_exit(&serve_args).await;
    assert!(!st.success());
    assert!(
        err.contains("upstream alpha") && err.contains(&alpha),
        "{err}"
    );
    assert!(
        err.contains("invalid transform; first: GET /items"),
        "{err}"
    );
    write(&l.alpha, &alpha_v1());

    // A missing overlay file.
    std::fs::remove_file(&l.overlay).unwrap();
    let (st, _, err) = run_to_exit(&serve_args).await;
    assert!(!st.success());
    assert!(
        err.contains("upstream beta: overlays[0]") && err.contains("beta-overlay.yaml"),
        "{err}"
    );
    write(&l.overlay, &rename("/things/{id}", "get", "fetch_thing"));

    // A URL that answers 404: the upstream and the URL.
    let missing = format!("{}/missing.json", l.docs.url);
    write(
        &l.config,
        &format!("upstreams:\n  gamma: {{openapi: {{url: '{missing}'}}, baseUrl: 'http://x'}}\n"),
    );
    let (st, _, err) = run_to_exit(&serve_args).await;
    assert!(!st.success());
    assert!(
        err.contains("upstream gamma") && err.contains(&missing) && err.contains("404"),
        "{err}"
    );

    // A redirect to another origin is not followed (as in the operator):
    // the 3xx, where it pointed, and what to do.
    let target = l.docs.document_url();
    let moved = {
        let target = target.clone();
        let app = axum::Router::new().route(
            "/moved.json",
            axum::routing::get(move || {
                let target = target.clone();
                async move { axum::response::Redirect::temporary(&target) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/moved.json", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        url
    };
    write(
        &l.config,
        &format!("upstreams:\n  gamma: {{openapi: {{url: '{moved}'}}, baseUrl: 'http://x'}}\n"),
    );
    let (st, _, err) = run_to_exit(&serve_args).await;
    assert!(!st.success());
    assert!(
        err.contains("upstream gamma")
            && err.contains("HTTP 307")
            && err.contains(&target)
            && err.contains("another origin"),
        "{err}"
    );

    // Prefixes that would share tool names: both named.
    write(
        &l.config,
        "upstreams:\n  alpha: {openapi: {file: specs/alpha.yaml}}\n  alpha__v2: {openapi: {file: specs/beta.yaml}}\n",
    );
    let (st, _, err) = run_to_exit(&serve_args).await;
    assert!(!st.success());
    assert!(err.contains(config), "{err}");
    assert!(
        err.contains("upstreams.alpha__v2") && err.contains("upstream alpha's"),
        "{err}"
    );

    // The same prefix twice.
    write(
        &l.config,
        "upstreams:\n  alpha: {openapi: {file: specs/alpha.yaml}}\n  alpha: {openapi: {file: specs/beta.yaml}}\n",
    );
    let (st, _, err) = run_to_exit(&serve_args).await;
    assert!(!st.success());
    assert!(err.contains("\"alpha\" is given to two upstreams"), "{err}");

    // A field the McpUpstream would refuse.
    write(
        &l.config,
        "upstreams:\n  alpha: {openapi: {file: specs/alpha.yaml}, naming: {separator: '-'}}\n",
    );
    let (st, _, err) = run_to_exit(&serve_args).await;
    assert!(!st.success());
    assert!(err.contains("upstreams.alpha.naming.separator"), "{err}");

    // Nothing to serve; and with --kube, upstreams stay the operator's.
    write(&l.config, "inbound: {}\n");
    let (st, _, err) = run_to_exit(&serve_args).await;
    assert!(!st.success());
    assert!(err.contains("nothing to serve"), "{err}");
    write(&l.config, &l.config_text(false));
    let (st, _, err) = run_to_exit(&[
        "serve",
        "--kube",
        "--listen",
        "127.0.0.1:0",
        "--config",
        config,
    ])
    .await;
    assert!(!st.success());
    assert!(err.contains("`upstreams` is not allowed"), "{err}");
}
