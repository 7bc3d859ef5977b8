"""Issue 36.7: the 2,000-host report in a real browser. The fleet_report action writes the report of 2,000 hosts
replayed from the real records of docs/evidence (tests/unit/fixtures/report/replayfleet.py: every verdict, racks and
zones); headless Chromium (Debian's chromium, installed by scripts/bootstrap.sh --test) opens the page and, once its
script ran, gives back the DOM: the dashboard, a cause's hosts, a group filter and a host's detail are drawn as the
JSON report says. Each view is a link the page itself makes (#cause=, #where=, #host=). Not a benchmark:
benchmarks/bench_report.py times the page."""
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from actionlab import make_action

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import LAYERS
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand

from replayfleet import spooled_hostvars  # (tests/unit/fixtures/report, on the path by tests/conftest.py)

pytestmark = pytest.mark.integration

HOSTS = 2000
PAGE = 200              # rows the page draws at first (report.js)


def chromium():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        why = "no chromium (scripts/bootstrap.sh --test installs Debian's package as root)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return found


class Dom(HTMLParser):
    """What the test reads of the DOM Chromium gives back: the body's attributes, the tiles, the headlines, the hosts
    table's rows (their data-state, data-group and cell texts), the count, and the detail section (hidden or not,
    its text, its table rows)."""

    def __init__(self, text):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.body, self.tiles, self.headlines, self.rows, self.count = {}, {}, [], [], ""
        self.detail_hidden, self.detail_text, self.detail_rows = None, "", []
        self._tile, self._tile_depth, self._li, self._row, self._cell, self._in = None, 0, None, None, None, set()
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if tag == "div" and self._tile:
            self._tile_depth += 1
        if tag == "div" and "tile" in (a.get("class") or "").split():
            self._tile, self._tile_depth = [a.get("data-state") or a.get("id"), ""], 1
        if tag == "ul" and a.get("class") == "headlines":
            self._in.add("headlines")
        if tag == "li" and "headlines" in self._in:
            self._li = ""
        if tag == "table" and a.get("id") == "hosts":
            self._in.add("hosts")
        if tag == "tbody" and "hosts" in self._in:
            self._in.add("tbody")
        if tag == "tr" and ("tbody" in self._in or "detail" in self._in):
            self._row = {"state": a.get("data-state"), "group": a.get("data-group"), "cells": [], "detail": "detail" in self._in}
        if tag == "td" and self._row is not None:
            self._cell = ""
        if tag == "span" and a.get("id") == "f-count":
            self._in.add("count")
        if tag == "section" and a.get("id") == "detail":
            self._in.add("detail")
            self.detail_hidden = "hidden" in a

    def handle_endtag(self, tag):
        if tag == "div" and self._tile:
            self._tile_depth -= 1
            if not self._tile_depth:
                self.tiles[self._tile[0]] = " ".join(self._tile[1].split())
                self._tile = None
        if tag == "ul":
            self._in.discard("headlines")
        if tag == "li" and self._li is not None:
            self.headlines.append(" ".join(self._li.split()))
            self._li = None
        if tag == "td" and self._cell is not None:
            self._row["cells"].append(" ".join(self._cell.split()))
            self._cell = None
        if tag == "tr" and self._row is not None:
            if self._row["cells"]:       # (a row of th is a table's head)
                (self.detail_rows if self._row["detail"] else self.rows).append(self._row)
            self._row = None
        if tag == "tbody":
            self._in.discard("tbody")
        if tag == "table":
            self._in.discard("hosts")
        if tag == "span":
            self._in.discard("count")
        if tag == "section":
            self._in.discard("detail")

    def handle_data(self, data):
        if self._tile:
            self._tile[1] += " " + data
        if self._li is not None:
            self._li += data
        if self._cell is not None:
            self._cell += data
        if "count" in self._in:
            self.count += data
        if "detail" in self._in:
            self.detail_text += " " + data


