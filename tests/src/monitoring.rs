//! What the chart's monitoring objects query, and what a `/metrics` scrape
//! offers, for the tests that every metric the Grafana dashboard and the
//! PrometheusRule read exists in the binaries' scrapes (gateway e2e
//! `dashboard`) and the chart's rendering tests (`--test apiserver`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use regex::Regex;
use serde_json::Value;

/// The repository's root (the chart and tests/deploy live there).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The chart rendered by Helm's SDK (tests/deploy/render_chart.py, run by
/// `python`: [`crate::tools::deploy_python`]) with `values`, as release
/// `toolgate` in `namespace`: its objects, hooks included.
pub fn render_chart(python: &Path, values: &Value, namespace: &str) -> Result<Vec<Value>, String> {
    let out = Command::new(python)
        .arg(repo().join("tests/deploy/render_chart.py"))
        .arg(repo().join("charts/toolgate"))
        .args(["toolgate", namespace])
        .arg(values.to_string())
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "render_chart.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut objs = Vec::new();
    for doc in yaml_serde::Deserializer::from_str(&text) {
        let v: Value = serde::Deserialize::deserialize(doc).map_err(|e| e.to_string())?;
        if !v.is_null() {
            objs.push(v);
        }
    }
    Ok(objs)
}

/// One PromQL expression of the monitoring objects, and where it is.
#[derive(Debug, Clone)]
pub struct Query {
    /// `PrometheusRule toolgate: alert ToolgateNoLeader`,
    /// `dashboard toolgate: panel "Leader" target A`, ...
    pub origin: String,
    pub expr: String,
}

/// Every PromQL expression of `objs`: the PrometheusRules' rule `expr`s,
/// and in each ConfigMap holding a Grafana dashboard (a `*.json` key with
/// `panels`), the panels' target `expr`s and the template variables'
/// queries. Errors on a dashboard that is not JSON.
pub fn queries(objs: &[Value]) -> Result<Vec<Query>, String> {
    let mut out = Vec::new();
    for o in objs {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        if o["kind"] == "PrometheusRule" {
            for g in o["spec"]["groups"].as_array().into_iter().flatten() {
                for r in g["rules"].as_array().into_iter().flatten() {
                    let what = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("?");
                    out.push(Query {
                        origin: format!("PrometheusRule {name}: rule {what}"),
                        expr: r["expr"].as_str().unwrap_or_default().to_string(),
                    });
                }
            }
        }
        if o["kind"] == "ConfigMap" {
            for (key, text) in o["data"].as_object().into_iter().flatten() {
                if !key.ends_with(".json") {
                    continue;
                }
                let dashboard: Value = serde_json::from_str(text.as_str().unwrap_or_default())
                    .map_err(|e| format!("ConfigMap {name} key {key}: not JSON: {e}"))?;
                if dashboard.get("panels").is_some() {
                    out.extend(dashboard_queries(&dashboard, &format!("dashboard {name}")));
                }
            }
        }
    }
    Ok(out)
}

/// The queries of one Grafana dashboard: panels (rows' nested panels too)
/// and template variables.
pub fn dashboard_queries(dashboard: &Value, origin: &str) -> Vec<Query> {
    let mut out = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    while let Some(p) = panels.pop() {
        panels.extend(p["panels"].as_array().into_iter().flatten());
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(Query {
                origin: format!(
                    "{origin}: panel {} target {}",
                    p["title"],
                    t["refId"].as_str().unwrap_or("?")
                ),
                expr: t["expr"].as_str().unwrap_or_default().to_string(),
            });
        }
    }
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["type"] == "query")
    {
        let q = &v["query"];
        let expr = q["query"].as_str().or(q.as_str()).unwrap_or_default();
        out.push(Query {
            origin: format!("{origin}: variable {}", v["name"]),
            expr: expr.to_string(),
        });
    }
    out
}

