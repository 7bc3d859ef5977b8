"""Pure parts of the compute layer: step outcomes and signatures, hints, busy GPU, host control attribution,
per-GPU rows (probe output produced by the real probe code running on a fake libcuda: tests/unit/fixtures/cuda)."""
import os
import sys

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import assess as _compute_assess
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import catalogue as _compute_catalogue
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import host_control as _compute_host_control
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import rows as _compute_rows
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import busy as busy_mod
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as probe_mod
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import rollup_status, validate_record

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "cuda"))
import fakecuda  # noqa: E402  pylint: disable=wrong-import-position

OK_STEPS = [{"step": s, "call": s, "ok": True, "rc": 0, "name": "CUDA_SUCCESS", "ms": 1.0}
            for s in ("cuInit", "cuDevicePrimaryCtxRetain", "cuModuleLoadData")]
VERIFY = {"step": "verify", "call": "verify", "ok": True, "checked": 1024, "mismatches": 0, "first_bad": None}


BUSY_HOST = {"evidence": {"nvml": {"ok": True, "gpus": [
    {"index": 0, "uuid": "GPU-a", "compute_processes": [{"pid": 7, "used_gpu_memory_bytes": 1}]}]}}}
IDLE_HOST = {"evidence": {"nvml": {"ok": True, "gpus": [{"index": 0, "uuid": "GPU-a", "compute_processes": []}]}}}


def _fail(step, rc, name):
    return {"step": step, "call": step, "ok": False, "rc": rc, "name": name, "ms": 2.0}


def _probe(steps, uvm=True, **extra):
    nodes = {"/dev/nvidia-uvm": {"present": uvm}}
    probe = {"executed": True, "cdi_devices": ["gpuprobe.local/gpu=0"], "runtime": "podman 4.3.1",
             "container_name": "gpuprobe-r-1", "compute_requested": True, "steps": steps, "complete": True,
             "inventory": {"nodes": nodes}, "facts": {}, "nvml": None, "hung_step": None, "timed_out": False}
    probe.update(extra)
    return probe


def _host(status, calls=None):
    def runner(_host_record, _timeout, _uuid, only_uuids=None, idle_uuids=None):
        if calls is not None:
            calls.append({"only_uuids": only_uuids, "idle_uuids": idle_uuids})
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
    assert _compute_assess.step_signature(step) == signature
    assert signature in _compute_catalogue.SIGNATURES


def test_unknown_with_uvm_absent_gets_the_uvm_hint():
    step = _fail("cuInit", 999, "CUDA_ERROR_UNKNOWN")
    assert "/dev/nvidia-uvm absent" in _compute_assess.step_hint(step, _probe([step], uvm=False))
    assert "/dev/nvidia-uvm absent" not in _compute_assess.step_hint(step, _probe([step], uvm=True))


@pytest.mark.parametrize("parsed,timed_out,status,signature", [
    ({"steps": OK_STEPS + [VERIFY]}, False, "PASS", None),
    ({"steps": OK_STEPS}, False, "FAIL", "compute.probe.incomplete"),
    ({"steps": OK_STEPS, "hung_step": "cuModuleLoadData"}, True, "FAIL", "compute.timeout"),
    ({"steps": [_fail("cuInit", 100, "CUDA_ERROR_NO_DEVICE")]}, False, "FAIL", "compute.cuda.CUDA_ERROR_NO_DEVICE"),
])
def test_assess(parsed, timed_out, status, signature):
    outcome = _compute_assess.assess(parsed, timed_out, 60)
    assert (outcome["status"], outcome["signature"]) == (status, signature)


