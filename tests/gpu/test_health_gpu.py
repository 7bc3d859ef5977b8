"""The host layer's per-GPU health checks (host.health.*) on the real reference GPU host (H200, driver root
/usr/local/nvidia). Run there with GPUPROBE_GPU=1 (scripts/gpu-e2e.sh); skipped everywhere else. Nothing is faked.

With GPUPROBE_EVIDENCE_DIR set, the untouched host record is written to $GPUPROBE_EVIDENCE_DIR/health.json: it says
which readings that machine exposes and which are NOT_RUN, with NVML's code. Only what must hold on a healthy lent
GPU is asserted: no host.health.* FAIL, every check has a status, and every NOT_RUN one says why.

Every counter is read: the NVLink state of each link 0..NVML_NVLINK_MAX_LINKS-1 (a one-GPU H200 VM most likely
answers NVML_ERROR_NOT_SUPPORTED on each: host.health.nvlink NOT_RUN with that code), the row-remap bank histogram,
the reset fields of drivers before R570, the fabric info through nvml.h's own layout with its health mask, and per
MIG device the uncorrected SRAM counts (none without MIG). The readings of every counter, as read, also go to
$GPUPROBE_EVIDENCE_DIR/health-readings.json with the pynvml version that read them (a pynvml release with an
80-byte fabric cluster UUID is why the fabric is read through our own structures). dcgmi diag runs at level 1 only
when GPUPROBE_DCGM_DIAG=1 is set (and dcgmi exists; the GPU must be idle): its record goes to health-dcgm.json.
"""
import json
import os
import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")   # the pynvml shim warns that it is deprecated in favour of nvidia-ml-py
    import pynvml

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.judge import PER_GPU_CHECKS
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health.limits import DEFAULT_THRESHOLDS
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.layer import record as host_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, STATUSES, WARN, validate_record

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs the GPU host (GPUPROBE_GPU=1)")]
DRIVER_ROOT = os.environ.get("GPUPROBE_DRIVER_ROOT", "/usr/local/nvidia")
PER_GPU = sorted(PER_GPU_CHECKS)
# the readings this test must find for every GPU (as read: a value, or None with the NVML error in errors)
READINGS = ("ecc_mode", "ecc_errors", "retired_pages", "remapped_rows", "row_remap_histogram", "clock_event_reasons",
            "temperature_c", "temperature_slowdown_c", "temperature_shutdown_c", "pcie", "recovery_action", "reset_status",
            "fabric", "nvlink", "mig")


def _write(name, data):
    evidence_dir = os.environ.get("GPUPROBE_EVIDENCE_DIR")
    if evidence_dir:
        os.makedirs(evidence_dir, exist_ok=True)
        with open(os.path.join(evidence_dir, name), "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")


def _pynvml_version():
    try:
        from importlib import metadata  # pylint: disable=import-outside-toplevel
        return dict((dist, metadata.version(dist)) for dist in ("nvidia-ml-py", "pynvml") if _installed(metadata, dist))
    except ImportError:
        return {}


def _installed(metadata, dist):
    try:
        metadata.version(dist)
        return True
    except metadata.PackageNotFoundError:
        return False


@pytest.fixture(scope="module")
def record():
    rec = host_record(driver_root=DRIVER_ROOT)
    _write("health.json", rec)
    _write("health-readings.json", {"pynvml": _pynvml_version(), "driver": rec["versions"]["driver"],
                                    "health": rec["evidence"]["health"]})
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
        # (mig_ecc is per MIG device, dcgm_diag per DCGM result: the tests below)
        assert mine - {"host.health.xid", "host.health.mig_ecc", "host.health.dcgm_diag"} == set(PER_GPU), gpu["uuid"]
    for check in checks:
        assert check["status"] in STATUSES
        if check["status"] == NOT_RUN:
            # NVML's code (NVML_ERROR_*, or the fabric state NVML_GPU_FABRIC_STATE_NOT_SUPPORTED), a missing pynvml
            # function, no NVLink up on a GPU without fabric or in MIG mode, dcgmi diag not asked, or why the kernel log
            # was not read
            assert check["observed"] and ("NVML_" in check["observed"] or "pynvml has no" in check["observed"]
                                          or check["observed"].startswith("no NVLink is up and NVML reports no NVLink fabric")
                                          or check["observed"].startswith("MIG enabled: NVLink not used")
                                          or check["id"] == "host.health.dcgm_diag"
                                          or check["observed"].startswith("kernel log not read: ")), check


