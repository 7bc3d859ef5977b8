"""A libcuda that is not the driver's cannot earn COMPUTE_VERIFIED (issue 18 item 1), with REAL podman + runc.

tests/unit/fixtures/host/fake_driver.c answers every CUDA driver API call the probe makes with success, claims
the GPU's UUID, name and CUDA driver version it is told to claim (spec env), and writes the values the probe's
kernel would write (it reads the kernel's arithmetic from the PTX or the launch parameters). Mounted by a CDI
spec as libcuda.so.1 into a container with synthetic device nodes, it gets through every compute step and
verifies "its kernel". The host record (NVML's driver 580.159.04 / CUDA 13000 and a driver root holding
libcuda.so.580.159.04) decides:

- the impostor (another file than the driver root's, whatever its name) -> compute.driver.binding FAIL, the
  node FAILED_AT_COMPUTE and never COMPUTE_VERIFIED;
- the right file but another CUDA driver version than NVML's -> FAIL as well;
- the control: the very file of the driver root (bind-mounted from there) with NVML's version -> the binding
  PASSes and, with the cdi layer and a passing host control, the node is COMPUTE_VERIFIED. That is what the
  binding can prove: the answer came from the host driver root's own library; the driver root itself is the
  host's (its integrity is not the container's to prove).

The lab's files (the driver root is a directory of the lab's, not a driver root the node has), synthetic device nodes
and the fake driver's env are no generator's edits: the cdi layer is told they are the site's declared trusted edits
(trusted_edits, ``accounted.declaring``). Undeclared, the node is FAILED_AT_CDI by cdi.trust.accounted and no
container starts.
"""
import json
import os
import shutil
import subprocess

import pytest

import verdictlab  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from accounted import declaring
from test_attribution_podman import _undeclared
from test_runtime_podman import LIB_IN_CONTAINER, Lab, lab, podman_env, probe_image  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, LayerBuilder, validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = pytest.mark.integration

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit", "fixtures", "host", "fake_driver.c")
DRIVER = "580.159.04"
CUDA = 13000
GPU = "GPU-76b67699-5ddb-7d06-f635-4738405197b2"
PTXJIT_IN_CONTAINER = "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1"


def _build(path, mark, soname="libcuda.so.1"):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("needs a C compiler for the fake driver")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,%s" % soname, '-DFAKE_BUILD="%s"' % mark, "-o", path, SOURCE],
                   check=True, capture_output=True, timeout=120)
    return path


def _host(driver_root):
    """A host record as NVML and the driver root would give it, GPU idle."""
    b = LayerBuilder("host")
    b.evidence = {"driver_root": driver_root, "root": "/",
                  "nvml": {"ok": True, "driver_version": DRIVER, "cuda_driver_version_int": CUDA,
                           "gpus": [{"index": 0, "uuid": GPU, "compute_processes": []}]}}
    return b.build(status=PASS)


def _records(lab_, libcuda, claimed_cuda=CUDA):
    edits = {"env": ["FAKE_GPU_UUID=%s" % GPU, "FAKE_GPU_NAME=NVIDIA H200", "FAKE_CUDA_DRIVER_VERSION=%d" % claimed_cuda],
             "deviceNodes": [lab_.node("nvidia0", 1, 3), lab_.node("nvidiactl", 1, 5), lab_.node("nvidia-uvm", 1, 7)],
             "mounts": [{"hostPath": libcuda, "containerPath": LIB_IN_CONTAINER, "options": ["ro", "nosuid", "nodev", "bind"]},
                        # a stand-in named as the JIT compiler is (its SONAME too: cdi.host.library_soname reads it)
                        {"hostPath": _build(os.path.join(lab_.base, "driver", "lib64", "libnvidia-ptxjitcompiler.so.%s" % DRIVER),
                                            "ptxjit", soname="libnvidia-ptxjitcompiler.so.1"),
                         "containerPath": PTXJIT_IN_CONTAINER, "options": ["ro", "nosuid", "nodev", "bind"]}]}
    lab_.write_spec(edits)
    host = _host(os.path.join(lab_.base, "driver"))
    cdi = _cdi_layer.record(spec_dirs=[os.path.dirname(lab_.spec_path)], discover_runtime_dirs_=False,
                            devices=[lab_.device], kinds=[lab_.device.split("=")[0]], trusted_edits=declaring(edits))
    runtime, probe = lab_.run(cdi["evidence"]["expected_edits"], host=host)
    assert probe is not None, json.dumps([c for c in runtime["checks"] if c["status"] != "PASS"])[:3000]
    compute = _compute_layer.record(probe, runtime, host_record=host, host_runner=verdictlab.passing_control,
                                    timeout=30, expected_gpus=[{"uuid": GPU, "index": 0, "minor": 0, "name": "NVIDIA H200"}])
    for record in (host, cdi, runtime, compute):
        assert validate_record(record) == []
    return {"host": host, "cdi": cdi, "runtime": runtime, "compute": compute}, probe


