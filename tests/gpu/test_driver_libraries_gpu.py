"""Every driver library the probe loads is the host's, on a real GPU (issue 42 item 3; the lead runs this on the GPU
host: GPUPROBE_GPU=1, scripts/gpu-e2e.sh).

- The honest spec (the self-built "full" variant: libcuda, libnvidia-ml and libnvidia-ptxjitcompiler from the driver
  root): the probe reports libcuda, NVML and the JIT compiler the real driver loads at PTX load among the driver
  libraries mapped in its process, each with the content of the driver root's libX.so.<driver version>;
  compute.driver.binding PASSes and the node is COMPUTE_VERIFIED. Whatever else the real driver maps (e.g.
  libnvidia-gpucomp) is bound the same way or named.
- The same spec with libnvidia-ml.so.1 replaced by a library of the spec's own (tests/unit/fixtures/host/fake_driver.c
  built as NVML: it answers nvmlInit): the probe loads it, and the binding FAILs naming it; never COMPUTE_VERIFIED.
  The impostor is declared trusted (trusted_edits) so that the allowlist (cdi.trust.accounted) lets the probe run and
  the binding is what is judged; undeclared it is FAILED_AT_CDI before any container (tests/gpu/test_probe_trust_gpu.py).
Records and verdicts go untouched to $GPUPROBE_EVIDENCE_DIR/<case>.json (through run_variant). Skips cleanly without
a GPU.
"""
import os
import shutil
import subprocess

import pytest

from test_runtime_compute_gpu import assert_accounted, host_record, run_variant  # noqa: F401 pylint: disable=unused-import

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs a real NVIDIA GPU (GPUPROBE_GPU=1)"),
]

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_SOURCE = os.path.join(HERE, "..", "unit", "fixtures", "host", "fake_driver.c")
WORK = "/tmp/gpuprobe-libraries-gpu"


def _checks(record, check_id):
    return [c for c in record["checks"] if c["id"] == check_id]


def _runs(records):
    return records["compute"]["evidence"]["driver_binding"]["runs"]


def test_the_real_drivers_libraries_in_the_probe_are_bound(host_record):  # noqa: F811 pylint: disable=redefined-outer-name
    records, probe, verdict = run_variant("full", host_record, name="libraries-bound")
    mapped = [os.path.basename(m["path"]) for m in probe["mapped_libraries"]["libraries"]]
    for stem in ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so"):
        assert any(name.startswith(stem) for name in mapped), (stem, mapped)
    rows = [r for run in _runs(records) for r in run["libraries"]]
    assert rows and all(r["status"] == "PASS" and r["sha256"] == r["host_sha256"] for r in rows), rows
    binding = _checks(records["compute"], "compute.driver.binding")
    assert binding and all(c["status"] == "PASS" for c in binding), binding
    assert [c["status"] for c in _checks(records["runtime"], "runtime.probe.unchanged")] == ["PASS"]
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict
    assert_accounted(records)


def _impostor_nvml():
    target = os.path.join(WORK, "libnvidia-ml.so.1")
    os.makedirs(WORK, exist_ok=True)
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler: cannot build the impostor NVML")
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libnvidia-ml.so.1", "-o", target, FAKE_SOURCE], check=True,
                   timeout=120)
    return target


def test_an_impostor_nvml_in_the_probe_is_never_verified(host_record):  # noqa: F811 pylint: disable=redefined-outer-name
    impostor = _impostor_nvml()

    def replace_nvml(spec):
        for m in spec["containerEdits"]["mounts"]:
            if os.path.basename(m["containerPath"]).startswith("libnvidia-ml.so"):
                m["hostPath"] = impostor

    records, probe, verdict = run_variant("full", host_record, edit=replace_nvml, name="libraries-impostor-nvml",
                                          trusted_edits=[{"hostPath": impostor, "why": "test: an NVML of the spec's own"}])
    assert_accounted(records, declared=True)
    assert probe["nvml"]["library"]["ok"], probe["nvml"]  # the probe loaded it: its code ran in the probe
    binding = _checks(records["compute"], "compute.driver.binding")
    assert [c["status"] for c in binding] == ["FAIL"] and "libnvidia-ml" in binding[0]["subject"], binding
    assert verdict["verdict"] != "COMPUTE_VERIFIED", verdict