def test_xid_check_ran_or_says_why(record):
    xid = [c for c in _health(record) if c["id"] == "host.health.xid"]
    assert xid
    log = record["evidence"]["health"]["kernel_log"]
    assert (log["source"] is None) == (log["error"] is not None)


def test_no_health_fail_on_a_healthy_lent_gpu(record):
    failed = [c for c in _health(record) if c["status"] == FAIL]
    assert failed == [], failed


def test_every_counter_was_read_or_says_nvmls_code(record):
    """Each reading is there for every GPU, as a value or None with its NVML error (the code name) in errors."""
    health = record["evidence"]["health"]
    assert health["thresholds"] == DEFAULT_THRESHOLDS
    for gpu in health["gpus"]:
        missing = [k for k in READINGS if k not in gpu]
        assert missing == [], (gpu["uuid"], missing)
        errors = gpu["errors"]
        for key in ("row_remap_histogram", "fabric"):
            assert gpu[key] is not None or "NVML_" in errors.get(key, "") or "pynvml has no" in errors.get(key, ""), (key, errors)
        nvlink = gpu["nvlink"]
        # every link 0..NVML_NVLINK_MAX_LINKS-1 answered: a state, or an NVML error recorded for that link
        answered = [int(k) for k in nvlink["links"]] + [link for links in nvlink["errors"].values() for link in links]
        assert sorted(answered) == list(range(int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)))), nvlink
        assert all("NVML_" in text for text in nvlink["errors"]), nvlink["errors"]
        reset = gpu["reset_status"]
        for key in ("reset_required", "drain_and_reset"):
            assert reset[key] is not None or "NVML_" in errors.get(key, ""), (key, errors)
        # the fabric structure is nvml.h's: a 16-byte cluster UUID (32 hex digits)
        if gpu["fabric"] is not None:
            assert len(gpu["fabric"]["cluster_uuid"]) == 32, gpu["fabric"]


def test_nvlink_check_on_this_machine(record):
    """A GPU without NVLink (the one-GPU H200 VM, most likely) is NOT_RUN with NVML's code, never PASS."""
    for check in [c for c in _health(record) if c["id"] == "host.health.nvlink"]:
        if check["status"] == NOT_RUN:
            assert "NVML_ERROR_" in check["observed"] or "no NVLink is up" in check["observed"], check
        else:
            assert check["status"] in (PASS, WARN) and "links" in check["observed"], check


def test_mig_instances_are_read_per_instance(record):
    nvml = dict((g["uuid"], g) for g in record["evidence"]["nvml"]["gpus"])
    for gpu in record["evidence"]["health"]["gpus"]:
        instances = nvml[gpu["uuid"]].get("mig_devices") or []
        assert sorted(m["uuid"] for m in gpu["mig"]) == sorted(d["uuid"] for d in instances)
    rows = [c for c in _health(record) if c["id"] == "host.health.mig_ecc"]
    assert len(rows) == sum(len(g["mig"]) for g in record["evidence"]["health"]["gpus"])


@pytest.mark.skipif(os.environ.get("GPUPROBE_DCGM_DIAG") != "1", reason="dcgmi diag -r 1 only when GPUPROBE_DCGM_DIAG=1")
def test_dcgm_diag_level_1():
    rec = host_record(driver_root=DRIVER_ROOT, dcgm_diag=1)
    _write("health-dcgm.json", rec)
    diag = rec["evidence"]["health"]["dcgm_diag"]
    rows = [c for c in _health(rec) if c["id"] == "host.health.dcgm_diag"]
    assert rows and all(c["status"] in STATUSES for c in rows)
    if not diag["ran"]:
        assert [c["status"] for c in rows] == [NOT_RUN] and diag["why"], diag


def test_pcie_replays_below_dcgms_limits_are_not_a_warn(record):
    """The H200s lent here read 1 or 2 replays since the driver loaded: information, never a WARN; the counter is read a
    second time in the same NVML session (issue 32.3)."""
    pcie = dict((g["uuid"], g["pcie"]) for g in record["evidence"]["health"]["gpus"])
    for check in [c for c in _health(record) if c["id"] == "host.health.pcie_replay" and c["status"] != NOT_RUN]:
        reading = pcie[check["subject"].split()[-1]]
        assert reading["replay_counter_end"] is not None and reading["replay_interval_s"] >= 0, reading
        if reading["replay_counter"] < DEFAULT_THRESHOLDS["pcie_replay_warn"] and "above it" not in check["observed"]:
            assert check["status"] == PASS, check
