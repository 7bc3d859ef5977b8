"""What a person sees of a fleet run whose nodes cannot be reached (issue 22.4), over a real ansible-playbook run of
playbooks/verify-gpu.yml: nodes whose SSH port is closed (connection refused) and nodes whose name does not
resolve, a synthetic node through the local connection, and the stdout callback gpuprobe.layers.fleet. No GPU and
no podman (audit mode)."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from hostfixture import build_node
from pagedata import page_data, rows
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "verify-gpu.yml")
REFUSED, UNRESOLVED = 6, 6


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("fleet-output")
    build_node(str(base / "node"))
    ssh = {"ansible_connection": "ssh", "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes"}
    hosts = {"node": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
             "nopython": {"ansible_connection": "local", "ansible_python_interpreter": "/nonexistent/bin/python3"}}
    for i in range(REFUSED):
        hosts["refused-%02d" % i] = dict(ssh, ansible_host="127.0.0.1", ansible_port=1)
    for i in range(UNRESOLVED):
        hosts["nosuch-%02d.gpuprobe.invalid" % i] = dict(ssh)
    inventory = {"all": {"vars": {"verify_root": str(base / "node"), "verify_nvml": False, "verify_k8s": False,
                                  "verify_cdi_spec_dirs": ["/etc/cdi"], "gpuprobe_pins": {"driver_version": "580.95.05"}},
                         "hosts": hosts}}
    (base / "hosts.yml").write_text(yaml.safe_dump(inventory))
    reports = base / "reports"
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False",
               ANSIBLE_STDOUT_CALLBACK="gpuprobe.layers.fleet", ANSIBLE_CALLBACKS_ENABLED="gpuprobe.layers.gpuprobe_summary",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    r = subprocess.run(["ansible-playbook", "-i", str(base / "hosts.yml"), PLAYBOOK, "-e", "gpuprobe_mode=audit",
                        "-e", "gpuprobe_report_dir=%s" % reports, "--forks", "14"],
                       env=env, capture_output=True, text=True, timeout=300, check=False)
    report = _expand_report(json.loads((reports / "gpuprobe-report-latest.json").read_text()))
    return r, report, reports


def test_stdout_is_one_line_per_node(run):
    r, _report, _reports = run
    total = REFUSED + UNRESOLVED + 2
    assert r.returncode == 2, r.stdout[-3000:]
    progress = [line for line in r.stdout.splitlines() if line.startswith("gpuprobe [")]
    assert len(progress) == total, r.stdout
    # the total is known from the first line on (never [N/?]), each node once, with its cause in words
    counters = [" ".join(line.split(" ", 2)[:2]) for line in progress]
    assert counters == ["gpuprobe [%d/%d]" % (i + 1, total) for i in range(total)]
    refused = [line for line in progress if " refused-" in line]
    unresolved = [line for line in progress if " nosuch-" in line]
    assert all(line.endswith(": UNREACHABLE connection refused (no SSH server listening)") for line in refused), refused
    assert all(line.endswith(": UNREACHABLE name does not resolve (DNS)") for line in unresolved), unresolved
    # a node whose verify run failed (its task failed: ansible-core 2.19 hands the callback no "failed" key)
    assert [line for line in progress if " nopython:" in line][0].endswith(": RUN_FAILED no usable Python on the node")
    # no result JSON of an unreachable node, and no node's message repeated per node by the gate task
    assert "UNREACHABLE!" not in r.stdout and "...ignoring" not in r.stdout
    assert "could not be verified:" not in r.stdout
    for i in range(1, REFUSED):    # (refused-00 is its group's example in the summary)
        assert r.stdout.count("refused-%02d" % i) == 2, r.stdout      # its progress line and the recap
    # an audit: the gate fails the nodes that could not be verified, and says no post-check
    n = REFUSED + UNRESOLVED + 1
    assert "the run fails for %d hosts: %d hosts could not be verified; see" % (n, n) in r.stdout
    assert "not COMPUTE_VERIFIED in this post-check" not in r.stdout
    assert "  1 host RUN_FAILED: no usable Python on the node (e.g. nopython)" in r.stdout
    # the end-of-run summary is by group, not per node
    assert "  %d hosts UNREACHABLE: connection refused (no SSH server listening)" % REFUSED in r.stdout
    assert "  %d hosts UNREACHABLE: name does not resolve (DNS)" % UNRESOLVED in r.stdout
    # a few hundred bytes per node at most (was ~4 KB: the UNREACHABLE! result, the gate's error and its origin)
    assert len(r.stdout) < 600 * total, len(r.stdout)


def test_unreachable_is_a_state_of_its_own_in_every_format(run):
    _r, report, reports = run
    unreachable = [h for h, e in report["hosts"].items() if e["state"] == "UNREACHABLE"]
    assert len(unreachable) == REFUSED + UNRESOLVED and report["counts"]["by_state"]["UNREACHABLE"] == len(unreachable)
    groups = dict((g["cause"], g) for g in report["groups"] if g["state"] == "UNREACHABLE")
    assert sorted((c, g["count"]) for c, g in groups.items()) == [
        ("connection refused (no SSH server listening)", REFUSED), ("name does not resolve (DNS)", UNRESOLVED)]
    # never drift: their pins could not be observed, which their state already says
    assert set(d["host"] for d in report["drift"]) <= {"node"} and report["summary"]["drifted"] <= 1
    for name in unreachable:
        entry = report["hosts"][name]
        # (k8s was not selected: its own reason stays)
        assert [entry["layers"][layer]["reason"] for layer in ("host", "cdi", "runtime", "compute")] == ["host unreachable"] * 4
        assert entry["unverifiable"].startswith("host unreachable: ")
    page = (reports / "gpuprobe-report-latest.html").read_text()
    md = (reports / "gpuprobe-report-latest.md").read_text()
    junit = (reports / "gpuprobe-report-latest.junit.xml").read_text()
    # the hosts table the page's script draws: one row per unreachable host, in its state
    assert sorted(r["name"] for r in rows(page_data(page)) if r["state"] == "UNREACHABLE") == sorted(unreachable)
    assert "%d hosts could not be reached" % len(unreachable) in page and "%d hosts could not be reached" % len(unreachable) in md
    assert junit.count('type="gpuprobe.unreachable"') == len(unreachable)
    # each node's message once in each format (the host detail, or the JUnit error), plus once for its group's example
    message = report["hosts"]["nosuch-03.gpuprobe.invalid"]["unverifiable"]   # (names the node: its own)
    for text in (md, junit):
        assert text.count(message) <= 2
