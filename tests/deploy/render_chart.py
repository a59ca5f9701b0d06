#!/usr/bin/env python3
"""Renders the Helm chart with Helm's own Go SDK (helm-python-sdk, no helm
binary needed) and prints the manifests as one multi-document YAML stream.

    render_chart.py CHART RELEASE NAMESPACE [VALUES_JSON]

Lints the chart first and validates the values against values.schema.json
(helm does both on install); exits non-zero with the message on any error.
Used by the toolgate-tests `deploy` tests (TOOLGATE_DEPLOY_PYTHON).
"""
import json
import sys

import helm_python as helm


def main() -> int:
    chart_dir, release, namespace = sys.argv[1:4]
    values = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    lint = helm.lint(chart_dir)
    if lint["errors"]:
        print(f"helm lint {chart_dir}: {lint['errors']}", file=sys.stderr)
        return 1
    try:
        with helm.Chart.load(chart_dir) as chart:
            chart.validate_schema(values)
            rendered = chart.render(values, name=release, namespace=namespace)
    except helm.HelmError as e:
        print(f"helm: {e}", file=sys.stderr)
        return 1
    out = []
    for name in sorted(rendered):
        if name.endswith("NOTES.txt") or not rendered[name].strip():
            continue
        out.append(f"# Source: {name}\n{rendered[name].strip()}\n")
    sys.stdout.write("---\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
