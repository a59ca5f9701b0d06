//! External programs some tests drive: `kubectl`, the Python that has
//! Helm's SDK and the Kubernetes schemas (`tests/deploy/venv.sh`),
//! Node.js with the Gateway API schemas it installs beside them,
//! `nginx` (the reverse proxy of the gateway's rolling-restart test), and
//! the official MCP SDK clients (`tests/clients/sdk/setup.sh`).
//!
//! A test that cannot find one must not pass by doing nothing. Under CI
//! (`CI=true`, which `.ci/run` exports; `CI=1` too) a missing tool fails
//! the test. Elsewhere the test prints what is missing and how to get it,
//! then returns early:
//!
//! ```no_run
//! let Some(kubectl) = toolgate_tests::tools::kubectl() else { return };
//! ```

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `kubectl`: `$KUBECTL` (a path, or a name looked up on `PATH`), else
/// `kubectl` on `PATH`.
pub fn kubectl() -> Option<PathBuf> {
    let name = std::env::var_os("KUBECTL").filter(|v| !v.is_empty());
    let found = executable(name.as_deref().unwrap_or(OsStr::new("kubectl")));
    required(
        found,
        "kubectl",
        "install it (Debian: apt-get install kubernetes-client) or set KUBECTL to its path",
    )
}

/// `nginx`: `$NGINX` (a path, or a name looked up on `PATH`), else `nginx`
/// on `PATH`, else Debian's `/usr/sbin/nginx` (not on a non-root `PATH`).
pub fn nginx() -> Option<PathBuf> {
    let name = std::env::var_os("NGINX").filter(|v| !v.is_empty());
    let found = match name {
        Some(n) => executable(&n),
        None => executable(OsStr::new("nginx"))
            .or_else(|| Some(PathBuf::from("/usr/sbin/nginx")).filter(|p| is_executable(p))),
    };
    required(
        found,
        "nginx",
        "install it (Debian: apt-get install nginx) or set NGINX to its path",
    )
}

/// The Python with helm-python-sdk and kubernetes-validate installed:
/// `$TOOLGATE_DEPLOY_PYTHON`.
pub fn deploy_python() -> Option<PathBuf> {
    let found = std::env::var_os("TOOLGATE_DEPLOY_PYTHON")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    required(
        found,
        "the deploy Python (TOOLGATE_DEPLOY_PYTHON, unset or not a file)",
        "export TOOLGATE_DEPLOY_PYTHON=$(tests/deploy/venv.sh), which installs \
         helm-python-sdk and kubernetes-validate from PyPI into a venv",
    )
}

/// Node.js and the schema checks that `tests/deploy/venv.sh` installs
/// beside the deploy Python (`<venv>/gateway-api/validate.mjs`: Gateway API
/// and Prometheus Operator objects; `promql.mjs` beside it parses PromQL):
/// `(node, validate.mjs)`.
pub fn gateway_api_validator() -> Option<(PathBuf, PathBuf)> {
    let script = std::env::var_os("TOOLGATE_DEPLOY_PYTHON")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .and_then(|python| Some(python.parent()?.parent()?.join("gateway-api/validate.mjs")))
        .filter(|p| p.is_file());
    let found = script.zip(executable(OsStr::new("node")));
    required(
        found.map(|(script, node)| (node, script)),
        "node and the Gateway API schemas (<deploy venv>/gateway-api/validate.mjs)",
        "install Node.js 20+ and export TOOLGATE_DEPLOY_PYTHON=$(tests/deploy/venv.sh), \
         which also installs @kubernetes-models/gateway-api, \
         @kubernetes-models/prometheus-operator and @prometheus-io/lezer-promql from npm",
    )
}

/// The official MCP SDK clients `tests/clients/sdk/setup.sh` installs.
#[derive(Debug, Clone)]
pub struct SdkClients {
    /// A Python with the `mcp` package.
    pub python: PathBuf,
    /// Node.js.
    pub node: PathBuf,
    /// Where `@modelcontextprotocol/sdk` is installed: run scripts with
    /// this as their working directory (or copy them here) so Node's
    /// module resolution finds it.
    pub node_dir: PathBuf,
}

/// The SDK clients in `$TOOLGATE_SDK_CLIENTS`.
pub fn sdk_clients() -> Option<SdkClients> {
    let dir = std::env::var_os("TOOLGATE_SDK_CLIENTS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let found = dir.and_then(|dir| {
        let python = dir.join("venv/bin/python");
        let node_dir = dir.join("node");
        let sdk = node_dir.join("node_modules/@modelcontextprotocol/sdk/package.json");
        let node = executable(OsStr::new("node"))?;
        (python.is_file() && sdk.is_file()).then_some(SdkClients {
            python,
            node,
            node_dir,
        })
    });
    required(
        found,
        "the official MCP SDK clients (TOOLGATE_SDK_CLIENTS)",
        "install Node.js 20+ and export TOOLGATE_SDK_CLIENTS=$(tests/clients/sdk/setup.sh), \
         which installs the Python and TypeScript SDKs from PyPI and npm",
    )
}

/// The rule every tool lookup goes through: `found`, or, when it is
/// `None`, a panic under CI and a printed skip elsewhere. `what` names the
/// tool, `how` says how to get it.
pub fn required<T>(found: Option<T>, what: &str, how: &str) -> Option<T> {
    if found.is_some() {
        return found;
    }
    if in_ci() {
        panic!("{what} is missing and CI requires it: {how}");
    }
    // NB: not `eprintln!`: the test harness captures that and shows it only
    // for failing tests, and a skip passes. Writing to the stderr handle
    // bypasses the capture, so the skip shows in a plain `cargo test`.
    // The test harness names each test's thread after the test.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED in {test}: {what} is missing, so what needs it is not checked \
         (under CI=true this fails): {how}"
    );
    None
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// `name` if it is a path to a file, else the first `PATH` entry holding
/// an executable file of that name.
fn executable(name: &OsStr) -> Option<PathBuf> {
    let name = Path::new(name);
    if name.components().count() > 1 {
        return name.is_file().then(|| name.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}
