//! `toolgate compile` and `toolgate lint`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use catalog::{
    Catalog, CompileError, CompileOptions, Linted, Overlay, UpstreamCatalog, UpstreamSource,
};
use clap::Args;

/// What both subcommands read: one document (`--spec`), or every
/// upstream of a gateway config (`--config` alone).
#[derive(Args, Debug)]
pub struct SourceArgs {
    /// OpenAPI document (2.0, 3.0 or 3.1; JSON or YAML).
    #[arg(
        long,
        value_name = "FILE",
        requires = "prefix",
        required_unless_present = "config"
    )]
    pub spec: Option<PathBuf>,
    /// Tool prefix: every tool is named `{prefix}__{name}`.
    #[arg(long, value_name = "P", requires = "spec")]
    pub prefix: Option<String>,
    /// Overlay documents, applied in the order given.
    #[arg(long = "overlay", value_name = "FILE", requires = "spec")]
    pub overlays: Vec<PathBuf>,
    /// With --spec: compile settings (naming, tools, schema) as YAML or
    /// JSON. Without: a gateway config (`toolgate serve --config`), whose
    /// upstreams are all compiled, each from its `openapi` document.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Overlay targets that match nothing are errors, not warnings.
    #[arg(long)]
    pub strict: bool,
}

#[derive(Args, Debug)]
pub struct CompileArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Write the catalog here instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the jq request expression equivalent to TOOL's request plan.
    #[arg(long, value_name = "TOOL")]
    pub explain: Option<String>,
    /// Exit non-zero when FILE differs from what would be compiled.
    #[arg(long, value_name = "FILE", conflicts_with = "output")]
    pub check: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct LintArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// How many of the longest tool names to show.
    #[arg(long, default_value_t = 5)]
    pub longest: usize,
    /// How many of the largest tools (by `tools/list` bytes) to show.
    #[arg(long, default_value_t = 10)]
    pub largest: usize,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Compiles what the arguments describe: each upstream with the document
/// it came from.
pub fn compile_sources(args: &SourceArgs) -> Result<Vec<(String, UpstreamCatalog)>> {
    let (None, Some(config)) = (&args.spec, &args.config) else {
        let u = compile_source(args)?;
        return Ok(vec![(source_name(args), u)]);
    };
    // Documents may be URLs: fetching needs a runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut sources = gateway::serving::local::Sources::new(config.clone(), args.strict);
    let compiled = rt.block_on(sources.compile_all())?;
    Ok(compiled
        .into_iter()
        .map(|c| (format!("upstream {} ({})", c.prefix, c.document), c.catalog))
        .collect())
}

