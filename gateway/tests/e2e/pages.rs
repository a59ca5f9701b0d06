//! tools/list pages bounded by bytes, and cursors across reloads, seen by
//! real clients: rmcp's, and the official Python and TypeScript SDKs
//! (scripts in `tests/clients/`).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use catalog::Catalog;
use gateway::config::GatewayConfig;
use gateway::EdgeOptions;
use rmcp::model::{ErrorCode, PaginatedRequestParams, ProtocolVersion};
use serde_json::{json, Value};

use crate::support::*;
use crate::upstream::TestUpstream;

/// A tool as a client received it.
#[derive(Debug, Clone)]
struct Listed {
    name: String,
    /// Its JSON bytes as serde_json writes it (as the gateway does).
    bytes: usize,
}

impl Listed {
    fn of<T: serde::Serialize>(name: &str, tool: &T) -> Listed {
        Listed {
            name: name.to_string(),
            bytes: serde_json::to_vec(tool).expect("a tool serialises").len(),
        }
    }

    fn of_json(tool: &Value) -> Listed {
        Listed::of(tool["name"].as_str().unwrap_or_default(), tool)
    }
}

/// The tools of each page.
type Pages = Vec<Vec<Listed>>;

/// JSON bytes of a page's `tools` array: what the budget bounds.
fn page_bytes(page: &[Listed]) -> usize {
    // `[`, `]` and a comma between tools.
    page.iter().map(|t| t.bytes).sum::<usize>() + page.len().max(1) + 1
}

fn names(pages: &Pages) -> Vec<String> {
    pages.iter().flatten().map(|t| t.name.clone()).collect()
}

/// Asserts that `pages` list exactly `expected` (in order, each once) and
/// that no page's tools exceed `budget` bytes unless the page is one tool.
fn assert_complete(client: &str, url: &str, pages: &Pages, expected: &[String], budget: usize) {
    let listed = names(pages);
    let mut seen = HashSet::new();
    let dups: Vec<&String> = listed.iter().filter(|n| !seen.insert(*n)).collect();
    assert!(dups.is_empty(), "{client} {url}: listed twice: {dups:?}");
    assert_eq!(listed.len(), expected.len(), "{client} {url}: tool count");
    assert!(listed == expected, "{client} {url}: names differ");
    for (i, page) in pages.iter().enumerate() {
        let bytes = page_bytes(page);
        assert!(
            bytes <= budget || page.len() == 1,
            "{client} {url}: page {i} has {} tools in {bytes} bytes, over the budget of {budget}",
            page.len()
        );
    }
}

/// Asserts that every page but the last ends because the next tool would
/// not fit (or the count is reached): pages are as full as the budget lets
/// them be.
fn assert_full(url: &str, pages: &Pages, budget: usize, size: usize) {
    for (i, pair) in pages.windows(2).enumerate() {
        let with_next = page_bytes(&pair[0]) + pair[1][0].bytes + 1;
        assert!(
            pair[0].len() == size || with_next > budget,
            "{url}: page {i} ({} bytes) ends early: the next tool would fit",
            page_bytes(&pair[0])
        );
    }
}

/// Every page of `url`'s tools/list, through rmcp.
async fn rmcp_pages(client: &Client) -> Pages {
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let params = cursor.map(|c| {
            let mut p = PaginatedRequestParams::default();
            p.cursor = Some(c);
            p
        });
        let page = tokio::time::timeout(WAIT, client.list_tools(params))
            .await
            .expect("timed out waiting for tools/list")
            .expect("tools/list answers");
        pages.push(page.tools.iter().map(|t| Listed::of(&t.name, t)).collect());
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return pages,
        }
    }
}

/// The corpus served at every `/mcp/{prefix}` and `/mcp`, with each
/// endpoint's expected names in catalog order.
struct Corpus {
    catalog: Catalog,
    config: GatewayConfig,
    /// The corpus file of each prefix.
    files: BTreeMap<String, String>,
}

