"""Pure parts of the compute layer: step outcomes and signatures, hints, busy GPU, host control attribution."""
import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils import _compute
from ansible_collections.gpuprobe.layers.plugins.module_utils._result import validate_record

OK_STEPS = [{"step": s, "call": s, "ok": True, "rc": 0, "name": "CUDA_SUCCESS", "ms": 1.0}
            for s in ("cuInit", "cuDevicePrimaryCtxRetain", "cuModuleLoadData")]
VERIFY = {"step": "verify", "call": "verify", "ok": True, "checked": 1024, "mismatches": 0, "first_bad": None}


def _fail(step, rc, name):
    return {"step": step, "call": step, "ok": False, "rc": rc, "name": name, "ms": 2.0}


def _probe(steps, uvm=True, **extra):
    nodes = {"/dev/nvidia-uvm": {"present": uvm}}
    probe = {"executed": True, "cdi_devices": ["gpuprobe.local/gpu=0"], "runtime": "podman 4.3.1",
             "container_name": "gpuprobe-r-1", "compute_requested": True, "steps": steps, "complete": True,
             "inventory": {"nodes": nodes}, "facts": {}, "nvml": None, "hung_step": None, "timed_out": False}
    probe.update(extra)
    return probe


def _host(status):
    def runner(_host_record, _timeout, _uuid):
        return {"status": status, "reason": None if status == "PASS" else "x", "python": "python3", "steps": [],
                "facts": {}}, {}, {}
    return runner


