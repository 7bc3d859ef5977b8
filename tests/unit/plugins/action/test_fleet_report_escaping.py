"""Issue 34.2: every value from a node is escaped for the format it lands in. A node whose records conform but whose
every string field (check ids, subjects, expected, observed, hints, reasons, signatures, GPU rows, the message of a
failed task) holds HTML, Markdown blocks and table rows, links, images and control characters: the Markdown rendered by
a CommonMark renderer with GFM tables makes no element, link, heading or host row of the node's; the HTML has no
element or handler of the node's; the JUnit is well-formed; a status outside the contract is a malformed record."""
import json

import pytest

from actionlab import make_action
from hostilefixture import HOSTILE, assert_html_safe, assert_junit_safe, assert_markdown_safe
from test_fleet_report import HOSTVARS, record

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, LayerBuilder, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report


def hostile_records(text):
    """Conforming records of a node that fails at cdi, ``text`` in every string field a node gives."""
    host = LayerBuilder("host")
    host.add("host.health.row_remap", WARN, text, text, text, hint=text)
    host.add("host.driver.version", PASS, text, text, text)
    host.evidence = {"gpus": [{"index": 0, "uuid": text, "name": text, "mig": None}]}
    host.versions = {"driver": text}
    cdi = LayerBuilder("cdi")
    cdi.add(text, FAIL, text, text, text, hint=text)
    cdi.evidence = {"spec_digest": text, "identity": {"expected_gpus": [{"index": 0, "uuid": text}]}}
    records = {"host": host.build(reason=text), "cdi": cdi.build(reason=text, signature=text)}
    records["compute"] = record("compute", PASS, container={"executed": True, "cdi_devices": [text]},
                                gpus=[{"index": 0, "uuid": text, "model": text, "expected": True, "seen_in_container": True,
                                       "ordinal": 0, "status": FAIL, "signature": text, "reason": text}])
    return records


def _hostvars(text):
    return {"ok": HOSTVARS["ok"], "evil": {"verify_result": {"records": hostile_records(text)}, "gpuprobe_pins": {"driver_version": "x"}},
            "evil-run": {"verify_result": {"failed": True, "msg": text, "records": {"host": hostile_records(text)["host"]}}},
            "evil-status": {"verify_result": {"records": dict(hostile_records(text), runtime=dict(record("runtime", PASS), status=text))}}}


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_every_value_from_a_node_is_escaped_in_every_format(tmp_path, text):
    hostvars = _hostvars(text)
    action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": sorted(hostvars), "report_dir": str(tmp_path)})
    result = action.run(task_vars={"hostvars": hostvars})
    assert result["verdicts"]["evil"] == "FAILED_AT_CDI" and result["verdicts"]["ok"] == "COMPUTE_VERIFIED"
    # a status outside the contract's set is a malformed record (issue 34.1)
    assert result["unverifiable"]["evil-status"].startswith("verify run failed: malformed record from the node: runtime: unknown status")
    files = result["files"]
    # the Markdown's hosts table lists the hosts not verified
    assert_markdown_safe(open(files["markdown"]).read(), sorted(h for h, v in result["verdicts"].items() if v != "COMPUTE_VERIFIED"))
    assert_html_safe(open(files["html"]).read())
    assert_junit_safe(open(files["junit"]).read())
    data = _expand_report(json.loads(open(files["json"]).read()))
    assert data["hosts"]["evil"]["signature"] == text  # JSON holds the value itself, JSON-escaped


def test_no_template_prints_a_value_raw():
    """|raw (Markup) is kept for the templates' own literals; a value goes through |known, which prints only the report's
    own words as they are."""
    import os
    import re
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as R
    for name in os.listdir(R.TEMPLATE_DIR):
        text = open(os.path.join(R.TEMPLATE_DIR, name)).read()
        assert not re.findall(r"[\w.)\]]\s*\|\s*raw\b", text), (name, re.findall(r".{30}\|\s*raw\b", text))
    assert str(R.md_known("FAILED_AT_CDI")) == "FAILED_AT_CDI"
    assert str(R.md_known("PASS\n| x |")) == "PASS \\| x \\|"
    assert str(R.md_block("1. x")) == "1\\. x" and str(R.md_block("# x")) == "\\# x" and str(R.md_block("---")) == "\\---"
    assert str(R.md_html("</summary><script>")) == "&lt;/summary&gt;&lt;script&gt;"
