"""Node-style CDI specs (kind nvidia.com/gpu, the shape nvidia-ctk writes) on a real GPU: identity,
attribution and isolation (the lead runs this on the H200: GPUPROBE_GPU=1).

Each case writes ONE spec of kind nvidia.com/gpu under /var/run/cdi (never /etc/cdi), named
``nvidia-gpuprobe-nodestyle-<id>.yaml``, runs the four layers through the real module code (host, cdi,
runtime + in-container compute, host control), computes the node verdict, removes the spec, and
checks that the verdict, the failing layer and ``points_to`` are the ones the cause calls for:

- identity (issue 9): a spec whose device "1" gives /dev/nvidia0, a request for nvidia.com/gpu=1 on a
  one-GPU node, a device named by a UUID that is not the GPU behind its node -> FAILED_AT_CDI with an
  identity check; the honest spec verifies GPU 0 by UUID;
- attribution (issue 10): cdiVersion 0.6.0 for podman 4.3.1 -> FAILED_AT_CDI (the runtime cannot read it);
  the missing nvidiactl and the stub first on LD_LIBRARY_PATH are in test_runtime_compute_gpu.py;
- isolation (issue 11): a leftover self-built spec of a crashed run beside a self-built run changes nothing.

The records and verdicts are written untouched to $GPUPROBE_EVIDENCE_DIR/nodestyle-<case>.json.
"""
import copy
import json
import os
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _runtime_cleanup
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import VERIFY_NODE_ARGSPEC
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs a real NVIDIA GPU (GPUPROBE_GPU=1)"),
]

# the collection's own default (verify_probe_image), the image scripts/build-probe-image.sh builds and gpu-e2e.sh uses
IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", VERIFY_NODE_ARGSPEC["probe_image"]["default"])
DRIVER_ROOT = os.environ.get("GPUPROBE_DRIVER_ROOT", "/usr/local/nvidia")
SPEC_DIR = "/var/run/cdi"
EVIDENCE_DIR = os.environ.get("GPUPROBE_EVIDENCE_DIR")
KIND = "nvidia.com/gpu"
FOREIGN_UUID = "GPU-00000000-1111-2222-3333-444444444444"


@pytest.fixture(scope="module")
def host_record():
    record = _host.record(driver_root=DRIVER_ROOT)
    assert record["status"] != "FAIL", record["reason"]
    return record


def _gpu0(host):
    gpus = host["evidence"].get("gpus") or host["evidence"]["nvml"]["gpus"]
    return gpus[0]


def node_style_spec(host, case):
    """A spec of kind nvidia.com/gpu built from the self-built 'full' spec's edits: devices "0", the GPU's
    UUID and "all" (nvidia-ctk's index + uuid strategies), then the case's one change."""
    base = _cdi_spec.build_spec("nodestyle-base", variant="full", driver_root=DRIVER_ROOT, host=host)
    gpu = _gpu0(host)
    gpu_edits = next(d for d in base["devices"] if d["name"] != "all")["containerEdits"]
    spec = {"cdiVersion": "0.5.0", "kind": KIND, "containerEdits": copy.deepcopy(base["containerEdits"]),
            "devices": [{"name": "0", "containerEdits": copy.deepcopy(gpu_edits)},
                        {"name": gpu["uuid"], "containerEdits": copy.deepcopy(gpu_edits)},
                        {"name": "all", "containerEdits": copy.deepcopy(gpu_edits)}]}
    env = [e for e in spec["containerEdits"]["env"] if not e.startswith("GPUPROBE_")]
    spec["containerEdits"]["env"] = env
    request = "%s=0" % KIND
    if case == "extra_index_1":          # device "1" that gives /dev/nvidia0
        spec["devices"].append({"name": "1", "containerEdits": copy.deepcopy(gpu_edits)})
    elif case == "request_index_1":      # the node has no GPU 1; "1" exists in the spec but gives GPU 0
        spec["devices"].append({"name": "1", "containerEdits": copy.deepcopy(gpu_edits)})
        request = "%s=1" % KIND
    elif case == "wrong_uuid":           # a UUID that is not the GPU behind /dev/nvidia0
        spec["devices"][1]["name"] = FOREIGN_UUID
        request = "%s=%s" % (KIND, FOREIGN_UUID)
    elif case == "by_uuid":
        request = "%s=%s" % (KIND, gpu["uuid"])
    elif case == "cdi_0_6_0":
        spec["cdiVersion"] = "0.6.0"
    return spec, request


