//! The pipeline of one `tools/call`, and the ready tool it runs
//! ([`tool`]): [`pipeline`] validates the arguments ([`validate`]), builds
//! the request from the tool's plan ([`request`]) or its jq transform
//! ([`transform`]), sends it ([`upstream`], with [`credentials`]) and turns
//! the answer into a result ([`response`], [`output_schema`]). Response
//! bodies are read in place ([`rawjson`]) and sent by reference
//! ([`payload`]), never as trees; schemas are kept as compact text
//! ([`schema_text`]).
//!
//! Below the serving catalog: a snapshot is made of these tools and
//! upstream runtimes, and nothing here knows snapshots.

pub mod credentials;
pub(crate) mod output_schema;
pub(crate) mod payload;
pub mod pipeline;
pub mod rawjson;
pub mod request;
pub(crate) mod response;
pub(crate) mod schema_text;
pub(crate) mod tool;
pub(crate) mod transform;
pub mod upstream;
pub(crate) mod validate;
