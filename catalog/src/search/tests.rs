use rust_stemmers::{Algorithm, Stemmer};

use super::index::*;
use super::intent::*;
use super::params::*;
use super::query::*;
use super::words::*;
use crate::model::{Catalog, Tool};

use super::*;

fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    split_words(text, |w| match w {
        Word::Plain(w) => out.push(w.to_string()),
        Word::Cjk(w) => out.push(format!("cjk:{w}")),
    });
    out
}

#[test]
fn names_split_on_separators_case_and_digits() {
    assert_eq!(
        words("gitea__repo_addCollaborator"),
        ["gitea", "repo", "add", "Collaborator"]
    );
    assert_eq!(words("getHTTPStatus"), ["get", "HTTP", "Status"]);
    assert_eq!(words("v2Users.list"), ["v", "2", "Users", "list"]);
    assert_eq!(
        words("/repos/{owner}/{repo}/labels"),
        ["repos", "owner", "repo", "labels"]
    );
    assert_eq!(words("oauth2-token"), ["oauth", "2", "token"]);
    assert_eq!(
        words("日本語のAPIです"),
        ["cjk:日本語の", "API", "cjk:です"]
    );
    assert!(words("__--//").is_empty());
}

#[test]
fn stop_words_are_sorted_for_binary_search() {
    let mut sorted = STOP_WORDS.to_vec();
    sorted.sort_unstable();
    assert_eq!(sorted, STOP_WORDS);
}

#[test]
fn intent_tables_are_sorted_and_disjoint() {
    for table in [
        READ_VERBS,
        WRITE_VERBS,
        LEADING_FILLERS,
        ONE_WORDS,
        MANY_WORDS,
    ] {
        let mut sorted = table.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, table);
    }
    for w in READ_VERBS {
        assert!(
            !WRITE_VERBS.contains(w) && !LEADING_FILLERS.contains(w),
            "{w}"
        );
    }
    for w in WRITE_VERBS {
        assert!(!LEADING_FILLERS.contains(w), "{w}");
    }
}

#[test]
fn the_leading_word_says_whether_a_task_reads_or_changes() {
    let cases = [
        ("Show the settings of one webhook", Intent::Read),
        ("which apps have access to my account?", Intent::Read),
        ("Can this project be deleted safely?", Intent::Read),
        ("Delete a user", Intent::Write),
        ("please remove the label", Intent::Write),
        ("I want to create a repository", Intent::Write),
        ("Can you delete the branch", Intent::Write),
        ("help me find a pet", Intent::Read),
        ("find and delete stale branches", Intent::Unknown),
        ("the latest release", Intent::Unknown),
        ("please", Intent::Unknown),
        ("", Intent::Unknown),
    ];
    for (text, want) in cases {
        assert_eq!(Query::parse(text).unwrap().intent, want, "{text:?}");
    }
}

#[test]
fn a_task_about_one_item_prefers_the_path_that_addresses_one() {
    let count = |text: &str| Query::parse(text).unwrap().count;
    assert_eq!(count("Show one webhook"), Count::One);
    assert_eq!(count("list the webhooks"), Count::Many);
    assert_eq!(count("list every specific thing"), Count::Any);
    assert_eq!(count("Show a webhook"), Count::Any);
    let c = catalog(
        r#""/hooks": {
          "get": {"operationId": "listHooks", "summary": "Hooks of the account",
            "responses": {"200": {"description": "ok"}}}},
          "/hooks/{id}": {
          "get": {"operationId": "getHook", "summary": "A hook of the account",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}}"#,
    );
    let index = SearchIndex::build(&c);
    assert_eq!(top(&c, &index, "one hook"), "pets__get_hook");
    assert_eq!(top(&c, &index, "every hook"), "pets__list_hooks");
}

#[test]
fn a_read_task_prefers_the_tool_that_reads() {
    let c = catalog(
        r#""/hooks/{id}": {
          "get": {"operationId": "getHook", "summary": "Get a hook",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}},
          "patch": {"operationId": "editHook", "summary": "Edit a hook",
            "description": "Changes the settings of a hook: its URL, events and settings.",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}}"#,
    );
    let index = SearchIndex::build(&c);
    // The edit tool holds "settings" twice; the read intent still
    // puts the read first, and a change the edit.
    assert_eq!(
        top(&c, &index, "show the settings of a hook"),
        "pets__get_hook"
    );
    assert_eq!(
        top(&c, &index, "change the settings of a hook"),
        "pets__edit_hook"
    );
    // Without a leading verb neither is discounted: the words decide.
    assert_eq!(top(&c, &index, "hook settings"), "pets__edit_hook");
}

