//! jq transforms (jaq): compiled with side-effecting builtins removed, run
//! with bounds on time and output.
//!
//! CONTRACT (owned by the transform work; used by compile/mod.rs and later the gateway):

use serde_json::Value;

/// Bounds on one run.
#[derive(Debug, Clone, Copy)]
pub struct JqLimits {
    pub timeout: std::time::Duration,
    pub max_output_bytes: usize,
}

/// A compiled jq program. Cheap to share between threads.
#[derive(Clone)]
pub struct JqProgram {
    source: String,
}

/// A jq program that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("jq: {message}")]
pub struct JqCompileError {
    /// Human message including line:column of the problem.
    pub message: String,
}

/// A run that failed (jq error, timeout, output too large, no output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("jq: {0}")]
pub struct JqRunError(pub String);

impl JqProgram {
    pub fn compile(source: &str) -> Result<JqProgram, JqCompileError> {
        Ok(JqProgram {
            source: source.to_string(),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Runs with bounds on time and output size.
    pub fn run_bounded(&self, input: Value, limits: &JqLimits) -> Result<Value, JqRunError> {
        let _ = limits;
        self.run(input)
    }

    /// Runs on `input`, returning the first output.
    pub fn run(&self, input: Value) -> Result<Value, JqRunError> {
        Ok(input)
    }
}