@pytest.mark.parametrize("host_status,points_to", [("PASS", "runtime"), ("FAIL", "host"), ("NOT_RUN", "compute")])
def test_container_failure_points_by_host_control(host_status, points_to):
    record = _compute_layer.record(_probe([_fail("cuModuleLoadData", 221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND")]),
                                   host_record=IDLE_HOST, host_runner=_host(host_status))
    assert validate_record(record) == []
    assert record["status"] == "FAIL" and record["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"
    assert record["points_to"] == points_to


def test_pass_in_cdi_container_beside_a_host_control_fail_is_never_silent():
    """The container verified its kernel, the same probe on the host FAILed: the record is WARN, saying so (the
    verdict makes the node INCONCLUSIVE on it), never a silent PASS."""
    record = _compute_layer.record(fakecuda.container_probe(fakecuda.FakeCuda([U0])), host_record=IDLE_HOST,
                                   host_runner=_host("FAIL"))
    assert validate_record(record) == []
    assert record["status"] == "WARN"
    assert "the container passed but the host control FAILed" in record["reason"]
    assert [c["status"] for c in record["checks"] if c["id"] == "compute.host_control"] == ["WARN"]
    assert [r["status"] for r in record["evidence"]["gpus"]] == ["PASS"]


def test_container_never_ran_is_not_run_with_the_runtime_reason():
    runtime = {"status": "FAIL", "signature": "runtime.start.hostpath_missing", "reason": "stat x"}
    record = _compute_layer.record(None, runtime, host_control=False)
    assert record["status"] == "NOT_RUN" and "runtime.start.hostpath_missing" in record["reason"]
    assert record["evidence"]["container"]["executed"] is False


@pytest.mark.parametrize("host,expected", [(None, None), (IDLE_HOST, []), ({"evidence": {"nvml": {"ok": False}}}, None)])
def test_busy_processes(host, expected):
    assert busy_mod.gpu_compute_processes(host) == expected


def test_host_control_env_adds_the_driver_root(tmp_path):
    lib = tmp_path / "lib64"
    lib.mkdir()
    (lib / "libcuda.so.1").write_text("x")
    env, dirs = _compute_host_control.host_control_env({"evidence": {"driver_root": str(tmp_path)}}, environ={"LD_LIBRARY_PATH": "/a"})
    assert dirs == [str(lib)] and env["LD_LIBRARY_PATH"] == "%s:/a" % lib
    env, dirs = _compute_host_control.host_control_env({"evidence": {"driver_root": "/"}}, environ={})
    assert dirs == [] and "LD_LIBRARY_PATH" not in env


def test_probe_source_is_the_probe_script():
    text = probe_mod.probe_source()
    assert "def run_compute(" in text and 'if __name__ == "__main__":' in text


def test_host_control_runs_the_real_probe_here():
    """No GPU here: the same probe on this host FAILs at dlopen; it is never reported as PASS."""
    result, _parsed, outcome = _compute_host_control.run_host_control(None, timeout=30)
    assert result["status"] == "FAIL" and outcome["signature"] == "compute.dlopen.libcuda"
    assert result["steps"][0]["step"] == "dlopen"


def _nvml_host(*gpus):
    return {"evidence": {"nvml": {"ok": True, "gpus": [dict({"index": i, "compute_processes": []}, **g) for i, g in enumerate(gpus)]}}}


DEFAULT_GPU = {"uuid": "GPU-a", "compute_mode": "Default", "mig_mode": {"current": 0, "pending": 0}}
EXPECTED_A = [{"uuid": "GPU-a", "index": 0, "mig_uuid": None}]


@pytest.mark.parametrize("gpu,expected,idle,scope", [
    (DEFAULT_GPU, EXPECTED_A, None, ["GPU-a"]),
    (dict(DEFAULT_GPU, mig_mode=None), EXPECTED_A, None, ["GPU-a"]),  # MIG not supported on that GPU
    (dict(DEFAULT_GPU, uuid="GPU-A"), EXPECTED_A, None, ["GPU-a"]),  # the UUID compared as NVML and CUDA spell it
    (dict(DEFAULT_GPU, compute_mode="Exclusive_Process"), EXPECTED_A, None, None),  # a second context would fail
    (dict(DEFAULT_GPU, compute_mode=None), EXPECTED_A, None, None),  # not read: not known to be allowed
    (dict(DEFAULT_GPU, mig_mode={"current": 1, "pending": 1}), EXPECTED_A, None, None),
    (dict(DEFAULT_GPU, uuid="GPU-b"), EXPECTED_A, None, None),  # the expected GPU is not in the host's reading
    (DEFAULT_GPU, [{"uuid": "GPU-a", "index": 0, "mig_uuid": "MIG-x"}], None, None),
    (DEFAULT_GPU, [{"index": 0}], None, None),  # no UUID to prove it by
    (DEFAULT_GPU, None, [], None),
    (DEFAULT_GPU, EXPECTED_A, [], None),  # not known idle (busy): never touched, nothing left to run early
    (DEFAULT_GPU, EXPECTED_A, ["GPU-A"], ["GPU-a"]),  # known idle, the UUID compared as NVML and CUDA spell it
])
def test_the_host_control_runs_beside_the_container_only_where_two_contexts_are_known_to_be_allowed(gpu, expected, idle, scope):
    assert _compute_host_control.concurrent_scope(_nvml_host(gpu), expected, idle) == scope


def test_an_early_host_control_is_used_for_the_same_gpus_and_run_again_for_others(monkeypatch):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import host_control
    calls = []

    def fake(host_record, timeout, uuid=None, python=None, only_uuids=None, idle_uuids=None, cancel=None):
        calls.append((list(only_uuids or []), cancel is not None))
        return {"status": "PASS", "gpus": []}, {}, {"status": "PASS"}
    monkeypatch.setattr(host_control, "run_host_control", fake)
    early = _compute_host_control.EarlyControl(IDLE_HOST, 30, ["GPU-a", "GPU-b"], [])
    result, _parsed, _outcome = early.runner(IDLE_HOST, 30, None, only_uuids=["GPU-b", "GPU-a"], idle_uuids=None)
    assert result["concurrent"] is True and calls == [(["GPU-a", "GPU-b"], True)]
    result, _parsed, _outcome = early.runner(IDLE_HOST, 30, None, only_uuids=["GPU-a", "GPU-c"], idle_uuids=None)
    assert "concurrent" not in result and calls[-1] == (["GPU-a", "GPU-c"], False)  # another scope: run now, in this thread
    early.stop()


# ---------------------------------------------------------------------------------------------------
# per-GPU rows, from the real probe code running on a fake libcuda

U0 = "GPU-00000000-1111-2222-3333-444444444444"
U1 = "GPU-11111111-1111-2222-3333-444444444444"
U9 = "GPU-99999999-1111-2222-3333-444444444444"


def _expected(*uuids):
    return [{"uuid": u, "index": i, "minor": i, "name": "NVIDIA H200", "mig_uuid": None} for i, u in enumerate(uuids)]


def _idle(*uuids):
    gpus = [{"index": i, "uuid": u, "compute_processes": []} for i, u in enumerate(uuids)]
    return {"evidence": {"nvml": {"ok": True, "gpus": gpus}}}


def _busy(uuids, busy_uuid, pid=4242):
    host = _idle(*uuids)
    for gpu in host["evidence"]["nvml"]["gpus"]:
        if gpu["uuid"] == busy_uuid:
            gpu["compute_processes"] = [{"pid": pid, "used_gpu_memory_bytes": 1 << 20}]
    return host


def _rows(record):
    return dict((r["uuid"], r) for r in record["evidence"]["gpus"])


def _checks(record, check_id, status=None):
    return [c for c in record["checks"] if c["id"] == check_id and (status is None or c["status"] == status)]


def _record(lib, expected=None, host=None, config=None, host_status="PASS", calls=None, **kw):
    probe = fakecuda.container_probe(lib, config)
    record = _compute_layer.record(probe, host_record=host if host is not None else _idle(U0, U1, U9),
                                   host_runner=_host(host_status, calls), expected_gpus=expected, **kw)
    assert validate_record(record) == []
    assert all(sorted(r) == sorted(_compute_rows.ROW_KEYS) for r in record["evidence"]["gpus"])
    return record


def _container_rollup(record):
    return rollup_status([c for c in record["checks"] if c["id"] != "compute.host_control"])


def test_every_gpu_is_verified_in_one_container_and_the_host_control_runs_on_the_same():
    lib = fakecuda.FakeCuda([U0, U1])
    calls = []
    record = _record(lib, _expected(U0, U1), calls=calls)
    assert record["status"] == "PASS" == _container_rollup(record)
    rows = record["evidence"]["gpus"]
    assert [(r["uuid"], r["ordinal"], r["status"], r["expected"], r["seen_in_container"]) for r in rows] == [
        (U0, 0, "PASS", True, True), (U1, 1, "PASS", True, True)]
    assert rows[0]["model"] == "Fake GPU 0" and rows[0]["index"] == 0
    assert lib.touched() == [0, 1] and lib.contexts == {0: 0, 1: 0}  # every context released
    verify = _checks(record, "compute.kernel.verify", "PASS")
    assert [c["subject"] for c in verify] == ["container GPU %s: 1024 x uint32" % u for u in (U0, U1)]
    assert calls == [{"only_uuids": [U0, U1], "idle_uuids": [U0, U1, U9]}]
    assert record["evidence"]["expected_source"].startswith("cdi identity")


def test_one_gpu_failing_does_not_stop_the_others():
    lib = fakecuda.FakeCuda([U0, U1], fail={("cuModuleLoadData", 0): 221})
    record = _record(lib, _expected(U0, U1))
    rows = _rows(record)
    assert rows[U0]["status"] == "FAIL" and rows[U0]["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"
    assert rows[U1]["status"] == "PASS"
    assert lib.touched() == [0, 1] and lib.contexts == {0: 0, 1: 0}
    assert record["status"] == "FAIL" == _container_rollup(record)
    assert record["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"
    assert record["reason"].startswith("GPU %s: cuModuleLoadData failed" % U0) and "ptxjitcompiler" in record["reason"]
    assert record["points_to"] == "runtime"
    failed = _checks(record, "compute.cuda.call", "FAIL")
    assert [c["subject"] for c in failed] == ["container GPU %s: cuModuleLoadData" % U0]


def test_wrong_values_on_one_gpu():
    record = _record(fakecuda.FakeCuda([U0, U1], corrupt={1}), _expected(U0, U1))
    rows = _rows(record)
    assert rows[U1]["status"] == "FAIL" and rows[U1]["signature"] == "compute.verify.mismatch"
    assert rows[U0]["status"] == "PASS"
    assert record["signature"] == "compute.verify.mismatch"


def test_expected_gpu_missing_in_the_container_is_a_fail():
    record = _record(fakecuda.FakeCuda([U0]), _expected(U0, U9))
    row = _rows(record)[U9]
    assert (row["status"], row["signature"], row["seen_in_container"], row["ordinal"]) == ("FAIL", "compute.gpu.missing",
                                                                                           False, None)
    assert U0 in row["reason"]
    assert [c["subject"] for c in _checks(record, "compute.gpu.seen", "FAIL")] == ["GPU %s" % U9]
    assert record["status"] == "FAIL" and record["signature"] == "compute.gpu.missing"
    assert "compute.gpu.missing" in _compute_catalogue.SIGNATURES


def test_a_gpu_the_container_did_not_ask_for_is_a_warn_even_when_it_fails():
    lib = fakecuda.FakeCuda([U0, U1], fail={("cuCtxSynchronize", 1): 719})
    record = _record(lib, _expected(U0))
    row = _rows(record)[U1]
    assert (row["expected"], row["seen_in_container"], row["status"]) == (False, True, "WARN")
    assert "did not ask for" in row["reason"] and "CUDA_ERROR_LAUNCH_FAILED" in row["reason"]
    assert _checks(record, "compute.gpu.unexpected", "WARN")
    assert not _checks(record, "compute.cuda.call", "FAIL")
    assert record["status"] == "WARN" == _container_rollup(record)


def test_without_expected_gpus_every_gpu_seen_is_expected():
    record = _record(fakecuda.FakeCuda([U0, U1]), None)
    assert [r["expected"] for r in record["evidence"]["gpus"]] == [True, True]
    assert record["evidence"]["expected_source"].startswith("none given")
    assert record["status"] == "PASS"


@pytest.mark.parametrize("lib,signature", [
    (fakecuda.FakeCuda([U0], fail={("cuInit", None): 999}), "compute.cuda.CUDA_ERROR_UNKNOWN"),
    (None, "compute.dlopen.libcuda"),
])
def test_rows_when_the_probe_cannot_list_devices(lib, signature):
    record = _record(lib, _expected(U0, U1))
    assert record["status"] == "FAIL" and record["signature"] == signature
    rows = record["evidence"]["gpus"]
    assert [(r["status"], r["signature"], r["seen_in_container"]) for r in rows] == [("FAIL", signature, False)] * 2
    assert rows[0]["reason"].startswith("not listed")
    # not 'missing': the probe could not tell
    assert [c["status"] for c in _checks(record, "compute.gpu.seen")] == ["NOT_RUN", "NOT_RUN"]


def test_busy_gpu_is_not_run_for_that_gpu_alone_and_never_touched():
    host = _busy([U0, U1], U1)
    plan = busy_mod.busy_plan(host)
    assert plan["idle_uuids"] == [U0] and plan["skip_reason"] is None
    lib = fakecuda.FakeCuda([U0, U1])
    calls = []
    record = _record(lib, _expected(U0, U1), host=host, config={"idle_uuids": plan["idle_uuids"]}, calls=calls)
    assert lib.touched() == [0]  # listed, never given a context
    rows = _rows(record)
    assert rows[U0]["status"] == "PASS"
    assert rows[U1]["status"] == "NOT_RUN" and rows[U1]["reason"] == "GPU in use, not preempting: pid 4242"
    assert rows[U1]["seen_in_container"] is True
    idle = dict((c["subject"], c["status"]) for c in _checks(record, "compute.gpu.idle"))
    assert idle == {"GPU %s" % U0: "PASS", "GPU %s" % U1: "NOT_RUN"}
    # a requested GPU left unproven is never a PASS of the layer (a JUnit gate would go green); the verdict makes
    # the node INCONCLUSIVE naming it
    assert record["status"] == "WARN" and U1 in record["reason"]
    assert calls == [{"only_uuids": [U0], "idle_uuids": [U0]}]


def test_every_expected_gpu_busy_is_not_run():
    host = _busy([U0], U0)
    lib = fakecuda.FakeCuda([U0])
    record = _record(lib, _expected(U0), host=host, config={"idle_uuids": []})
    assert lib.touched() == []
    assert record["status"] == "NOT_RUN" and "GPU in use, not preempting: pid 4242" in record["reason"]


def test_busy_gpu_probed_when_allowed_is_a_warn():
    host = _busy([U0], U0)
    assert busy_mod.touch_only(busy_mod.busy_plan(host, allow_busy_gpu=True)) is None
    record = _record(fakecuda.FakeCuda([U0]), _expected(U0), host=host, allow_busy_gpu=True)
    assert _rows(record)[U0]["status"] == "PASS"
    assert [c["status"] for c in _checks(record, "compute.gpu.idle")] == ["WARN"]
    assert record["status"] == "WARN"


def test_unknown_busy_state_is_not_run_unless_allowed():
    calls = []
    probe = fakecuda.container_probe(fakecuda.FakeCuda([U0]))
    for host in (None, {"evidence": {"nvml": {"ok": False}}}):
        record = _compute_layer.record(probe, host_record=host, host_runner=_host("PASS", calls),
                                       expected_gpus=_expected(U0))
        assert validate_record(record) == []
        assert record["status"] == "NOT_RUN" and record["reason"].startswith("cannot tell whether the GPU is in use")
        assert [r["status"] for r in record["evidence"]["gpus"]] == ["NOT_RUN"]
    assert calls == []  # not even the host control touched a GPU
    allowed = _compute_layer.record(probe, host_record=None, allow_busy_gpu=True, host_runner=_host("PASS", calls),
                                    expected_gpus=_expected(U0))
    assert allowed["status"] == "PASS"
    assert [c["status"] for c in _checks(allowed, "compute.gpu.idle")] == ["NOT_RUN"]


@pytest.mark.parametrize("host,allow,touch_only,skip_reason", [
    (None, False, [], busy_mod.UNKNOWN_BUSY),
    (None, True, None, None),
    (_busy([U0, U1], U1), False, [U0], None),
    (_busy([U0, U1], U1), True, None, None),
    # a busy GPU without a UUID: not known idle, nothing else changes (the positive list cannot hold it)
    ({"evidence": {"nvml": {"ok": True, "gpus": [{"index": 0, "uuid": None, "compute_processes": [{"pid": 1}]},
                                                 {"index": 1, "uuid": U1, "compute_processes": []}]}}},
     False, [U1], None),
])
def test_busy_plan(host, allow, touch_only, skip_reason):
    plan = busy_mod.busy_plan(host, allow)
    assert (busy_mod.touch_only(plan), plan["skip_reason"]) == (touch_only, skip_reason)


def test_cdi_devices_are_the_observed_ones_never_the_requested():
    runtime = {"status": "FAIL", "signature": "runtime.start.cdi_unresolvable", "reason": "x",
               "evidence": {"requested_devices": ["nvidia.com/gpu=0"]}}
    record = _compute_layer.record(None, runtime, host_record=_idle(U0), host_control=False)
    assert record["status"] == "NOT_RUN" and record["evidence"]["container"]["cdi_devices"] == []
    never_ran = {"executed": False, "cdi_devices": ["nvidia.com/gpu=0"]}
    assert _compute_layer.container_evidence(never_ran, runtime)["cdi_devices"] == []


def test_per_device_isolation_gives_one_record_with_rows_from_every_container():
    probes = [fakecuda.container_probe(fakecuda.FakeCuda([U0]), devices=["k/gpu=0"], name="c0"),
              fakecuda.container_probe(fakecuda.FakeCuda([U1], fail={("cuModuleLoadData", 0): 221}),
                                       devices=["k/gpu=1"], name="c1"),
              {"executed": False, "cdi_devices": [], "requested_devices": ["k/gpu=2"], "reason": "FAIL x: y"}]
    shared = {"executed": True, "cdi_devices": ["k/gpu=0", "k/gpu=1", "k/gpu=2"], "compute_requested": True,
              "containers": probes}
    record = _compute_layer.record(shared, host_record=_idle(U0, U1, U9), host_runner=_host("PASS"),
                                   expected_gpus=_expected(U0, U1, U9))
    assert validate_record(record) == []
    rows = _rows(record)
    assert (rows[U0]["status"], rows[U1]["status"], rows[U9]["status"]) == ("PASS", "FAIL", "FAIL")
    assert rows[U9]["signature"] == "compute.gpu.missing"
    assert rows[U1]["ordinal"] == 0  # each container sees exactly its GPU, as ordinal 0
    assert record["evidence"]["container"]["cdi_devices"] == ["k/gpu=0", "k/gpu=1"]  # observed, not requested
    assert len(record["evidence"]["containers"]) == 3
    cdi = dict((c["subject"], c["status"]) for c in _checks(record, "compute.container.cdi"))
    assert cdi == {"c0": "PASS", "c1": "PASS", "k/gpu=2": "FAIL"}
    assert record["status"] == "FAIL" and record["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"


def test_mig_uuid_matches_the_uuid_cuda_reports():
    mig = "MIG-00000000-1111-2222-3333-444444444444"
    expected = [{"uuid": "GPU-77777777-1111-2222-3333-444444444444", "index": 0, "minor": 0, "name": "H200",
                 "mig_uuid": mig}]
    record = _record(fakecuda.FakeCuda([U0]), expected)  # cuDeviceGetUuid_v2 gives the MIG UUID's bytes
    assert [(r["uuid"], r["status"]) for r in record["evidence"]["gpus"]] == [(mig, "PASS")]


def test_busy_gpu_stays_not_run_when_the_probe_could_not_list_devices():
    host = _busy([U0, U1], U1)
    record = _record(fakecuda.FakeCuda([U0, U1], fail={("cuInit", None): 999}), _expected(U0, U1), host=host,
                     config={"idle_uuids": [U0]})
    rows = _rows(record)
    assert (rows[U0]["status"], rows[U0]["signature"]) == ("FAIL", "compute.cuda.CUDA_ERROR_UNKNOWN")
    assert (rows[U1]["status"], rows[U1]["reason"]) == ("NOT_RUN", "GPU in use, not preempting: pid 4242")
    assert record["status"] == "FAIL" and record["signature"] == "compute.cuda.CUDA_ERROR_UNKNOWN"


def test_no_gpu_listed_in_the_container_makes_every_expected_gpu_missing():
    record = _record(fakecuda.FakeCuda([]), _expected(U0))
    assert [(r["status"], r["signature"]) for r in record["evidence"]["gpus"]] == [("FAIL", "compute.gpu.missing")]
    assert record["status"] == "FAIL" and record["signature"] == "compute.gpu.missing"
    alone = _record(fakecuda.FakeCuda([]), None)
    assert alone["evidence"]["gpus"] == [] and alone["signature"] == "compute.cuda.CUDA_ERROR_NO_DEVICE"


def test_per_device_containers_that_all_failed_to_start_say_why():
    shared = {"executed": True, "cdi_devices": ["k/gpu=0"], "compute_requested": True, "containers": [
        {"executed": False, "cdi_devices": [], "requested_devices": ["k/gpu=0"],
         "reason": "FAIL runtime.start.oci_error: runc create failed"}]}
    record = _compute_layer.record(shared, {"status": "PASS"}, host_record=_idle(U0), host_control=False,
                                   expected_gpus=_expected(U0))
    assert validate_record(record) == []
    assert record["status"] == "NOT_RUN" and record["reason"].startswith("no per-device compute container ran: k/gpu=0")
    assert record["evidence"]["container"]["cdi_devices"] == []


def test_cuinit_unknown_without_uvm_keeps_the_uvm_hint_in_the_reason():
    probe = fakecuda.container_probe(fakecuda.FakeCuda([U0], fail={("cuInit", None): 999}))
    probe["inventory"]["nodes"] = {"/dev/nvidia-uvm": {"present": False}}
    record = _compute_layer.record(probe, host_record=_idle(U0), host_runner=_host("PASS"))
    assert record["signature"] == "compute.cuda.CUDA_ERROR_UNKNOWN" and record["points_to"] == "runtime"
    assert "/dev/nvidia-uvm absent" in record["reason"]
    assert record["evidence"]["gpus"] == []  # nothing expected, nothing listed


MIG_A = "MIG-0a0a0a0a-0000-4000-8000-00000000000a"
MIG_B = "MIG-0b0b0b0b-0000-4000-8000-00000000000b"


@pytest.mark.parametrize("seen", [[U0], [MIG_A]], ids=["whole-parent-gpu", "one-instance"])
def test_a_mig_request_is_proven_only_by_its_own_instance_and_each_device_proves_one_row(seen):
    """cuDeviceGetUuid v1 gives a MIG device its parent's UUID: the parent UUID proves no instance, and one seen
    device never satisfies two expected rows."""
    expected = [{"uuid": U0, "index": 0, "minor": 0, "name": "NVIDIA H200", "mig_uuid": MIG_A},
                {"uuid": U0, "index": 0, "minor": 0, "name": "NVIDIA H200", "mig_uuid": MIG_B}]
    record = _record(fakecuda.FakeCuda(seen), expected)
    rows = [r for r in record["evidence"]["gpus"] if r["expected"]]
    assert [r["uuid"] for r in rows] == [MIG_A, MIG_B]
    if seen == [MIG_A]:
        # one shared container lists one MIG instance (one CUDA process enumerates one): the other is not provable
        # there, which is NOT_RUN with the reason, never compute.gpu.missing
        assert rows[0]["status"] == "PASS"
        assert rows[1]["status"] == "NOT_RUN" and rows[1]["signature"] is None
        assert "one CUDA process enumerates a single MIG instance" in rows[1]["reason"]
        assert record["status"] == "WARN"
    else:  # the container saw the whole GPU, no MIG instance at all: both are missing
        assert [(r["status"], r["signature"]) for r in rows] == [("FAIL", "compute.gpu.missing")] * 2
        assert record["status"] == "FAIL"


def test_an_expected_gpu_without_a_uuid_is_not_run_never_missing():
    """A host inventory without NVML gives minors only: no container GPU can be matched to such a row, so it is
    NOT_RUN 'identity unknown' (the node INCONCLUSIVE), never compute.gpu.missing (a false blame)."""
    expected = [{"uuid": None, "index": None, "minor": 0, "name": None, "mig_uuid": None}]
    record = _record(fakecuda.FakeCuda([U0]), expected)
    rows = [r for r in record["evidence"]["gpus"] if r["expected"]]
    assert [(r["status"], r["signature"]) for r in rows] == [("NOT_RUN", None)] and "identity unknown" in rows[0]["reason"]
    assert record["status"] != "FAIL"


def test_the_driver_roots_libcuda_is_hashed_beside_the_container_and_the_compute_layer_reuses_it(tmp_path):
    # _node_probe starts the prefetch before the probe container; compute.driver.binding's own call after it finds
    # the digest made (file_digest: cached) instead of hashing ~100 MB after the container
    import hashlib
    from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import binding
    lib = tmp_path / "drivers" / "lib64" / "libcuda.so.580.1"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"\x7fELF" + os.urandom(3 << 20))
    host = {"evidence": {"root": str(tmp_path), "driver_root": {"path": "/drivers"},
                         "nvml": {"driver_version": "580.1", "cuda_driver_version_int": 13000}}}
    binding.prefetch_host_driver_facts(host).join(30)
    facts = binding.host_driver_facts(host)
    assert facts["libcuda"]["cached"] is True and facts["libcuda"]["host_path"] == "/drivers/lib64/libcuda.so.580.1"
    assert facts["libcuda"]["sha256"] == hashlib.sha256(lib.read_bytes()).hexdigest() and facts["unknown"] == []
    # a host record it cannot use, or a file that cannot be read: the thread ends without raising, and the compute
    # layer's own call says what is unknown
    import threading
    raised = []
    old_hook = threading.excepthook
    threading.excepthook = raised.append
    try:
        binding.prefetch_host_driver_facts(None).join(30)
        lib.chmod(0)
        os.rename(str(lib), str(lib) + ".gone")
        os.mkdir(str(lib))  # a directory where the file was: os.path.isfile says no
        binding.prefetch_host_driver_facts(dict(host, evidence=dict(host["evidence"], root=str(tmp_path / "nowhere")))).join(30)
    finally:
        threading.excepthook = old_hook
    assert raised == []
    assert binding.host_driver_facts(None)["libcuda"] is None