impl Corpus {
    fn load() -> Corpus {
        let (catalog, not_compiled) = crate::corpus::corpus_catalog();
        assert!(not_compiled.is_empty(), "{not_compiled:#?}");
        let mut yaml = String::from("upstreams:\n");
        for u in &catalog.upstreams {
            yaml.push_str(&format!(
                "  {}: {{baseUrl: 'http://127.0.0.1:9'}}\n",
                u.prefix
            ));
        }
        let config = gateway::config::parse(&yaml).expect("corpus config parses");
        let files = toolgate_corpus::documents()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let name = p.file_name().map(|n| n.to_string_lossy().to_string());
                (format!("c{i}"), name.unwrap_or_default())
            })
            .collect();
        Corpus {
            catalog,
            config,
            files,
        }
    }

    /// (path, expected names): each upstream's endpoint, then `/mcp`.
    fn endpoints(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = self
            .catalog
            .upstreams
            .iter()
            .map(|u| {
                let names = u.tools.iter().map(|t| t.name.clone()).collect();
                (format!("/mcp/{}", u.prefix), names)
            })
            .collect();
        let all = out.iter().flat_map(|(_, n)| n.clone()).collect();
        out.push(("/mcp".to_string(), all));
        out
    }
}

/// One endpoint's listing, measured.
#[derive(Debug)]
struct Row {
    path: String,
    tools: usize,
    bytes: usize,
    largest: usize,
    pages: usize,
    /// Pages holding a single tool larger than the budget.
    alone: usize,
}

/// What one SDK script printed for each URL.
struct ScriptResult {
    protocol: Option<String>,
    pages: Result<Pages, String>,
}

/// Runs a `tests/clients` script and reads its `{"results": [...]}`.
async fn run_script(mut cmd: Command, urls: &[String]) -> Vec<ScriptResult> {
    cmd.args(urls);
    let shown = format!("{cmd:?}");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("the script's runner")
        .unwrap_or_else(|e| panic!("{shown}: {e}"));
    assert!(
        out.status.success(),
        "{shown}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{shown}: not JSON ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), urls.len(), "{shown}: one result per URL");
    results
        .iter()
        .map(|r| ScriptResult {
            protocol: r["protocol"].as_str().map(str::to_string),
            pages: match r.get("error") {
                Some(e) => Err(e.as_str().unwrap_or_default().to_string()),
                None => Ok(r["pages"]
                    .as_array()
                    .expect("pages")
                    .iter()
                    .map(|p| {
                        p.as_array()
                            .expect("a page")
                            .iter()
                            .map(Listed::of_json)
                            .collect()
                    })
                    .collect()),
            },
        })
        .collect()
}

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/clients")
}

/// A copy of a `tests/clients` Node script in the SDK's node directory
/// (ES modules resolve packages from the script's location), removed on
/// drop. Named per process, so concurrent test runs do not share it.
struct NodeScript(PathBuf);

impl NodeScript {
    fn install(node_dir: &Path, name: &str) -> NodeScript {
        let stem = name.trim_end_matches(".mjs");
        let to = node_dir.join(format!("{stem}-{}.mjs", std::process::id()));
        std::fs::copy(clients_dir().join(name), &to)
            .unwrap_or_else(|e| panic!("copying {name} to {}: {e}", to.display()));
        NodeScript(to)
    }
}

impl Drop for NodeScript {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Item 1 of issue 12: every corpus document lists completely, each page
/// within the default budget, through rmcp's client (a 2025-06-18 session
/// and 2026-07-28 stateless), the official Python SDK (a 2025-06-18
/// session, where one unbounded page of Box used to exceed its 1 MiB SSE
/// event limit, and stateless) and the official TypeScript SDK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_document_lists_completely_through_each_client() {
    let sdk = toolgate_tests::tools::sdk_clients();
    let corpus = Corpus::load();
    let gw = start_gateway(&corpus.catalog, corpus.config.clone()).await;
    let budget = gateway::mcp::pages::DEFAULT_PAGE_BYTES;
    let size = gateway::mcp::pages::DEFAULT_PAGE_SIZE;
    let endpoints = corpus.endpoints();
    let urls: Vec<String> = endpoints
        .iter()
        .map(|(p, _)| format!("{}{p}", gw.url))
        .collect();