def run_case(host, case):
    tag = uuid.uuid4().hex[:6]
    spec, request = node_style_spec(host, case)
    path = os.path.join(SPEC_DIR, "nvidia-gpuprobe-nodestyle-%s.yaml" % tag)
    os.makedirs(SPEC_DIR, exist_ok=True)
    with open(path, "w") as f:
        f.write(_cdi_spec.render(spec))
    run_id = "nodestyle-%s-%s" % (case.replace("_", "-"), tag)
    try:
        cdi = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[request], host=host)
        runtime, probe = _runtime_layer.record({
            "run_id": run_id, "image": IMAGE, "cdi_devices": [request], "runtime": "podman", "timeout": 90,
            "expected_edits": cdi["evidence"]["expected_edits"], "compute": True, "host": host})
        expected_gpus = ((cdi["evidence"].get("identity") or {}).get("expected_gpus")) or []
        compute = _compute_layer.record(probe, runtime, host_record=host, host_control=True, timeout=90,
                                        expected_gpus=expected_gpus)
    finally:
        os.unlink(path)
        leftovers = _runtime_cleanup.cleanup(run_id=run_id, runtime="podman", spec_dir=SPEC_DIR)
    records = {"host": host, "cdi": cdi, "runtime": runtime, "compute": compute}
    verdict = node_verdict(records)
    if EVIDENCE_DIR:
        os.makedirs(EVIDENCE_DIR, exist_ok=True)
        with open(os.path.join(EVIDENCE_DIR, "nodestyle-%s.json" % case), "w") as f:
            json.dump({"case": case, "request": request, "spec": spec,
                       "records": dict(records, probe=probe), "verdict": verdict}, f, indent=2, sort_keys=True,
                      default=str)
    for layer in ("cdi", "runtime", "compute"):
        assert validate_record(records[layer]) == [], layer
    assert leftovers["containers"] == [] and leftovers["errors"] == [], leftovers
    return records, verdict


def _ids(record, status):
    return set(c["id"] for c in record["checks"] if c["status"] == status)


@pytest.mark.parametrize("case", ["full", "by_uuid"])
def test_honest_node_spec_verifies_gpu0_by_uuid(host_record, case):
    records, verdict = run_case(host_record, case)
    gpu = _gpu0(host_record)
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict
    rows = records["compute"]["evidence"]["gpus"]
    assert [r["uuid"] for r in rows if r["expected"]] == [gpu["uuid"]], rows
    assert all(r["status"] == "PASS" for r in rows if r["expected"]), rows
    assert [g["uuid"] for g in records["cdi"]["evidence"]["identity"]["expected_gpus"]] == [gpu["uuid"]]
    # every edit of the node-style spec is accounted for as the generators' (cdi.trust.accounted), none declared
    trust = [c for c in records["cdi"]["checks"] if c["id"] == "cdi.trust.accounted"]
    assert [c["status"] for c in trust] == ["PASS"] and "declared" not in trust[0]["observed"], trust


@pytest.mark.parametrize("case", ["extra_index_1", "request_index_1", "wrong_uuid"])
def test_identity_lies_fail_at_cdi(host_record, case):
    records, verdict = run_case(host_record, case)
    assert verdict["verdict"] == "FAILED_AT_CDI", verdict
    assert verdict["signature"].startswith("cdi.identity"), verdict


def test_spec_version_the_runtime_cannot_read_fails_in_cdi(host_record):
    records, verdict = run_case(host_record, "cdi_0_6_0")
    assert verdict["verdict"] == "FAILED_AT_CDI", verdict
    assert "cdi.runtime.spec_version" in _ids(records["cdi"], "FAIL"), records["cdi"]["reason"]
    # what podman itself said, recorded as evidence of the prediction
    assert records["runtime"]["status"] in ("FAIL", "NOT_RUN"), records["runtime"]["reason"]


def test_leftover_self_built_spec_of_a_crashed_run_changes_nothing(host_record):
    """A crashed run's self-built spec stays in /var/run/cdi (its owner is gone only once cleanup says so); a new
    self-built run beside it resolves its own kind and is verified. Before per-run kinds, the two specs shared
    gpuprobe.local/gpu and podman dropped both devices (FAILED_AT_CDI on a healthy node)."""
    tag = uuid.uuid4().hex[:6]
    crashed = _cdi_spec.build_spec("crashed-%s" % tag, variant="full", driver_root=DRIVER_ROOT, host=host_record)
    crashed_path = _cdi_spec.write_spec(crashed, SPEC_DIR, "crashed-%s" % tag)
    run_id = "selfbuilt-%s" % tag
    try:
        mine = _cdi_spec.build_spec(run_id, variant="full", driver_root=DRIVER_ROOT, host=host_record)
        _cdi_spec.write_spec(mine, SPEC_DIR, run_id)
        device = "%s=0" % mine["kind"]
        cdi = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[device], host=host_record)
        runtime, probe = _runtime_layer.record({
            "run_id": run_id, "image": IMAGE, "cdi_devices": [device], "runtime": "podman", "timeout": 90,
            "expected_edits": cdi["evidence"]["expected_edits"], "compute": True, "host": host_record})
        compute = _compute_layer.record(probe, runtime, host_record=host_record, host_control=True, timeout=90,
                                        expected_gpus=cdi["evidence"]["identity"]["expected_gpus"])
    finally:
        _cdi_spec.remove_spec(SPEC_DIR, run_id)
        os.unlink(crashed_path)
        _runtime_cleanup.cleanup(run_id=run_id, runtime="podman", spec_dir=SPEC_DIR)
    records = {"host": host_record, "cdi": cdi, "runtime": runtime, "compute": compute}
    verdict = node_verdict(records)
    if EVIDENCE_DIR:
        os.makedirs(EVIDENCE_DIR, exist_ok=True)
        with open(os.path.join(EVIDENCE_DIR, "leftover-crashed-run.json"), "w") as f:
            json.dump({"crashed_kind": crashed["kind"], "kind": mine["kind"], "records": dict(records, probe=probe),
                       "verdict": verdict}, f, indent=2, sort_keys=True, default=str)
    assert crashed["kind"] != mine["kind"]
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict
