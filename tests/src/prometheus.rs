//! Reading `/metrics` as Prometheus does, for tests of both binaries: an
//! HTTP GET, then `prometheus-parse` on the body.
//!
//! Both binaries encode with `prometheus-client`, which writes the
//! OpenMetrics text format. `prometheus-parse` reads the Prometheus text
//! format, which OpenMetrics extends; the one difference that matters here
//! is that an OpenMetrics counter family `foo` has its samples named
//! `foo_total`, so its `# TYPE` line is renamed before parsing (else its
//! samples parse untyped). `# UNIT` and `# EOF` lines are comments to it.

use std::collections::BTreeSet;

pub use prometheus_parse::{Sample, Value};

/// One parsed scrape.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// The response's `Content-Type` (empty when parsed from text).
    pub content_type: String,
    pub samples: Vec<Sample>,
    /// `# HELP` texts by the name they give (an OpenMetrics counter's
    /// without `_total`).
    pub docs: std::collections::HashMap<String, String>,
    /// The body as served, for failure messages.
    pub text: String,
}

/// GETs `url` (a `/metrics` endpoint) and parses the body; panics when
/// the endpoint does not answer 200.
pub async fn scrape(url: &str) -> Scrape {
    let resp = reqwest::get(url)
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let text = resp
        .text()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: reading the body: {e}"));
    assert!(status.is_success(), "GET {url}: {status}: {text}");
    Scrape {
        content_type,
        ..parse(&text)
    }
}

/// Parses an exposition in the Prometheus or OpenMetrics text format.
pub fn parse(text: &str) -> Scrape {
    let lines = text.lines().map(|line| Ok(openmetrics_counter_type(line)));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("reading from a string");
    Scrape {
        content_type: String::new(),
        samples: parsed.samples,
        docs: parsed.docs,
        text: text.to_string(),
    }
}

/// `# TYPE foo counter` → `# TYPE foo_total counter`, unless it already
/// names the samples (Prometheus text format).
fn openmetrics_counter_type(line: &str) -> String {
    let Some(rest) = line.strip_prefix("# TYPE ") else {
        return line.to_string();
    };
    match rest.split_once(' ') {
        Some((name, "counter")) if !name.ends_with("_total") => {
            format!("# TYPE {name}_total counter")
        }
        _ => line.to_string(),
    }
}

impl Scrape {
    /// Samples of `name` whose labels include `labels`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
    }

    /// The sum of the counter, gauge or untyped samples of `name` whose
    /// labels include `labels`; `None` when there is none.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.matching(name, labels)
            .filter_map(|s| match s.value {
                Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(v),
                Value::Histogram(_) | Value::Summary(_) => None,
            })
            .reduce(|a, b| a + b)
    }

    /// [`Scrape::value`], or a panic showing the scrape.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels)
            .unwrap_or_else(|| panic!("no sample {name} {labels:?} in:\n{}", self.text))
    }

    /// Observations of histogram `name` (its `_count`) with `labels`.
    pub fn count(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(&format!("{name}_count"), labels)
    }

    /// Every metric name sampled: histograms by their family name (as a
    /// query names them in `histogram_quantile`), besides their `_count`
    /// and `_sum` samples.
    pub fn names(&self) -> BTreeSet<String> {
        self.samples.iter().map(|s| s.metric.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_and_prometheus_counters_both_parse_as_counters() {
        let openmetrics = "# HELP c A counter.\n# TYPE c counter\nc_total{k=\"v\"} 3\n# EOF\n";
        let prometheus = "# HELP c_total A counter.\n# TYPE c_total counter\nc_total{k=\"v\"} 3\n";
        for text in [openmetrics, prometheus] {
            let m = parse(text);
            let s = m.matching("c_total", &[("k", "v")]).next().expect("sample");
            assert_eq!(s.value, Value::Counter(3.0), "{text}");
        }
    }

    #[test]
    fn histograms_are_read_by_count_and_family_name() {
        let text = "# TYPE h histogram\n# UNIT h seconds\nh_sum{k=\"a\"} 1.5\nh_count{k=\"a\"} 2\nh_bucket{le=\"1\",k=\"a\"} 1\nh_bucket{le=\"+Inf\",k=\"a\"} 2\n# EOF\n";
        let m = parse(text);
        assert_eq!(m.count("h", &[("k", "a")]), 2.0);
        assert!(m.names().contains("h"), "{:?}", m.names());
    }
}
