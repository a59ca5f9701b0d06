#!/usr/bin/env python3
"""Renders the Helm chart with Helm's own Go SDK (helm-python-sdk, no helm
binary needed).

    render_chart.py CHART RELEASE NAMESPACE [VALUES_JSON]
        prints the manifests as one multi-document YAML stream;
    render_chart.py --write-base CHART DIR
        regenerates the kustomize base's operator.yaml and gateway.yaml in
        DIR (deploy/default): the default values, release `toolgate` in
        toolgate-system, without Helm's own labels; and, beside it,
        DIR/../uninstall/uninstall.yaml from the chart's pre-delete hook
        (the one-off uninstall Job for kustomize installs).

Lints the chart first and validates the values against values.schema.json
(helm does both on install); exits non-zero with the message on any error.
Used by the toolgate-tests `deploy` tests (TOOLGATE_DEPLOY_PYTHON).
"""
import json
import os
import re
import sys

import helm_python as helm

BASE_FILES = {
    "operator.yaml": [
        "operator-rbac.yaml",
        "operator-deployment.yaml",
        "operator-service.yaml",
    ],
    "gateway.yaml": [
        "gateway-rbac.yaml",
        "gateway-config.yaml",
        "gateway-deployment.yaml",
        "gateway-service.yaml",
        "gateway-metrics-service.yaml",
        "gateway-pdb.yaml",
    ],
}
UNINSTALL_FILES = {"uninstall.yaml": ["operator-uninstall-hook.yaml"]}
UNINSTALL_HEADER = (
    "# Generated from charts/toolgate's pre-delete hook (release `toolgate`,\n"
    "# namespace toolgate-system, default values) without Helm's labels; the\n"
    "# helm.sh/hook annotations mean nothing to kubectl. toolgate-tests checks\n"
    "# it against the chart. Regenerate when the chart changes:\n"
    "#   tests/deploy/render_chart.py --write-base charts/toolgate deploy/default\n"
)
BASE_HEADER = (
    "# Generated from charts/toolgate (release `toolgate`, namespace toolgate-system,\n"
    "# default values) without Helm's labels. toolgate-tests checks it against\n"
    "# the chart. Regenerate when the chart changes:\n"
    "#   tests/deploy/render_chart.py --write-base charts/toolgate deploy/default\n"
)
HELM_LABELS = re.compile(
    r"^\s*(helm\.sh/chart: .*|app\.kubernetes\.io/managed-by: Helm)\n", re.M
)


def render(chart_dir, release, namespace, values):
    """{template file name: rendered text}, or exits with helm's message."""
    lint = helm.lint(chart_dir)
    if lint["errors"]:
        sys.exit(f"helm lint {chart_dir}: {lint['errors']}")
    try:
        with helm.Chart.load(chart_dir) as chart:
            chart.validate_schema(values)
            rendered = chart.render(values, name=release, namespace=namespace)
    except helm.HelmError as e:
        sys.exit(f"helm: {e}")
    return {
        os.path.basename(name): text
        for name, text in rendered.items()
        if not name.endswith("NOTES.txt") and text.strip()
    }


def write_base(chart_dir, out_dir):
    rendered = render(chart_dir, "toolgate", "toolgate-system", {})
    uninstall_dir = os.path.join(out_dir, "..", "uninstall")
    for files, header, directory in [
        (BASE_FILES, BASE_HEADER, out_dir),
        (UNINSTALL_FILES, UNINSTALL_HEADER, uninstall_dir),
    ]:
        for out, sources in files.items():
            docs = []
            for src in sources:
                text = HELM_LABELS.sub("", rendered[src]).strip("\n")
                docs.append(text.removeprefix("---\n") + "\n")
            with open(os.path.join(directory, out), "w") as f:
                f.write(header + "---\n" + "---\n".join(docs))


def main() -> int:
    if sys.argv[1] == "--write-base":
        write_base(sys.argv[2], sys.argv[3])
        return 0
    chart_dir, release, namespace = sys.argv[1:4]
    values = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    rendered = render(chart_dir, release, namespace, values)
    out = [f"# Source: {n}\n{rendered[n].strip()}\n" for n in sorted(rendered)]
    sys.stdout.write("---\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
