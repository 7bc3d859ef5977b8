"""The spec did it, the runtime is blamed; the right name on the wrong library (issue 32), on a real GPU (the lead runs
this on the H200: GPUPROBE_GPU=1).

Variants of the self-built 'full' spec (run_variant: cdi layer, the probe container through each engine of
tests/gpu/test_engines_gpu.py that is up (podman; containerd over the CRI and docker under scripts/gpu-engines.sh) with the CDI device,
the compute record with the host control, the node verdict; records and verdicts go untouched to
$GPUPROBE_EVIDENCE_DIR/<name>.json):

- every device node with cgroup permissions "r" (no w) and "w" (no r): open(O_RDWR) is denied as the spec asks, so
  the verdict points at cdi, naming cdi.nvidia.cgroup_write / cdi.nvidia.cgroup_read, and the runtime record alone
  (the one rule) names the deviceNode edit;
- libcuda on a noexec mount: cdi.nvidia.libcuda_noexec WARNs before the container; the verdict points at cdi with it;
- libcuda mounted where the image's loader does not look (a directory no LD_LIBRARY_PATH names): cdi.nvidia.libcuda_path;
  no generator places the driver's library there, so the test declares that mount trusted (trusted_edits): the
  allowlist (cdi.trust.accounted) passes on the site's word and the attribution of the failure is what is judged;
- NVML's library mounted as libnvidia-ptxjitcompiler.so.1: cdi.host.library_soname FAILs before the container
  (FAILED_AT_CDI naming it; cdi.trust.accounted FAILs on the same mount after it, the driver's NVML not being where the
  generators place it); the container, run anyway here, fails PTX load with CUDA_ERROR_JIT_COMPILER_NOT_FOUND,
  which the records without the cdi layer put on the spec's JIT mount.
The other variants change only what the allowlist accepts (cgroup permissions, a noexec option): every edit is
accounted for as the generators'.
"""
import os

import pytest

from test_engines_gpu import engine  # noqa: F401 pylint: disable=unused-import
from test_runtime_compute_gpu import assert_accounted, host_record, run_variant, trust_checks  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs a real NVIDIA GPU (GPUPROBE_GPU=1)"),
]

PTXJIT = "libnvidia-ptxjitcompiler.so.1"


def _all_edits(spec):
    return [spec.get("containerEdits") or {}] + [d.get("containerEdits") or {} for d in spec["devices"]]


def _mounts(spec, name):
    return [m for e in _all_edits(spec) for m in e.get("mounts") or [] if os.path.basename(m["containerPath"]) == name]


def _statuses(record, check_id):
    return [c["status"] for c in record["checks"] if c["id"] == check_id]


def _alone(records):
    """The verdict of the runtime and compute records without the cdi layer: the one rule names the edit."""
    return node_verdict({"runtime": records["runtime"], "compute": records["compute"]})


@pytest.mark.parametrize("permissions,check", [("r", "cdi.nvidia.cgroup_write"), ("w", "cdi.nvidia.cgroup_read")])
def test_nodes_whose_cgroup_permissions_deny_open_point_at_the_spec(host_record, engine, permissions, check):  # noqa: F811 pylint: disable=redefined-outer-name
    def restrict(spec):
        for edits in _all_edits(spec):
            for node in edits.get("deviceNodes") or []:
                node["permissions"] = permissions

    records, _probe, verdict = run_variant("full", host_record, edit=restrict, engine=engine,
                                           name="%s-cgroup-%s" % (engine["runtime"], permissions))
    assert _statuses(records["cdi"], check) == ["WARN"], records["cdi"]["reason"]
    assert_accounted(records)
    assert records["runtime"]["signature"] == "runtime.device_node.open.EPERM", records["runtime"]["reason"]
    assert (verdict["verdict"], verdict["points_to"]) == ("FAILED_AT_RUNTIME", "cdi"), verdict
    assert check in [b["check"] for b in verdict["because"]], verdict
    alone = node_verdict({"runtime": records["runtime"]})
    assert alone["points_to"] == "cdi" and "permissions %s; the runtime said: open(O_RDWR) EPERM" % permissions in alone["reason"]