def _binding(compute):
    return [c for c in compute["checks"] if c["id"] == "compute.driver.binding"]


@pytest.fixture
def driver(lab):  # noqa: F811 pylint: disable=redefined-outer-name
    """The driver root's own libcuda.so.<driver version> (here: the fake, built as the host's driver file)."""
    return _build(os.path.join(lab.base, "driver", "lib64", "libcuda.so.%s" % DRIVER), "driver-root")


@pytest.mark.parametrize("where", ["elsewhere", "driver-named"])
def test_an_impostor_libcuda_is_never_verified(lab, driver, where):  # noqa: F811 pylint: disable=redefined-outer-name,unused-argument
    # the impostor is another build: another file, whatever it is called (the driver's own file name too)
    name = "libcuda.so.1" if where == "elsewhere" else "libcuda.so.%s" % DRIVER
    fake = _build(os.path.join(lab.base, "impostor", name), "impostor")
    records, probe = _records(lab, fake)
    steps = [s for s in probe["steps"] if not s.get("ok")]
    assert steps == [], steps  # every step the fake was asked for "succeeded", the kernel "verified"
    assert [s["ok"] for s in probe["steps"] if s["step"] == "verify"] == [True]
    assert [c["status"] for c in _binding(records["compute"])] == [FAIL], _binding(records["compute"])
    assert records["compute"]["status"] == FAIL and records["compute"]["signature"] == "compute.driver.binding"
    v = node_verdict(records)
    assert v["verdict"] == "FAILED_AT_COMPUTE" and v["signature"] == "compute.driver.binding", v
    assert v["points_to"] == "cdi", v  # the libcuda that answered is the file the spec mounted
    (verdict, signature, edits), gate = _undeclared(lab)  # undeclared, the impostor is no driver file
    assert (verdict, signature, gate) == ("FAILED_AT_CDI", "cdi.trust.accounted", "blocked by cdi FAIL")
    assert "mount %s -> %s" % (fake, LIB_IN_CONTAINER) in edits, edits


def test_the_driver_file_with_another_cuda_version_is_never_verified(lab, driver):  # noqa: F811 pylint: disable=redefined-outer-name
    records, _probe = _records(lab, driver, claimed_cuda=12080)
    assert [c["status"] for c in _binding(records["compute"])] == [FAIL]
    assert "12080" in _binding(records["compute"])[0]["observed"]
    assert node_verdict(records)["verdict"] == "FAILED_AT_COMPUTE"
    assert _undeclared(lab)[0][:2] == ("FAILED_AT_CDI", "cdi.trust.accounted")


def test_the_driver_roots_own_file_is_bound(lab, driver):  # noqa: F811 pylint: disable=redefined-outer-name
    records, _probe = _records(lab, driver)
    assert [c["status"] for c in _binding(records["compute"])] == [PASS], _binding(records["compute"])
    assert records["compute"]["status"] == PASS, records["compute"]["reason"]
    v = node_verdict(records)
    assert v["verdict"] == "COMPUTE_VERIFIED", v["reason"]
    assert "rests on edits the site declared trusted (trusted_edits)" in v["reason"], v["reason"]  # and says so
    (verdict, signature, edits), gate = _undeclared(lab)
    assert (verdict, signature, gate) == ("FAILED_AT_CDI", "cdi.trust.accounted", "blocked by cdi FAIL")
    assert "mount %s -> %s" % (driver, LIB_IN_CONTAINER) in edits, edits
