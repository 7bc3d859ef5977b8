"""Issue 43 item 8, a fleet view for action: each cause says what to do, once (the hint of the checks it failed on, not
repeated per host; where its hosts were told different things, each hint with its hosts, bounded); the drift says
where its hosts are with the causes' one where-logic; the where tables are not cut off (the page shows every place,
the Markdown every place of the 2,000 replayed hosts and says where the rest is when it must keep to 65,536
characters)."""
import re

import pytest
from markupsafe import escape

from replayfleet import replay_fleet
from test__report_render import Page  # the page's reading of the report's own tests (same directory)

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, LayerBuilder, not_run
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.escape import display_text
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as V
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import todo as T
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import where as W


def tables(html):
    """The page's tables by id: rows of cell texts (test__report_render's reading of the page)."""
    page = Page()
    page.feed(html)
    return page.tables


def _column(table, name):
    """The cells of one column of a page table, by its heading, keyed by the row's cause cell."""
    head = table[0]
    return dict((row[head.index("cause")], row[head.index(name)]) for row in table[1:])


@pytest.fixture(scope="module")
def replayed():
    report = F.build_report(replay_fleet(2000), "2026-12-04T03:00:00Z", run={"mode": "full", "cdi_source": "node"})
    return report, V.render_markdown(report), V.render_html(report)


