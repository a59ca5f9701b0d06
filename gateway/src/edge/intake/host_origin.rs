//! Step 1: Host and Origin (DNS-rebinding protection), from the headers.
//!
//! rmcp checks both inside its service, after which it reads the body; the
//! check is private to it, so it is repeated here (same rules, same
//! settings: `cfg.allowed_hosts`, `cfg.allowed_origins`) to run first, and
//! for `/status`. rmcp still checks again; the two agree or rmcp's is moot.

#![allow(clippy::result_large_err)]

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, Uri};
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;

/// Refuses a request whose `Host` is not allowed (403) or whose `Origin`,
/// when origins are checked, is not (403). A missing or malformed `Host`
/// is a 400.
pub(crate) fn check_host_and_origin(
    uri: &Uri,
    headers: &HeaderMap,
    cfg: &StreamableHttpServerConfig,
) -> Result<(), Response> {
    if !cfg.allowed_hosts.is_empty() {
        let (host, port) = request_authority(uri, headers)?;
        let allowed = cfg.allowed_hosts.iter().any(|a| {
            let a = a.trim();
            let (ah, ap) = match http::uri::Authority::try_from(a) {
                Ok(auth) => (normalize_host(auth.host()), auth.port_u16()),
                Err(_) => (normalize_host(a), None),
            };
            !a.is_empty() && ah == host && ap.is_none_or(|p| Some(p) == port)
        });
        if !allowed {
            tracing::warn!(
                host,
                "refused a request with a Host that is not allowed (possible DNS rebinding)"
            );
            return Err(forbidden("Forbidden: Host header is not allowed"));
        }
    }
    // NB: `AppState` enforces origins exactly when it lists some (rmcp's
    // switch for an empty list is private), so an empty list means off.
    if cfg.allowed_origins.is_empty() {
        return Ok(());
    }
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin
        .to_str()
        .ok()
        .and_then(parse_origin)
        .ok_or_else(|| forbidden("Forbidden: Invalid Origin header"))?;
    if !cfg
        .allowed_origins
        .iter()
        .filter_map(|a| parse_allowed_origin(a))
        .any(|a| a.matches(&origin))
    {
        tracing::warn!(
            ?origin,
            "refused a request with an Origin that is not allowed"
        );
        return Err(forbidden("Forbidden: Origin header is not allowed"));
    }
    Ok(())
}

pub(super) fn forbidden(message: &'static str) -> Response {
    (StatusCode::FORBIDDEN, message).into_response()
}

pub(super) fn normalize_host(h: &str) -> String {
    h.trim_matches(['[', ']']).to_ascii_lowercase()
}

pub(super) fn request_authority(
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<(String, Option<u16>), Response> {
    let bad = |m: &'static str| (StatusCode::BAD_REQUEST, m).into_response();
    let auth = match headers.get(http::header::HOST) {
        Some(h) => {
            let s = h
                .to_str()
                .map_err(|_| bad("Bad Request: Invalid Host header encoding"))?;
            http::uri::Authority::try_from(s)
                .map_err(|_| bad("Bad Request: Invalid Host header"))?
        }
        // HTTP/2 carries it in `:authority`.
        None => uri
            .authority()
            .cloned()
            .ok_or_else(|| bad("Bad Request: missing Host header"))?,
    };
    Ok((normalize_host(auth.host()), auth.port_u16()))
}

#[derive(Debug, PartialEq)]
pub(super) enum Origin {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

pub(super) fn parse_origin(v: &str) -> Option<Origin> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("null") {
        return Some(Origin::Null);
    }
    let uri = Uri::try_from(v).ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let auth = uri.authority()?;
    Some(Origin::Tuple {
        scheme,
        host: normalize_host(auth.host()),
        port: auth.port_u16(),
    })
}

/// An `--allowed-origin` entry: `scheme://host` (any port), `scheme://host:*`
/// (any port), `scheme://host:port`, or `null`.
pub(super) struct AllowedOrigin {
    origin: Origin,
    any_port: bool,
}

pub(super) fn parse_allowed_origin(v: &str) -> Option<AllowedOrigin> {
    let v = v.trim();
    if let Some(base) = v.strip_suffix(":*") {
        let origin = parse_origin(base)?;
        return match origin {
            Origin::Tuple { port: None, .. } => Some(AllowedOrigin {
                origin,
                any_port: true,
            }),
            _ => None,
        };
    }
    let origin = parse_origin(v)?;
    let any_port = matches!(origin, Origin::Tuple { port: None, .. });
    Some(AllowedOrigin { origin, any_port })
}

impl AllowedOrigin {
    fn matches(&self, o: &Origin) -> bool {
        match (&self.origin, o) {
            (Origin::Null, Origin::Null) => true,
            (
                Origin::Tuple {
                    scheme: s,
                    host: h,
                    port: p,
                },
                Origin::Tuple { scheme, host, port },
            ) => {
                let default = match scheme.as_str() {
                    "http" => Some(80),
                    "https" => Some(443),
                    _ => None,
                };
                s == scheme && h == host && (self.any_port || *p == port.or(default))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn cfg(hosts: &[&str], origins: &[&str]) -> StreamableHttpServerConfig {
        let mut c = StreamableHttpServerConfig::default().with_allowed_hosts(hosts.to_vec());
        if !origins.is_empty() {
            c = c
                .with_allowed_origins(origins.to_vec())
                .enforce_origin_validation();
        }
        c
    }

    fn check(c: &StreamableHttpServerConfig, host: &str, origin: Option<&str>) -> u16 {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_str(host).unwrap());
        if let Some(o) = origin {
            h.insert("origin", HeaderValue::from_str(o).unwrap());
        }
        match check_host_and_origin(&Uri::from_static("/mcp"), &h, c) {
            Ok(()) => 200,
            Err(r) => r.status().as_u16(),
        }
    }

    #[test]
    fn hosts_match_with_or_without_a_port_as_rmcp_does() {
        let c = cfg(&["localhost", "mcp.example.com:8443", "::1"], &[]);
        assert_eq!(check(&c, "localhost:8080", None), 200);
        assert_eq!(check(&c, "LOCALHOST", None), 200);
        assert_eq!(check(&c, "[::1]:80", None), 200);
        assert_eq!(check(&c, "mcp.example.com:8443", None), 200);
        assert_eq!(check(&c, "mcp.example.com:9000", None), 403);
        assert_eq!(check(&c, "evil.example", None), 403);
        assert_eq!(check(&cfg(&[], &[]), "evil.example", None), 200);
    }

    #[test]
    fn origins_match_scheme_host_and_port() {
        let c = cfg(
            &["localhost"],
            &["http://localhost:*", "https://app.example.com:443", "null"],
        );
        assert_eq!(check(&c, "localhost", None), 200);
        assert_eq!(check(&c, "localhost", Some("http://localhost:5173")), 200);
        assert_eq!(check(&c, "localhost", Some("https://app.example.com")), 200);
        assert_eq!(
            check(&c, "localhost", Some("https://app.example.com:444")),
            403
        );
        assert_eq!(check(&c, "localhost", Some("http://evil.example")), 403);
        assert_eq!(check(&c, "localhost", Some("null")), 200);
        assert_eq!(check(&c, "localhost", Some("::nonsense")), 403);
    }
}
