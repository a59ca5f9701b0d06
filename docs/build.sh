#!/usr/bin/env bash
# Builds the user guide (docs/, mkdocs.yml) with MkDocs and the Material
# theme in strict mode: a broken link or anchor between pages, or a page
# missing from the nav, fails the build. External links are then checked
# as warnings only (docs/check_links.py; DOCS_LINKS=off skips it).
#
#   docs/build.sh            # the site in <cargo target dir>/site
#   docs/build.sh serve      # mkdocs serve, for writing (http://127.0.0.1:8000)
#
# Env: DOCS_VENV (the venv; default <cargo target dir>/docs-venv, with
# docs/requirements.txt installed once per version of that file),
# SITE_DIR (the built site; default <cargo target dir>/site; never inside
# docs/, and not committed).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${DOCS_VENV:-}" ] || [ -z "${SITE_DIR:-}" ]; then
  target_dir=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  DOCS_VENV="${DOCS_VENV:-$target_dir/docs-venv}"
  SITE_DIR="${SITE_DIR:-$target_dir/site}"
fi
# The stamp names the requirements' content: a changed pin reinstalls.
stamp="$DOCS_VENV/.toolgate-docs-$(sha256sum docs/requirements.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  python3 -m venv "$DOCS_VENV"
  "$DOCS_VENV/bin/pip" install -q --disable-pip-version-check -r docs/requirements.txt
  rm -f "$DOCS_VENV"/.toolgate-docs-*
  touch "$stamp"
fi
if [ "${1:-}" = serve ]; then
  exec "$DOCS_VENV/bin/mkdocs" serve --strict
fi
"$DOCS_VENV/bin/mkdocs" build --strict --clean --site-dir "$SITE_DIR"
echo "docs: site built in $SITE_DIR"
if [ "${DOCS_LINKS:-on}" != off ]; then
  "$DOCS_VENV/bin/python" docs/check_links.py "$SITE_DIR"
fi
