//! `tools/list` bytes of every corpus document, with and without output
//! schemas, as the compiler's listed-schema settings change them: every
//! schema kept as converted (`before`), the defaults, and the defaults
//! with `refs: defs`. Prints a Markdown table (README, docs/measurements.md)
//! and then, per document, where the default listing's bytes go.
//!
//! `TOOLGATE_SPECS=/path/to/specs cargo bench -p catalog --bench listing_sizes`
//! (sizes, not times: a debug build prints the same table).

use catalog::listing::size_of;
use catalog::size::breakdown;
use catalog::{compile_upstream, CompileOptions, SchemaOptions, SchemaRefs, UpstreamSource};

fn main() {
    let before = SchemaOptions {
        description_budget: 0,
        nested_examples: true,
        title_copies: true,
        refs: SchemaRefs::Inline,
        ..Default::default()
    };
    let defs = SchemaOptions {
        refs: SchemaRefs::Defs,
        ..Default::default()
    };
    let settings = [before, SchemaOptions::default(), defs];
    println!(
        "| document | tools | tools changed by the defaults | before | default | defs \
         | before, with outputSchema | default, with outputSchema | defs, with outputSchema |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut total = [[0u64; 3]; 2];
    let mut breakdowns = Vec::new();
    for path in toolgate_corpus::documents() {
        let spec = std::fs::read(&path).expect("a corpus document");
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let mut row = [[0u64; 3]; 2];
        let mut tools = 0;
        // Listed schemas of each tool as first compiled, to count the
        // tools the defaults change.
        let mut first = Vec::new();
        let mut changed = 0;
        for (i, schema) in settings.iter().enumerate() {
            let options = CompileOptions {
                schema: schema.clone(),
                ..Default::default()
            };
            let u = compile_upstream(&UpstreamSource {
                prefix: toolgate_corpus::prefix_of(&path),
                document: &name,
                spec: &spec,
                overlays: &[],
                options: &options,
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            tools = u.tools.len();
            let listed: Vec<_> = u
                .tools
                .iter()
                .map(|t| (t.input_schema.clone(), t.output_schema.clone()))
                .collect();
            match i {
                0 => first = listed,
                1 => changed = first.iter().zip(&listed).filter(|(a, b)| a != b).count(),
                _ => {}
            }
            for (m, output) in [false, true].into_iter().enumerate() {
                row[m][i] = size_of(&u.tools, output).bytes;
                total[m][i] += row[m][i];
            }
            if i == 0 {
                breakdowns.push((name.clone(), breakdown(&u.tools, true)));
            }
        }
        let r = |m: usize, i: usize| {
            if i == 0 {
                thousands(row[m][0])
            } else {
                format!(
                    "{} ({:.2}×)",
                    thousands(row[m][i]),
                    row[m][i] as f64 / row[m][0].max(1) as f64
                )
            }
        };
        println!(
            "| {name} | {tools} | {changed} | {} | {} | {} | {} | {} | {} |",
            r(0, 0),
            r(0, 1),
            r(0, 2),
            r(1, 0),
            r(1, 1),
            r(1, 2)
        );
    }
    println!(
        "| **all** | | | {} | {} | {} | {} | {} | {} |",
        thousands(total[0][0]),
        thousands(total[0][1]),
        thousands(total[0][2]),
        thousands(total[1][0]),
        thousands(total[1][1]),
        thousands(total[1][2])
    );
    println!(
        "\nWhere the bytes go before the cuts, with output schemas \
         (`repeated` overlaps the other columns):\n"
    );
    println!(
        "| document | part | bytes | descriptions, top-level | descriptions, nested \
         | examples, top-level | examples, nested | titles (of which name copies) \
         | defaults | the rest | repeated sub-schemas |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, b) in breakdowns {
        println!(
            "| {name} | tool fields | {} | | | | | | | | |",
            thousands(b.tool_fields)
        );
        for (part, s) in [("inputSchema", &b.input), ("outputSchema", &b.output)] {
            println!(
                "| | {part} | {} | {} | {} | {} | {} | {} ({}) | {} | {} | {} |",
                thousands(s.total),
                thousands(s.top_descriptions),
                thousands(s.nested_descriptions),
                thousands(s.top_examples),
                thousands(s.nested_examples),
                thousands(s.titles + s.title_copies),
                thousands(s.title_copies),
                thousands(s.defaults),
                thousands(s.rest()),
                thousands(s.repeated),
            );
        }
    }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
