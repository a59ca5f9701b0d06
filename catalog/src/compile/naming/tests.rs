use proptest::prelude::*;

use super::*;

fn defaults() -> NamingOptions {
    NamingOptions::default()
}

/// The "exact table" settings: slug rules on except case handling.
fn keep_case() -> SlugRules {
    SlugRules {
        lowercase: false,
        split_camel_case: false,
        ..SlugRules::default()
    }
}

fn from_path(method: &str, path: &str, rules: &SlugRules) -> String {
    base_name(
        &NameSource {
            method,
            path,
            operation_id: None,
            tool_name: None,
        },
        rules,
    )
}

fn from_op_id(op_id: &str) -> String {
    base_name(
        &NameSource {
            method: "GET",
            path: "/fallback",
            operation_id: Some(op_id),
            tool_name: None,
        },
        &SlugRules::default(),
    )
}

fn cand(name: &str, method: &str, path: &str) -> Candidate {
    Candidate {
        name: name.into(),
        // The tests' prefix is `p` with the default separator.
        base: name.strip_prefix("p__").unwrap_or(name).into(),
        method: method.into(),
        path: path.into(),
        tag: None,
        pinned: false,
    }
}

fn with_desc_limit(max: usize, suffix: &str) -> NamingOptions {
    NamingOptions {
        description_max_length: max,
        description_truncation_suffix: suffix.into(),
        ..defaults()
    }
}

#[test]
fn method_and_path_table_holds_exactly_with_case_rules_off() {
    let table = [
        ("GET", "/pets", "list_pets"),
        ("GET", "/pets/{petId}", "get_pets_petId"),
        ("POST", "/pets", "create_pets"),
        ("PUT", "/pets/{petId}", "update_pets_petId"),
        ("DELETE", "/pets/{petId}", "delete_pets_petId"),
        ("PATCH", "/pets/{petId}", "patch_pets_petId"),
        ("GET", "/stores/{storeId}/items", "get_stores_storeId_items"),
        ("GET", "/v2/users.list", "list_v2_users_list"),
    ];
    for (method, path, want) in table {
        assert_eq!(
            from_path(method, path, &keep_case()),
            want,
            "{method} {path}"
        );
    }
}

#[test]
fn default_rules_give_lowercase_snake_case() {
    let rules = SlugRules::default();
    assert_eq!(from_op_id("fetchPet"), "fetch_pet");
    assert_eq!(from_path("GET", "/pets/{petId}", &rules), "get_pets_pet_id");
    assert_eq!(
        from_path("GET", "/stores/{storeId}/items", &rules),
        "get_stores_store_id_items"
    );
    assert_eq!(from_path("GET", "/pets", &rules), "list_pets");
}

#[test]
fn other_methods_use_their_own_verb() {
    let rules = SlugRules::default();
    assert_eq!(from_path("HEAD", "/pets/{id}", &rules), "head_pets_id");
    assert_eq!(from_path("OPTIONS", "/pets", &rules), "options_pets");
    assert_eq!(from_path("TRACE", "/pets", &rules), "trace_pets");
    assert_eq!(from_path("get", "/pets", &rules), "list_pets");
    assert_eq!(from_path("PROPFIND", "/dav", &rules), "propfind_dav");
    assert_eq!(from_path("!!", "/dav", &rules), "call_dav");
}

#[test]
fn path_fragment_stays_in_the_name_so_operations_differ() {
    let rules = SlugRules::default();
    let plain = from_path("GET", "/files/{file_id}", &rules);
    let fragment = from_path("GET", "/files/{file_id}#get_shared_link", &rules);
    assert_eq!(plain, "get_files_file_id");
    assert_eq!(fragment, "get_files_file_id_get_shared_link");
    // Braces only in the fragment are not path parameters.
    assert_eq!(from_path("GET", "/files#{x}", &rules), "list_files_x");
}

#[test]
fn root_path_leaves_the_bare_verb() {
    assert_eq!(from_path("GET", "/", &SlugRules::default()), "list");
    assert_eq!(from_path("POST", "", &SlugRules::default()), "create");
}