def test_each_cause_that_failed_says_what_to_do_once(replayed):
    report, md, html = replayed
    failed = [g for g in report["groups"] if g["state"].startswith("FAILED_AT_")]
    assert len(failed) == 10
    for g in report["groups"]:
        if g not in failed:  # nobody could look, or nothing failed: no check to take a hint from, none made up
            assert g["todo"] is None and T.todo_text(g) == ""
    stale = next(g for g in failed if g["cause"] == "cdi.host.library_version")
    assert stale["todo"] == {"hints": [{"hint": "stale spec: it names driver 470.256.02 but 580.159.04 is running; regenerate the spec",
                                        "hosts": stale["count"]}], "other": 0, "without": 0}
    jit = next(g for g in failed if g["cause"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND")
    # the check the host failed on (compute.cuda.call), not the cdi check's prediction the verdict names (because)
    assert T.todo_text(jit) == "add a mount of libnvidia-ptxjitcompiler.so.1 from the driver root to the spec"
    lines = F.summary_lines(report)
    groups = tables(html)["groups"]
    todo = _column(groups, "what to do")
    for g in failed:
        text = T.todo_text(g)
        assert text and sum(h["hosts"] for h in g["todo"]["hints"]) == g["count"]
        # said once per cause: the terminal summary's line under the cause, the page's and the Markdown's causes table
        assert lines.count("    what to do: " + text) == 1
        assert lines[lines.index("    what to do: " + text) - 1].startswith("  %s %s: %s" % (F.plural(g["count"], "host"), g["state"], g["cause"]))
        assert todo[g["cause"]] == text
        assert html.count(">%s<" % escape(text)) == 1
        causes = md[md.index("## Hosts by cause"):md.index("## Where")]
        row = next(line for line in causes.splitlines() if line.startswith("| %s | %s | %s |" % (g["state"], g["count"], V.md_known(g["cause"]))))
        assert "| %s |" % V.md_known(text) in row and causes.count(V.md_known(text)) == 1


def _failed_host(name, hint, signature="cdi.spec.version", groups=()):
    cdi = LayerBuilder("cdi")
    cdi.add(signature, FAIL, "/etc/cdi/nvidia.yaml", "0.6.0", "0.7.0", hint=hint)
    host = LayerBuilder("host")
    host.add("host.driver.version", PASS, "driver", "580", "580")
    records = {"host": host.build(), "cdi": cdi.build(signature=signature, points_to="cdi"),
               "runtime": not_run("runtime", "blocked by cdi FAIL"), "compute": not_run("compute", "blocked by cdi FAIL"),
               "k8s": not_run("k8s", "disabled")}
    return {"name": name, "records": records, "groups": list(groups), "vars": {}, "pins": {}}


def test_a_cause_whose_hosts_were_told_different_things_says_so():
    hosts = [_failed_host("n%02d" % i, "regenerate the spec on n%02d with driver 580.%d" % (i, i % 2)) for i in range(6)]
    hosts += [_failed_host("n%02d" % i, None) for i in range(6, 8)]
    report = F.build_report(hosts, "2026-12-04T03:00:00Z")
    (g,) = report["groups"]
    # the host's own name is taken out: the hosts told alike count as one hint
    assert g["todo"] == {"hints": [{"hint": "regenerate the spec on <host> with driver 580.0", "hosts": 3},
                                   {"hint": "regenerate the spec on <host> with driver 580.1", "hosts": 3}],
                         "other": 0, "without": 2}
    assert T.todo_text(g) == ("regenerate the spec on <host> with driver 580.0 (3 hosts); regenerate the spec on <host> "
                              "with driver 580.1 (3 hosts); 2 hosts: no check gave a hint")


def test_the_hints_of_a_cause_are_bounded():
    """60 hosts told each something else before 40 told the same: the common hint first, TOP listed, the hosts of the
    others counted; a hint one line of at most 240 characters."""
    hosts = [_failed_host("n%03d" % i, "step %03d\n%s" % (i, "x" * 400) if i < 60 else "the common one") for i in range(100)]
    report = F.build_report(hosts, "2026-12-04T03:00:00Z")
    (g,) = report["groups"]
    assert g["todo"]["hints"][0] == {"hint": "the common one", "hosts": 40}
    assert len(g["todo"]["hints"]) == T.TOP and g["todo"]["other"] == 60 - (T.TOP - 1) and g["todo"]["without"] == 0
    assert all(len(h["hint"]) <= 240 and "\n" not in h["hint"] for h in g["todo"]["hints"])
    assert T.todo_text(g).endswith("; 58 hosts told something else (see each host)")


def test_a_hostile_hint_is_escaped_in_every_rendering():
    hint = "<script>alert(1)</script> | **x** \x1b[2J\u202e [link](http://e)"
    report = F.build_report([_failed_host("n1", hint), _failed_host("n2", hint)], "2026-12-04T03:00:00Z")
    html, md = V.render_html(report), V.render_markdown(report)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\x1b" not in html + md and "\u202e" not in html + md and "\\x1b[2J" in html and "\\u202e" in html
    row = next(line for line in md.splitlines() if line.startswith("| FAILED_AT_CDI |"))
    assert "| %s |" % V.md_known(hint) in row and "\\<script\\>" in row and "\\\\x1b\\[2J" in row
    assert len(re.split(r"(?<!\\)\|", row)) == 10   # 8 cells: the hint's "|" cannot open another
    line = next(x for x in F.summary_lines(report) if x.startswith("    what to do: "))
    assert "\x1b" not in display_text(line) and "\\u202e" in display_text(line)


def test_the_drift_says_where_its_hosts_are_as_a_cause_does(replayed):
    report, md, html = replayed
    (row,) = [d for d in report["drift_groups"] if d["key"] == "driver_version"]
    hosts = sorted(d["host"] for d in report["drift"] if d["key"] == "driver_version")
    assert row["count"] == len(hosts) == 47 and row["examples"] == hosts[:3]
    # the causes' one where-logic, on the drift's hosts
    assert row["where"] == W.concentration([report["hosts"][h]["where"] for h in hosts], report["where"]["places"], 2000)
    assert row["where"]["concentrated"] == {"dim": "group", "value": "rack_r07", "hosts": 47}
    assert "    driver_version differs (expected 580.126.09, observed 580.159.04): 47 hosts, all of them in rack_r07" in F.summary_lines(report)
    drift = tables(html)["drift"]
    assert drift[0][-1] == "where" and drift[1][-1] == "all of them in rack_r07"
    assert "| driver\\_version | 580.126.09 | 580.159.04 | differs: host layer | 47 | all of them in rack\\_r07 |" in md


def test_the_narrowest_place_of_a_drift_is_named():
    """A pin that differs on the hosts of one rack (all of them also in its zone): the rack is named, not the zone."""
    hosts = []
    for r in range(16):
        for s in range(10):
            item = _failed_host("r%02d-%02d" % (r, s), "x", groups=["rack_r%02d" % r, "zone_%s" % "abcd"[r // 4]])
            item["records"]["host"]["versions"] = {"driver": "570.1" if r == 5 and s < 8 else "580.1"}
            item["pins"] = {"driver_version": "580.1"}
            hosts.append(item)
    report = F.build_report(hosts, "2026-12-04T03:00:00Z")
    (row,) = report["drift_groups"]
    assert row["count"] == 8 and row["where"]["concentrated"] == {"dim": "group", "value": "rack_r05", "hosts": 8}
    # the zone alone would be said too (all 8 there, a quarter of the fleet): the rack is the narrower
    without_racks = [dict(w, groups=[g for g in w["groups"] if g.startswith("zone_")]) for w in (
        report["hosts"][h]["where"] for h in sorted(d["host"] for d in report["drift"]))]
    assert W.concentration(without_racks, report["where"]["places"], 160)["concentrated"]["value"] == "zone_b"


def test_every_place_is_in_the_page_s_where_table_and_the_markdown_says_where_the_rest_is():
    """600 hosts, each in a group of its own and all in a zone: the page lists all 600 groups (it listed 500), the
    Markdown as many as it holds and says how many more there are and where."""
    hosts = [{"name": "h%03d" % i, "records": None, "unreachable": "Connection timed out", "pins": {},
              "groups": ["own_%03d" % i, "zone_%s" % "ab"[i % 2]], "vars": {"rack": "r%02d" % (i // 10)}} for i in range(600)]
    report = F.build_report(hosts, "2026-12-04T03:00:00Z")
    page = tables(V.render_html(report))
    assert [row[0] for row in page["where-group"][1:]] == list(report["where"]["places"]["group"]) and len(page["where-group"]) == 603
    assert len(page["where-rack"]) == 61
    md = V.render_markdown(report)
    assert len(md) <= V.MD_LIMIT
    said = re.search(r"The ([0-9,]+) places by inventory group with the most hosts not verified, of 602 places: the other "
                     r"([0-9,]+) places are in the HTML report's Where view \(#view=where\) and the JSON report's where\.", md)
    assert said and int(said.group(1)) + int(said.group(2)) == 602 and int(said.group(1)) == V.MD_PLACES
    section = md[md.index("## Where"):md.index("## The fleet by hardware")]
    assert len([line for line in section.splitlines() if line.startswith(("| own\\_", "| zone\\_"))]) == V.MD_PLACES
    assert "places by rack" not in section and len(re.findall(r"^\| r[0-9]{2} \|", section, re.M)) == 60


def test_the_markdown_of_2000_replayed_hosts_has_every_place(replayed):
    report, md, _html = replayed
    assert len(md) <= V.MD_LIMIT
    section = md[md.index("## Where"):md.index("## The fleet by hardware")]
    assert "places by" not in section
    for dim, rows in report["where"]["places"].items():
        for value in rows:
            assert "\n| %s | %d |" % (V.md_known(value), rows[value]["hosts"]) in section, (dim, value)


def test_a_host_that_did_not_fail_has_nothing_to_do():
    entry = {"name": "n", "state": "INCONCLUSIVE", "failing_layer": None, "layers": {}}
    assert T.host_todo(entry) is None
    b = LayerBuilder("cdi")
    b.add("cdi.spec.version", NOT_RUN, "x", hint="not a failure")
    entry = {"name": "n", "state": "FAILED_AT_CDI", "failing_layer": "cdi", "signature": "cdi.failed", "layers": {"cdi": b.build()},
             "because": []}
    assert T.host_todo(entry) is None
