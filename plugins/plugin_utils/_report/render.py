# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: rendering the fleet report (JSON, Markdown, HTML, JUnit) and the comparison of two reports.

Not public API. Controller side only (the action plugin gpuprobe.layers.fleet_report and the filter plugins): the
report's model is model.py and fleet.py (``build_report``: a dict whose JSON, jsonfile.py, is the source of truth); HTML
and Markdown are rendered from it by the Jinja2 templates shipped in ``templates/`` next to this file (HTML with
autoescape; Markdown with every value escaped by the environment's ``finalize``), through a small view (``view``)
that only orders and words what the report holds. JUnit is built with ElementTree. Each rendering is made in pieces
(``json_chunks``, ``markdown_chunks``, ``html_chunks``, ``junit_chunks``: what ``RENDERERS`` gives, written to the
report's files as they come), each host's own part from its full entry given by name (``full``) when the report holds
brief entries (``fleet.Fleet``); ``render_*`` join the pieces.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, LAYERS, NOT_RUN, ORDERED_LAYERS, PASS, STATUSES, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.reasons import not_read_lines
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.attribution import because_text
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import COMPUTE_VERIFIED, INCONCLUSIVE
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._controller_cache import template_cache
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.escape import controls
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.fleet import BREAKDOWN, fleet_line
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.health import health_line
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.jsonfile import json_chunks
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.page import (
    findings as page_findings, gpu_tree, host_order, page_data, page_places, text as _text,
)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.sentences import drift_lines, drift_text, gpu_line, plural
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.states import RUN_FAILED, STATES, UNREACHABLE, state_words
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.todo import todo_text
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.where import GROUP, concentration_line, concentration_words

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

STATUS_COLOURS = {PASS: "#1a7f37", WARN: "#9a6700", FAIL: "#cf222e", NOT_RUN: "#6e7781"}
STATE_COLOURS = {COMPUTE_VERIFIED: "#1a7f37", INCONCLUSIVE: "#6e7781", UNREACHABLE: "#8250df", RUN_FAILED: "#bc4c00"}
BREAKDOWN_TITLES = {"gpu_model": "GPU model", "driver_branch": "driver branch", "runtime": "container runtime"}
# what the page and the Markdown summary show at most (the JSON report has everything; the page every place)
HTML_DRIFT_ROWS = 200       # pin values of the drift table
MD_HOSTS = 500              # hosts not verified in the Markdown's hosts table, and k8s findings
MD_HOSTS_PER_CAUSE = 50     # host names listed per cause in the Markdown
MD_PLACES = 100             # places per where table of the Markdown
MD_DRIFT_ROWS = 50          # pin values of the Markdown's drift table
MD_CAUSES = 200             # causes in the Markdown's causes table (and signatures, and rows of each breakdown table)
# the most characters of the Markdown summary: what a GitHub comment or a merge request note holds (65,536); a larger
# summary is made again with fewer hosts listed, then fewer names per cause, places, causes, pin values (_md_limits)
MD_LIMIT = 65536
MD_LIMITS = ("md_hosts", "md_hosts_per_cause", "md_places", "md_causes", "md_drift_rows")
HEADLINE_PLACES = 5         # causes said concentrated among the headlines


# ---------------------------------------------------------------------------------------------------
# text helpers shared by the templates

def _md(value):
    """A value escaped for a Markdown table cell or line (Markup passes as it is: the template's own markup): one line
    (a newline cannot forge a table row), its other control characters visible (``_escape.controls``), and every
    character that Markdown or inline HTML reads as markup backslash-escaped."""
    if isinstance(value, Markup):
        return str(value)
    text = controls(_text(value).replace("\r", " ").replace("\n", " "))
    for ch in ("\\", "|", "`", "*", "_", "<", ">", "[", "]"):
        text = text.replace(ch, "\\" + ch)
    return text


# what a Markdown line that a value starts reads as a block: a heading, a rule or setext underline, a list, a quote
_MD_BLOCK_START = re.compile(r"^(\s*)(#|=|-|\+|~|[0-9]+[.)])")

# the report's own words (statuses, states, verdicts, drift states): printed as they are; anything else is escaped
KNOWN_WORDS = frozenset(STATUSES + STATES + ("differs", "unknown"))


def md_known(value):
    """One of the report's own words as it is (``KNOWN_WORDS``: PASS, FAILED_AT_CDI, ...), anything else escaped
    (``_md``): the template never prints a value from a node raw."""
    if isinstance(value, str) and value in KNOWN_WORDS:
        return Markup(value)
    return Markup(_md(value))


def md_block(value):
    """``_md`` of a value that starts a Markdown line: what would make the line a heading, a rule, a list item or a
    quote is escaped too, and leading blanks (an indented code block) dropped."""
    text = _md(value).lstrip()
    match = _MD_BLOCK_START.match(text)
    if match:
        end = match.end()
        text = text[:end - 1] + "\\" + text[end - 1:]
    return Markup(text)


def md_html(value):
    """A value inside a raw HTML block of the Markdown (``<details><summary>``, where Markdown escapes are not read):
    HTML-escaped, on one line."""
    return Markup(escape(" ".join(controls(_text(value)).split())))


def _html_finalize(value):
    """Every value the page prints (autoescaped after this): its text with every control character a visible escape
    (``_escape.controls``; a newline and a tab are HTML's own whitespace): a bidi override or a zero-width character
    from a node never reorders or hides what the page shows."""
    return controls(_text(value), keep="\n\t") if not isinstance(value, Markup) else value


def state_colour(state):
    return STATE_COLOURS.get(state) or (STATUS_COLOURS[FAIL] if str(state).startswith("FAILED_AT_") else "#6e7781")


def status_colour(status):
    return STATUS_COLOURS.get(status) or state_colour(status)


def colours():
    """(state or status, colour) of every word the page shows as a badge (its CSS classes b-<word>)."""
    words = list(STATUS_COLOURS) + [s for s in STATES if s not in STATUS_COLOURS]
    return [(w, status_colour(w)) for w in words]


def _instance_name(row):
    return row.get("uuid") or "#%s" % row.get("ordinal")


def predicted_text(row):
    if row.get("predicted") is False:
        return "no prediction (the drill did not run)"
    return row.get("predicted_layer") or "none (passes)"


def where_text(group):
    """Where the hosts of a cause not verified (or of a pin value of the drift, ``fleet.drift_groups``) are, in the
    causes and drift tables: '40 of them in rack_r03' when they are concentrated there
    (``_report.where.concentration``), else the places holding the most of them ('zone_a 3, rack_r12 2'), or ''."""
    where = group.get("where") or {}
    if group.get("state") == COMPUTE_VERIFIED:
        return ""
    if where.get("concentrated"):
        return concentration_words(group["count"], where["concentrated"])
    return ", ".join("%s %s" % (p["value"] if p["dim"] == GROUP else "%s=%s" % (p["dim"], p["value"]), p["hosts"])
                     for p in where.get("places") or [])


def svg_bar_chart(counts, title, width=420, bar_height=22):
    """An inline SVG horizontal bar chart of ``counts`` (label -> number), as Markup (every text escaped)."""
    items = list(counts.items())
    label_w = 110
    height = 28 + bar_height * max(len(items), 1) + 6
    top = max([value for _label, value in items] or [1]) or 1
    bars = []
    for i, (label, value) in enumerate(items):
        bars.append({"label": label, "value": value, "y": 26 + i * bar_height,
                     "w": max(int((width - label_w - 40) * value / top), 1)})
    return Markup(_env("html").get_template("bar_chart.svg.j2").render(
        title=title, width=width, height=height, label_w=label_w, bar_height=bar_height, bars=bars,
        colour=STATUS_COLOURS[FAIL]))


# ---------------------------------------------------------------------------------------------------
# the view: what the dashboard says, ordered and worded (no figure is computed here that the JSON lacks)

def concentration_lines(report):
    """'cdi.host.library_version: 59 hosts, 40 of them in rack_r03' for each cause not verified whose hosts are
    concentrated in one place, at most HEADLINE_PLACES, then how many more are."""
    lines = [concentration_line(g) for g in report.get("groups") or []
             if g["state"] != COMPUTE_VERIFIED and (g.get("where") or {}).get("concentrated")]
    if len(lines) > HEADLINE_PLACES:
        more = len(lines) - HEADLINE_PLACES
        lines = lines[:HEADLINE_PLACES] + ["%s concentrated in one place (see Hosts by cause)" % plural(
            more, "more cause is", "more causes are")]
    return lines


def headlines(report):
    """The dashboard's sentences, in words a person uses, each from the report's figures."""
    s = report["summary"]
    counts = report["counts"]
    out = [fleet_line(report), gpu_line(s.get("gpus"), (report.get("run") or {}).get("mode"))]
    failing = counts.get("by_failing_layer") or {}
    if failing:
        out.append("%s failed: %s" % (plural(sum(failing.values()), "host"), ", ".join(
            "{0:,} at {1}".format(failing[layer], layer) for layer in ORDERED_LAYERS if failing.get(layer))))
    for state, verb in ((UNREACHABLE, "could not be reached"), (RUN_FAILED, "could not be verified (the run failed on them)")):
        groups = [g for g in report.get("groups") or [] if g["state"] == state]
        if groups:
            out.append("%s %s: %s" % (plural(sum(g["count"] for g in groups), "host"), verb,
                                      "; ".join("{0} ({1:,})".format(g["cause"], g["count"]) for g in groups)))
    out.extend(concentration_lines(report))
    for finding in (report.get("health") or {}).get("findings") or []:
        out.append(health_line(finding))
    out.extend(drift_lines(s, counts.get("drift_by_pin"), report.get("drift")))
    if s.get("k8s_findings"):
        out.append("%s where what Kubernetes is told disagrees with what the node showed (its verdict or its driver)"
                   % plural(s["k8s_findings"], "finding"))
    return out


def state_tiles(report):
    total = report["summary"]["hosts"] or 1
    return [{"state": state, "words": state_words(state), "count": n, "percent": 100.0 * n / total,
             "colour": state_colour(state)} for state, n in (report["counts"].get("by_state") or {}).items()]


def where_tables(report, limit=None):
    """(dimension, title, [(value, {hosts, states})], how many to show: every one, or at most ``limit``) per
    dimension of the report's where: the inventory groups, then each group_by variable, the places with the most hosts
    not verified first."""
    where = report.get("where") or {}
    out = []
    for dim in where.get("by") or []:
        rows = list(((where.get("places") or {}).get(dim) or {}).items())
        if rows:
            out.append((dim, "inventory group" if dim == GROUP else dim, rows, len(rows) if limit is None else min(len(rows), limit)))
    return out


def drift_rows(report):
    """The drift by pin value, the most hosts first, with where their hosts are (the report's ``drift_groups``)."""
    return report.get("drift_groups") or []


def _script():
    with open(os.path.join(TEMPLATE_DIR, "report.js")) as f:
        return Markup(f.read())


def view(report, full=None):
    """The variables of the report templates. ``full``: name -> a host's full entry, when the report's hosts are brief
    (Fleet.report); the page's data reads the full entries of the hosts not verified only."""
    hosts = report["hosts"]
    full = full or hosts.__getitem__
    groups = report.get("groups") or []
    failing = report["counts"].get("by_failing_layer") or {}
    not_verified = [hosts[name] for name in host_order(report) if hosts[name]["state"] != COMPUTE_VERIFIED]
    return {
        "r": report,
        "run": report.get("run") or {},
        "s": report["summary"],
        "layers": LAYERS,
        "headlines": headlines(report),
        "drift_lines": drift_lines(report["summary"], report["counts"].get("drift_by_pin"), report.get("drift")),
        "drift_rows": drift_rows(report), "html_drift_rows": HTML_DRIFT_ROWS,
        "tiles": state_tiles(report),
        "colours": colours(),
        "groups": groups,
        "breakdown": [(dim, BREAKDOWN_TITLES.get(dim, dim), (report.get("breakdown") or {}).get(dim) or {}) for dim in BREAKDOWN],
        "where_dims": list((report.get("where") or {}).get("by") or []),
        "where_tables": where_tables(report),
        "md_where_tables": where_tables(report, MD_PLACES),
        "place_labels": [p[2] for p in page_places(report)],
        "findings": page_findings(report)[0],
        "states": list((report["counts"].get("by_state") or {}).keys()),
        "failing_chart": svg_bar_chart(dict((layer, failing[layer]) for layer in ORDERED_LAYERS if layer in failing),
                                       "hosts by failing layer"),
        "signatures": [g for g in groups if g.get("signature")],
        "health": dict({"findings": [], "not_read": {}, "not_read_why": [], "gpus_read": 0, "hosts_read": 0}, **(report.get("health") or {})),
        "not_verified": not_verified,
        "page_data": (Markup(piece) for piece in page_data(report, full)),
        "script": _script(),
        "md_hosts": MD_HOSTS, "md_hosts_per_cause": MD_HOSTS_PER_CAUSE, "md_drift_rows": MD_DRIFT_ROWS, "md_causes": MD_CAUSES,
        "md_limit": MD_LIMIT,
        "UNREACHABLE": UNREACHABLE, "RUN_FAILED": RUN_FAILED, "PASS": PASS, "WARN": WARN, "FAIL": FAIL,
    }


# ---------------------------------------------------------------------------------------------------
# the Jinja2 environments (one per output kind; the templates are shipped with the collection)

_ENVS = {}


def _env(kind):
    if kind not in _ENVS:
        if not os.path.isdir(TEMPLATE_DIR):
            raise OSError("the report templates are missing: %s (a broken install of gpuprobe.layers?)" % TEMPLATE_DIR)
        env = Environment(loader=FileSystemLoader(TEMPLATE_DIR), autoescape=(kind == "html"), undefined=StrictUndefined,
                          bytecode_cache=template_cache(),
                          trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                          finalize=_html_finalize if kind == "html" else _md)
        env.filters.update(text=_text, md=_md, raw=Markup, known=md_known, md_block=md_block, md_html=md_html,
                           plural=plural, state_words=state_words, where_text=where_text, todo_text=todo_text,
                           state_colour=state_colour, status_colour=status_colour, because_text=because_text,
                           health_line=health_line, predicted_text=predicted_text, not_read_lines=not_read_lines)
        _ENVS[kind] = env
    return _ENVS[kind]


def html_chunks(report, full=None):
    """A self-contained HTML page (inline CSS, SVG and one inline script: the hosts table, its filters and a host's
    detail, drawn from the page's data; no external asset), in pieces as the template writes them (``full``: see
    ``view``)."""
    yield from _env("html").get_template("report.html.j2").generate(view(report, full))


def _md_limits():
    """The Markdown's limits, from the most generous (MD_HOSTS, ...) down to none listed: each step halves the first
    limit (in MD_LIMITS' order) that is not yet 0, so what goes first is the least needed (the hosts table: every host
    is in the JSON report), the causes last."""
    limits = {"md_hosts": MD_HOSTS, "md_hosts_per_cause": MD_HOSTS_PER_CAUSE, "md_places": MD_PLACES,
              "md_causes": MD_CAUSES, "md_drift_rows": MD_DRIFT_ROWS}
    yield dict(limits)
    for key in MD_LIMITS:
        while limits[key]:
            limits[key] //= 2
            yield dict(limits)


def markdown_chunks(report, full=None):
    """The Markdown summary, at most MD_LIMIT characters: made with the generous limits, and again with smaller ones
    (``_md_limits``) while it is longer; one that is still longer with nothing listed (a fleet's own words alone) is
    cut at a line, and says so."""
    variables = view(report, full)
    template = _env("md").get_template("report.md.j2")
    text = ""
    for limits in _md_limits():
        text = template.render(dict(variables, md_where_tables=where_tables(report, limits["md_places"]), **limits))
        if len(text) <= MD_LIMIT:
            yield text
            return
    note = "\n\n(cut at %s characters: the JSON report has everything)\n" % "{:,}".format(MD_LIMIT)
    yield text[:text.rfind("\n", 0, MD_LIMIT - len(note)) + 1] + note


def render_html(report, full=None):
    return "".join(html_chunks(report, full))


def render_markdown(report, full=None):
    return "".join(markdown_chunks(report, full))


def render_diff_markdown(diff):
    return _env("md").get_template("diff.md.j2").render(d=diff)


def render_drills_markdown(rows):
    return _env("md").get_template("drills.md.j2").render(drills=rows)


# ---------------------------------------------------------------------------------------------------
# JUnit XML

def _check_lines(record, statuses):
    lines = []
    for c in record.get("checks") or []:
        if c.get("status") in statuses:
            lines.append("%s %s %s: expected %s, observed %s%s" % (
                c.get("status"), c.get("id"), _text(c.get("subject")), _text(c.get("expected")) or "-",
                _text(c.get("observed")) or "-",
                ("; next: %s" % c["hint"]) if c.get("hint") else ""))
    return "\n".join(lines)


def gpu_properties(gpus):
    """The GPUs of a host as JUnit properties, each MIG instance under its GPU: ("gpu <index>", "<uuid> <status>[
    <signature>][: reason]"), then ("gpu <index> mig <MIG uuid>", "<status>[ <signature>][: reason]")."""
    out = []
    parent_name = "gpu ?"
    for depth, row in gpu_tree(gpus):
        text = "%s%s%s" % (row.get("status"), " %s" % row["signature"] if row.get("signature") else "",
                           ": %s" % row["reason"] if row.get("reason") else "")
        if depth:
            out.append(("%s mig %s" % (parent_name, _instance_name(row)), text))
        else:
            parent_name = "gpu %s" % (row.get("index") if row.get("index") is not None else row.get("uuid") or "?")
            out.append((parent_name, "%s %s" % (row.get("uuid") or "?", text)))
    return out


JUNIT_ERROR_CASE = {UNREACHABLE: ("connect", "gpuprobe.unreachable"), RUN_FAILED: ("verify run", "gpuprobe.run_failed")}


def _junit_counts(e):
    """tests, failures, errors, skipped of a host's testsuite (from its layers' statuses: a brief entry says them)."""
    statuses = [e["layers"][layer]["status"] for layer in LAYERS]
    unverifiable = 1 if e.get("unverifiable") else 0
    return dict(tests=unverifiable + len(statuses), failures=statuses.count(FAIL), errors=unverifiable,
                skipped=statuses.count(NOT_RUN))


def _junit_suite(name, e, generated_at):
    """The <testsuite> of one host (its full entry)."""
    suite = ET.Element("testsuite", name=name, timestamp=str(generated_at))
    unverifiable = e.get("unverifiable")
    seconds = 0.0
    if unverifiable:
        case_name, error_type = JUNIT_ERROR_CASE.get(e.get("state"), JUNIT_ERROR_CASE[RUN_FAILED])
        case = ET.SubElement(suite, "testcase", classname="gpuprobe.%s" % name, name=case_name, time="0.000")
        error = ET.SubElement(case, "error", message="%s: %s" % (state_words(e.get("state")), e.get("cause")),
                              type=error_type)
        error.text = unverifiable
    for layer in LAYERS:
        rec = e["layers"][layer]
        t = float(rec.get("duration_ms") or 0.0) / 1000.0
        seconds += t
        case = ET.SubElement(suite, "testcase", classname="gpuprobe.%s" % name, name=layer, time="%.3f" % t)
        if rec["status"] == FAIL:
            failure = ET.SubElement(case, "failure", message=str(rec.get("reason") or ""),
                                    type=str(rec.get("signature") or "%s.failed" % layer))
            failure.text = _check_lines(rec, (FAIL,))
        elif rec["status"] == NOT_RUN:
            ET.SubElement(case, "skipped", message=str(rec.get("reason") or "not run"))
        elif rec["status"] == WARN:
            out = ET.SubElement(case, "system-out")
            out.text = "WARN: %s\n%s" % (rec.get("reason") or "", _check_lines(rec, (WARN,)))
    props = ET.Element("properties")
    for key in ("state", "verdict", "signature", "points_to", "cause", "group"):
        ET.SubElement(props, "property", name=key, value=str(e.get(key) or ""))
    if e.get("because"):
        ET.SubElement(props, "property", name="because", value="; ".join(because_text(b) for b in e["because"]))
    for state, name_ in (("differs", "drift differs"), ("unknown", "drift not observed")):   # said apart, as everywhere
        if any(d.get("state") == state for d in e.get("drift") or []):
            ET.SubElement(props, "property", name=name_, value="; ".join(drift_text(d) for d in e["drift"] if d.get("state") == state))
    for name_, value in gpu_properties(e.get("gpus")):
        ET.SubElement(props, "property", name=name_, value=value)
    suite.insert(0, props)
    for key, value in _junit_counts(e).items():
        suite.set(key, str(value))
    suite.set("time", "%.3f" % seconds)
    return _junit_visible(suite)


def _junit_visible(element):
    """``element`` with every control character of its texts and attribute values a visible escape (``controls``; a
    newline and a tab kept in a text, where they are the message's own lines): a CI page that shows a testcase's
    message never reorders it (bidi), hides part of it (zero-width) or acts on it (ESC)."""
    for item in element.iter():
        if item.text:
            item.text = controls(item.text, keep="\n\t")
        for key, value in item.attrib.items():
            item.set(key, controls(value))
    return element


def junit_chunks(report, full=None):
    """JUnit XML: a testsuite per host, a testcase per layer (NOT_RUN -> skipped, FAIL -> failure), one host at a
    time (``full``: see ``view``).

    A node that could not be verified is its own state here too: an unreachable node has one testcase ``connect``
    with an <error type="gpuprobe.unreachable"> (its message once), a node whose verify run failed one testcase
    ``verify run`` with <error type="gpuprobe.run_failed">; their layers without a result are <skipped>. So CI gating
    on JUnit never goes green over nodes nobody looked at, in every mode, and counts each such node once.
    """
    full = full or report["hosts"].__getitem__
    suites = ET.Element("testsuites", name="gpuprobe fleet report %s" % report["generated_at"])
    total = dict(tests=0, failures=0, errors=0, skipped=0)
    for e in report["hosts"].values():
        for key, value in _junit_counts(e).items():
            total[key] += value
    for key, value in total.items():
        suites.set(key, str(value))
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    if not report["hosts"]:
        yield xml_safe(ET.tostring(suites, encoding="unicode")) + "\n"
        return
    # the root's start tag, then each host's testsuite as ElementTree writes it inside the root
    end = "</testsuites>"
    yield xml_safe(ET.tostring(_junit_visible(suites), encoding="unicode", short_empty_elements=False)[:-len(end)])
    for name in report["hosts"]:
        yield xml_safe(ET.tostring(_junit_suite(name, full(name), report["generated_at"]), encoding="unicode"))
    yield end + "\n"


def render_junit(report, full=None):
    return "".join(junit_chunks(report, full))


# characters XML 1.0 does not allow anywhere, even escaped (control characters other than tab, LF, CR; surrogates;
# U+FFFE/U+FFFF): a node's text (an event message, a slice attribute) may hold them and would make the file unreadable
_XML_INVALID = re.compile(u"[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text):
    """``text`` with every character XML 1.0 forbids replaced by U+FFFD."""
    return _XML_INVALID.sub(u"\ufffd", text)


# format -> (suffix, its rendering in pieces: f(report, full=None), see view)
RENDERERS = {
    "json": (".json", json_chunks),
    "markdown": (".md", markdown_chunks),
    "html": (".html", html_chunks),
    "junit": (".junit.xml", junit_chunks),
}