#[test]
fn operation_ids_from_the_corpus_become_snake_case() {
    let cases = [
        ("find pet by id", "find_pet_by_id"),
        (
            "payment_notices/templates/index",
            "payment_notices_templates_index",
        ),
        (
            "get-information-about-the-users-current-playback",
            "get_information_about_the_users_current_playback",
        ),
        (
            "ClusterWorkflowTemplateService_CreateClusterWorkflowTemplate",
            "cluster_workflow_template_service_create_cluster_workflow_template",
        ),
        ("getHTTPStatus", "get_http_status"),
        ("listV2Users", "list_v2_users"),
        ("get_files_id#get_shared_link", "get_files_id_get_shared_link"),
        ("repo.getArchive", "repo_get_archive"),
        ("café-crème", "caf_cr_me"),
        (
            "get_preview_frames_from_cache_preview__camera_name__start__start_ts__end__end_ts__frames_get",
            "get_preview_frames_from_cache_preview_camera_name_start_start_ts_end_end_ts_frames_get",
        ),
    ];
    for (id, want) in cases {
        assert_eq!(from_op_id(id), want, "{id}");
    }
}

#[test]
fn operation_id_that_slugs_to_nothing_falls_back_to_method_and_path() {
    for id in ["", "{}", "日本", "--", " . "] {
        assert_eq!(from_op_id(id), "list_fallback", "{id:?}");
    }
}

#[test]
fn tool_name_extension_is_used_verbatim_even_when_invalid() {
    let src = |tool_name| NameSource {
        method: "GET",
        path: "/pets",
        operation_id: Some("listPets"),
        tool_name: Some(tool_name),
    };
    let rules = SlugRules::default();
    assert_eq!(base_name(&src("Pets.List-All"), &rules), "Pets.List-All");
    let bad = base_name(&src("list pets"), &rules);
    assert_eq!(bad, "list pets");
    assert!(!is_valid_name(&bad));
    assert!(!is_valid_name(&base_name(&src(""), &rules)));
}

#[test]
fn disabled_slug_rules_change_the_output_and_stay_valid() {
    let rules = SlugRules {
        replace_slashes: false,
        ..SlugRules::default()
    };
    assert_eq!(from_path("GET", "/a/b", &rules), "list_a.b");

    let mut rules = keep_case();
    rules.collapse_separators = false;
    assert_eq!(from_path("GET", "/a//b", &rules), "list_a__b");
    rules.replace_braces = false;
    assert_eq!(from_path("GET", "/a/{id}/b", &rules), "get_a__id__b");
    rules.replace_braces = true;
    assert_eq!(from_path("GET", "/a/{id}/b", &rules), "get_a_id_b");
}

#[test]
fn full_name_is_prefix_separator_base_when_it_fits() {
    assert_eq!(
        full_name("pets", "fetch_pet", &defaults()),
        "pets__fetch_pet"
    );
    let exactly = "x".repeat(64 - "pets__".len());
    assert_eq!(
        full_name("pets", &exactly, &defaults()),
        format!("pets__{exactly}")
    );
}

