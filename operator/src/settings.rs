//! McpUpstream → the gateway's settings for it (base URL, HTTP settings,
//! response validation, auth, access rules) and the credentials the gateway needs, read
//! from the Secrets it names. Every failure names the field.

use std::collections::BTreeMap;

use catalog::runtime::{ApiKeyLocation, AuthConfig, SecretRef, UpstreamConfig};
use crds::conditions::Reason;
use crds::{AuthType, McpUpstream};
use kube::ResourceExt;

use crate::error::Failure;
use crate::sources;

/// The gateway's settings for this upstream and the credentials to copy.
pub async fn read(
    client: &kube::Client,
    access: &sources::SecretAccess,
    u: &McpUpstream,
) -> Result<(UpstreamConfig, BTreeMap<String, Vec<u8>>), Failure> {
    let ns = u.namespace().unwrap_or_default();
    let spec = &u.spec;
    let base_url = match (&spec.base_url, &spec.service_ref) {
        (Some(url), _) => url.clone(),
        (None, Some(svc)) => {
            match sources::service_exists(client, &ns, &svc.name).await {
                Ok(true) => {}
                Ok(false) => {
                    return Err(Failure::new(
                        Reason::ServiceNotFound,
                        format!("spec.serviceRef: Service {ns}/{} not found", svc.name),
                    ))
                }
                Err(e) => {
                    return Err(Failure::transient(format!(
                        "reading Service {ns}/{}: {e}",
                        svc.name
                    )))
                }
            }
            let scheme = match svc.scheme {
                crds::Scheme::Http => "http",
                crds::Scheme::Https => "https",
            };
            format!(
                "{scheme}://{}.{ns}.svc:{}{}",
                svc.name,
                svc.port,
                svc.path.as_deref().unwrap_or("")
            )
        }
        (None, None) => {
            return Err(Failure::new(
                Reason::SpecInvalid,
                "exactly one of spec.baseUrl or spec.serviceRef must be set",
            ))
        }
    };
    let http = spec.http.clone().unwrap_or_default();
    // The gateway would refuse the whole upstream for a header it cannot
    // send; say which one here, where it was written.
    for (name, value) in &http.headers {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(Failure::new(
                Reason::InvalidSettings,
                format!("spec.http.headers: {name:?} is not a valid HTTP header name"),
            ));
        }
        if reqwest::header::HeaderValue::from_str(value).is_err() {
            return Err(Failure::new(
                Reason::InvalidSettings,
                format!("spec.http.headers[{name:?}]: the value is not a valid HTTP header value (line breaks and control characters are not allowed)"),
            ));
        }
    }
    // The gateway refuses an upstream whose limit or identity header it
    // cannot use; say so here, on the field.
    if let Some(r) = &spec.rate_limit {
        r.check().map_err(|e| {
            Failure::new(
                Reason::InvalidSettings,
                format!("spec.rateLimit.{}: {}", e.field, e.message),
            )
        })?;
    }
    if let Some(f) = &spec.forward_identity {
        f.check().map_err(|e| {
            Failure::new(
                Reason::InvalidSettings,
                format!("spec.forwardIdentity.{}: {}", e.field, e.message),
            )
        })?;
        let api_key_header = spec
            .auth
            .as_ref()
            .filter(|a| a.type_ == AuthType::ApiKey)
            .and_then(|a| a.header.as_deref());
        let named = [
            ("header", Some(&f.header)),
            ("issuerHeader", f.issuer_header.as_ref()),
        ];
        for (field, name) in named {
            let Some(name) = name else { continue };
            if api_key_header.is_some_and(|h| h.eq_ignore_ascii_case(name)) {
                return Err(Failure::new(
                    Reason::InvalidSettings,
                    format!(
                        "spec.forwardIdentity.{field}: {name} carries the upstream's API key (spec.auth.header)"
                    ),
                ));
            }
        }
    }
    // Compiled here to name the field as written; the gateway compiles
    // it again when it builds its snapshot.
    if let Some(policy) = &spec.access {
        policy
            .compile(&catalog::access::PolicySite::McpUpstream)
            .map_err(|e| Failure::new(Reason::InvalidAccessRule, e.to_string()))?;
    }
    let validation = spec.validation.clone().unwrap_or_default();
    let mut config = UpstreamConfig {
        base_url: Some(base_url),
        timeout_seconds: Some(
            http.timeout
                .as_deref()
                .and_then(crds::parse_duration)
                .or_else(|| crds::parse_duration(crds::DEFAULT_TIMEOUT))
                .map(|d| d.as_secs_f64())
                .unwrap_or(30.0),
        ),
        max_response_bytes: Some(
            http.max_response_bytes
                .unwrap_or(crds::DEFAULT_MAX_RESPONSE_BYTES),
        ),
        headers: http.headers.clone(),
        rate_limit: spec.rate_limit.clone(),
        forward_identity: spec.forward_identity.clone(),
        access: spec.access.clone(),
        ..Default::default()
    };
    validation.apply(&mut config);
    let mut creds = BTreeMap::new();
    if let Some(auth) = &spec.auth {
        if auth.type_ != AuthType::None {
            let Some(sref) = &auth.secret_ref else {
                return Err(Failure::new(
                    Reason::SecretNotFound,
                    "spec.auth.secretRef is required unless spec.auth.type is none",
                ));
            };
            let data = sources::read_secret(client, access, "spec.auth.secretRef", &ns, &sref.name)
                .await?;
            let mut refs = Vec::new();
            for k in sref.keys(auth.type_) {
                let Some(v) = data.get(k) else {
                    return Err(Failure::new(
                        Reason::SecretNotFound,
                        format!(
                            "spec.auth.secretRef: Secret {ns}/{} has no key {k:?}",
                            sref.name
                        ),
                    ));
                };
                let ck = crds::publish::credentials_key(&ns, &sref.name, k);
                creds.insert(ck.clone(), v.clone());
                refs.push(SecretRef {
                    secret_key: Some(ck),
                    ..Default::default()
                });
            }
            let mut refs = refs.into_iter();
            let mut next = || refs.next().unwrap_or_default();
            config.auth = match auth.type_ {
                AuthType::None => AuthConfig::None,
                AuthType::Bearer => AuthConfig::Bearer { token: next() },
                AuthType::ApiKey => {
                    let (location, name) = match (&auth.header, &auth.query) {
                        (Some(h), _) => (ApiKeyLocation::Header, h.clone()),
                        (None, Some(q)) => (ApiKeyLocation::Query, q.clone()),
                        (None, None) => {
                            return Err(Failure::new(
                                Reason::SpecInvalid,
                                "spec.auth.type apiKey needs exactly one of spec.auth.header or spec.auth.query",
                            ))
                        }
                    };
                    AuthConfig::ApiKey {
                        location,
                        name,
                        value: next(),
                    }
                }
                AuthType::Basic => AuthConfig::Basic {
                    username: next(),
                    password: next(),
                },
                AuthType::Oauth2ClientCredentials => AuthConfig::Oauth2ClientCredentials {
                    token_url: auth.token_url.clone().unwrap_or_default(),
                    client_id: next(),
                    client_secret: next(),
                    scopes: auth.scopes.clone(),
                    audience: None,
                    client_auth: Default::default(),
                },
                AuthType::TokenExchange => AuthConfig::TokenExchange {
                    token_url: auth.token_url.clone().unwrap_or_default(),
                    client_id: next(),
                    client_secret: next(),
                    audience: auth.audience.clone(),
                    scopes: auth.scopes.clone(),
                    resource: None,
                    client_auth: Default::default(),
                },
            };
        }
    }
    Ok((config, creds))
}
