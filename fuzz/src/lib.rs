//! Helpers shared by the fuzz targets: how an input is split into parts,
//! and the request builder's safety invariant.

use percent_encoding::percent_decode_str;
use reqwest::Url;
use serde_json::Value;

/// Splits an input at its first NUL byte: the targets that need two
/// documents (overlay + OpenAPI document, program + data) take them this
/// way, which keeps seeds readable text and lets libFuzzer mutate either
/// side. No NUL: everything is the first part.
pub fn split_nul(data: &[u8]) -> (&[u8], Option<&[u8]>) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    }
}

/// The bytes as JSON, or as one JSON string when they are not JSON: the
/// string case is what reaches `fromjson`, `test`, `@base64d` and friends.
pub fn json_or_string(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// The bytes as a JSON object (what MCP arguments are), else `None`.
pub fn json_object(bytes: &[u8]) -> Option<serde_json::Map<String, Value>> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// Base URLs an operator may configure: with and without a path, trailing
/// slash, port, userinfo, IPv6 host, encoded characters and a query.
pub const BASE_URLS: [&str; 8] = [
    "http://127.0.0.1:9/api",
    "http://127.0.0.1:9/api/",
    "http://127.0.0.1:9",
    "https://user:secret@upstream.test:8443/a/b/v1",
    "http://[::1]:9/x%20y/",
    "http://upstream.test/api/v2?key=k",
    "https://upstream.test/",
    "http://upstream.test/%2Fodd/api",
];

/// The request builder's contract (gateway/src/request.rs): whatever the
/// arguments, the request goes to the base URL's origin and below its path.
/// Panics (so libFuzzer reports the input) when `url` is elsewhere.
pub fn assert_under_base(base: &Url, url: &Url, what: &str) {
    let fail = |why: &str| -> ! {
        panic!("request builder escaped the base URL ({why}): base {base} → built {url} [{what}]")
    };
    if url.scheme() != base.scheme() {
        fail("scheme");
    }
    if url.host_str() != base.host_str()
        || url.port_or_known_default() != base.port_or_known_default()
    {
        fail("host or port");
    }
    if url.username() != base.username() || url.password() != base.password() {
        fail("userinfo");
    }
    if url.fragment().is_some() {
        fail("fragment");
    }
    let prefix = base.path().trim_end_matches('/');
    let path = url.path();
    let below = match path.strip_prefix(prefix) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => fail("path prefix"),
    };
    // A server decodes each segment once; a dot segment after decoding
    // walks up out of the prefix on servers that normalise after decoding.
    for seg in below.split('/') {
        let decoded = percent_decode_str(seg).decode_utf8_lossy();
        if decoded == "." || decoded == ".." {
            fail("dot segment");
        }
    }
    // What goes on the wire is the serialisation; it must mean the same URL.
    match Url::parse(url.as_str()) {
        Ok(again) if again == *url => {}
        _ => fail("serialisation does not round-trip"),
    }
}

/// Marks an amplified part: see [`amplify`].
pub const AMPLIFY: u8 = 0xfe;
/// Largest amplified part.
pub const MAX_AMPLIFIED: usize = 4 << 20;

/// Lets a short input stand for a large one: `0xFE n_hi n_lo A \0 B`
/// becomes `A` repeated n times followed by `B` repeated n times (so
/// `[` / `]` make n levels of nesting), and `0xFE n_hi n_lo P \0 A \0 B \0 S`
/// becomes `P`, that, then `S` (a bomb inside a valid document). Capped at
/// [`MAX_AMPLIFIED`] bytes.
/// Depth and size bombs are the inputs most worth having, and libFuzzer's
/// `-max_len` would otherwise keep them small. `0xFE` starts no valid
/// UTF-8 text, so no document, JSON value or program loses a meaning.
pub fn amplify(part: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let [AMPLIFY, hi, lo, rest @ ..] = part else {
        return std::borrow::Cow::Borrowed(part);
    };
    let parts: Vec<&[u8]> = rest.splitn(4, |&b| b == 0).collect();
    let (p, a, b, s): (&[u8], &[u8], &[u8], &[u8]) = match parts[..] {
        [p, a, b, s] => (p, a, b, s),
        [a, b, ..] => (&[], a, b, &[]),
        _ => (&[], rest, &[], &[]),
    };
    let unit = (a.len() + b.len()).max(1);
    let n = usize::from(u16::from_be_bytes([*hi, *lo])).min(MAX_AMPLIFIED / unit);
    let mut out = Vec::with_capacity(p.len() + unit * n + s.len());
    out.extend_from_slice(p);
    for _ in 0..n {
        out.extend_from_slice(a);
    }
    for _ in 0..n {
        out.extend_from_slice(b);
    }
    out.extend_from_slice(s);
    std::borrow::Cow::Owned(out)
}
