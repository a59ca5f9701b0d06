//! Fetching a document (an OpenAPI description, an overlay) from a URL,
//! the one way for the operator and the gateway's local mode: one redirect
//! policy, conditional GETs, and a size cap enforced before buffering.

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

/// What a server said to identify a document, sent back on the next GET
/// so an unchanged document costs a `304` instead of its body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// The answer to [`get`].
#[derive(Debug)]
pub enum Fetched {
    /// `304`: the document the caller kept is current.
    NotModified,
    /// A (new) document and what identifies it.
    Document {
        body: Vec<u8>,
        validators: Validators,
    },
}

/// Why [`get`] has no document. Messages never hold the URL (it may carry
/// credentials); the caller names it in its own words.
#[derive(Debug)]
pub enum FetchError {
    /// The request's timeout passed, the body's transfer included.
    Timeout,
    /// Connecting, TLS or reading the answer failed.
    Transport(String),
    /// A 3xx that [`redirect_policy`] did not follow.
    Redirect { status: u16, location: String },
    /// Any other status but 2xx (and 304 when validators were sent).
    Status(u16),
    /// Larger than the cap, by `Content-Length` or by what arrived.
    TooLarge { max: usize },
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Timeout => f.write_str("timed out"),
            FetchError::Transport(e) => write!(f, "request failed: {e}"),
            FetchError::Redirect { status, location } => {
                f.write_str(&cross_origin_redirect(*status, location))
            }
            FetchError::Status(s) => write!(f, "returned HTTP {s}"),
            FetchError::TooLarge { max } => write!(f, "is larger than {max} bytes"),
        }
    }
}

impl std::error::Error for FetchError {}

impl FetchError {
    fn from_reqwest(e: reqwest::Error) -> FetchError {
        if e.is_timeout() {
            return FetchError::Timeout;
        }
        // The chain says why (refused, DNS, certificate); the top alone
        // often says only "error sending request".
        let e = e.without_url();
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        FetchError::Transport(text)
    }
}

/// Sends `req` (a GET with the caller's client, timeout and headers),
/// conditional on `previous`, and reads at most `max` bytes of the answer:
/// a larger `Content-Length` is refused unread. The one fetch of the
/// operator's `spec.openapi.url` and the gateway's local `spec.url`.
pub async fn get(
    mut req: reqwest::RequestBuilder,
    previous: Option<&Validators>,
    max: usize,
) -> Result<Fetched, FetchError> {
    if let Some(v) = previous {
        if let Some(etag) = &v.etag {
            req = req.header(reqwest::header::IF_NONE_MATCH, etag);
        } else if let Some(lm) = &v.last_modified {
            req = req.header(reqwest::header::IF_MODIFIED_SINCE, lm);
        }
    }
    let mut resp = req.send().await.map_err(FetchError::from_reqwest)?;
    let status = resp.status();
    tracing::Span::current().record("http.response.status_code", status.as_u16());
    if status == reqwest::StatusCode::NOT_MODIFIED {
        return match previous {
            Some(_) => Ok(Fetched::NotModified),
            // Nothing was asked conditionally: a 304 is no answer.
            None => Err(FetchError::Status(304)),
        };
    }
    if status.is_redirection() {
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?")
            .to_string();
        return Err(FetchError::Redirect {
            status: status.as_u16(),
            location,
        });
    }
    if !status.is_success() {
        return Err(FetchError::Status(status.as_u16()));
    }
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(FetchError::TooLarge { max });
    }
    let header = |name| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let validators = Validators {
        etag: header(reqwest::header::ETAG),
        last_modified: header(reqwest::header::LAST_MODIFIED),
    };
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(FetchError::from_reqwest)? {
        if body.len() + chunk.len() > max {
            return Err(FetchError::TooLarge { max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched::Document { body, validators })
}