/// `--spec`, or else `--config`, for messages.
fn source_name(args: &SourceArgs) -> String {
    args.spec
        .as_ref()
        .or(args.config.as_ref())
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// What `lint` reads: each upstream with the document it came from,
/// compiled by [`catalog::lint_upstream`].
fn lint_sources(args: &SourceArgs) -> Result<Vec<(String, Linted)>> {
    let (None, Some(config)) = (&args.spec, &args.config) else {
        let linted = with_source(args, catalog::lint_upstream)?;
        return Ok(vec![(source_name(args), linted)]);
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut sources = gateway::serving::local::Sources::for_lint(config.clone(), args.strict);
    let compiled = rt.block_on(sources.compile_all())?;
    Ok(compiled
        .into_iter()
        .map(|c| {
            let document = format!("upstream {} ({})", c.prefix, c.document);
            let linted = Linted {
                catalog: c.catalog,
                refused: c.refused,
            };
            (document, linted)
        })
        .collect())
}

/// Compiles the one upstream of `--spec`.
pub fn compile_source(args: &SourceArgs) -> Result<UpstreamCatalog> {
    with_source(args, catalog::compile_upstream)
}

/// Reads the `--spec` upstream's inputs and hands them to `compile`.
fn with_source<T>(
    args: &SourceArgs,
    compile: impl FnOnce(&UpstreamSource<'_>) -> Result<T, CompileError>,
) -> Result<T> {
    let (Some(spec_path), Some(prefix)) = (&args.spec, &args.prefix) else {
        bail!("--spec and --prefix are needed (or --config alone)");
    };
    let options: CompileOptions = match &args.config {
        None => CompileOptions::default(),
        Some(p) => {
            let bytes = read(p)?;
            let value = catalog::spec::parse_value(&p.display().to_string(), &bytes)?;
            serde_json::from_value(value)
                .with_context(|| format!("{}: invalid compile settings", p.display()))?
        }
    };
    let mut overlays = Vec::new();
    for p in &args.overlays {
        overlays.push(Overlay::parse(
            &p.display().to_string(),
            &read(p)?,
            args.strict,
        )?);
    }
    let spec = read(spec_path)?;
    let document = spec_path.display().to_string();
    Ok(compile(&UpstreamSource {
        prefix,
        document: &document,
        spec: &spec,
        overlays: &overlays,
        options: &options,
    })?)
}

/// Canonical bytes of a catalog file: pretty JSON plus a final newline.
pub fn catalog_bytes(catalog: &Catalog) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(catalog)?;
    bytes.push(b'\n');
    Ok(bytes)
}

pub fn compile(args: CompileArgs) -> Result<ExitCode> {
    let upstreams = compile_sources(&args.source)?;
    let catalog = Catalog::new(upstreams.into_iter().map(|(_, u)| u).collect());
    if let Some(name) = &args.explain {
        let Some((_, tool)) = catalog.tool(name) else {
            bail!(
                "no tool {name:?} in {} (run `toolgate lint` to list tools)",
                source_name(&args.source)
            );
        };
        let jq = catalog::explain::request_jq(&tool.plan);
        write_stdout(format!("{jq}\n").as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let bytes = catalog_bytes(&catalog)?;
    if let Some(path) = &args.check {
        let existing = read(path)?;
        if existing != bytes {
            eprintln!(
                "{} is stale: recompile with `toolgate compile ... -o {}`",
                path.display(),
                path.display()
            );
            return Ok(ExitCode::from(1));
        }
        return Ok(ExitCode::SUCCESS);
    }
    match &args.output {
        Some(path) => std::fs::write(path, &bytes)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => write_stdout(&bytes)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to stdout. A reader that closed the pipe early
/// (`toolgate lint … | head -1`) has what it wanted: that ends the output
/// quietly, where `print!` would panic (exit 101).
fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r.context("cannot write to stdout")?),
    }
}

/// Findings never fail a lint: it exits 0 whenever every upstream could
/// be compiled, name conflicts included, and lists what it found.
pub fn lint(args: LintArgs) -> Result<ExitCode> {
    let mut out = String::new();
    let linted = lint_sources(&args.source)?;
    for (i, (document, l)) in linted.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        lint_upstream(&mut out, document, l, args.longest, args.largest)?;
    }
    findings_summary(&mut out, &linted)?;
    write_stdout(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The summary of one upstream.
fn lint_upstream(
    out: &mut String,
    document: &str,
    l: &Linted,
    longest: usize,
    largest: usize,
) -> std::fmt::Result {
    use std::fmt::Write as _;
    let u = &l.catalog;
    let title = u.source.title.as_deref().unwrap_or("(untitled)");
    writeln!(
        out,
        "{document}: {title} (OpenAPI {}), {} operations",
        u.source.openapi_version, u.source.operation_count
    )?;
    writeln!(out, "tools:    {}", u.tools.len())?;
    writeln!(out, "rejected: {}", u.rejected.len())?;
    writeln!(out, "warnings: {}", u.warnings.len())?;
    if let Some(refused) = &l.refused {
        writeln!(out, "conflicts: {}", refused.conflicts.len())?;
        writeln!(
            out,
            "\nName conflicts (naming.conflictResolution: error refuses the document; set it to \
             qualify to keep every operation, firstWins or skip to drop some, or name one \
             operation of each pair with x-mcp-tool-name):"
        )?;
        for c in &refused.conflicts {
            writeln!(
                out,
                "  {:?}: {} {} and {} {}",
                c.name, c.first.0, c.first.1, c.second.0, c.second.1
            )?;
        }
        writeln!(
            out,
            "The rest of this report is the catalog naming.conflictResolution: qualify makes."
        )?;
    }
    if !u.rejected.is_empty() {
        writeln!(out, "\nRejected operations:")?;
        for r in &u.rejected {
            writeln!(
                out,
                "  {} {} [{}] {}",
                r.method,
                r.path,
                r.reason.as_str(),
                r.message
            )?;
        }
    }
    if !u.warnings.is_empty() {
        writeln!(out, "\nWarnings:")?;
        for w in &u.warnings {
            match w.at.as_ref().map(catalog::Location::pointer) {
                Some(p) => writeln!(out, "  [{}] {} ({p})", w.code, w.message)?,
                None => writeln!(out, "  [{}] {}", w.code, w.message)?,
            }
        }
    }
    let mut names: Vec<&str> = u.tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    if !names.is_empty() {
        writeln!(out, "\nLongest tool names:")?;
        for n in names.iter().take(longest) {
            writeln!(out, "  {:>3}  {n}", n.len())?;
        }
    }
    listing_sizes(out, u, largest)
}

/// Counts per upstream and per finding code, after every upstream's report.
fn findings_summary(out: &mut String, linted: &[(String, Linted)]) -> std::fmt::Result {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    writeln!(out, "\nFindings summary:")?;
    writeln!(
        out,
        "  {:>6} {:>8} {:>8} {:>9}  upstream",
        "tools", "rejected", "warnings", "conflicts"
    )?;
    let mut by_code: BTreeMap<String, usize> = BTreeMap::new();
    for (document, l) in linted {
        let u = &l.catalog;
        let conflicts = l.refused.as_ref().map_or(0, |r| r.conflicts.len());
        writeln!(
            out,
            "  {:>6} {:>8} {:>8} {conflicts:>9}  {document}",
            u.tools.len(),
            u.rejected.len(),
            u.warnings.len()
        )?;
        for w in &u.warnings {
            *by_code.entry(w.code.to_string()).or_default() += 1;
        }
        for r in &u.rejected {
            *by_code
                .entry(format!("rejected {}", r.reason.as_str()))
                .or_default() += 1;
        }
        if conflicts > 0 {
            *by_code.entry("name conflicts".into()).or_default() += conflicts;
        }
    }
    if by_code.is_empty() {
        writeln!(out, "  no findings")?;
    }
    for (code, n) in by_code {
        writeln!(out, "  {n:>6}  {code}")?;
    }
    Ok(())
}

/// Where the listing's bytes go (see `catalog::size`), in both modes.
fn where_the_bytes_go(out: &mut String, u: &UpstreamCatalog) -> std::fmt::Result {
    use catalog::size::breakdown;
    use std::fmt::Write as _;
    let warn = breakdown(&u.tools, false);
    let fail = breakdown(&u.tools, true);
    writeln!(
        out,
        "\nWhere the bytes go (warn/off; fail adds outputSchema; `repeated` overlaps the rest):"
    )?;
    writeln!(out, "  {:<34} {:>10} {:>10}", "", "warn, off", "fail")?;
    let mut row = |what: &str, a: u64, b: u64| writeln!(out, "  {what:<34} {a:>10} {b:>10}");
    row("total", warn.total, fail.total)?;
    row(
        "tool fields (name, description...)",
        warn.tool_fields,
        fail.tool_fields,
    )?;
    for (side, a, b) in [
        ("inputSchema", &warn.input, &fail.input),
        ("outputSchema", &warn.output, &fail.output),
    ] {
        for ((what, x), (_, y)) in a.rows().into_iter().zip(b.rows()) {
            match what {
                "total" => row(side, x, y)?,
                _ => row(&format!("  {what}"), x, y)?,
            }
        }
    }
    Ok(())
}

/// The estimated `tools/list` size of the document's tools, as the gateway
/// lists them under each response validation mode (the operator reports
/// the same in `status.listing`), and the largest tools.
fn listing_sizes(out: &mut String, u: &UpstreamCatalog, largest: usize) -> std::fmt::Result {
    use catalog::listing::{size_of, tool_bytes, ListingSize};
    use catalog::runtime::ResponseValidation;
    use std::fmt::Write as _;
    let listed = |mode: ResponseValidation| size_of(&u.tools, mode.advertises_output_schemas());
    let line = |s: ListingSize| format!("{:>10} bytes {:>9} tokens", s.bytes, s.tokens);
    writeln!(out, "\ntools/list estimate (tokens = bytes / 4):")?;
    writeln!(
        out,
        "  responseValidation warn, off (no outputSchema): {}",
        line(listed(ResponseValidation::Warn))
    )?;
    writeln!(
        out,
        "  responseValidation fail (outputSchema listed):  {}",
        line(listed(ResponseValidation::Fail))
    )?;
    where_the_bytes_go(out, u)?;
    let mut tools: Vec<(u64, u64, &str)> = u
        .tools
        .iter()
        .map(|t| {
            let plain = tool_bytes(t, false);
            (plain, tool_bytes(t, true) - plain, t.name.as_str())
        })
        .collect();
    tools.sort_by_key(|&(bytes, _, name)| (std::cmp::Reverse(bytes), name));
    if !tools.is_empty() && largest > 0 {
        writeln!(
            out,
            "\nLargest tools (tools/list bytes under warn/off; +output: what fail adds):"
        )?;
        writeln!(
            out,
            "  {:>8} {:>7} {:>8}  name",
            "bytes", "tokens", "+output"
        )?;
        for (bytes, output, name) in tools.iter().take(largest) {
            let tokens = ListingSize::of_bytes(*bytes).tokens;
            writeln!(out, "  {bytes:>8} {tokens:>7} {output:>8}  {name}")?;
        }
    }
    Ok(())
}
