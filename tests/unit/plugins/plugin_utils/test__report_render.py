"""The fleet report's renderings of a large synthetic fleet (tests/unit/fixtures/host/fleetfixture.py: records built
with the result contract, verdicts from the one verdict function): every figure of the HTML dashboard, read back
from the page, equals what the JSON says, recounted here from its host entries (issue 22.5 and its "Show")."""
import json
from collections import Counter
from html.parser import HTMLParser

import pytest

from fleetfixture import synthetic_fleet, synthetic_host

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import health as HL
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import jsonfile as J
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import sentences as SN
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import states as ST
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as V

HOSTS = 1000


class Page(HTMLParser):
    """The parts of the page the dashboard's figures are in: tiles (state -> text), tables by id (rows of cell
    texts), the hosts table rows' data-state/data-group, the headline sentences, the group <details>."""

    def __init__(self):
        HTMLParser.__init__(self)
        self.tiles, self.tables, self.rows, self.headlines, self.groups = {}, {}, [], [], {}
        self._tile = self._table = self._cell = self._li = self._summary = None
        self._in_headlines = False
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and self._tile:
            self._depth += 1
        if tag == "div" and "tile" in (a.get("class") or "").split():
            self._tile = [a.get("data-state") or a.get("id"), ""]
            self._depth = 1
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table] = []
        if tag == "tr" and self._table:
            self.tables[self._table].append([])
            if self._table == "hosts" and a.get("data-state"):
                self.rows.append((a["data-state"], a.get("data-group")))
        if tag in ("td", "th") and self._table:
            self._cell = ""
        if tag == "ul" and a.get("class") == "headlines":
            self._in_headlines = True
        if tag == "li" and self._in_headlines:
            self._li = ""
        if tag == "details" and a.get("data-group"):
            self._summary = [a["data-group"], ""]

    def handle_endtag(self, tag):
        if tag == "div" and self._tile:
            self._depth -= 1
            if not self._depth:
                self.tiles[self._tile[0]] = " ".join(self._tile[1].split())
                self._tile = None
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append(" ".join(self._cell.split()))
            self._cell = None
        if tag == "table":
            self._table = None
        if tag == "ul":
            self._in_headlines = False
        if tag == "li" and self._li is not None:
            self.headlines.append(" ".join(self._li.split()))
            self._li = None
        if tag == "summary" and self._summary:
            self.groups[self._summary[0]] = " ".join(self._summary[1].split())
            self._summary = None

    def handle_data(self, data):
        if self._tile:
            self._tile[1] += " " + data
        if self._cell is not None:
            self._cell += data
        if self._li is not None:
            self._li += data
        if self._summary:
            self._summary[1] += data


@pytest.fixture(scope="module")
def fleet():
    report = F.build_report(synthetic_fleet(HOSTS), "2026-12-03T12:00:00Z", run={"mode": "full", "cdi_source": "node"})
    data = json.loads(J.render_json(report))
    page = Page()
    page.feed(V.render_html(report))
    return data, page, V.render_markdown(report)


def _n(text):
    return int(text.replace(",", ""))


def test_the_json_is_the_report(fleet):
    data, _page, _md = fleet
    assert len(data["hosts"]) == HOSTS and data["summary"]["hosts"] == HOSTS
    # every host is in exactly one group, and its group says its state and cause
    members = [h for g in data["groups"] for h in g["hosts"]]
    assert sorted(members) == sorted(data["hosts"])
    for g in data["groups"]:
        assert g["count"] == len(g["hosts"])
        for h in g["hosts"]:
            assert (data["hosts"][h]["state"], data["hosts"][h]["cause"], data["hosts"][h]["group"]) == (g["state"], g["cause"], g["id"])


def test_state_tiles_and_hosts_table_match_the_json(fleet):
    data, page, _md = fleet
    states = Counter(e["state"] for e in data["hosts"].values())
    assert set(states) == {"COMPUTE_VERIFIED", "FAILED_AT_CDI", "FAILED_AT_COMPUTE", "FAILED_AT_HOST", "UNREACHABLE",
                           "RUN_FAILED", "INCONCLUSIVE"}
    for state, n in states.items():
        assert _n(page.tiles[state].split()[0]) == n, (state, page.tiles[state])
        assert "(%.0f%%)" % (100.0 * n / HOSTS) in page.tiles[state]
    # the hosts table: one row per host, each with its state and group, filterable by both
    assert len(page.rows) == HOSTS
    assert Counter(s for s, _g in page.rows) == states
    assert Counter(g for _s, g in page.rows) == Counter(e["group"] for e in data["hosts"].values())
    # unreachable is its own state, never a failure, never drift
    unreachable = [e for e in data["hosts"].values() if not e["reachable"]]
    assert all(e["state"] == "UNREACHABLE" and not e["drift"] for e in unreachable)
    assert data["summary"]["unreachable"] == states["UNREACHABLE"] == len(unreachable)


def test_gpu_figures_match_the_json(fleet):
    data, page, _md = fleet
    gpus = data["summary"]["gpus"]
    verified, total = [_n(x) for x in page.tiles["gpu-tile"].split(" GPUs")[0].split(" / ")]
    assert (verified, total) == (gpus["verified"], gpus["total"])
    # recounted from the host entries: every GPU the host layer inventoried, verified where the node's proof holds
    assert total == sum(len(e["layers"]["host"]["evidence"].get("gpus") or []) for e in data["hosts"].values())
    assert verified == sum(1 for e in data["hosts"].values() if e["failing_layer"] in (None, "compute")
                           for g in e["gpus"] if g["expected"] and g["status"] == "PASS")
    assert page.headlines[1].startswith("{0:,} of {1:,} GPUs verified in a container; {2:,} failed".format(
        verified, total, gpus["failed"]))


