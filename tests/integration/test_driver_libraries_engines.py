"""Issue 42 items 3 and 4, with REAL podman 4.3.1 + runc and REAL containerd 1.7.24 over the CRI (the engines lab of
test_engine_drills): what a spec puts into the probe's process, or changes of the probe on the host, never earns
COMPUTE_VERIFIED.

- Row 5 of the issue: the spec mounts a libnvidia-ml.so.1 that is not the driver's (tests/unit/fixtures/host/
  fake_driver.c built as NVML: its code runs in the probe, which loads NVML). Its libcuda and JIT compiler are the
  driver root's own files (the fake driver built as the host's), so the rest binds; the probe reports every driver
  library mapped in its process and compute.driver.binding FAILs naming libnvidia-ml.so.1. The same for the JIT
  compiler CUDA loads at PTX load (the fake libcuda dlopens it there, as the driver's does). The control: the driver
  root's own NVML is bound, and the node is COMPUTE_VERIFIED.
- Row 6: a createRuntime hook of the spec finds the probe's bind-mount source in the bundle's config.json and rewrites
  it on the host (the file then runs in the container). The runtime layer looks at the file again once the container
  is gone: runtime.probe.unchanged FAILs and the verdict is FAILED_AT_CDI cdi.inject.probe_integrity.

The test's own files, env and hook are declared trusted to the cdi layer (trusted_edits), so its trust check
(cdi.trust.accounted, tested on its own) passes and does not stop the probe: what is judged here is what the probe and
the runtime layer now do on their own.
"""
import os

import pytest

from test_engine_drills import engine, lab  # noqa: F401 pylint: disable=unused-import
from test_fake_driver_podman import CUDA, DRIVER, GPU, PTXJIT_IN_CONTAINER, _build, _host
from test_probe_trust_engines import RO
from replaced_probe import REWRITE_HOOK as REWRITE
import verdictlab  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from test_runtime_podman import LIB_IN_CONTAINER

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import PROBE_INTEGRITY, node_verdict

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("engine", ["podman", "containerd"], indirect=True)]

NVML_IN_CONTAINER = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"