#[test]
fn words_are_lowercased_stemmed_and_function_words_dropped() {
    let s = Stemmer::create(Algorithm::English);
    assert_eq!(normalise(&s, "Repositories").as_deref(), Some("repositori"));
    assert_eq!(normalise(&s, "repository").as_deref(), Some("repositori"));
    assert_eq!(normalise(&s, "deleting").as_deref(), Some("delet"));
    assert_eq!(normalise(&s, "The"), None);
    assert_eq!(normalise(&s, "x"), None);
    let long = "a".repeat(100);
    assert_eq!(normalise(&s, &long).map(|w| w.len()), Some(MAX_WORD_BYTES));
    // Cut on a character boundary.
    let wide = "é".repeat(30);
    assert!(normalise(&s, &wide).is_some());
}

fn catalog(ops: &str) -> Catalog {
    let spec = format!(
        r#"{{"openapi": "3.0.3", "info": {{"title": "Pet Store", "version": "1"}}, "paths": {{{ops}}}}}"#
    );
    let options = crate::CompileOptions::default();
    let a = crate::compile_upstream(&crate::UpstreamSource {
        prefix: "pets",
        document: "pets.json",
        spec: spec.as_bytes(),
        overlays: &[],
        options: &options,
    })
    .unwrap();
    let other = r#"{"openapi": "3.0.3", "info": {"title": "Music", "version": "1"}, "paths": {
        "/playlists/{id}": {"delete": {"operationId": "removePlaylist", "summary": "Remove a playlist",
          "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
          "responses": {"204": {"description": "ok"}}}}}}"#;
    let b = crate::compile_upstream(&crate::UpstreamSource {
        prefix: "music",
        document: "music.json",
        spec: other.as_bytes(),
        overlays: &[],
        options: &options,
    })
    .unwrap();
    Catalog::new(vec![a, b])
}

