"""The host layer's per-GPU health checks (host.health.*) on the real reference GPU host (H200, driver root
/usr/local/nvidia). Run there with GPUPROBE_GPU=1 (scripts/gpu-e2e.sh); skipped everywhere else. Nothing is faked.

With GPUPROBE_EVIDENCE_DIR set, the untouched host record is written to $GPUPROBE_EVIDENCE_DIR/health.json: it says
which readings that machine exposes and which are NOT_RUN, with NVML's code. Only what must hold on a healthy lent
GPU is asserted: no host.health.* FAIL, every check has a status, and every NOT_RUN one says why.
"""
import json
import os

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._health import CHECKS
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import collect_host
from ansible_collections.gpuprobe.layers.plugins.module_utils._result import FAIL, NOT_RUN, STATUSES, validate_record

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs the GPU host (GPUPROBE_GPU=1)")]
DRIVER_ROOT = os.environ.get("GPUPROBE_DRIVER_ROOT", "/usr/local/nvidia")
PER_GPU = sorted(cid for cid in CHECKS if cid != "host.health.xid")


@pytest.fixture(scope="module")
def record():
    rec = collect_host(driver_root=DRIVER_ROOT)
    evidence_dir = os.environ.get("GPUPROBE_EVIDENCE_DIR")
    if evidence_dir:
        os.makedirs(evidence_dir, exist_ok=True)
        with open(os.path.join(evidence_dir, "health.json"), "w") as f:
            json.dump(rec, f, indent=2, sort_keys=True)
            f.write("\n")
    return rec


def _health(record):
    return [c for c in record["checks"] if c["id"].startswith("host.health.")]


def test_the_record_is_valid_and_reads_every_gpu(record):
    assert validate_record(record) == []
    nvml = record["evidence"]["nvml"]
    assert nvml["ok"] and nvml["gpu_count"] >= 1
    readings = record["evidence"]["health"]["gpus"]
    assert sorted(g["uuid"] for g in readings) == sorted(g["uuid"] for g in nvml["gpus"])
    assert all(g["uuid"].startswith("GPU-") for g in readings)


def test_every_per_gpu_check_ran_or_says_why_for_every_gpu(record):
    checks = _health(record)
    for gpu in record["evidence"]["health"]["gpus"]:
        mine = set(c["id"] for c in checks if c["subject"] and gpu["uuid"] in c["subject"])
        # every per-GPU reading for this GPU; the Xid check is this GPU's too when the kernel log was read (seen on
        # the H200: 'none in 359 line(s) of dmesg --notime'), else one node-wide NOT_RUN saying why
        assert mine - {"host.health.xid"} == set(PER_GPU), gpu["uuid"]
    for check in checks:
        assert check["status"] in STATUSES
        if check["status"] == NOT_RUN:
            # NVML's code (NVML_ERROR_*, or the fabric state NVML_GPU_FABRIC_STATE_NOT_SUPPORTED), a missing pynvml
            # function, or why the kernel log was not read
            assert check["observed"] and ("NVML_" in check["observed"] or "pynvml has no" in check["observed"]
                                          or check["observed"].startswith("kernel log not read: ")), check


def test_xid_check_ran_or_says_why(record):
    xid = [c for c in _health(record) if c["id"] == "host.health.xid"]
    assert xid
    log = record["evidence"]["health"]["kernel_log"]
    assert (log["source"] is None) == (log["error"] is not None)


def test_no_health_fail_on_a_healthy_lent_gpu(record):
    failed = [c for c in _health(record) if c["status"] == FAIL]
    assert failed == [], failed
