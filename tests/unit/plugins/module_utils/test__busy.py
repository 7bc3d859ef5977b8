"""MIG busy state, from the pynvml boundary up: a fake pynvml module (real pynvml structures and NVMLError codes,
tests/unit/fixtures/host/hostfixture.py) read by _nvml.read_nvml, judged by _busy, then the compute layer on the
probe's output (the real probe code on a fake libcuda that lists the MIG instances)."""
import os
import sys

import pytest

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import busy as _busy
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import nvml as _nvml
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "cuda"))
import fakecuda  # noqa: E402  pylint: disable=wrong-import-position

nv = hf.real_pynvml
PROCS = "nvmlDeviceGetComputeRunningProcesses"
A = hf.mig_device(0, gi=1)["uuid"]       # instance A: GPU instance 1, compute instance 0
B = hf.mig_device(0, gi=2)["uuid"]       # instance B: GPU instance 2, compute instance 0
PARENT = hf.gpu(0)["uuid"]
BUSY, UNKNOWN = "busy", "unknown"


def _host(parent=(), a=(), b=(), fail=None):
    """The host record of one H200 with MIG enabled and two instances, as the host layer keeps NVML's answer."""
    gpu = hf.gpu(0, mig_devices=[hf.mig_device(0, gi=1, processes=a), hf.mig_device(0, gi=2, processes=b)],
                 processes=list(parent))
    return {"evidence": {"nvml": _nvml.read_nvml(hf.fake_pynvml([gpu], fail=fail))}}


def _state(busy):
    """uuid -> (busy|unknown, pids) of every device with an entry (a device without one is known idle)."""
    out = {}
    for p in busy:
        kind = UNKNOWN if _busy.is_unknown(p) else BUSY
        prev = out.get(p["gpu_uuid"], (kind, []))
        out[p["gpu_uuid"]] = (prev[0], prev[1] + ([p["pid"]] if p["pid"] is not None else []))
    return out


NO_MIG_LIST = {((0, 0), PROCS): nv.NVML_ERROR_NOT_SUPPORTED, ((0, 1), PROCS): nv.NVML_ERROR_NOT_SUPPORTED}


@pytest.mark.parametrize("host,expected", [
    # a busy instance, an idle one beside it, told by each MIG device handle
    (_host(parent=[(4242, 1, 0)], a=[(4242, 1, 0)]), {A: (BUSY, [4242])}),
    (_host(parent=[(7, 2, 0)], b=[(7, 2, 0)]), {B: (BUSY, [7])}),
    # the MIG handle lists the process, the parent list is not readable (no privilege for the aggregate)
    (_host(a=[(9, 1, 0)], fail={(0, PROCS): nv.NVML_ERROR_NO_PERMISSION}), {A: (BUSY, [9])}),
    # NOT_SUPPORTED on the MIG handle: the parent's instance ids place the busy process; the other instance is unknown
    (_host(parent=[(4242, 1, 0)], fail=NO_MIG_LIST), {A: (BUSY, [4242]), B: (UNKNOWN, [])}),
    # NOT_SUPPORTED on the MIG handle and nothing on the parent: an empty aggregate proves no instance idle
    (_host(fail=NO_MIG_LIST), {A: (UNKNOWN, []), B: (UNKNOWN, [])}),
    # a parent-level process without instance info: unknown for every instance of that parent
    (_host(parent=[55], fail=NO_MIG_LIST), {A: (UNKNOWN, []), B: (UNKNOWN, [])}),
    (_host(parent=[55, (4242, 2, 0)], fail=NO_MIG_LIST), {A: (UNKNOWN, []), B: (BUSY, [4242])}),
    # ... even when each instance's own list was read, unless one of them lists that pid
    (_host(parent=[55]), {A: (UNKNOWN, []), B: (UNKNOWN, [])}),
    (_host(parent=[55], b=[55]), {B: (BUSY, [55])}),
    # NOT_SUPPORTED on one MIG handle only
    (_host(a=[], b=[], fail={((0, 1), PROCS): nv.NVML_ERROR_NOT_SUPPORTED}), {B: (UNKNOWN, [])}),
    # idle: every instance listed none
    (_host(), {}),
])
def test_busy_state_is_per_mig_instance(host, expected):
    busy = _busy.gpu_compute_processes(host)
    assert _state(busy) == expected
    assert all(p["parent_uuid"] == PARENT for p in busy)
    plan = _busy.busy_plan(host)
    # only the instances known idle may be touched (by the MIG UUID CUDA reports for each), and the parent's UUID (a
    # device an old driver names by its parent's UUID could be any instance) only while every instance is idle
    assert plan["skip_reason"] is None
    assert plan["idle_uuids"] == sorted(set([A, B]) - set(expected) | (set() if expected else set([PARENT])))