def test_libcuda_on_a_noexec_mount_points_at_the_spec(host_record, engine):  # noqa: F811 pylint: disable=redefined-outer-name
    def noexec(spec):
        for mount in _mounts(spec, "libcuda.so.1"):
            mount["options"] = list(mount.get("options") or []) + ["noexec"]

    records, _probe, verdict = run_variant("full", host_record, edit=noexec, engine=engine, name="%s-libcuda-noexec" % engine["runtime"])
    assert _statuses(records["cdi"], "cdi.nvidia.libcuda_noexec") == ["WARN"]
    assert_accounted(records)  # noexec is among the generators' options (their IPC sockets)
    assert verdict["verdict"] in ("FAILED_AT_RUNTIME", "FAILED_AT_COMPUTE"), verdict
    assert verdict["points_to"] == "cdi", verdict
    assert "cdi.nvidia.libcuda_noexec" in [b["check"] for b in verdict["because"]], verdict
    assert _alone(records)["points_to"] == "cdi", _alone(records)


NOWHERE = "/opt/gpuprobe-nowhere/libcuda.so.1"


def test_libcuda_where_the_loader_does_not_look_points_at_the_spec(host_record, engine):  # noqa: F811 pylint: disable=redefined-outer-name
    def elsewhere(spec):
        for mount in _mounts(spec, "libcuda.so.1"):
            mount["containerPath"] = NOWHERE

    records, _probe, verdict = run_variant("full", host_record, edit=elsewhere, engine=engine,
                                           name="%s-libcuda-elsewhere" % engine["runtime"],
                                           trusted_edits=[{"containerPath": NOWHERE, "why": "test: libcuda where the loader does not look"}])
    assert _statuses(records["cdi"], "cdi.nvidia.libcuda_path") == ["WARN"]
    assert "-> %s" % NOWHERE in assert_accounted(records, declared=True)["observed"]
    assert verdict["verdict"] in ("FAILED_AT_RUNTIME", "FAILED_AT_COMPUTE"), verdict
    assert verdict["points_to"] == "cdi", verdict
    assert "cdi.nvidia.libcuda_path" in [b["check"] for b in verdict["because"]], verdict
    assert _alone(records)["points_to"] == "cdi", _alone(records)


def test_nvml_mounted_as_the_jit_compiler_is_a_cdi_fail(host_record, engine):  # noqa: F811 pylint: disable=redefined-outer-name
    def swap(spec):
        nvml = _mounts(spec, "libnvidia-ml.so.1")
        for mount in _mounts(spec, PTXJIT):
            mount["hostPath"] = nvml[0]["hostPath"]

    records, _probe, verdict = run_variant("full", host_record, edit=swap, engine=engine, name="%s-nvml-as-ptxjit" % engine["runtime"])
    soname = [c for c in records["cdi"]["checks"] if c["id"] == "cdi.host.library_soname" and c["subject"].endswith(PTXJIT)]
    assert [c["status"] for c in soname] == ["FAIL"] and "libnvidia-ml.so.1" in soname[0]["observed"], soname
    assert (verdict["verdict"], verdict["signature"], verdict["points_to"]) == (
        "FAILED_AT_CDI", "cdi.host.library_soname", "cdi"), verdict
    unaccounted = [c for c in trust_checks(records["cdi"]) if c["status"] == "FAIL"]
    assert len(unaccounted) == 1 and "-> %s" % _mounts_path(records, PTXJIT) in unaccounted[0]["observed"], unaccounted
    compute = records["compute"]
    if compute["status"] == "FAIL":  # seen on the H200 before this check existed: PTX load, JIT compiler not found
        assert compute["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", compute["reason"]
        alone = _alone(records)
        assert alone["points_to"] == "cdi" and "-> %s" % _mounts_path(records, PTXJIT) in alone["reason"], alone


def _mounts_path(records, name):
    edits = records["cdi"]["evidence"]["expected_edits"]
    return [m["containerPath"] for m in edits["mounts"] if os.path.basename(m["containerPath"]) == name][0]
