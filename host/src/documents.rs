//! Fetching a document (an OpenAPI description, an overlay) from a URL:
//! the one redirect policy of the operator's and the gateway's document
//! clients.

/// Redirects followed within one origin.
pub const MAX_REDIRECTS: usize = 5;

/// Follows a few redirects within the origin of the first URL, never to
/// another origin. NB: reqwest drops `Authorization` on a cross-origin hop
/// but not custom headers (`spec.openapi.headersFrom`), which are as
/// secret: whoever points a URL at a redirector must not be able to send
/// them elsewhere. The caller sees the 3xx and says so
/// ([`cross_origin_redirect`]).
pub fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

/// What to say of a 3xx that [`redirect_policy`] did not follow: where it
/// pointed, and what to do instead.
pub fn cross_origin_redirect(status: u16, location: &str) -> String {
    format!(
        "HTTP {status} to {location}: redirects to another origin are not followed (they would \
         carry the request's headers); use the final URL"
    )
}
