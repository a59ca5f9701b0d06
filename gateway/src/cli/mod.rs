//! Subcommands of the `toolgate` binary, one module each.

pub mod serve;