def test_unknown_instance_says_why():
    busy = _busy.gpu_compute_processes(_host(parent=[55], fail=NO_MIG_LIST))
    assert "NVML_ERROR_NOT_SUPPORTED" in busy[0]["unknown"]
    assert _busy.busy_text(busy[:1]).startswith("busy state unknown: NVML did not list this MIG instance's processes")
    busy = _busy.gpu_compute_processes(_host(parent=[55]))
    assert "pid 55 on GPU %s has no MIG instance id" % PARENT in busy[0]["unknown"]
    assert _busy.busy_reason(busy) == "busy state unknown on %s, not touching it" % ", ".join(sorted([A, B]))


@pytest.mark.parametrize("fail", [
    {(0, "nvmlDeviceGetMaxMigDeviceCount"): nv.NVML_ERROR_UNKNOWN},    # instances not enumerated
    {(0, "nvmlDeviceGetMigMode"): nv.NVML_ERROR_UNKNOWN},               # MIG mode unknown: CUDA may see instances
])
def test_unknown_instances_make_the_whole_node_unknown(fail):
    host = _host(a=[], b=[], fail=fail)
    assert _busy.gpu_compute_processes(host) is None
    assert _busy.busy_plan(host)["skip_reason"] == _busy.UNKNOWN_BUSY


def test_gpu_without_mig_keeps_its_parent_list():
    host = {"evidence": {"nvml": _nvml.read_nvml(hf.fake_pynvml([hf.gpu(0, processes=[4242]), hf.gpu(1)]))}}
    assert _busy.gpu_compute_processes(host) == [
        {"gpu_index": 0, "gpu_uuid": PARENT, "pid": 4242, "used_gpu_memory_bytes": 1 << 20}]


def _expected(*uuids):
    return [{"uuid": PARENT, "index": 0, "minor": 0, "name": "NVIDIA H200 MIG 1g.18gb", "mig_uuid": u} for u in uuids]


def _runner(calls):
    def run(_host_record, _timeout, _uuid, only_uuids=None, idle_uuids=None):
        calls.append({"only_uuids": only_uuids, "idle_uuids": idle_uuids})
        return {"status": "PASS", "reason": None, "python": "python3", "steps": [], "facts": {}}, {}, {}
    return run


@pytest.mark.parametrize("host,untouched", [
    (_host(parent=[(4242, 1, 0)], a=[(4242, 1, 0)]), [A]),             # busy instance
    (_host(parent=[55], fail=NO_MIG_LIST), [A, B]),                    # parent-level process, no instance info
    (_host(a=[], fail={((0, 1), PROCS): nv.NVML_ERROR_NOT_SUPPORTED}), [B]),   # NOT_SUPPORTED on B's handle
])
def test_busy_or_unknown_mig_instance_is_never_touched_nor_idle(host, untouched):
    """The class of the defect: a MIG instance the parent's process list alone cannot clear was probed and
    compute.gpu.idle PASSed. Now it is listed in the container, never given a context, its row and idle check NOT_RUN."""
    plan = _busy.busy_plan(host)
    lib = fakecuda.FakeCuda([A, B])
    calls = []
    record = _compute_layer.record(fakecuda.container_probe(lib, {"idle_uuids": plan["idle_uuids"]}), host_record=host,
                                   host_runner=_runner(calls), expected_gpus=_expected(A, B))
    assert validate_record(record) == []
    assert lib.touched() == [i for i, u in enumerate([A, B]) if u not in untouched]
    rows = dict((r["uuid"], r["status"]) for r in record["evidence"]["gpus"])
    idle = dict((c["subject"], c["status"]) for c in record["checks"] if c["id"] == "compute.gpu.idle")
    for uuid in (A, B):
        assert rows[uuid] == ("NOT_RUN" if uuid in untouched else "PASS")
        assert idle["GPU %s" % uuid] == ("NOT_RUN" if uuid in untouched else "PASS")
    assert record["status"] != "PASS"
    assert calls and calls[0]["idle_uuids"] == sorted(set([A, B]) - set(untouched))
