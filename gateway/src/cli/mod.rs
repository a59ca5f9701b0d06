//! Subcommands of the `toolgate` binary, one module each.

pub mod compile;
pub mod demo;
pub mod serve;
