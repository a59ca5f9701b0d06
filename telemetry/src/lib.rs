//! Logs, traces and metrics, set up the same way by both binaries.