/// The toolgate and MCP metric names `expr` reads: every identifier
/// `(mcp|toolgate)_[a-z0-9_]+` not part of a longer one, as written (a
/// histogram's `_bucket`, `_sum`, `_count` included; [`Exposition::has`]
/// maps them), except label names (`mcp_method_name`): those of grouping
/// clauses (`by (...)`, `on (...)`, ...) and of matchers (`name="..."`).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let grouping = Regex::new(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
        .expect("a valid regex");
    let expr = grouping.replace_all(expr, "");
    let name = Regex::new(r"(mcp|toolgate)_[a-z0-9_]+").expect("a valid regex");
    name.find_iter(&expr)
        .filter(|m| {
            let before = expr[..m.start()].chars().next_back();
            let after = expr[m.end()..].trim_start();
            let matcher = ["=~", "!=", "!~"].iter().any(|op| after.starts_with(op))
                || (after.starts_with('=') && !after.starts_with("=="));
            !matcher && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        })
        .map(|m| m.as_str().to_string())
        .collect()
}

/// The metric names one or more Prometheus text scrapes offer, as PromQL
/// names them.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    /// Series names: every sample's, and each family a `# TYPE` line
    /// declares (a labelled metric that has no sample yet still declares
    /// its family): a counter `x` as `x_total`.
    pub names: BTreeSet<String>,
    /// Histogram families, by base name.
    pub histograms: BTreeSet<String>,
}

impl Exposition {
    /// Adds what one scrape offers.
    pub fn add(&mut self, scrape: &crate::prometheus::Scrape) {
        for s in &scrape.samples {
            if let crate::prometheus::Value::Histogram(_) = s.value {
                self.histograms.insert(s.metric.clone());
            }
            self.names.insert(s.metric.clone());
        }
        for line in scrape.text.lines() {
            let mut words = line.split_whitespace();
            if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
                (words.next(), words.next(), words.next(), words.next())
            {
                match kind {
                    "histogram" => {
                        self.histograms.insert(name.to_string());
                    }
                    "counter" if !name.ends_with("_total") => {
                        self.names.insert(format!("{name}_total"));
                    }
                    _ => {
                        self.names.insert(name.to_string());
                    }
                }
            }
        }
    }

    /// Whether a query may read `name`: a series name offered, or a
    /// histogram's (`x`, `x_bucket`, `x_sum`, `x_count`).
    pub fn has(&self, name: &str) -> bool {
        self.names.contains(name)
            || self.histograms.contains(name)
            || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|base| self.histograms.contains(base))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_are_the_toolgate_and_mcp_identifiers() {
        let expr = r#"histogram_quantile(0.95, sum by (mcp_method_name, le) (rate(mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",mcp_x!="",job="toolgate-gateway-metrics"}[5m])))
            / on (x_toolgate_y) group_left (mcp_session) toolgate_catalog_tools or x_toolgate_z == 1
            or label_values({__name__=~"toolgate_operator_leader|mcp_server_sessions_active"}, namespace)
            or toolgate_operator_prefix_conflicts==0"#;
        assert_eq!(
            metric_names(expr).into_iter().collect::<Vec<_>>(),
            [
                "mcp_server_operation_duration_seconds_bucket",
                "mcp_server_sessions_active",
                "toolgate_catalog_tools",
                "toolgate_operator_leader",
                "toolgate_operator_prefix_conflicts",
            ]
        );
    }

    #[test]
    fn an_exposition_offers_samples_declared_families_and_histogram_series() {
        let mut e = Exposition::default();
        e.add(&crate::prometheus::parse(
            "# HELP a_requests Requests.\n# TYPE a_requests counter\n\
             # HELP a_seconds Latency.\n# TYPE a_seconds histogram\n\
             a_seconds_bucket{le=\"1\"} 1\na_seconds_bucket{le=\"+Inf\"} 1\n\
             a_seconds_sum 0.5\na_seconds_count 1\n\
             # TYPE a_up gauge\na_up 1\n# EOF\n",
        ));
        for name in [
            "a_requests_total",
            "a_seconds_bucket",
            "a_seconds_count",
            "a_seconds_sum",
            "a_up",
        ] {
            assert!(e.has(name), "{name}: {e:?}");
        }
        assert!(!e.has("a_requests_count"));
        assert!(!e.has("a_down"));
    }
}