    // The SDK scripts run while rmcp lists.
    let scripts = sdk.clone().map(|sdk| {
        let urls = urls.clone();
        tokio::spawn(async move {
            let py = |mode: &str| {
                let mut c = Command::new(&sdk.python);
                c.arg(clients_dir().join("list_tools.py")).arg(mode);
                c
            };
            let script = NodeScript::install(&sdk.node_dir, "list_tools.mjs");
            let mut node = Command::new(&sdk.node);
            node.arg(&script.0).current_dir(&sdk.node_dir);
            let (session, stateless, ts) = tokio::join!(
                run_script(py("session"), &urls),
                run_script(py("stateless"), &urls),
                run_script(node, &urls),
            );
            drop(script);
            (session, stateless, ts)
        })
    });

    let mut table = Vec::new();
    for version in [ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2026_07_28] {
        for ((path, expected), url) in endpoints.iter().zip(&urls) {
            let client = if version == ProtocolVersion::V_2026_07_28 {
                connect_stateless(url).await
            } else {
                connect_as(url, version.clone(), None).await
            };
            let pages = rmcp_pages(&client).await;
            let _ = client.cancel().await;
            let who = format!("rmcp {version}");
            assert_complete(&who, path, &pages, expected, budget);
            assert_full(path, &pages, budget, size);
            if version == ProtocolVersion::V_2025_06_18 {
                let bytes: usize = pages.iter().flatten().map(|t| t.bytes).sum();
                let largest = pages.iter().flatten().map(|t| t.bytes).max();
                let alone = pages.iter().filter(|p| page_bytes(p) > budget).count();
                table.push(Row {
                    path: path.clone(),
                    tools: expected.len(),
                    bytes,
                    largest: largest.unwrap_or_default(),
                    pages: pages.len(),
                    alone,
                });
            }
        }
    }
    // Box's tools alone are 2.6 MB: paging must have happened.
    assert!(
        table.iter().any(|r| r.path != "/mcp" && r.pages > 1),
        "no document needed a second page: {table:?}"
    );

    // The measurements of docs/measurements.md ("Pages bounded by bytes").
    eprintln!(
        "| document | prefix | tools | tools/list bytes | ≈ tokens (bytes ÷ 4) | largest tool | \
         pages at {budget} B | of which one tool over the budget |"
    );
    eprintln!("|---|---|---:|---:|---:|---:|---:|---:|");
    for r in &table {
        let prefix = r.path.trim_start_matches("/mcp").trim_start_matches('/');
        let file = corpus
            .files
            .get(prefix)
            .map_or("(all, `/mcp`)", String::as_str);
        eprintln!(
            "| {file} | {prefix} | {} | {} | {} | {} | {} | {} |",
            r.tools,
            r.bytes,
            r.bytes.div_ceil(4),
            r.largest,
            r.pages,
            r.alone
        );
    }

    let Some(scripts) = scripts else { return };
    let (session, stateless, ts) = scripts.await.expect("the SDK scripts ran");
    for (client, results, protocol) in [
        ("python session", &session, Some("2025-06-18")),
        ("python stateless", &stateless, Some("2026-07-28")),
        ("typescript", &ts, None),
    ] {
        for (r, (path, expected)) in results.iter().zip(&endpoints) {
            let pages = r
                .pages
                .as_ref()
                .unwrap_or_else(|e| panic!("{client} {path}: {e}"));
            if let Some(p) = protocol {
                assert_eq!(r.protocol.as_deref(), Some(p), "{client} {path}");
            }
            assert_complete(client, path, pages, expected, budget);
        }
    }
}

