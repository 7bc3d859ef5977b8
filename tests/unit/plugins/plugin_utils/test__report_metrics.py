"""plugin_utils/_report/metrics.py: the series of a host entry, bounded and escaped label values, the text formats
(issue 36.4). promtool and node_exporter read real files in tests/integration/test_metrics.py."""
import re

import pytest

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import metrics
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import model

UUID0 = "GPU-a198196e-3adf-2f39-7708-ea4742cf7baf"
UUID1 = "GPU-b198196e-3adf-2f39-7708-ea4742cf7baf"
SAMPLE = re.compile(r'^(?P<name>[a-z_]+)(?:\{(?P<labels>(?:[A-Za-z_]+="(?:[^"\\\n]|\\.)*",?)*)\})? (?P<value>\S+)$')


def _entry(verdict="COMPUTE_VERIFIED", failing=None, signature=None, gpus=None, checks=None, **extra):
    entry = {"name": "n1", "verdict": verdict, "failing_layer": failing, "signature": signature, "points_to": failing,
             "reachable": True, "unverifiable": None, "state": verdict,
             "runtimes": [{"runtime": "podman"}], "gpus": gpus if gpus is not None else [
                 {"index": 0, "uuid": UUID0, "expected": True, "status": "PASS"},
                 {"index": 1, "uuid": UUID1, "expected": True, "status": "PASS"}],
             "layers": dict((layer, {"status": "PASS"}) for layer in ("host", "cdi", "runtime", "compute"))}
    entry["layers"]["k8s"] = {"status": "NOT_RUN"}
    entry["layers"]["host"]["checks"] = checks or []
    # the host layer lists the node's GPUs (a GPU it does not list is never verified: issue 43.3)
    entry["layers"]["host"]["evidence"] = {"gpus": [{"index": g.get("index"), "uuid": g.get("uuid")} for g in entry["gpus"]]}
    entry.update(extra)
    return entry


def _parse(text):
    """(name, {label: value}, value) of every sample line; every other line is HELP, TYPE, UNIT or EOF."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE|UNIT) gpuprobe_[a-z_]+ .+$|^# EOF$", line), line
            continue
        m = SAMPLE.match(line)
        assert m, line
        labels = dict((k, re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), v))
                      for k, v in re.findall(r'([A-Za-z_]+)="((?:[^"\\\n]|\\.)*)"', m.group("labels") or ""))
        out.append((m.group("name"), labels, float(m.group("value"))))
    return out


def _find(samples, name, **labels):
    return [v for n, lab, v in samples if n == name and all(lab.get(k) == want for k, want in labels.items())]


def test_gpu_series_join_dcgm_exporters_on_uuid():
    """dcgm-exporter names a GPU's UUID ``UUID``: every GPU series carries it, so a query joins the two on(UUID)."""
    samples = _parse(metrics.node_text(_entry(checks=[{"id": "host.health.xid", "status": "FAIL", "subject": "GPU 1 " + UUID1}]),
                                       "full", 1700000000))
    gpu_series = [(n, lab) for n, lab, _v in samples if n.startswith("gpuprobe_gpu_")]
    assert len(gpu_series) >= 4 and all(lab["UUID"] == lab["uuid"] and lab["UUID"] in (UUID0, UUID1) for _n, lab in gpu_series)


def test_a_gpu_the_host_layer_does_not_list_is_never_verified():
    entry = _entry()
    entry["gpus"].append({"index": 2, "uuid": "GPU-deadbeef-3adf-2f39-7708-ea4742cf7baf", "expected": True, "status": "PASS"})
    for text in (metrics.node_text(entry, "full", 1700000000), metrics.fleet_text(
            {"hosts": {"n1": entry}, "counts": {}, "summary": {}}, lambda name: entry, "full", 1700000000)):
        samples = _parse(text)
        assert _find(samples, "gpuprobe_gpu_verified", uuid="GPU-deadbeef-3adf-2f39-7708-ea4742cf7baf") == [0]
        assert _find(samples, "gpuprobe_gpu_verified", uuid=UUID0) == [1]


def test_a_verified_node():
    samples = _parse(metrics.node_text(_entry(), "full", 1700000000, 2.5))
    assert _find(samples, "gpuprobe_node_verified", mode="full") == [1]
    assert _find(samples, "gpuprobe_node_checked") == [1]
    verdicts = dict((lab["verdict"], v) for n, lab, v in samples if n == "gpuprobe_node_verdict")
    assert verdicts == {"COMPUTE_VERIFIED": 1, "INCONCLUSIVE": 0, "FAILED_AT_HOST": 0, "FAILED_AT_CDI": 0,
                        "FAILED_AT_RUNTIME": 0, "FAILED_AT_COMPUTE": 0}
    assert _find(samples, "gpuprobe_gpu_verified", gpu="0", uuid=UUID0) == [1]
    assert _find(samples, "gpuprobe_node_last_run_timestamp_seconds") == [1700000000]
    assert _find(samples, "gpuprobe_node_run_duration_seconds") == [2.5]
    assert _find(samples, "gpuprobe_node_failure_info", failing_layer="", signature="", runtime="podman") == [1]
    # the node's own file has no host label (node_exporter's instance says which node)
    assert all("host" not in lab for _n, lab, _v in samples)


