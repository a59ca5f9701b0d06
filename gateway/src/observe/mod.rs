//! Observability: the Prometheus metrics ([`metrics`], on a listener of
//! their own) and the OpenTelemetry spans of requests and calls
//! ([`trace`]). Every other room reports here; this one depends on none of
//! them (only on [`crate::outcome`]).

pub(crate) mod labels;
pub mod metrics;
pub(crate) mod trace;