/// The default catalog and one tool larger than any small budget.
fn catalog_with_huge_tool() -> Catalog {
    let mut pets = pets_tools();
    pets.insert(
        3,
        tool(
            "pets__huge",
            "GET",
            "/huge",
            json!({"type": "object", "properties": {}}),
            json!([]),
            json!({"description": "x".repeat(4000)}),
        ),
    );
    catalog_of(vec![
        upstream("pets", pets),
        upstream("other", other_tools()),
    ])
}

fn expected_names(catalog: &Catalog, prefix: Option<&str>) -> Vec<String> {
    catalog
        .upstreams
        .iter()
        .filter(|u| prefix.is_none_or(|p| p == u.prefix))
        .flat_map(|u| u.tools.iter().map(|t| t.name.clone()))
        .collect()
}

/// With a budget of a few tools, pages end at it; a tool larger than the
/// budget on its own is listed alone, on a page of its own.
#[tokio::test]
async fn pages_end_at_the_byte_budget_and_a_larger_tool_goes_alone() {
    let up = TestUpstream::start().await;
    let catalog = catalog_with_huge_tool();
    let budget = 700;
    let edge = EdgeOptions {
        page_bytes: budget,
        ..Default::default()
    };
    let gw = start_gateway_with(&catalog, config_for(&up.url, ""), edge).await;
    for prefix in [None, Some("pets")] {
        let path = prefix.map_or("/mcp".to_string(), |p| format!("/mcp/{p}"));
        let client = connect(&format!("{}{path}", gw.url)).await;
        let pages = rmcp_pages(&client).await;
        assert_complete(
            "rmcp",
            &path,
            &pages,
            &expected_names(&catalog, prefix),
            budget,
        );
        assert_full(&path, &pages, budget, usize::MAX);
        let huge = pages
            .iter()
            .find(|p| p.iter().any(|t| t.name == "pets__huge"))
            .expect("the huge tool is listed");
        assert_eq!(huge.len(), 1, "{path}: the huge tool shares its page");
        assert!(page_bytes(huge) > budget);
        assert!(pages.len() >= 4, "{path}: {} pages", pages.len());
    }
}

fn cursor_of(page: &rmcp::model::ListToolsResult) -> String {
    page.next_cursor.clone().expect("a next page")
}

async fn page_at(client: &Client, cursor: &str) -> Result<Vec<String>, rmcp::ErrorData> {
    let mut p = PaginatedRequestParams::default();
    p.cursor = Some(cursor.to_string());
    match tokio::time::timeout(WAIT, client.list_tools(Some(p)))
        .await
        .expect("timed out waiting for tools/list")
    {
        Ok(page) => Ok(page.tools.iter().map(|t| t.name.to_string()).collect()),
        Err(rmcp::ServiceError::McpError(e)) => Err(e),
        Err(e) => panic!("tools/list failed outside MCP: {e}"),
    }
}

fn assert_refused(r: Result<Vec<String>, rmcp::ErrorData>, why: &str) {
    let e = r.expect_err("the cursor is refused");
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
    assert!(
        e.message.contains(why),
        "{:?} does not say {why:?}",
        e.message
    );
}

