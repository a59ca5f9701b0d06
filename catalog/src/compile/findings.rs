//! Lint findings about the document itself, which the compile works
//! around but the author should fix: they become [`Warning`]s, listed by
//! `toolgate lint` and in `McpUpstream` status like the others.

use serde_json::Value;

use crate::model::{Location, Warning, WarningCode};
use crate::spec::{escape_pointer, Document, OperationSite};

/// `{variable}`s of the first server's URL (the one the base URL comes
/// from) that have no string `default`: they stay in the base URL as
/// written, so every call would go to a host like `{siteUrl}`.
pub fn server_variables(doc: &Document) -> Vec<Warning> {
    let Some(server) = doc.root.pointer("/servers/0") else {
        return Vec::new();
    };
    let Some(url) = server.get("url").and_then(Value::as_str) else {
        return Vec::new();
    };
    let vars = server.get("variables").and_then(Value::as_object);
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for piece in url.split('{').skip(1) {
        let Some((name, _)) = piece.split_once('}') else {
            continue;
        };
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        let declared = vars.and_then(|v| v.get(name));
        if declared
            .and_then(|v| v.get("default"))
            .is_some_and(Value::is_string)
        {
            continue;
        }
        let (pointer, what) = match declared {
            Some(_) => (
                format!("/servers/0/variables/{}", escape_pointer(name)),
                "has no default",
            ),
            None => ("/servers/0/url".to_string(), "is not declared in variables"),
        };
        out.push(Warning {
            code: WarningCode::ServerVariableWithoutDefault,
            message: format!(
                "server URL variable {{{name}}} {what}, so the base URL stays {url:?}; give it a \
                 default (an overlay can) or set the upstream's baseUrl"
            ),
            at: Some(Location::Document { pointer }),
        });
    }
    out
}

/// A GET, HEAD or DELETE operation with a request body: HTTP gives such a
/// body no meaning, and servers and proxies may drop or refuse it.
pub fn body_on_method(site: &OperationSite<'_>, method: &str) -> Option<Warning> {
    if !matches!(method, "GET" | "HEAD" | "DELETE") || site.operation.get("requestBody").is_none() {
        return None;
    }
    Some(Warning {
        code: WarningCode::RequestBodyOnMethod,
        message: format!(
            "{method} {} declares a request body, which servers and proxies may drop or refuse; \
             the tool still sends it",
            site.path
        ),
        at: Some(Location::Document {
            pointer: format!("{}/requestBody", site.pointer),
        }),
    })
}

/// What `toolgate lint` reports on; see [`lint_upstream`].
#[derive(Debug, Clone)]
pub struct Linted {
    pub catalog: crate::UpstreamCatalog,
    /// The conflicts `conflictResolution: error` refused the document for;
    /// `catalog` is then what `qualify` makes of it.
    pub refused: Option<crate::NameConflicts>,
}

/// Compiles as [`super::compile_upstream`] does, except that name
/// conflicts under `conflictResolution: error` are a finding rather than
/// the end: they are returned with the catalog `qualify` makes, so a lint
/// lists them and still reports on every operation.
pub fn lint_upstream(src: &super::UpstreamSource<'_>) -> Result<Linted, crate::CompileError> {
    match super::compile_upstream(src) {
        Ok(catalog) => Ok(Linted {
            catalog,
            refused: None,
        }),
        Err(crate::CompileError::NameConflict(conflicts)) => {
            let mut options = src.options.clone();
            options.naming.conflict_resolution = crate::ConflictResolution::Qualify;
            let catalog = super::compile_upstream(&super::UpstreamSource {
                options: &options,
                ..*src
            })?;
            Ok(Linted {
                catalog,
                refused: Some(conflicts),
            })
        }
        Err(e) => Err(e),
    }
}