def page(html, fragment=""):
    """The DOM of the page at ``fragment`` once its script ran (Chromium's --dump-dom after a virtual time budget)."""
    out = subprocess.run([chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--no-first-run", "--virtual-time-budget=20000", "--dump-dom", "file://%s%s" % (html, fragment)],
                         capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    dom = Dom(out.stdout)
    assert dom.body.get("data-ready") == "1" and "data-error" not in dom.body, (dom.body, out.stderr[-2000:])
    return dom


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """(the JSON report with every host restored, the HTML file) of the 2,000 replayed hosts, written by the action."""
    chromium()
    tmp = tmp_path_factory.mktemp("browser")
    from ansible import constants as C  # pylint: disable=import-outside-toplevel
    old = C.DEFAULT_LOCAL_TMP
    try:
        hostvars = spooled_hostvars(HOSTS, str(tmp / "run-tmp"))
        action = make_action(A, "gpuprobe.layers.fleet_report", {
            "hosts": sorted(hostvars), "report_dir": str(tmp / "reports"), "group_by": ["rack", "zone"],
            "run": {"mode": "full", "cdi_source": "node"}})
        result = action.run(task_vars={"hostvars": hostvars})
    finally:
        C.DEFAULT_LOCAL_TMP = old
    with open(result["files"]["json"]) as f:
        report = expand(json.load(f))
    return report, result["files"]["html"]


def test_the_dashboard_is_drawn_with_the_hosts_failures_first(fleet):
    report, html = fleet
    dom = page(html)
    states = report["counts"]["by_state"]
    assert dict((s, int(dom.tiles[s].split()[0].replace(",", ""))) for s in states) == states
    assert sum(states.values()) == HOSTS
    stale = next(g for g in report["groups"] if g["cause"] == "cdi.host.library_version")
    assert "cdi.host.library_version: {0:,} hosts, 40 of them in rack_r03".format(stale["count"]) in dom.headlines
    # the hosts table: the first page of rows, failures first (the report's groups in order), every row a host
    assert len(dom.rows) == PAGE and dom.count.strip() == "2,000 hosts; the first 200 shown"
    order = [h for g in report["groups"] for h in g["hosts"]][:PAGE]
    assert [r["cells"][0] for r in dom.rows] == order
    assert dom.rows[0]["state"] != "COMPUTE_VERIFIED" and [r["state"] for r in dom.rows] == [report["hosts"][h]["state"] for h in order]
    assert dom.detail_hidden


def test_a_cause_s_hosts(fleet):
    report, html = fleet
    stale = next(g for g in report["groups"] if g["cause"] == "cdi.host.library_version")
    dom = page(html, "#cause=" + stale["id"])
    assert sorted(r["cells"][0] for r in dom.rows) == sorted(stale["hosts"])
    assert set(r["group"] for r in dom.rows) == {stale["id"]} and set(r["state"] for r in dom.rows) == {"FAILED_AT_CDI"}
    assert dom.count.strip() == "{0:,} of 2,000 hosts".format(stale["count"])


@pytest.mark.parametrize("where,dim,value", [("group:rack_r03", "group", "rack_r03"), ("zone:c", "zone", "c")])
def test_a_group_filter(fleet, where, dim, value):
    report, html = fleet
    want = sorted(h for h, e in report["hosts"].items()
                  if (value in e["where"]["groups"] if dim == "group" else e["where"]["vars"].get(dim) == value))
    assert want and len(want) == report["where"]["places"][dim][value]["hosts"]
    dom = page(html, "#where=" + where)
    shown = [r["cells"][0] for r in dom.rows]
    assert sorted(shown) == want[:PAGE] if len(want) <= PAGE else len(shown) == PAGE
    label = value if dim == "group" else "%s=%s" % (dim, value)
    assert all(label in r["cells"][-1].split(", ") for r in dom.rows)
    assert dom.count.strip().startswith("{0:,} of 2,000 hosts".format(len(want)))


def test_a_failed_host_s_detail(fleet):
    report, html = fleet
    stale = next(g for g in report["groups"] if g["cause"] == "cdi.host.library_version")
    name = stale["hosts"][-1]                  # not its cause's first host: its detail is a patch of that host's
    entry = report["hosts"][name]
    dom = page(html, "#host=" + name)
    assert dom.detail_hidden is False and name in dom.detail_text
    failed = [r["cells"] for r in dom.detail_rows if r["cells"][:2] == ["cdi.host.library_version", "FAIL"]]
    want = [c for c in entry["layers"]["cdi"]["checks"] if c["id"] == "cdi.host.library_version" and c["status"] == "FAIL"]
    assert [row[4] for row in failed] == [c["observed"] for c in want]
    # its own GPU, not the GPU of the host its detail was written against
    own = entry["layers"]["host"]["evidence"]["gpus"][0]["uuid"]
    other = report["hosts"][stale["hosts"][0]]["layers"]["host"]["evidence"]["gpus"][0]["uuid"]
    assert own in dom.detail_text and other not in dom.detail_text


def test_an_unreachable_and_a_verified_host_s_detail(fleet):
    report, html = fleet
    gone = next(e for e in report["hosts"].values() if e["state"] == "UNREACHABLE")
    dom = page(html, "#host=" + gone["name"])
    assert gone["unverifiable"] in " ".join(dom.detail_text.split())
    fine = next(e for e in report["hosts"].values() if e["state"] == "COMPUTE_VERIFIED")
    dom = page(html, "#host=" + fine["name"])
    text = " ".join(dom.detail_text.split())
    assert "every layer's record of this host is in the JSON report" in text
    assert [r["cells"][:2] for r in dom.detail_rows] == [[layer, fine["layers"][layer]["status"]] for layer in LAYERS]