@pytest.mark.parametrize("step,signature", [
    (_fail("dlopen", None, "DLOPEN_FAILED"), "compute.dlopen.libcuda"),
    (_fail("cuInit", 34, "CUDA_ERROR_STUB_LIBRARY"), "compute.cuda.CUDA_ERROR_STUB_LIBRARY"),
    (_fail("cuInit", 35, "CUDA_ERROR_INSUFFICIENT_DRIVER"), "compute.cuda.CUDA_ERROR_INSUFFICIENT_DRIVER"),
    (_fail("cuInit", 100, "CUDA_ERROR_NO_DEVICE"), "compute.cuda.CUDA_ERROR_NO_DEVICE"),
    (_fail("cuModuleLoadData", 221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"), "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"),
    (_fail("cuInit", 802, "CUDA_ERROR_SYSTEM_NOT_READY"), "compute.cuda.CUDA_ERROR_SYSTEM_NOT_READY"),
    (_fail("cuInit", 804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"), "compute.cuda.CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
    (_fail("cuInit", 999, "CUDA_ERROR_UNKNOWN"), "compute.cuda.CUDA_ERROR_UNKNOWN"),
    (dict(VERIFY, ok=False, mismatches=3), "compute.verify.mismatch"),
])
def test_step_signatures_are_catalogued(step, signature):
    assert _compute.step_signature(step) == signature
    assert signature in _compute.SIGNATURES


def test_unknown_with_uvm_absent_gets_the_uvm_hint():
    step = _fail("cuInit", 999, "CUDA_ERROR_UNKNOWN")
    assert "/dev/nvidia-uvm absent" in _compute.step_hint(step, _probe([step], uvm=False))
    assert "/dev/nvidia-uvm absent" not in _compute.step_hint(step, _probe([step], uvm=True))


@pytest.mark.parametrize("parsed,timed_out,status,signature", [
    ({"steps": OK_STEPS + [VERIFY]}, False, "PASS", None),
    ({"steps": OK_STEPS}, False, "FAIL", "compute.probe.incomplete"),
    ({"steps": OK_STEPS, "hung_step": "cuModuleLoadData"}, True, "FAIL", "compute.timeout"),
    ({"steps": [_fail("cuInit", 100, "CUDA_ERROR_NO_DEVICE")]}, False, "FAIL", "compute.cuda.CUDA_ERROR_NO_DEVICE"),
])
def test_assess(parsed, timed_out, status, signature):
    outcome = _compute.assess(parsed, timed_out, 60)
    assert (outcome["status"], outcome["signature"]) == (status, signature)


@pytest.mark.parametrize("host_status,points_to", [("PASS", "runtime"), ("FAIL", "host"), ("NOT_RUN", "compute")])
def test_container_failure_points_by_host_control(host_status, points_to):
    record = _compute.compute_record(_probe([_fail("cuModuleLoadData", 221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND")]),
                                     host_runner=_host(host_status))
    assert validate_record(record) == []
    assert record["status"] == "FAIL" and record["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"
    assert record["points_to"] == points_to


def test_pass_in_cdi_container_is_compute_verified_even_if_host_control_fails():
    record = _compute.compute_record(_probe(OK_STEPS + [VERIFY]), host_runner=_host("FAIL"))
    assert validate_record(record) == []
    assert record["status"] == "PASS"
    assert [c["status"] for c in record["checks"] if c["id"] == "compute.host_control"] == ["WARN"]
    # (COMPUTE_VERIFIED also needs a runtime record and per-GPU rows: tests/unit/.../test__verdict.py)


def test_container_never_ran_is_not_run_with_the_runtime_reason():
    runtime = {"status": "FAIL", "signature": "runtime.start.hostpath_missing", "reason": "stat x"}
    record = _compute.compute_record(None, runtime, host_control=False)
    assert record["status"] == "NOT_RUN" and "runtime.start.hostpath_missing" in record["reason"]
    assert record["evidence"]["container"]["executed"] is False


BUSY_HOST = {"evidence": {"nvml": {"ok": True, "gpus": [
    {"index": 0, "uuid": "GPU-a", "compute_processes": [{"pid": 7, "used_gpu_memory_bytes": 1}]}]}}}
IDLE_HOST = {"evidence": {"nvml": {"ok": True, "gpus": [{"index": 0, "uuid": "GPU-a", "compute_processes": []}]}}}


def test_busy_gpu_is_not_run_unless_allowed():
    record = _compute.compute_record(_probe(OK_STEPS + [VERIFY]), host_record=BUSY_HOST, host_runner=_host("PASS"))
    assert record["status"] == "NOT_RUN" and record["reason"] == "GPU in use, not preempting: 1 compute process(es) on GPU-a"
    allowed = _compute.compute_record(_probe(OK_STEPS + [VERIFY]), host_record=BUSY_HOST, allow_busy_gpu=True,
                                      host_runner=_host("PASS"))
    assert allowed["status"] == "PASS"
    assert [c["status"] for c in allowed["checks"] if c["id"] == "compute.gpu.idle"] == ["WARN"]


@pytest.mark.parametrize("host,expected", [(None, None), (IDLE_HOST, []), ({"evidence": {"nvml": {"ok": False}}}, None)])
def test_busy_processes(host, expected):
    assert _compute.busy_processes(host) == expected


def test_host_control_env_adds_the_driver_root(tmp_path):
    lib = tmp_path / "lib64"
    lib.mkdir()
    (lib / "libcuda.so.1").write_text("x")
    env, dirs = _compute.host_control_env({"evidence": {"driver_root": str(tmp_path)}}, environ={"LD_LIBRARY_PATH": "/a"})
    assert dirs == [str(lib)] and env["LD_LIBRARY_PATH"] == "%s:/a" % lib
    env, dirs = _compute.host_control_env({"evidence": {"driver_root": "/"}}, environ={})
    assert dirs == [] and "LD_LIBRARY_PATH" not in env


def test_probe_source_is_the_probe_script():
    text = _compute.probe_source()
    assert "def run_compute(" in text and 'if __name__ == "__main__":' in text


def test_host_control_runs_the_real_probe_here():
    """No GPU here: the same probe on this host FAILs at dlopen; it is never reported as PASS."""
    result, _parsed, outcome = _compute.run_host_control(None, timeout=30)
    assert result["status"] == "FAIL" and outcome["signature"] == "compute.dlopen.libcuda"
    assert result["steps"][0]["step"] == "dlopen"
