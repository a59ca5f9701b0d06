"""Checks the external links of the built user guide, as warnings only.

    python docs/check_links.py SITE_DIR

Internal links and anchors are MkDocs' job (strict mode fails on them);
this asks every distinct http(s) link of a page's content (`<a href>`) with
a HEAD request (GET when the server refuses HEAD) and prints a warning per
link that does not answer below 400. It never fails: a site that is down
today is no reason to stop a release, and CI has no network — when no link
could be reached at all it says so once instead of listing every link.
"""

import concurrent.futures
import html.parser
import pathlib
import sys

import requests

TIMEOUT_SECONDS = 5
WORKERS = 16


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = set()

    def handle_starttag(self, tag, attrs):
        if tag != "a":
            return
        href = dict(attrs).get("href") or ""
        if href.startswith(("http://", "https://")):
            self.found.add(href.split("#", 1)[0])


def check(url):
    """None when the link answers, else why not; and whether it was the
    network (no answer at all) rather than the site."""
    headers = {"User-Agent": "toolgate-docs-link-check"}
    try:
        r = requests.head(url, timeout=TIMEOUT_SECONDS, allow_redirects=True, headers=headers)
        if r.status_code in (403, 405, 501):
            r = requests.get(url, timeout=TIMEOUT_SECONDS, allow_redirects=True, headers=headers, stream=True)
            r.close()
        if r.status_code >= 400:
            return f"HTTP {r.status_code}", False
        return None, False
    except (requests.ConnectionError, requests.Timeout) as e:
        return type(e).__name__, True
    except requests.RequestException as e:
        return str(e), False


def main():
    site = pathlib.Path(sys.argv[1])
    pages = {}
    for page in sorted(site.rglob("*.html")):
        parser = Links()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        for url in parser.found:
            pages.setdefault(url, str(page.relative_to(site)))
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        results = dict(zip(pages, pool.map(check, pages)))
    failed = {u: r for u, r in results.items() if r[0] is not None}
    if pages and len(failed) == len(pages) and all(net for _, net in failed.values()):
        print(f"docs: warning: no network; {len(pages)} external links not checked")
        return
    for url, (why, _) in sorted(failed.items()):
        print(f"docs: warning: {url} ({pages[url]}): {why}")
    print(f"docs: {len(pages)} external links, {len(failed)} unreachable (warnings only)")


if __name__ == "__main__":
    main()
