//! Test support for toolgate's cross-crate end-to-end tests.
//!
//! [`apiserver`] is an in-memory Kubernetes API server that the real
//! operator, `kube` client and `kubectl` run against over HTTP.

pub mod apiserver;