/// A reload between pages: one that changes nothing keeps the cursor
/// valid; one that changes a tool, or an access policy, makes it stale:
/// refused with -32602 saying to list again, after list_changed, and the
/// fresh listing is the new catalog, complete.
#[tokio::test]
async fn a_reload_between_pages_refuses_the_stale_cursor_and_the_relisting_is_complete() {
    let up = TestUpstream::start().await;
    let catalog = default_catalog();
    let edge = EdgeOptions {
        page_size: 3,
        ..Default::default()
    };
    let config = config_for(&up.url, "");
    let gw = start_gateway_with(&catalog, config.clone(), edge).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let all = expected_names(&catalog, None);

    let first = client.list_tools(None).await.expect("page 1");
    let cursor = cursor_of(&first);
    let diff = gw
        .store
        .install(&catalog)
        .expect("the same catalog installs");
    assert!(diff.is_empty());
    assert_eq!(page_at(&client, &cursor).await.expect("page 2"), all[3..6]);

    // A changed description: same names, different listing.
    let mut changed = default_catalog();
    let pets = changed
        .upstreams
        .iter_mut()
        .find(|u| u.prefix == "pets")
        .expect("pets");
    let get = pets
        .tools
        .iter_mut()
        .find(|t| t.name == "pets__get_pet")
        .expect("pets__get_pet");
    get.description = Some("Fetches one pet.".into());
    pets.seal();
    let changed = catalog_of(changed.upstreams);
    gw.store
        .install(&changed)
        .expect("the changed catalog installs");
    client.service().wait_changes(1).await;
    assert_refused(page_at(&client, &cursor).await, "list the tools again");
    let relisted = client.list_all_tools().await.expect("a fresh listing");
    let relisted: Vec<String> = relisted.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(relisted, expected_names(&changed, None));
    let get = client
        .list_tools(None)
        .await
        .expect("page 1 again")
        .tools
        .into_iter()
        .find(|t| t.name == "pets__get_pet")
        .expect("pets__get_pet on page 1");
    assert_eq!(get.description.as_deref(), Some("Fetches one pet."));

    // An access policy, same tools: what callers see may differ.
    let cursor = cursor_of(&client.list_tools(None).await.expect("page 1"));
    let with_policy = config_for(&up.url, "    access: {rules: [{tools: ['get_*']}]}");
    gw.store
        .install_with_config(changed.clone(), with_policy, Default::default())
        .expect("the policy installs");
    client.service().wait_changes(2).await;
    assert_refused(page_at(&client, &cursor).await, "list the tools again");
    let relisted = client.list_all_tools().await.expect("a fresh listing");
    let mut relisted: Vec<String> = relisted.iter().map(|t| t.name.to_string()).collect();
    relisted.sort();
    assert_eq!(relisted, ["other__ping", "pets__get_pet"]);
}

/// A cursor pages only the endpoint that issued it; anything else that is
/// not an issued cursor is refused as invalid.
#[tokio::test]
async fn a_cursor_pages_only_its_own_endpoint() {
    let up = TestUpstream::start().await;
    let edge = EdgeOptions {
        page_size: 2,
        ..Default::default()
    };
    let gw = start_gateway_with(&default_catalog(), config_for(&up.url, ""), edge).await;
    let all = connect(&format!("{}/mcp", gw.url)).await;
    let pets = connect(&format!("{}/mcp/pets", gw.url)).await;
    let from_all = cursor_of(&all.list_tools(None).await.expect("page 1"));
    let from_pets = cursor_of(&pets.list_tools(None).await.expect("page 1"));
    assert_refused(page_at(&pets, &from_all).await, "another endpoint");
    assert_refused(page_at(&all, &from_pets).await, "another endpoint");
    for bad in [
        "2",
        "not-a-cursor",
        &"A".repeat(4096),
        &format!("{from_all}A"),
    ] {
        assert_refused(page_at(&all, bad).await, "invalid pagination cursor");
    }
    assert!(page_at(&all, &from_all).await.is_ok());
}

/// Replicas serving the same catalog accept each other's cursors: a
/// stateless client's next page may land on any of them.
#[tokio::test]
async fn replicas_with_the_same_catalog_resume_each_others_cursors() {
    let up = TestUpstream::start().await;
    let catalog = default_catalog();
    let edge = || EdgeOptions {
        page_size: 4,
        ..Default::default()
    };
    let a = start_gateway_with(&catalog, config_for(&up.url, ""), edge()).await;
    let b = start_gateway_with(&catalog, config_for(&up.url, ""), edge()).await;
    let on_a = connect_stateless(&format!("{}/mcp", a.url)).await;
    let on_b = connect_stateless(&format!("{}/mcp", b.url)).await;
    let first = on_a.list_tools(None).await.expect("page 1 on a");
    let second = page_at(&on_b, &cursor_of(&first))
        .await
        .expect("page 2 on b");
    let all = expected_names(&catalog, None);
    assert_eq!(second, all[4..8]);
}