def test_failures_by_signature_and_groups_match_the_json(fleet):
    data, page, _md = fleet
    by_sig = Counter(e["signature"] for e in data["hosts"].values() if e["signature"])
    rows = page.tables["by-signature"][1:]
    assert dict((r[0], _n(r[3])) for r in rows) == dict(by_sig)
    groups = page.tables["groups"][1:]
    want = [(g["state"], g["count"], g["cause"], g["points_to"] or "") for g in data["groups"]]
    assert [(r[0], _n(r[1]), r[2], r[3]) for r in groups] == want
    for g in data["groups"]:
        assert page.groups[g["id"]] == SN.plural(g["count"], "host")
    failing = Counter(e["failing_layer"] for e in data["hosts"].values() if e["failing_layer"])
    assert page.headlines[2] == "%d hosts failed: %s" % (sum(failing.values()), ", ".join(
        "%d at %s" % (failing[layer], layer) for layer in ("host", "cdi", "runtime", "compute") if failing[layer]))
    causes = Counter(e["cause"] for e in data["hosts"].values() if e["state"] == "UNREACHABLE")
    line = next(h for h in page.headlines if "could not be reached" in h)
    for cause, n in causes.items():
        assert "%s (%d)" % (cause, n) in line


@pytest.mark.parametrize("dim,read", [
    ("gpu_model", lambda e: e["layers"]["host"]["evidence"]["gpus"][0]["name"]),
    ("driver_branch", lambda e: e["layers"]["host"]["versions"]["driver"].split(".")[0]),
    ("runtime", lambda e: e["layers"]["runtime"]["versions"].get("runtime") or "unknown"),
])
def test_breakdown_tables_match_the_json(fleet, dim, read):
    data, page, _md = fleet
    table = page.tables["by-%s" % dim]
    head, rows = table[0], table[1:]
    want = Counter()
    for e in data["hosts"].values():
        value = read(e) if e["layers"]["host"]["status"] != "NOT_RUN" else "unknown"
        want[(value, "hosts")] += 1
        want[(value, ST.state_words(e["state"]))] += 1
    got = Counter()
    for row in rows:
        for col, cell in zip(head[1:], row[1:]):
            if cell:
                got[(row[0], col)] += _n(cell)
    assert got == want


def test_health_findings_match_the_json(fleet):
    data, page, md = fleet
    found = {}
    for e in data["hosts"].values():
        for c in e["layers"]["host"].get("checks") or []:
            if c["id"].startswith("host.health.") and c["status"] in ("WARN", "FAIL"):
                item = found.setdefault((c["id"], c["status"]), [set(), set()])
                item[0].add((e["name"], c["subject"]))
                item[1].add(e["name"])
    assert found, "the synthetic fleet has health findings"
    rows = page.tables["health"][1:]
    assert len(rows) == len(found)
    for (cid, status), (gpus, hosts) in found.items():
        words = HL.health_words(cid, status)
        line = "%s with %s on %s" % (SN.plural(len(gpus), "GPU"), words, SN.plural(len(hosts), "host"))
        assert [line, status, str(len(gpus)), str(len(hosts))] in [r[:4] for r in rows]
        assert line in page.headlines and line in md
    # e.g. "N GPUs with pending row remaps on M hosts"
    hosts = SN.plural(len(found[("host.health.row_remap", "WARN")][1]), "host")
    assert any(h.endswith("GPUs with pending row remaps or memory banks without a spare row on %s" % hosts) for h in page.headlines)


def test_markdown_says_the_same_sentences(fleet):
    _data, page, md = fleet
    for line in page.headlines:
        assert "- %s" % V._md(line) in md


def test_a_fleet_nobody_could_reach_says_so_in_words():
    """issue 22.5: no "0 of 0 GPUs verified; 0 failed on 0 host(s)" for a fleet whose GPUs nobody saw."""
    hosts = [synthetic_host(i, 500) for i in range(500) if synthetic_host(i, 500)["unreachable"]]
    report = F.build_report(hosts, "2026-12-03T12:00:00Z", run={"mode": "full"})
    page = Page()
    page.feed(V.render_html(report))
    n = len(hosts)
    assert page.tiles["UNREACHABLE"].startswith("%d unreachable (100%%)" % n) and page.tiles["gpu-tile"] == "no GPU seen on any host"
    assert page.headlines[:2] == ["%d hosts: %d unreachable" % (n, n), "No GPU was seen: the GPUs of %d hosts are unknown "
                                  "(%d not reached)" % (n, n)]
    text = " ".join(page.headlines) + " ".join(page.tiles.values())
    assert " 0 " not in " %s " % text and "(s)" not in text and "drift" not in text


def test_one_host_report_reads_in_words():
    report = F.build_report([synthetic_host(30, 1)], "2026-12-03T12:00:00Z", run={"mode": "full", "cdi_source": "node"})
    page = Page()
    page.feed(V.render_html(report))
    assert page.headlines[:2] == ["1 host: 1 verified", "8 of 8 GPUs verified in a container"]
    assert "0 of 0" not in "".join(page.headlines) and "(s)" not in "".join(page.headlines)
