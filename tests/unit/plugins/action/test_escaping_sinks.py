"""Issue 43.6: escaped everywhere, each sink read by a real consumer. A fleet whose nodes give a signature with a
right-to-left override (``cdi.x<U+202E>DEIFIREV_ETUPMOC`` displays as "cdi.xCOMPUTE_VERIFIED"), host names with
zero-width and isolate characters, ESC/BEL and a newline: JUnit as CI reads it (junitparser), both metrics files as
Prometheus' Python client parses them (and promtool, where installed), and the retry file as ``ansible-playbook --limit
@FILE`` reads it. The HTML page in a real browser: tests/integration/test_report_browser_escaping.py."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from actionlab import make_action
from hostilefixture import HIDDEN
from test_fleet_report import HOSTVARS, record

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import metrics as M
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import model
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import status as S

SIGNATURE = u"cdi.x\u202eDEIFIREV_ETUPMOC"
ZW_HOST = u"gpu\u200b-b\u2066x\u2069"
ESC_HOST = u"e\x1bc\x07"
NL_HOST = u"n-x\nall"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _bidi_records():
    records = dict(HOSTVARS["ok"]["verify_result"]["records"])
    records["cdi"] = dict(record("cdi", FAIL), signature=SIGNATURE, reason=u"spec \u202egnorw")
    return records


def hostile_fleet():
    """hostvars of a fleet: one verified node, a node failing at cdi with the bidi signature under a zero-width name, an
    unreachable node whose name holds a newline, a failed run whose name holds ESC and BEL."""
    return {"ok": HOSTVARS["ok"], ZW_HOST: {"verify_result": {"records": _bidi_records()}},
            NL_HOST: {"verify_result": {"unreachable": True, "msg": u"\x1b]0;t\x07 gone \u202eX"}},
            ESC_HOST: {"verify_result": {"failed": True, "msg": u"boom \u2066x\u2069"}}}


@pytest.fixture(name="report")
def _report(tmp_path):
    hostvars = hostile_fleet()
    args = {"hosts": sorted(hostvars), "report_dir": str(tmp_path / "r"), "metrics_file": str(tmp_path / "fleet.prom"),
            "retry_file": str(tmp_path / "retry"), "status_file": str(tmp_path / "status.json")}
    result = make_action(A, "gpuprobe.layers.fleet_report", args).run(task_vars={"hostvars": hostvars})
    assert result["verdicts"][ZW_HOST] == "FAILED_AT_CDI"
    return dict(result, paths=args)


def test_junit_as_ci_reads_it(report):
    from junitparser import JUnitXml  # pylint: disable=import-outside-toplevel
    xml = JUnitXml.fromfile(report["files"]["junit"])
    said = []
    for suite in xml:
        said.append(suite.name)
        said.extend(p.value for p in suite.properties())
        for case in suite:
            said.extend([case.name, case.classname])
            for result in case.result:
                said.extend([result.message, result.type, result.text])
    said = [s for s in said if s]
    assert not [s for s in said if HIDDEN.search(s)], [s for s in said if HIDDEN.search(s)][:3]
    assert u"gpu\\u200b-b\\u2066x\\u2069" in said and u"cdi.x\\u202eDEIFIREV_ETUPMOC" in said
    assert "e\\x1bc\\a" in said and "n-x\\nall" in said


def _families(text, openmetrics):
    if openmetrics:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families  # pylint: disable=import-outside-toplevel
    else:
        from prometheus_client.parser import text_string_to_metric_families  # pylint: disable=import-outside-toplevel
    return list(text_string_to_metric_families(text))


def _label_values(families):
    return [v for family in families for sample in family.samples for v in sample.labels.values()]


def test_the_metrics_files_as_prometheus_parses_them(report, tmp_path):
    fleet = open(report["paths"]["metrics_file"]).read()
    values = _label_values(_families(fleet, openmetrics=True))
    assert not [v for v in values if HIDDEN.search(v) or "\n" in v], [v for v in values if HIDDEN.search(v) or "\n" in v]
    assert {"e\\x1bc\\a", "n-x\\nall", "gpu\\u200b-b\\u2066x\\u2069"} <= set(values)
    # the node's own file, rendered from the same records (its labels are bounded: the signature is "other")
    entry = model.host_entry(ZW_HOST, _bidi_records())
    node = M.node_text(entry, "full", 1700000000, 1.5)
    values = _label_values(_families(node, openmetrics=False))
    assert not [v for v in values if HIDDEN.search(v)] and "other" in values
    promtool = shutil.which("promtool")
    if promtool:
        for name, text in (("fleet.prom", fleet), ("node.prom", node)):
            (tmp_path / name).write_text(text)
            with open(str(tmp_path / name)) as f:
                r = subprocess.run([promtool, "check", "metrics"], stdin=f, capture_output=True, text=True, timeout=60, check=False)
            assert (r.returncode, r.stdout + r.stderr) == (0, ""), name


def test_the_retry_file_as_ansible_playbook_limit_reads_it(report, tmp_path):
    retry = open(report["paths"]["retry_file"]).read()
    assert retry.count("\n") == 2 and "all\n" not in retry.splitlines(True)  # one line per failing host, no "all"
    assert any("regular expression" in line for line in report["gate_lines"])
    names = ["ok", ZW_HOST, NL_HOST, ESC_HOST, "all-gpus", "other"]
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": dict((n, {}) for n in names)}}, allow_unicode=True))
    (tmp_path / "play.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.copy:\n"
        "        content: \"{{ ansible_play_hosts_all | to_json }}\"\n        dest: \"{{ out }}\"\n"
        "      run_once: true\n      delegate_to: localhost\n")
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                        "--limit", "@" + report["paths"]["retry_file"], str(tmp_path / "play.yml"), "-c", "local",
                        "-e", "out=%s" % (tmp_path / "out.json"), "-e", "ansible_python_interpreter=%s" % sys.executable],
                       capture_output=True, text=True, timeout=120, check=False, cwd=str(tmp_path))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    # exactly the hosts the run fails: the newline starts no pattern of its own ("all")
    assert sorted(json.loads((tmp_path / "out.json").read_text())) == sorted([NL_HOST, ESC_HOST])


@pytest.mark.parametrize("name,line", [
    ("gpu-a.dc1.example.com", "gpu-a.dc1.example.com"), ("10.0.0.7", "10.0.0.7"), ("fe80::1", "fe80::1"),
    ("n-x\nall", "~^n\\x2dx\\x0aall\\Z"), ("gpu*1", "~^gpu\\x2a1\\Z"), ("!bang", "~^\\x21bang\\Z"),
    ("~re", "~^\\x7ere\\Z"), ("@file", "~^\\x40file\\Z"), ("a b", "~^a\\x20b\\Z"), (u"zw\u200bx", "~^zw\\u200bx\\Z"),
])
def test_a_host_name_is_one_limit_pattern_that_matches_only_it(name, line):
    assert S.limit_pattern(name) == line
    assert "\n" not in line