def test_a_failed_node_and_its_health_findings():
    checks = [{"id": "host.health.ecc_errors", "status": "FAIL", "subject": "GPU 0 %s" % UUID0},
              {"id": "host.health.row_remap", "status": "WARN", "subject": "GPU 0 %s" % UUID0},
              {"id": "host.health.pcie_link", "status": "PASS", "subject": "GPU 1 %s" % UUID1},
              {"id": "host.health.xid", "status": "FAIL", "subject": "kernel log"}]
    entry = _entry("FAILED_AT_CDI", "cdi", "cdi.spec.version", checks=checks,
                   gpus=[{"index": 0, "uuid": UUID0, "expected": True, "status": "PASS"}])
    samples = _parse(metrics.node_text(entry, "audit", 1700000000))
    assert _find(samples, "gpuprobe_node_verified") == [0]
    assert _find(samples, "gpuprobe_node_verdict", verdict="FAILED_AT_CDI") == [1]
    assert _find(samples, "gpuprobe_node_failure_info", failing_layer="cdi", signature="cdi.spec.version") == [1]
    # a kernel that ran behind a failed cdi layer does not verify the GPU
    assert _find(samples, "gpuprobe_gpu_verified", gpu="0") == [0]
    assert _find(samples, "gpuprobe_gpu_health_findings", gpu="0", status="FAIL") == [1]
    assert _find(samples, "gpuprobe_gpu_health_findings", gpu="0", status="WARN") == [1]
    assert _find(samples, "gpuprobe_gpu_health_findings", gpu="1", status="FAIL") == [0]
    assert _find(samples, "gpuprobe_gpu_health_finding", gpu="0", check="host.health.ecc_errors", status="FAIL") == [1]
    # a finding whose subject is not a GPU (the kernel log) has no GPU series
    assert not _find(samples, "gpuprobe_gpu_health_finding", check="host.health.xid")
    assert not _find(samples, "gpuprobe_node_run_duration_seconds")


@pytest.mark.parametrize("field,value,label,expected", [
    ("signature", 'cdi.spec.version"} 1\ngpuprobe_node_verified{mode="full"} 1', "signature", "other"),
    ("signature", "x" * 161, "signature", "other"),
    ("signature", "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "signature", "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"),
    ("points_to", "Image Of Doom", "points_to", "other"),
    ("failing_layer", "gpu", "failing_layer", "other"),
])
def test_label_values_are_bounded(field, value, label, expected):
    entry = _entry("FAILED_AT_CDI", "cdi", "cdi.spec.version")
    entry[field] = value
    samples = _parse(metrics.node_text(entry, "full", 1))
    (labels,) = [lab for n, lab, _v in samples if n == "gpuprobe_node_failure_info"]
    assert labels[label] == expected


def test_a_uuid_that_is_not_one_is_dropped_and_a_host_name_is_escaped():
    entry = _entry(gpus=[{"index": 0, "uuid": 'GPU-"} 1\nevil', "expected": True, "status": "PASS"}])
    host = 'rack"7\\node\n1'
    report = {"hosts": {host: entry}, "counts": {"by_state": {"COMPUTE_VERIFIED": 1}},
              "summary": {"gpus": {"verified": 1, "failed": 0, "not_run": 0}}}
    text = metrics.fleet_text(report, lambda name: entry, "postcheck", 1700000000)
    assert text.endswith("# EOF\n") and "# UNIT gpuprobe_node_last_run_timestamp_seconds seconds\n" in text
    samples = _parse(text)
    # the host label holds the name with its newline written as a visible escape (issue 43.6)
    shown = 'rack"7\\node\\n1'
    assert _find(samples, "gpuprobe_gpu_verified", host=shown, uuid="") == [1]
    assert _find(samples, "gpuprobe_node_state", host=shown, state="COMPUTE_VERIFIED") == [1]
    assert _find(samples, "gpuprobe_fleet_hosts", state="COMPUTE_VERIFIED") == [1]
    assert _find(samples, "gpuprobe_fleet_hosts", state="UNREACHABLE") == [0]
    assert _find(samples, "gpuprobe_fleet_gpus", status="verified") == [1]
    # one sample per line: nothing the node or the inventory sent can start a line
    assert len([line for line in text.splitlines() if not line.startswith("#")]) == len(samples)


def test_an_unreachable_host_in_the_fleet():
    entry = model.host_entry("gone", None, unreachable="ssh: connect to host gone port 22: Connection refused")
    report = {"hosts": {"gone": entry}, "counts": {"by_state": {"UNREACHABLE": 1}}, "summary": {"gpus": {}}}
    samples = _parse(metrics.fleet_text(report, lambda name: entry, "audit", 5))
    assert _find(samples, "gpuprobe_node_checked", host="gone") == [0]
    assert _find(samples, "gpuprobe_node_state", host="gone", state="UNREACHABLE") == [1]
    assert _find(samples, "gpuprobe_node_verified", host="gone") == [0]
    assert _find(samples, "gpuprobe_fleet_hosts", state="UNREACHABLE") == [1]


def test_every_family_is_named_by_the_conventions():
    for name in metrics.FAMILIES:
        assert re.match(r"^gpuprobe_[a-z_]+$", name) and not name.endswith("_total"), name
        assert name.endswith("_seconds") == (name in metrics.UNITS), name
