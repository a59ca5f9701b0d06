// Parses PromQL expressions with Prometheus's own grammar
// (@prometheus-io/lezer-promql, the one its web UI uses; pinned in
// package.json).
//
//   node promql.mjs QUERIES.json
//
// QUERIES.json: a JSON array of {origin, expr} (the toolgate-tests deploy
// tests write the chart's alert expressions and dashboard queries there).
// Grafana's variables ($__rate_interval, $namespace, ${datasource}) are
// replaced by a duration or a name first. Prints one line per expression;
// exits 1 when any does not parse, naming it and the position.
import { readFileSync } from "node:fs";
import { parser } from "@prometheus-io/lezer-promql";

const queries = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const { origin, expr } of queries) {
  const promql = expr
    .replace(/\$__(rate_)?interval|\$__range/g, "5m")
    .replace(/\$\{?\w+\}?/g, "x");
  const errors = [];
  parser.parse(promql).iterate({
    enter: (node) => {
      if (node.type.isError) errors.push(node.from);
    },
  });
  if (!promql.trim()) errors.push(0);
  if (errors.length) {
    failed++;
    const at = errors[0];
    console.log(`${origin}: INVALID at ${at}: ${promql.slice(0, at)} >>> ${promql.slice(at)}`);
  } else {
    console.log(`${origin}: valid`);
  }
}
process.exit(failed ? 1 : 0);
