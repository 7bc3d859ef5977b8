"""A run split into slices, merged into one fleet (issue 45.1; docs/fleet.md, "Sliced runs"), over real runs of
playbooks/verify-gpu.yml started by ansible-runner, the runner AWX itself uses: 4 slices of one inventory (hosts dealt
round-robin, as AWX deals a sliced job template's inventory) run side by side, then playbooks/merge-slices.yml; the
merged report, gate status, retry and metrics files are compared with the same hosts run unsliced. Hosts: synthetic
node trees through the local connection (verified ones and ones without a driver), hosts whose SSH port is closed
(unreachable) and hosts without a usable Python. Audit mode: no container, no GPU."""
import json
import os
import sys

import pytest
import yaml

from hostfixture import build_node
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report

ansible_runner = pytest.importorskip("ansible_runner")

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "verify-gpu.yml")
MERGE = os.path.join(ROOT, "playbooks", "merge-slices.yml")
SLICES = 4
RUN = "nightly-45"
# what may differ between two runs of the same hosts: when, how long, and the files' own paths
TIMED = ("_timestamp_seconds", "_duration_seconds")


def _inventory(base):
    build_node(str(base / "good"))
    build_node(str(base / "nodriver"), kernel_version=None)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    ssh = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
           "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes"}
    hosts = {}
    for i in range(6):
        hosts["gpu-%02d" % i] = dict(local, verify_root=str(base / "good"), rack="r%d" % (i % 2))
    for i in range(3):
        hosts["nodriver-%02d" % i] = dict(local, verify_root=str(base / "nodriver"), rack="r2")
    for i in range(4):
        hosts["gone-%02d" % i] = dict(ssh, rack="r3")
    for i in range(2):
        hosts["nopython-%02d" % i] = dict(local, ansible_python_interpreter="/nonexistent/bin/python3", rack="r1")
    inventory = {"all": {"vars": {"verify_nvml": False, "verify_k8s": False, "verify_cdi_spec_dirs": ["/etc/cdi"]},
                         "hosts": hosts, "children": {"canary": {"hosts": {"gpu-00": None, "nodriver-00": None}}}}}
    (base / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return sorted(hosts)


def _runner(base, name, playbook, extravars, limit=None):
    """An ansible-runner run of ``playbook`` (not started): its private data dir, the thread and the runner."""
    private = base / ("runner-" + name)
    private.mkdir()
    env = dict((k, v) for k, v in os.environ.items() if k.startswith(("ANSIBLE_", "PYTHON", "PATH", "GPUPROBE_")))
    env.update(ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False", ANSIBLE_FORCE_COLOR="0")
    return ansible_runner.run_async(private_data_dir=str(private), playbook=playbook, inventory=str(base / "hosts.yml"),
                                    extravars=extravars, envvars=env, limit=limit, forks=8, quiet=True, timeout=600)


def _common(base, out):
    return {"gpuprobe_mode": "audit", "gpuprobe_report_dir": str(base / out), "gpuprobe_report_group_by": ["rack"],
            "gpuprobe_status_file": str(base / out / "status.json"), "gpuprobe_retry_file": str(base / out / "retry.txt"),
            "gpuprobe_metrics_file": str(base / out / "fleet.prom")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("sliced")
    names = _inventory(base)
    (base / "whole").mkdir()
    (base / "merged").mkdir()
    sliced = dict(_common(base, "merged"), gpuprobe_slice_run=RUN, gpuprobe_slice_dir=str(base / "slices"))
    # the 4 slices side by side (AWX deals the inventory's hosts round-robin), and the unsliced run
    started = [_runner(base, "slice-%d" % i, PLAYBOOK, sliced, ",".join(names[i::SLICES])) for i in range(SLICES)]
    for thread, _r in started:
        thread.join()
    # what the slices wrote besides their slice files (the fleet's files are the merge's)
    by_slices = sorted(p.name for p in (base / "merged").iterdir())
    whole = _runner(base, "whole", PLAYBOOK, _common(base, "whole"))
    whole[0].join()
    merge = _runner(base, "merge", MERGE, dict(sliced, gpuprobe_slice_count=SLICES))
    merge[0].join()
    return base, names, [r for _t, r in started], whole[1], merge[1], by_slices


def _read(base, out):
    # every host whole (schema 4 writes each against a shape, chosen by the first host of its kind in the order the
    # records came: a merged run's shapes may be other hosts' than the unsliced run's, the hosts restored are the same)
    report = _expand_report(json.loads((base / out / "gpuprobe-report-latest.json").read_text()))
    status = json.loads((base / out / "status.json").read_text())
    retry = (base / out / "retry.txt").read_text()
    metrics = sorted(line for line in (base / out / "fleet.prom").read_text().splitlines()
                     if not any(t in line.split("{")[0] for t in TIMED))
    return report, status, retry, metrics


def _stdout(runner):
    return runner.stdout.read()[-3000:]


def test_each_slice_writes_only_its_hosts(runs):
    base, names, slices, _whole, _merge, by_slices = runs
    for r in slices:
        # each slice fails the hosts it could not check (exit 2), as a run does; none writes the fleet's files
        assert r.status == "failed" and r.rc == 2, _stdout(r)
    files = sorted((base / "slices" / RUN).iterdir())
    assert len(files) == SLICES
    seen = []
    for path in files:
        lines = path.read_text().splitlines()
        head = json.loads(lines[0])
        assert head["run_id"] == RUN and json.loads(lines[-1]) == {"end": True, "entries": len(head["hosts"])}
        assert [json.loads(line)["name"] for line in lines[1:-1]] == head["hosts"]
        seen += head["hosts"]
    assert sorted(seen) == names
    assert by_slices == [], by_slices


def test_merged_fleet_is_the_unsliced_run(runs):
    base, names, _slices, whole, merge, _by_slices = runs
    assert whole.rc == 2 and merge.rc == 2, (_stdout(whole), _stdout(merge))
    w_report, w_status, w_retry, w_metrics = _read(base, "whole")
    m_report, m_status, m_retry, m_metrics = _read(base, "merged")
    assert sorted(m_report["hosts"]) == names
    for key in ("summary", "counts", "where", "groups", "breakdown", "health", "drift", "drift_groups"):
        assert m_report[key] == w_report[key], key
    for name in names:
        for key in ("verdict", "state", "signature", "failing_layer", "unverifiable", "where", "group"):
            assert m_report["hosts"][name].get(key) == w_report["hosts"][name].get(key), (name, key)
        layers = [dict((layer, rec.get("status")) for layer, rec in r["hosts"][name]["layers"].items()) for r in (m_report, w_report)]
        assert layers[0] == layers[1], name
    assert m_report["run"]["slice_run"] == RUN and m_report["run"]["slices"] == SLICES
    for key in ("status", "exit_status", "verified", "not_verified", "unreachable", "run_failed", "verdicts"):
        assert m_status[key] == w_status[key], key
    # why each host fails, ending with where its report is (each run's own)
    assert dict((h, why.replace(m_status["files"]["html"], "REPORT")) for h, why in m_status["failing"].items()) == dict(
        (h, why.replace(w_status["files"]["html"], "REPORT")) for h, why in w_status["failing"].items())
    assert m_status["status"] == "not_checked" and m_status["exit_status"] == 2
    assert len(m_status["unreachable"]) == 4 and len(m_status["run_failed"]) == 2 and len(m_status["not_verified"]) == 9
    # an audit proves no compute; the nodes without a driver fail at the host, the others do not
    assert set(m_status["verdicts"][h] for h in names if h.startswith("nodriver")) == {"FAILED_AT_HOST"}
    assert "FAILED_AT_HOST" not in set(m_status["verdicts"][h] for h in names if h.startswith("gpu-"))
    assert m_retry == w_retry and len(m_retry.splitlines()) == 6
    assert m_metrics == w_metrics and any(line.startswith("gpuprobe_node_verdict{") for line in m_metrics)


def _merge_again(base, name, **extra):
    thread, r = _runner(base, name, MERGE, dict(_common(base, name), gpuprobe_slice_run=RUN,
                                                gpuprobe_slice_dir=str(base / "slices"), **extra))
    thread.join()
    return r, json.loads((base / name / "status.json").read_text())


@pytest.mark.parametrize("case, extra, setup, why", [
    ("missing", {}, "hide", "1 host of the merge's selection is in no slice"),
    ("count", {"gpuprobe_slice_count": 5}, None, "has 4 slices in"),
    ("other-run", {}, "other", "is a slice of run nightly-44, not of run nightly-45"),
    ("other-mode", {"gpuprobe_mode": "full"}, None, 'was run with mode="audit", this merge with mode="full"'),
])
def test_a_partial_or_mixed_merge_is_refused(runs, case, extra, setup, why):
    base = runs[0]
    moved = []
    slices = sorted((base / "slices" / RUN).iterdir())
    if setup == "hide":
        # a slice that has not finished: its file lacks one host (the header names the hosts it checked)
        lines = slices[0].read_text().splitlines()
        head = json.loads(lines[0])
        head["hosts"] = head["hosts"][1:]
        moved.append((slices[0], slices[0].read_text()))
        slices[0].write_text("\n".join([json.dumps(head)] + lines[2:-1] + [json.dumps({"end": True, "entries": len(head["hosts"])})]) + "\n")
    elif setup == "other":
        text = slices[1].read_text()
        moved.append((slices[1], text))
        slices[1].write_text(text.replace('"run_id":"%s"' % RUN, '"run_id":"nightly-44"', 1))
    try:
        (base / case).mkdir()
        r, status = _merge_again(base, case, **extra)
    finally:
        for path, text in moved:
            path.write_text(text)
    assert r.rc == 2, _stdout(r)
    assert status["status"] == "report_not_written" and status["exit_status"] == 3, status
    assert why in status["error"], status["error"]
    assert status["hosts"] == 0 and not (base / case / "gpuprobe-report-latest.json").exists()
    assert not (base / case / "retry.txt").exists() and not (base / case / "fleet.prom").exists()