#[test]
fn frigate_long_operation_id_is_shortened_uniquely_and_stably() {
    let base = from_op_id(
        "get_preview_frames_from_cache_preview__camera_name__start__start_ts__end__end_ts__frames_get",
    );
    let opts = defaults();
    let name = full_name("frigate", &base, &opts);
    assert!(name.len() <= 64, "{name} is {} long", name.len());
    assert!(name.starts_with("frigate__get_preview_frames"), "{name}");
    assert!(is_valid_name(&name), "{name}");
    assert_eq!(name, full_name("frigate", &base, &opts));
    // The hash tail is SHA-256 of the whole base, hex.
    let tail = &name[name.len() - HASH_LEN..];
    assert!(tail.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
    assert_ne!(name, full_name("frigate", &format!("{base}_2"), &opts));
}

#[test]
fn shortened_name_fills_max_length_exactly() {
    let base = "abcdefghij".repeat(10);
    let name = full_name("p", &base, &defaults());
    assert_eq!(name.len(), 64);
    assert!(name.starts_with("p__abcdefghij"));
    assert_eq!(name.as_bytes()[64 - HASH_LEN - 1], b'_');
}

#[test]
fn long_names_sharing_a_sixty_char_stem_stay_distinct() {
    let stem = "s".repeat(60);
    let a = full_name("svc", &format!("{stem}_alpha"), &defaults());
    let b = full_name("svc", &format!("{stem}_beta"), &defaults());
    assert_ne!(a, b);
    assert!(a.len() <= 64 && b.len() <= 64);
    assert!(a.starts_with("svc__sss") && b.starts_with("svc__sss"));
}

#[test]
fn prefix_is_never_cut_even_when_nothing_else_fits() {
    let opts = NamingOptions {
        max_length: 10,
        ..defaults()
    };
    let prefix = "a_very_long_prefix";
    let name = full_name(prefix, "base", &opts);
    assert!(name.starts_with("a_very_long_prefix__"), "{name}");
    assert!(check_settings(prefix, &opts).is_err());
    // With exactly room for the hash, the base is the hash alone.
    let opts = NamingOptions {
        max_length: min_max_length("p", &defaults()),
        ..defaults()
    };
    let name = full_name("p", "a_long_base_name", &opts);
    assert_eq!(name.len(), opts.max_length);
    assert!(check_settings("p", &opts).is_ok());
}

#[test]
fn shortening_a_verbatim_multibyte_name_cuts_on_a_char_boundary() {
    let base = "é".repeat(60);
    for max in 20..40 {
        let opts = NamingOptions {
            max_length: max,
            ..defaults()
        };
        let name = full_name("p", &base, &opts);
        assert!(name.len() <= max, "{max}: {name}");
    }
}

#[test]
fn check_settings_rejects_an_invalid_separator() {
    let opts = NamingOptions {
        separator: "/".into(),
        ..defaults()
    };
    let err = check_settings("p", &opts).map_err(|e| e.to_string());
    assert!(
        matches!(&err, Err(m) if m.contains("naming.separator")),
        "{err:?}"
    );
    assert!(check_settings("p", &defaults()).is_ok());
}

#[test]
fn description_truncation_counts_characters_and_includes_the_suffix() {
    let opts = with_desc_limit(10, "...");
    assert_eq!(truncate_description("", &opts), "");
    assert_eq!(truncate_description("0123456789", &opts), "0123456789");
    assert_eq!(truncate_description("0123456789A", &opts), "0123456...");
    assert_eq!(
        truncate_description("0123456789A", &opts).chars().count(),
        10
    );
}

#[test]
fn description_truncation_zero_means_off() {
    let long = "x".repeat(5000);
    assert_eq!(
        truncate_description(&long, &with_desc_limit(0, "...")),
        long
    );
}

#[test]
fn description_truncation_never_splits_multibyte_chars() {
    let opts = with_desc_limit(5, "…");
    let desc = "日本語のテキスト";
    let out = truncate_description(desc, &opts);
    assert_eq!(out, "日本語の…");
    assert_eq!(truncate_description("日本語のテ", &opts), "日本語のテ");
}

#[test]
fn description_suffix_longer_than_limit_just_cuts() {
    let opts = with_desc_limit(3, "[truncated]");
    assert_eq!(truncate_description("abcdef", &opts), "abc");
}

#[test]
fn description_trailing_whitespace_is_trimmed_before_the_suffix() {
    let opts = with_desc_limit(10, "...");
    let out = truncate_description("Fetch   pet and more", &opts);
    assert_eq!(out, "Fetch...");
    assert!(out.chars().count() <= 10);
}

#[test]
fn conflicts_in_error_mode_list_every_pair_with_method_and_path() {
    let cands = [
        cand("x", "GET", "/a"),
        cand("y", "GET", "/b"),
        cand("x", "POST", "/a"),
        cand("x", "PUT", "/c"),
        cand("y", "DELETE", "/b"),
    ];
    let err = resolve_conflicts(&cands, ConflictResolution::Error).unwrap_err();
    let pairs: Vec<_> = err
        .conflicts
        .iter()
        .map(|c| (c.name.as_str(), c.first.clone(), c.second.clone()))
        .collect();
    let p = |m: &str, path: &str| (m.to_string(), path.to_string());
    assert_eq!(
        pairs,
        vec![
            ("x", p("GET", "/a"), p("POST", "/a")),
            ("x", p("GET", "/a"), p("PUT", "/c")),
            ("y", p("GET", "/b"), p("DELETE", "/b")),
        ]
    );
    assert!(err.to_string().contains("POST /a"));
}

#[test]
fn no_conflicts_keep_everyone_in_every_mode() {
    let cands = [cand("x", "GET", "/a"), cand("y", "GET", "/b")];
    for mode in [
        ConflictResolution::Error,
        ConflictResolution::FirstWins,
        ConflictResolution::Skip,
        ConflictResolution::Qualify,
    ] {
        assert_eq!(resolve_conflicts(&cands, mode).ok(), Some(vec![true, true]));
    }
}

#[test]
fn first_wins_keeps_the_first_holder_only() {
    let cands = [
        cand("x", "GET", "/a"),
        cand("y", "GET", "/b"),
        cand("x", "POST", "/a"),
        cand("x", "PUT", "/c"),
    ];
    assert_eq!(
        resolve_conflicts(&cands, ConflictResolution::FirstWins).ok(),
        Some(vec![true, true, false, false])
    );
}

#[test]
fn skip_rejects_every_holder_of_a_shared_name() {
    let cands = [
        cand("x", "GET", "/a"),
        cand("y", "GET", "/b"),
        cand("x", "POST", "/a"),
        cand("x", "PUT", "/c"),
    ];
    assert_eq!(
        resolve_conflicts(&cands, ConflictResolution::Skip).ok(),
        Some(vec![false, true, false, false])
    );
}

fn any_rules() -> impl Strategy<Value = SlugRules> {
    (any::<[bool; 5]>()).prop_map(|b| SlugRules {
        replace_slashes: b[0],
        replace_braces: b[1],
        lowercase: b[2],
        collapse_separators: b[3],
        split_camel_case: b[4],
    })
}

proptest! {
    #[test]
    fn every_derived_name_is_valid_and_within_max_length(
        method in prop_oneof![
            Just("GET".to_string()), Just("POST".to_string()), Just("DELETE".to_string()),
            ".*",
        ],
        path in ".*",
        op_id in proptest::option::of(".*"),
        prefix in "[A-Za-z0-9_.-]{1,20}",
        max_extra in 0usize..80,
        rules in any_rules(),
    ) {
        let src = NameSource {
            method: &method,
            path: &path,
            operation_id: op_id.as_deref(),
            tool_name: None,
        };
        let base = base_name(&src, &rules);
        prop_assert!(is_valid_name(&base), "base {:?}", base);
        let mut opts = NamingOptions { slug: rules, ..NamingOptions::default() };
        opts.max_length = min_max_length(&prefix, &opts) + max_extra;
        prop_assert!(check_settings(&prefix, &opts).is_ok());
        let name = full_name(&prefix, &base, &opts);
        prop_assert!(is_valid_name(&name), "name {:?}", name);
        prop_assert!(name.len() <= opts.max_length, "{:?} over {}", name, opts.max_length);
        let head = format!("{prefix}__");
        prop_assert!(name.starts_with(&head), "{:?}", name);
        prop_assert_eq!(&name, &full_name(&prefix, &base, &opts));
    }

    #[test]
    fn truncated_descriptions_never_exceed_the_limit(
        desc in ".*",
        max in 0usize..40,
        suffix in ".{0,5}",
    ) {
        let opts = with_desc_limit(max, &suffix);
        let out = truncate_description(&desc, &opts);
        if max == 0 || desc.chars().count() <= max {
            prop_assert_eq!(out, desc);
        } else {
            prop_assert!(out.chars().count() <= max);
        }
    }
}

/// Every operation of a corpus document as (METHOD, path, operationId,
/// x-mcp-tool-name), in document order. Reads the raw value directly so this
/// test does not depend on the spec module.
fn corpus_operations(file: &str) -> Vec<(String, String, Option<String>, Option<String>)> {
    let bytes = toolgate_corpus::read(file);
    let doc: serde_json::Value = if file.ends_with(".json") {
        serde_json::from_slice(&bytes).unwrap()
    } else {
        yaml_serde::from_slice(&bytes).unwrap()
    };
    let methods = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    let mut ops = Vec::new();
    let Some(paths) = doc.get("paths").and_then(|p| p.as_object()) else {
        return ops;
    };
    for (path, item) in paths {
        for m in methods {
            if let Some(op) = item.get(m) {
                let s = |k: &str| op.get(k).and_then(|v| v.as_str()).map(str::to_string);
                ops.push((
                    m.to_ascii_uppercase(),
                    path.clone(),
                    s("operationId"),
                    s("x-mcp-tool-name"),
                ));
            }
        }
    }
    ops
}

const CORPUS: &[&str] = &[
    "argo-workflows-swagger.json",
    "asana-oas.yaml",
    "box-openapi.json",
    "bump-train-travel.yaml",
    "discord-openapi.json",
    "freee-iv-api-schema.yaml",
    "frigate-api.yaml",
    "gitea-v1.26.3-swagger.json",
    "harbor-swagger.yaml",
    "oai-petstore-expanded-v2.json",
    "oai-petstore-v3.yaml",
    "prowlarr-openapi.json",
    "redocly-museum.yaml",
    "spotify-official.yaml",
    "swagger-petstore-v3.yaml",
    "twilio-api_v2010.json",
];

#[test]
fn corpus_names_are_valid_short_and_unique_under_defaults() {
    let opts = defaults();
    for file in CORPUS {
        let ops = corpus_operations(file);
        assert!(!ops.is_empty(), "{file} has no operations");
        let prefix = file.split(['-', '.', '_']).next().unwrap_or("x");
        let mut cands = Vec::new();
        for (method, path, op_id, tool_name) in &ops {
            let src = NameSource {
                method,
                path,
                operation_id: op_id.as_deref(),
                tool_name: tool_name.as_deref(),
            };
            let name = full_name(prefix, &base_name(&src, &opts.slug), &opts);
            assert!(is_valid_name(&name), "{file}: {method} {path}: {name:?}");
            assert!(name.len() <= opts.max_length, "{file}: {name}");
            cands.push(cand(&name, method, path));
        }
        if let Err(e) = resolve_conflicts(&cands, ConflictResolution::Error) {
            panic!("{file}: {e}");
        }
    }
}

fn tagged(name: &str, method: &str, path: &str, tag: Option<&str>) -> Candidate {
    Candidate {
        tag: tag.map(String::from),
        ..cand(name, method, path)
    }
}

/// Names after `qualify` with prefix `p`, in candidate order.
fn qualified(cands: &[Candidate], opts: &NamingOptions) -> Vec<String> {
    qualify(cands, "p", opts)
        .into_iter()
        .zip(cands)
        .map(|(q, c)| q.map_or(c.name.clone(), |q| q.name))
        .collect()
}

fn full(base: &str) -> String {
    full_name("p", base, &defaults())
}

#[test]
fn qualify_uses_the_first_rule_that_tells_every_holder_apart() {
    let opts = defaults();
    // Tags differ: the tag.
    let by_tag = [
        tagged(&full("list"), "GET", "/v1/users", Some("Users")),
        tagged(&full("list"), "GET", "/v1/groups", Some("Groups")),
    ];
    assert_eq!(
        qualified(&by_tag, &opts),
        ["p__users_list", "p__groups_list"]
    );
    // Same tag: the API version.
    let by_version = [
        tagged(&full("list"), "GET", "/api/v1/users", Some("users")),
        tagged(&full("list"), "GET", "/api/v2beta1/users", Some("users")),
    ];
    assert_eq!(
        qualified(&by_version, &opts),
        ["p__v1_list", "p__v2beta1_list"]
    );
    // No tags, one version: the group segment after the shared start.
    let by_group = [
        tagged(&full("list"), "GET", "/apis/apps/v1/things", None),
        tagged(&full("list"), "GET", "/apis/batch/v1/things", None),
    ];
    assert_eq!(
        qualified(&by_group, &opts),
        ["p__apps_list", "p__batch_list"]
    );
    // One path, two methods: the method.
    let by_method = [
        tagged(&full("thing"), "GET", "/thing/{id}", None),
        tagged(&full("thing"), "DELETE", "/thing/{id}", None),
    ];
    assert_eq!(
        qualified(&by_method, &opts),
        ["p__get_thing", "p__delete_thing"]
    );
}

#[test]
fn qualify_combines_rules_and_then_hashes_when_no_single_rule_separates() {
    let opts = defaults();
    // Tag a/a/b, no versions, group x/y/x, methods all GET: no single rule
    // separates all three; tag+group does.
    let cands = [
        tagged(&full("op"), "GET", "/x/one", Some("a")),
        tagged(&full("op"), "GET", "/y/two", Some("a")),
        tagged(&full("op"), "GET", "/x/three", Some("b")),
    ];
    let names = qualified(&cands, &opts);
    assert_eq!(names, ["p__a_x_get_op", "p__a_y_get_op", "p__b_x_get_op"]);
    // Fragment paths that differ only after `#`: everything alike, so the
    // hash of METHOD path separates them.
    let cands = [
        tagged(&full("op"), "GET", "/f#a", None),
        tagged(&full("op"), "GET", "/f#b", None),
    ];
    let names = qualified(&cands, &opts);
    assert_ne!(names[0], names[1]);
    for (n, path) in names.iter().zip(["/f#a", "/f#b"]) {
        let hash = short_hash(&format!("GET {path}"));
        assert_eq!(*n, format!("p__get_{hash}_op"));
    }
}

#[test]
fn qualify_keeps_a_single_pinned_holder_and_renames_into_free_names_only() {
    let opts = defaults();
    let mut pinned = tagged(&full("list"), "GET", "/v1/users", Some("users"));
    pinned.pinned = true;
    // `users_list` is taken by a third operation: the qualified name that
    // meets it is renamed again, the holder of `users_list` keeps it.
    let cands = [
        tagged(&full("list"), "GET", "/v2/users", Some("users")),
        pinned,
        tagged(&full("users_list"), "GET", "/other", None),
        tagged(&full("list"), "GET", "/v3/groups", Some("groups")),
    ];
    let names = qualified(&cands, &opts);
    assert_eq!(names[1], "p__list");
    assert_eq!(names[2], "p__users_list");
    assert_eq!(names[3], "p__groups_list");
    let hash = short_hash("1 GET /v2/users");
    assert_eq!(names[0], format!("p__users_list_{hash}"));
}

#[test]
fn qualified_names_keep_within_max_length_by_the_hash_rule() {
    let opts = NamingOptions {
        max_length: 24,
        ..defaults()
    };
    let base = "a_rather_long_operation_name";
    let long = |path: &str, tag: &str| Candidate {
        base: base.into(),
        ..tagged(&full_name("p", base, &opts), "GET", path, Some(tag))
    };
    let cands = [long("/x", "alpha"), long("/y", "beta")];
    let names = qualified(&cands, &opts);
    for (n, tag) in names.iter().zip(["alpha", "beta"]) {
        assert!(n.len() <= 24, "{n}");
        assert_eq!(*n, full_name("p", &format!("{tag}_{base}"), &opts));
    }
    assert_ne!(names[0], names[1]);
}

proptest! {
    /// Whatever the order of the candidates, each operation gets the same
    /// name, and the names are unique.
    #[test]
    fn qualify_is_independent_of_order_and_leaves_no_duplicates(
        ops in prop::collection::vec((0u8..3, 0u8..4, 0u8..3, 0u8..3), 1..12),
        seed in any::<u64>(),
    ) {
        let opts = defaults();
        let mut cands: Vec<Candidate> = Vec::new();
        for (i, (name, seg, tag, method)) in ops.iter().enumerate() {
            let method = ["GET", "POST", "DELETE"][*method as usize];
            let path = format!("/s{seg}/op{i}");
            let tag = ["a", "b", ""][*tag as usize];
            cands.push(tagged(&full(&format!("n{name}")), method, &path, Some(tag).filter(|t| !t.is_empty())));
        }
        let names = qualified(&cands, &opts);
        let mut uniq = names.clone();
        uniq.sort();
        uniq.dedup();
        prop_assert_eq!(uniq.len(), names.len());
        let mut order: Vec<usize> = (0..cands.len()).collect();
        let mut x = seed;
        for i in (1..order.len()).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (x >> 33) as usize % (i + 1));
        }
        let shuffled: Vec<Candidate> = order.iter().map(|&i| cands[i].clone()).collect();
        let again = qualified(&shuffled, &opts);
        for (k, &i) in order.iter().enumerate() {
            prop_assert_eq!(&again[k], &names[i]);
        }
    }
}