const OPS: &str = r#"
  "/pets": {
    "get": {"operationId": "listPets", "summary": "List all pets", "tags": ["pets"],
      "parameters": [{"name": "limit", "in": "query", "description": "How many items to return",
                      "schema": {"type": "integer"}}],
      "responses": {"200": {"description": "ok"}}},
    "post": {"operationId": "createPet", "summary": "Create a pet", "tags": ["pets"],
      "requestBody": {"content": {"application/json": {"schema": {"type": "object",
        "properties": {"name": {"type": "string"}, "species": {"type": "string",
          "description": "Dog, cat or parrot"}}}}}},
      "responses": {"201": {"description": "ok"}}}},
  "/pets/{petId}": {
    "get": {"operationId": "showPetById", "summary": "Info for a specific pet", "tags": ["pets"],
      "parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "ok"}}},
    "delete": {"operationId": "deletePet", "summary": "Deletes a pet",
      "parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"204": {"description": "ok"}}}},
  "/stores/{storeId}/vaccinations": {
    "post": {"operationId": "recordVaccination", "summary": "Record a vaccination",
      "description": "Records that an animal of the store received a vaccine.",
      "parameters": [{"name": "storeId", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"201": {"description": "ok"}}}}
"#;

fn names(c: &Catalog, hits: &[Hit]) -> Vec<String> {
    let all: Vec<&Tool> = c.upstreams.iter().flat_map(|u| &u.tools).collect();
    hits.iter().map(|h| all[h.tool].name.clone()).collect()
}

fn top(c: &Catalog, index: &SearchIndex, q: &str) -> String {
    let hits = index.search(&Query::parse(q).unwrap(), |_| true);
    names(c, &hits).into_iter().next().unwrap_or_default()
}

#[test]
fn ranks_the_tool_whose_words_match_first() {
    let c = catalog(OPS);
    let index = SearchIndex::build(&c);
    assert_eq!(index.len(), 6);
    assert_eq!(top(&c, &index, "create a new pet"), "pets__create_pet");
    assert_eq!(top(&c, &index, "show all the pets"), "pets__list_pets");
    // Stemming: "vaccinated" finds "vaccination".
    assert_eq!(
        top(&c, &index, "animal got vaccinated"),
        "pets__record_vaccination"
    );
    // A parameter's description is indexed.
    assert_eq!(top(&c, &index, "parrot"), "pets__create_pet");
    // The upstream's title is indexed.
    assert_eq!(top(&c, &index, "music"), "music__remove_playlist");
}

#[test]
fn synonyms_find_the_other_verb() {
    let c = catalog(OPS);
    let index = SearchIndex::build(&c);
    let only = |q: &str, prefix: &str| {
        let q = Query::parse(q).unwrap().with_prefix(prefix);
        names(&c, &index.search(&q, |_| true))
    };
    // Neither tool has the other verb anywhere.
    assert_eq!(only("remove a pet", "pets")[0], "pets__delete_pet");
    assert_eq!(only("delete", "music"), ["music__remove_playlist"]);
}

#[test]
fn filter_prefix_and_limit_bound_the_results() {
    let c = catalog(OPS);
    let index = SearchIndex::build(&c);
    let q = Query::parse("pet").unwrap();
    let all = index.search(&q, |_| true);
    assert!(all.len() >= 4, "{:?}", names(&c, &all));
    // Best first, ties in catalog order.
    for w in all.windows(2) {
        assert!(w[0].score > w[1].score || (w[0].score == w[1].score && w[0].tool < w[1].tool));
    }
    let create = all
        .iter()
        .find(|h| names(&c, &[**h])[0] == "pets__create_pet")
        .unwrap()
        .tool;
    let filtered = index.search(&q, |t| t != create);
    assert!(!filtered.iter().any(|h| h.tool == create));
    assert_eq!(filtered.len(), all.len() - 1);
    let two = index.search(&q.clone().with_limit(2).unwrap(), |_| true);
    assert_eq!(two, all[..2]);
    let q = Query::parse("remove").unwrap();
    assert_eq!(
        names(&c, &index.search(&q.clone().with_prefix("pets"), |_| true)),
        ["pets__delete_pet"]
    );
    assert_eq!(
        names(&c, &index.search(&q.clone().with_prefix("music"), |_| true)),
        ["music__remove_playlist"]
    );
    assert!(index.search(&q.with_prefix("nope"), |_| true).is_empty());
    // The filter is asked only until the limit is reached.
    let mut asked = 0;
    let one = Query::parse("pet").unwrap().with_limit(1).unwrap();
    index.search(&one, |_| {
        asked += 1;
        true
    });
    assert_eq!(asked, 1);
}

#[test]
fn queries_are_bounded() {
    let long = "pet ".repeat(300);
    assert_eq!(
        Query::parse(&long),
        Err(QueryError::TooLong { bytes: long.len() })
    );
    let many = "pet ".repeat(65);
    assert_eq!(
        Query::parse(&many),
        Err(QueryError::TooManyTerms { terms: 65 })
    );
    assert!(Query::parse(&"pet ".repeat(64)).is_ok());
    let q = Query::parse("pet").unwrap();
    assert_eq!(q.limit(), DEFAULT_LIMIT);
    assert_eq!(q.clone().with_limit(0), Err(QueryError::Limit { limit: 0 }));
    assert_eq!(
        q.clone().with_limit(51),
        Err(QueryError::Limit { limit: 51 })
    );
    assert_eq!(q.with_limit(50).unwrap().limit(), 50);
}

#[test]
fn empty_and_unknown_queries_find_nothing() {
    let c = catalog(OPS);
    let index = SearchIndex::build(&c);
    for q in ["", "   ", "the of and", "zebra", "__"] {
        let q = Query::parse(q).unwrap();
        assert!(index.search(&q, |_| true).is_empty());
    }
    assert!(Query::parse("the of").unwrap().is_empty());
}

#[test]
fn an_empty_catalog_has_an_empty_index() {
    let index = SearchIndex::build(&Catalog::new(Vec::new()));
    assert!(index.is_empty());
    assert!(index
        .search(&Query::parse("pets").unwrap(), |_| true)
        .is_empty());
}

#[test]
fn cjk_text_is_indexed_by_character_pairs() {
    let s = Stemmer::create(Algorithm::English);
    let mut terms = Vec::new();
    terms_of(&s, Word::Cjk("納品書"), |t| {
        if let Term::Exact(t) = t {
            terms.push(t)
        }
    });
    assert_eq!(terms, ["納品", "品書"]);
    let ops = r#""/slips/{id}/cancel": {"post": {"operationId": "slipsCancel",
        "summary": "納品書の取消", "parameters": [{"name": "id", "in": "path",
        "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok"}}}},
      "/invoices": {"get": {"operationId": "invoicesIndex", "summary": "請求書一覧の取得",
        "responses": {"200": {"description": "ok"}}}}"#;
    let c = catalog(ops);
    let index = SearchIndex::build(&c);
    assert_eq!(top(&c, &index, "納品書を取消したい"), "pets__slips_cancel");
    assert_eq!(top(&c, &index, "請求書の一覧"), "pets__invoices_index");
}

#[test]
fn words_the_stemmer_keeps_apart_still_match_by_their_start() {
    let ops = r#""/subscription": {"delete": {"operationId": "deleteSubscription",
        "summary": "Remove the subscription", "responses": {"204": {"description": "ok"}}}},
      "/pets": {"get": {"operationId": "listPets", "summary": "List pets",
        "responses": {"200": {"description": "ok"}}}}"#;
    let c = catalog(ops);
    let index = SearchIndex::build(&c);
    assert_eq!(
        top(&c, &index, "unsubscribe, I mean subscribe"),
        "pets__delete_subscription"
    );
}

