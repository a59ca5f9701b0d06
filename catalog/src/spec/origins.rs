//! Where the parts of a converted Swagger 2.0 document were written, so
//! that a warning points at the document the user has (`/definitions/Pet`),
//! not at the 3.0 shape the compiler works on (`/components/schemas/Pet`).
//!
//! Sections move by fixed rules ([`Origins::original`]); what moves per
//! operation — a `body` or `formData` parameter becoming `requestBody`,
//! the remaining parameters renumbered — is recorded by the converter.

use std::collections::BTreeMap;

/// Converted pointer prefix → original pointer prefix, for what moved per
/// operation. Empty for 3.x documents, which are not converted.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    moved: BTreeMap<String, String>,
    swagger2: bool,
}

impl Origins {
    /// For a converted 2.0 document.
    pub(crate) fn swagger2() -> Self {
        Origins {
            moved: BTreeMap::new(),
            swagger2: true,
        }
    }

    /// Records that what the converted document has at `converted` (and
    /// below) was written at `original`.
    pub(crate) fn record(&mut self, converted: String, original: String) {
        self.moved.insert(converted, original);
    }

    /// The pointer into the document as written for `pointer` into the
    /// converted one; `pointer` itself for 3.x documents and for what did
    /// not move.
    pub fn original(&self, pointer: &str) -> String {
        if !self.swagger2 {
            return pointer.to_string();
        }
        let mut tokens: Vec<&str> = pointer.split('/').skip(1).collect();
        // A body's schema is one per media type in 3.0 and one in 2.0.
        if let ["paths", _, _, "requestBody", "content", _, ..] = tokens.as_slice() {
            tokens.drain(4..6);
        }
        for end in (1..=tokens.len()).rev() {
            let prefix = join(&tokens[..end]);
            if let Some(original) = self.moved.get(&prefix) {
                return format!("{original}{}", join(&tokens[end..]));
            }
        }
        let rewritten: Vec<&str> = match tokens.as_slice() {
            ["components", "schemas", rest @ ..] => [&["definitions"][..], rest].concat(),
            ["components", "parameters", name, "schema", rest @ ..] => {
                [&["parameters", name][..], rest].concat()
            }
            ["components", "parameters", rest @ ..] => [&["parameters"][..], rest].concat(),
            ["components", "responses", name, "content", _, rest @ ..] => {
                [&["responses", name][..], rest].concat()
            }
            ["components", "responses", rest @ ..] => [&["responses"][..], rest].concat(),
            ["components", "securitySchemes", rest @ ..] => {
                [&["securityDefinitions"][..], rest].concat()
            }
            ["paths", p, m, "responses", code, "content", _, rest @ ..] => {
                [&["paths", p, m, "responses", code][..], rest].concat()
            }
            // Non-body parameters hold their schema keywords themselves.
            ["paths", p, m, "parameters", i, "schema", rest @ ..] => {
                [&["paths", p, m, "parameters", i][..], rest].concat()
            }
            ["paths", p, "parameters", i, "schema", rest @ ..] => {
                [&["paths", p, "parameters", i][..], rest].concat()
            }
            _ => return pointer.to_string(),
        };
        join(&rewritten)
    }
}

fn join(tokens: &[&str]) -> String {
    let mut out = String::new();
    for t in tokens {
        out.push('/');
        out.push_str(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_map_back_by_rule_and_moves_by_record() {
        let mut o = Origins::swagger2();
        o.record(
            "/paths/~1a/post/requestBody/schema".into(),
            "/paths/~1a/post/parameters/1/schema".into(),
        );
        // As the converter records a renumbered parameter.
        o.record(
            "/paths/~1a/post/parameters/1/schema".into(),
            "/paths/~1a/post/parameters/2".into(),
        );
        o.record(
            "/paths/~1a/post/parameters/1".into(),
            "/paths/~1a/post/parameters/2".into(),
        );
        for (converted, written) in [
            (
                "/components/schemas/Pet/properties/a",
                "/definitions/Pet/properties/a",
            ),
            (
                "/components/parameters/Q/schema/pattern",
                "/parameters/Q/pattern",
            ),
            (
                "/components/responses/E/content/application~1json/schema/items",
                "/responses/E/schema/items",
            ),
            (
                "/paths/~1a/get/responses/200/content/application~1json/schema/x",
                "/paths/~1a/get/responses/200/schema/x",
            ),
            (
                "/paths/~1a/post/requestBody/content/application~1xml/schema/required",
                "/paths/~1a/post/parameters/1/schema/required",
            ),
            (
                "/paths/~1a/post/parameters/1/schema/enum",
                "/paths/~1a/post/parameters/2/enum",
            ),
            (
                "/paths/~1a/get/parameters/0/schema/enum",
                "/paths/~1a/get/parameters/0/enum",
            ),
            ("/info/title", "/info/title"),
        ] {
            assert_eq!(o.original(converted), written, "{converted}");
        }
        // A 3.x document is not converted: pointers stay.
        let p = "/components/schemas/Pet";
        assert_eq!(Origins::default().original(p), p);
    }
}
