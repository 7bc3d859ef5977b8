"""Screenshots of the fleet report's HTML in headless Chromium: a documentation tool, not a test (CI does not need
Chromium). Renders two reports with the collection's own renderer and photographs the top of each page (the
dashboard a person reads first) and the hosts table:

  * 1 host: the real H200 node of docs/evidence/h200-verify-gpu (its layer records, rebuilt into a report by
    build_report: verdict, GPU and health rows as the code computes them now);
  * 2,000 hosts: the synthetic fleet of tests/unit/fixtures/host/fleetfixture.py.

    source scripts/dev-env.sh
    python scripts/report-screenshots.py [--out docs/screenshots] [--hosts 2000] [--chromium PATH] [--keep-html DIR]

Needs Chromium (Debian: apt-get install chromium). Writes report-1-host.png, report-2000-hosts.png and
report-2000-hosts-table.png (the hosts table, filtered to unreachable nodes) into --out.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "host"))
from fleetfixture import synthetic_fleet  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as _report_render  # noqa: E402  pylint: disable=wrong-import-position

WIDTH = 1360


def real_one_host_report():
    """The report of the real H200 node, rebuilt from the layer records the committed run left."""
    path = sorted(glob.glob(os.path.join(ROOT, "docs", "evidence", "h200-verify-gpu", "gpuprobe-report-*.json")))[-1]
    with open(path) as f:
        old = json.load(f)
    hosts = [{"name": name, "records": entry["layers"], "pins": entry.get("pins") or {},
              "unreachable": None if entry.get("reachable", True) else entry.get("unverifiable"), "error": entry.get("error")}
             for name, entry in old["hosts"].items()]
    return F.build_report(hosts, old["generated_at"], run=old.get("run")), os.path.relpath(path, ROOT)


def chromium_binary(given):
    for name in [given] if given else ["chromium", "chromium-browser", "google-chrome"]:
        found = shutil.which(name) if name else None
        if found:
            return found
    sys.exit("no Chromium found: apt-get install chromium, or pass --chromium PATH")


def shoot(chromium, html_path, png_path, height, fragment=""):
    url = "file://%s%s" % (html_path, fragment)
    subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--force-device-scale-factor=1", "--window-size=%d,%d" % (WIDTH, height),
                    "--virtual-time-budget=5000", "--screenshot=%s" % png_path, url],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    print("wrote %s (%s)" % (os.path.relpath(png_path, ROOT), url.split("/")[-1]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "screenshots"))
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--chromium")
    parser.add_argument("--keep-html", help="also keep the rendered pages in this directory")
    args = parser.parse_args()
    chromium = chromium_binary(args.chromium)
    os.makedirs(args.out, exist_ok=True)
    one, source = real_one_host_report()
    many = F.build_report(synthetic_fleet(args.hosts), "2026-12-03T12:00:00Z", run={"mode": "full", "cdi_source": "node"})
    with tempfile.TemporaryDirectory() as tmp:
        pages = {}
        for name, report in (("report-1-host", one), ("report-%d-hosts" % args.hosts, many)):
            pages[name] = os.path.join(tmp, name + ".html")
            with open(pages[name], "w") as f:
                f.write(_report_render.render_html(report))
            if args.keep_html:
                os.makedirs(args.keep_html, exist_ok=True)
                shutil.copy(pages[name], args.keep_html)
        print("1-host report from %s" % source)
        shoot(chromium, pages["report-1-host"], os.path.join(args.out, "report-1-host.png"), 1700)
        big = "report-%d-hosts" % args.hosts
        shoot(chromium, pages[big], os.path.join(args.out, big + ".png"), 1500)
        # the hosts table alone, filtered to the unreachable nodes (what the link #view=hosts&state=... shows)
        shoot(chromium, pages[big], os.path.join(args.out, big + "-table.png"), 900, "#view=hosts&state=UNREACHABLE")


if __name__ == "__main__":
    main()