#[test]
fn short_forms_and_phrases_find_each_other() {
    let ops = r#""/orgs": {"post": {"operationId": "orgCreate", "summary": "Create an org",
        "responses": {"201": {"description": "ok"}}}},
      "/collections": {"post": {"operationId": "createCollection", "summary": "Create a collection",
        "responses": {"201": {"description": "ok"}}}},
      "/jobs/{id}/log": {"get": {"operationId": "getJobLog", "summary": "Get the log of a job",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok"}}}},
      "/system/gc/{id}/log": {"get": {"operationId": "getGcLog", "summary": "Get gc job log",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok"}}}},
      "/users": {"post": {"operationId": "createUser", "summary": "Create a user",
        "responses": {"201": {"description": "ok"}}}}"#;
    let c = catalog(ops);
    let index = SearchIndex::build(&c);
    // "organization" finds "org" as well as the word itself would.
    assert_eq!(top(&c, &index, "new organization"), "pets__org_create");
    // A two-word phrase stands for a short form (the job log would
    // come first otherwise: it is first in the catalog).
    assert_eq!(
        top(&c, &index, "the log of a garbage collection job"),
        "pets__get_gc_log"
    );
}

#[test]
fn compounds_are_joined_and_split_as_the_catalog_writes_them() {
    let ops = r#""/user/hooks/{id}": {"delete": {"operationId": "userDeleteHook", "summary": "Delete a hook",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"204": {"description": "ok"}}}},
      "/user/books/{id}": {"delete": {"operationId": "userDeleteBook", "summary": "Delete a book from the web shelf",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"204": {"description": "ok"}}}},
      "/downloadclient": {"get": {"operationId": "listDownloadclient",
        "responses": {"200": {"description": "ok"}}}},
      "/downloads": {"get": {"operationId": "listDownloads", "summary": "List finished downloads",
        "responses": {"200": {"description": "ok"}}}}"#;
    let c = catalog(ops);
    let index = SearchIndex::build(&c);
    // "webhook" is split into two words the catalog has.
    assert_eq!(
        top(&c, &index, "remove my webhook"),
        "pets__user_delete_hook"
    );
    // "download clients" is joined into the word the catalog has.
    assert_eq!(
        top(&c, &index, "list the download clients"),
        "pets__list_downloadclient"
    );
    // Only into words the catalog has: nothing to split here.
    assert!(index
        .compounds(&Query::parse("zebrafish").unwrap())
        .is_empty());
}

#[test]
fn parameter_schemas_of_any_shape_are_read_or_skipped() {
    let p = Params::of(
        r#"{"type":"object","properties":{"a":{"type":"string","description":"the A","items":{"description":"nested"}},"b":true,"c":{"description":5}}}"#,
    );
    assert_eq!(
        p.top,
        [
            ("a".to_string(), Some("the A".to_string())),
            ("b".to_string(), None),
            ("c".to_string(), None)
        ]
    );
    assert!(Params::of("{}").top.is_empty());
    assert!(Params::of(r#"{"properties": 3}"#).top.is_empty());
    // One level down: a body's properties, also through `allOf` and
    // `items`; not two.
    let p = Params::of(
        r#"{"properties":{"body":{"type":"object","properties":{"name":{"description":"the name","properties":{"deep":{}}}},
          "allOf":[{"properties":{"color":{}}},true]},"ids":{"items":{"properties":{"gid":{}}}}}}"#,
    );
    assert_eq!(
        p.nested,
        [
            ("name".to_string(), Some("the name".to_string())),
            ("color".to_string(), None),
            ("gid".to_string(), None)
        ]
    );
}