def _driver_edits(lab_, nvml=None, ptxjit=None):  # noqa: F811 pylint: disable=redefined-outer-name
    """The fake driver's edits: the driver root's own libcuda, NVML from ``nvml`` and the JIT compiler from ``ptxjit``
    (None: the driver root's own)."""
    root = os.path.join(lab_.base, "driver", "lib64")
    own = dict((name, _build(os.path.join(root, "%s.so.%s" % (name, DRIVER)), name, soname="%s.so.1" % name))
               for name in ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler"))
    return {"env": ["FAKE_GPU_UUID=%s" % GPU, "FAKE_GPU_NAME=NVIDIA H200", "FAKE_CUDA_DRIVER_VERSION=%d" % CUDA],
            "deviceNodes": [lab_.node("nvidia0", 1, 3), lab_.node("nvidiactl", 1, 5), lab_.node("nvidia-uvm", 1, 7)],
            "mounts": [{"hostPath": own["libcuda"], "containerPath": LIB_IN_CONTAINER, "options": RO},
                       {"hostPath": ptxjit or own["libnvidia-ptxjitcompiler"], "containerPath": PTXJIT_IN_CONTAINER,
                        "options": RO},
                       {"hostPath": nvml or own["libnvidia-ml"], "containerPath": NVML_IN_CONTAINER, "options": RO}]}


def _node(lab_, edits):  # noqa: F811 pylint: disable=redefined-outer-name
    """The node's four records, the cdi layer told that the test's own files, env and hook are the site's declared
    trusted edits (trusted_edits: cdi.trust.accounted PASSes on them), so what is left is what the probe's side
    decides; the gate is not applied."""
    lab_.write_spec(edits)
    host = _host(os.path.join(lab_.base, "driver"))
    declared = [{"hostPath": os.path.join(lab_.base, "*"), "why": "the test's driver root, impostors and device nodes"},
                {"env": "FAKE_*"}, {"env": "GPUPROBE_*"}, {"hook": "/usr/bin/python3"}]
    cdi = _cdi_layer.record(spec_dirs=[os.path.dirname(lab_.spec_path)], discover_runtime_dirs_=False,
                            devices=[lab_.device], kinds=[lab_.device.split("=")[0]], trusted_edits=declared)
    runtime, probe = lab_.run(cdi["evidence"]["expected_edits"], host=host)
    compute = _compute_layer.record(probe, runtime, host_record=host, host_runner=verdictlab.passing_control,
                                    timeout=30, expected_gpus=[{"uuid": GPU, "index": 0, "minor": 0, "name": "NVIDIA H200"}])
    return {"host": host, "cdi": cdi, "runtime": runtime, "compute": compute}, probe


def _binding(records):
    return [c for c in records["compute"]["checks"] if c["id"] == "compute.driver.binding"]


def test_the_driver_roots_own_nvml_and_jit_compiler_are_bound(lab):  # noqa: F811 pylint: disable=redefined-outer-name
    records, probe = _node(lab, _driver_edits(lab))
    mapped = dict((os.path.basename(m["path"]), m["why"]) for m in probe["mapped_libraries"]["libraries"])
    assert set(mapped) >= {"libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"}, mapped
    assert [c["status"] for c in _binding(records)] == [PASS], _binding(records)
    assert records["compute"]["status"] == PASS, records["compute"]["reason"]
    assert [c["status"] for c in records["runtime"]["checks"] if c["id"] == "runtime.probe.unchanged"] == [PASS]
    assert [c["status"] for c in records["cdi"]["checks"] if c["id"] == "cdi.trust.accounted"] == [PASS]
    v = node_verdict(records)
    assert v["verdict"] == "COMPUTE_VERIFIED", v["reason"]


@pytest.mark.parametrize("library", ["libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"])
def test_an_impostor_driver_library_in_the_probe_is_never_verified(lab, library):  # noqa: F811 pylint: disable=redefined-outer-name
    impostor = _build(os.path.join(lab.base, "impostor", library), "impostor-" + library, soname=library)
    edits = _driver_edits(lab, nvml=impostor if "-ml" in library else None,
                          ptxjit=impostor if "ptxjit" in library else None)
    records, probe = _node(lab, edits)
    assert [s for s in probe["steps"] if not s.get("ok")] == []  # every step "succeeded", the kernel "verified"
    binding = _binding(records)
    assert [c["status"] for c in binding] == [FAIL] and binding[0]["subject"] == "container: %s" % library, binding
    assert "is not the driver root's" in binding[0]["observed"]
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_COMPUTE", "compute.driver.binding", "cdi"), v
    # the spec's mount that put it there, or the cdi check that saw it is not the driver root's file
    assert "mount %s -> " % impostor in v["reason"] or "cdi.host.driver_library" in [b["check"] for b in v["because"]], v


def test_a_hook_that_rewrites_the_probe_file_is_failed_at_cdi(lab):  # noqa: F811 pylint: disable=redefined-outer-name
    edits = _driver_edits(lab)
    edits["hooks"] = [{"hookName": "createRuntime", "path": "/usr/bin/python3", "args": ["python3", "-c", REWRITE]}]
    records, probe = _node(lab, edits)
    assert probe is not None and probe["executed"], records["runtime"]["reason"]
    checks = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.probe.unchanged"]
    assert [c["status"] for c in checks] == [FAIL] and "sha256" in checks[0]["observed"], checks
    change = records["runtime"]["evidence"]["probe_file"][0]
    assert change["written"]["sha256"] != change["after"]["sha256"]
    v = node_verdict(records)
    assert (v["verdict"], v["layer"], v["signature"], v["points_to"]) == ("FAILED_AT_CDI", "cdi", PROBE_INTEGRITY, "cdi"), v
