#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Seeds come from the spec corpus (../shared/specs), the repo's example
documents and overlays, and hand-written inputs for the non-document
targets. Large documents are cut into small self-contained ones (a few
paths plus every component they reference), because libFuzzer truncates
inputs to -max_len and a truncated document only exercises the parser's
error path. Output is deterministic; re-running replaces the files.

Usage: seed.py SPECS_DIR OUT_DIR [MAX_LEN]
"""

import hashlib
import json
import os
import sys

try:  # PyYAML: reads the YAML specs; without it they are skipped.
    import yaml

    YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:  # pragma: no cover - depends on the machine
    yaml = None

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATHS_PER_DOC = 2
DOCS_PER_SPEC = 6

written = {}


def put(target, data, out):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    written[target] = written.get(target, 0) + 1


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".json"):
        return raw, json.loads(raw)
    if yaml is None:
        return raw, None
    return raw, yaml.load(raw, Loader=YAML_LOADER)


def pointer_get(doc, pointer):
    node = doc
    for tok in pointer.split("/")[1:]:
        tok = tok.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and tok in node:
            node = node[tok]
        elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
            node = node[int(tok)]
        else:
            return None
    return node


def pointer_set(out, pointer, value):
    toks = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
    node = out
    for tok in toks[:-1]:
        node = node.setdefault(tok, {})
        if not isinstance(node, dict):
            return
    if toks:
        node[toks[-1]] = value


def refs(node, acc):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and r.startswith("#/"):
            acc.append(r[1:])
        for v in node.values():
            refs(v, acc)
    elif isinstance(node, list):
        for v in node:
            refs(v, acc)


def mini_docs(doc):
    """Small self-contained documents: the root's metadata, a window of
    paths and the closure of the local $refs they use."""
    if not isinstance(doc, dict) or not isinstance(doc.get("paths"), dict):
        return
    keep = [
        "openapi", "swagger", "info", "servers", "host", "basePath", "schemes",
        "consumes", "produces", "security", "securityDefinitions", "tags",
    ]
    names = list(doc["paths"])
    for start in range(0, min(len(names), PATHS_PER_DOC * DOCS_PER_SPEC), PATHS_PER_DOC):
        out = {k: doc[k] for k in keep if k in doc}
        out["paths"] = {n: doc["paths"][n] for n in names[start:start + PATHS_PER_DOC]}
        if "components" in doc and "securitySchemes" in (doc["components"] or {}):
            out.setdefault("components", {})["securitySchemes"] = doc["components"]["securitySchemes"]
        todo, seen = [], set()
        refs(out["paths"], todo)
        while todo and len(seen) < 200:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            target = pointer_get(doc, p)
            if target is None:
                continue
            pointer_set(out, p, target)
            refs(target, todo)
        yield out


def dumps_yaml(v):
    return yaml.safe_dump(v, sort_keys=False, allow_unicode=True)


OVERLAYS = [
    # (overlay, document or None for the target's default)
    {"overlay": "1.0.0", "info": {"title": "o", "version": "1"}, "actions": [
        {"target": "$.paths.*.*", "update": {"x-mcp-enabled": True}},
        {"target": "$.paths['/pets/{id}'].delete", "remove": True},
        {"target": "$.tags[?@ == 'a']", "remove": True}]},
    {"overlay": "1.1.0", "info": {"title": "o", "version": "1"}, "actions": [
        {"target": "$.components.schemas.Pet", "copy": "$.components.schemas.Pet.properties"},
        {"target": "$..[?@.type == 'integer']", "update": {"minimum": 0}},
        {"target": "$.paths[*][?length(@.parameters) > 0]", "update": {"x-mcp-toolsets": ["t"]}}]},
    {"overlay": "1.0.0", "info": {"title": "o", "version": "1"}, "extends": "x.yaml", "actions": [
        {"target": "$..parameters[0:2]", "remove": True},
        {"target": "$.paths..get", "update": {"x-mcp-tool-name": "g", "x-mcp-description": "d",
                                               "x-mcp-annotations": {"readOnlyHint": True}}},
        {"target": "$", "update": {"x-extra": [1, 2, {"a": None}]}}]},
    {"overlay": "1.1.0", "info": {"title": "transforms", "version": "1"}, "actions": [
        {"target": "$.paths.*.get", "update": {
            "x-mcp-response-transform": "{items: [.[]? | {id, name}]}",
            "x-mcp-request-transform": "{path: \"/pets\", query: {limit: .limit}}",
            "x-mcp-error-transform": ".message // .",
            "x-mcp-response-format": "text"}},
        {"target": "$.paths[?match(@, '.*')]", "update": {"x-mcp-hidden": False}},
        {"target": "$.info[?search(@, 't')]", "update": "x"}]},
    {"overlay": "1.0.0", "info": {"title": "o", "version": "1"}, "actions": [
        {"target": "$.paths[-1:]", "update": {}},
        {"target": "$['paths']['/pets/{id}']['get']['responses']['200']", "update": {"description": 1}},
        {"target": "$.components.schemas[?@.properties.id.type == 'integer' && @.type]", "remove": True}]},
]

TOOL_ARGS = [
    {"id": "7", "q": "a b&c=d", "tags": ["x", "y"], "many": ["1", "2"], "sp": ["a b"], "pp": ["a|b"],
     "deep": {"a": {"b": [1, 2]}, "c": None}, "obj": {"k": "v"}, "res": "a/b?c#d",
     "X-Trace": "t", "X-List": {"a": "1"}, "sess": "s;x"},
    {"l": ["a", "b"], "m": {"x": "1", "y": "2"}, "a": ".", "b": ".", "c": ["..", "/"]},
    {"whole": ".."},
    {"whole": "%2e%2e"},
    {"whole": "a/../../b"},
    {"file": "aGVsbG8=", "meta": {"a": [1]}, "note": "n"},
    {"a": "1", "b": ["2", "3"]},
    {"id": 1, "body": "aGk"},
    {"id": "x", "name": "n"},
]

RAW_ARGS = [
    {"method": "GET", "path": "/pets", "query": {"a": "1", "b": ["2", "3"]}, "headers": {"x-a": "b"}},
    {"method": "post", "path": "/x/%2e%2e/y", "body": {"a": 1}},
    {"method": "GET", "path": "//evil.test/x"},
    {"method": "DELETE", "path": "/a/.%2E/b", "cookies": {"c": "d"}},
    {"method": "PUT", "path": "/a", "headers": {"content-type": "text/plain", "host": "evil"}, "body": "x"},
]

JQ_DATA = [
    "null", "1", "1e308", "-0", "123456789012345678901234567890", '"x"', '"[1,[2,[3]]]"',
    '"' + "[" * 200 + "]" * 200 + '"', '"{\\"a\\":1}"', '"aGVsbG8="', '"%41"',
    '{"n": 3, "s": "ab", "a": [1, 2], "b": [3], "sep": ",", "re": "a+", "flags": "g", "t": "x",'
    ' "p": ["a", 0], "i": 1, "j": -1, "k": "a", "x": "b", "d": 2, "f": "%Y-%m-%d"}',
    "[[1, 2], [3, [4, [5]]]]", '[{"k": 1}, {"k": "1"}, {"k": null}]',
    '{"a": {"b": {"c": [1, {"d": 2}]}}}',
    '"2015-03-05T23:51:47Z"',
    "[" * 100 + "]" * 100,
]

JQ_PROGRAMS = [
    "def f: f; f", "[range(10)] | map(. * 2)", "reduce range(5) as $x (.; [.])",
    ".. |= (if type == \"number\" then . + 1 else . end)", "[limit(3; repeat(1))]",
    "try error(\"x\") catch .", "label $out | foreach .[] as $i (0; . + $i; if . > 3 then ., break $out else . end)",
    "def fib: if . < 2 then . else (. - 1 | fib) + (. - 2 | fib) end; 10 | fib",
    "tojson | fromjson", "@base64d", "ltrimstr(\"a\")", "input", "env", "$__loc__",
]

JSONRPC = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "MTA"}},
    {"jsonrpc": "2.0", "id": 4, "method": "ping"},
    {"jsonrpc": "2.0", "id": "s", "method": "tools/call", "params": {"name": "pets__fetch_pet", "arguments": {"petId": 1}}},
    {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "pets__find_pets", "arguments": {"kind": "cat", "limit": 2}}},
    {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "pets__create_pet",
                                                                   "arguments": {"name": "n", "kind": "dog"}}},
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "pets__get_pet_photo", "arguments": {"petId": "1"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": {}}}},
    {"jsonrpc": "2.0", "id": 8, "method": "resources/list"},
    {"jsonrpc": "2.0", "id": 9, "method": "nope/nope", "params": []},
    {"jsonrpc": "2.0", "id": 10, "result": {}},
    {"jsonrpc": "2.0", "id": 11, "error": {"code": -1, "message": "m"}},
    [{"jsonrpc": "2.0", "id": 12, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                       "params": {"requestId": 5}}],
]


# Access rules' `when` (CEL): each form the docs show, and near misses.
CEL_WHEN = [
    '"sre" in claims.groups',
    'subject == "ci-bot"',
    '"pets.read" in scopes && claims.tenant.id == 7',
    'claims.groups.exists(g, g.startsWith("team-"))',
    'size(scopes) > 1 || has(claims.admin)',
    'claims.groups.all(g, g != "banned")',
    'type(claims.groups) == list',
    'claims.groups.exists(g, ',
    'unknown_variable == 1',
    'claims.groups.map(g, claims.groups.map(h, h))',
]


def main():
    specs, out = sys.argv[1], sys.argv[2]
    max_len = int(sys.argv[3]) if len(sys.argv) > 3 else 65536
    docs = []  # (name, raw bytes, parsed)
    for name in sorted(os.listdir(specs)):
        if name.endswith((".json", ".yaml", ".yml")):
            raw, parsed = load(os.path.join(specs, name))
            docs.append((name, raw, parsed))
    for rel in ["deploy/examples/openapi/petstore.yaml"]:
        raw, parsed = load(os.path.join(REPO, rel))
        docs.append((rel, raw, parsed))

    small = []  # documents that fit max_len, as bytes
    for name, raw, parsed in docs:
        if len(raw) <= max_len:
            small.append(raw)
        for mini in mini_docs(parsed):
            j = json.dumps(mini, ensure_ascii=False).encode()
            if len(j) <= max_len:
                small.append(j)
            if yaml is not None:
                y = dumps_yaml(mini).encode()
                if len(y) <= max_len:
                    small.append(y)

    for i, doc in enumerate(small):
        put("spec_load", doc, out)
        put("compile", bytes([(i * 37) & 0xFF]) + doc, out)

    overlay_docs = []
    with open(os.path.join(REPO, "deploy/examples/openapi/petstore-overlay.yaml"), "rb") as f:
        overlay_docs.append(f.read())
    for o in OVERLAYS:
        overlay_docs.append(json.dumps(o).encode())
        if yaml is not None:
            overlay_docs.append(dumps_yaml(o).encode())
    petstore = [d for d in small if b"petstore" in d.lower() or b"Pet" in d][:4]
    for o in overlay_docs:
        put("overlay", o, out)
        for d in petstore[:2]:
            put("overlay", o + b"\0" + d, out)
        for d in petstore[:2]:
            put("compile", b"\x02" + d + b"\0" + o, out)

    for base in range(8):
        for tool in range(9):
            args = TOOL_ARGS[tool % len(TOOL_ARGS)]
            put("request_build", bytes([base, tool]) + json.dumps(args).encode(), out)
        for args in RAW_ARGS:
            put("request_build", bytes([base | 8]) + json.dumps(args).encode(), out)
            put("request_build", bytes([base | 16, base]) + json.dumps(args).encode(), out)
    for i, doc in enumerate(small[:40]):
        args = TOOL_ARGS[i % len(TOOL_ARGS)]
        put("request_build", bytes([24 | (i & 7)]) + doc + b"\0" + json.dumps(args).encode(), out)

    for sel in range(128):
        put("jq", bytes([sel]) + JQ_DATA[sel % len(JQ_DATA)].encode(), out)
    for p in JQ_PROGRAMS:
        for d in JQ_DATA[:3]:
            put("jq", b"\xff" + p.encode() + b"\0" + d.encode(), out)

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    for i, body in enumerate(JSONRPC):
        # Stateful: initialize without a session, the rest in a restored one
        # (bit 3), 2025-06-18 header (bit 1); both endpoints (bit 0).
        for scoped in (0, 1):
            stateful = 0 if i == 0 else 8
            put("jsonrpc_intake", bytes([scoped | 2 | stateful]) + json.dumps(body).encode(), out)
        # Stateless 2026-07-28: _meta in params, version and routing headers.
        if isinstance(body, dict) and "method" in body:
            b = json.loads(json.dumps(body))
            if isinstance(b.get("params", {}), dict):
                b.setdefault("params", {})["_meta"] = meta
            put("jsonrpc_intake", bytes([4 | 0x20]) + json.dumps(b).encode(), out)
            put("jsonrpc_intake", bytes([5 | 0x20]) + json.dumps(b).encode(), out)
        # A few odd shapes per body.
        for shape in (0x9B, 0x56, 0xC8, 0x71):
            put("jsonrpc_intake", bytes([(shape + i) & 0xFF]) + json.dumps(body).encode(), out)

    for w in CEL_WHEN:
        put("access", w.encode(), out)
        put("access", w.encode() + b'\0{"groups": ["sre"], "scp": ["a", "b"], "n": 1}', out)

    # Amplified (fuzz/src/lib.rs `amplify`): 0xFE, n (u16 BE), then A\0B or
    # P\0A\0B\0S. Depth and size bombs a few bytes long.
    def amp(n, *parts):
        return b"\xfe" + n.to_bytes(2, "big") + b"\0".join(p.encode() for p in parts)
    bombs = [
        amp(60000, "[", "]"), amp(60000, '{"a":', "}"), amp(65535, "a", ""), amp(60000, '{"a": [', "]}"),
        amp(3000, '{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"get": '
            '{"responses": {"200": {"description": "d", "content": {"application/json": {"schema": ',
            '{"type": "array", "items": ', "}", "}}}}}}}"),
        amp(2000, "openapi: 3.1.0\ninfo: {title: t, version: '1'}\ncomponents: {schemas: {A: ", "[", "]", "}}\n"),
        amp(500, 'swagger: "2.0"\ninfo: {title: t, version: "1"}\npaths: {}\ndefinitions:\n',
            "  D: {$ref: '#/definitions/D'}\n", "", ""),
    ]
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    put("spec_load", "openapi: 3.0.3\n" + laughs, out)
    for bomb in bombs:
        put("spec_load", bomb, out)
        put("compile", b"\x00" + bomb, out)
    for sel in (0, 1, 2, 3, 4, 5, 6, 20, 21, 60):
        put("jq", bytes([sel]) + amp(30000, '"', "[", "]", '"'), out)
        put("jq", bytes([sel]) + amp(60000, "[", "]"), out)
        put("jq", bytes([sel]) + amp(20000, '{"n": 1e9, "s": "', "x", "", '"}'), out)
    put("jsonrpc_intake", bytes([4 | 0x20]) + amp(
        5000, '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "pets__fetch_pet", '
        '"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", '
        '"io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}, '
        '"io.modelcontextprotocol/clientCapabilities": {}}, "arguments": {"petId": ', "[", "]", "}}}"), out)
    for bomb in (amp(20000, "(", ")"), amp(20000, "[", "]"), amp(20000, "!", "true"),
                 amp(5000, "true ? ", "", "1 : 2"), amp(1000, "claims.groups.map(g, ", "g", ")")):
        put("access", bomb, out)
    # Issue 26's shapes: comprehensions over literals and claims whose
    # bodies copy or concatenate, so mutations explore the cost bound's edge.
    zeros = ",".join(["0"] * 300)
    for w in (f"[{zeros}].map(x, [{zeros}]).size() > 0",
              f"[{zeros}].map(x, x + x).filter(y, y > 0).size() > 0",
              "claims.groups.map(g, claims.groups + claims.groups).size() > 0",
              "claims.groups.map(g, g + g + g + g).exists(h, h.size() > 0)",
              'scopes.map(s, string(claims)).exists(x, x.contains("a"))',
              'issuer == "https://idp.example" && method == "jwt" && subject == "alice"'):
        put("access", w.encode(), out)
        put("access", w.encode() + b'\0{"groups": ["' + b'x' * 2000 + b'", "b", "c"]}', out)
    put("request_build", bytes([8]) + amp(2000, '{"method": "GET", "path": "/', "a/", "", 'x"}'), out)

    for target in sorted(written):
        print(f"{target}: {written[target]} seeds")


if __name__ == "__main__":
    main()
