"""The class of issue 32 item 2 (MIG busy): a device is idle only where NVML positively says no process is on it.
Every way a MIG instance's (or a GPU's) busy state can be known or unknown, from the pynvml boundary up: the fake
pynvml (tests/unit/fixtures/host/hostfixture.py) read by _nvml.read_nvml (or the whole host layer over a node tree,
where procfs is involved), judged by _busy.busy_plan, the probe's config built by the runtime layer, the probe's real
device loop on a fake libcuda (what CUDA lists in the container), and the compute record.

Members (parent = the GPU's own process list, own = the instance's MIG-handle list):
  parent process with instance ids on an enumerated instance        busy                      (test__busy.py)
  parent process without instance ids, no instance lists it         every instance unknown    (test__busy.py)
  parent process whose ids name an instance NVML did not enumerate   unknown, no UUID: nothing touched     (here)
  MIG enabled, processes on the parent, no instance enumerated      unknown, no UUID: nothing touched     (here)
  own list null (NOT_SUPPORTED, no handle) / empty / non-empty      unknown / idle / busy     (matrix here)
  a device CUDA names by its parent's UUID (no cuDeviceGetUuid_v2)  any busy/unknown instance keeps it off (here)
  a device CUDA lists without a UUID while a device is busy          never idle                          (here)
  NVML did not count the GPUs (inventory from procfs, no lists)      node unknown: nothing touched        (here)
  a GPU the driver lists in procfs that NVML did not                 unknown: never touched               (here)
  MIG mode current vs pending                                        the current mode counts              (here)
"""
import contextlib
import io
import itertools
import os
import sys

import pytest

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils import _busy, _compute, _host, _nvml, _probe, _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._result import validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.layer import _probe_config
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import INCONCLUSIVE, node_verdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "cuda"))
import fakecuda  # noqa: E402  pylint: disable=wrong-import-position

nv = hf.real_pynvml
PROCS = "nvmlDeviceGetComputeRunningProcesses"
PARENT = hf.gpu(0)["uuid"]
A = hf.mig_device(0, gi=1)["uuid"]
B = hf.mig_device(0, gi=2)["uuid"]
C = hf.mig_device(0, gi=3)["uuid"]       # an instance NVML did not enumerate (CUDA still lists it)
GPU1 = hf.gpu(1)["uuid"]


def _mig_host(parent=(), instances=((1, ()), (2, ())), fail=None, mig=None):
    """The host record of one H200 with MIG enabled and the instances ((gi, own processes), ...), as the host layer
    keeps NVML's answer."""
    extra = {"mig": mig} if mig is not None else {}
    gpu = hf.gpu(0, mig_devices=[hf.mig_device(0, gi=gi, processes=procs) for gi, procs in instances],
                 processes=list(parent), **extra)
    return {"evidence": {"nvml": _nvml.read_nvml(hf.fake_pynvml([gpu], fail=fail))}}


def _container(lib, plan):
    """What runtime_facts hands the compute layer: the probe run with the config the runtime layer builds from the
    plan (skip_uuids, or skip_compute_reason: then the probe does not touch CUDA at all, as _probe.main does)."""
    config = _probe_config({}, True, plan)
    if not config.get("skip_compute_reason"):
        return fakecuda.container_probe(lib, config)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _probe.emit({"kind": "start", "compute": True, "probe_version": _probe.PROBE_VERSION})
        _probe.emit({"kind": "inventory", "nodes": {"/dev/nvidia-uvm": {"present": True}}, "libraries": {}})
        _probe.emit({"kind": "compute_skipped", "reason": config["skip_compute_reason"]})
        _probe.emit({"kind": "done"})
    probe = _probe_contract.parse_output(out.getvalue())
    probe.update({"executed": True, "cdi_devices": ["gpuprobe.local/gpu=0"], "runtime": "podman 4.3.1",
                  "container_name": "gpuprobe-t-1", "image": "localhost/gpuprobe-probe:local", "timed_out": False, "rc": 0})
    return probe


def _runner(calls):
    def run(_host_record, _timeout, _uuid, only_uuids=None, skip_uuids=None):
        calls.append({"only_uuids": only_uuids, "skip_uuids": skip_uuids})
        return {"status": "PASS", "reason": None, "python": "python3", "steps": [], "facts": {}}, {}, {}
    return run


def _compute_on(host, lib):
    plan = _busy.busy_plan(host)
    record = _compute.compute_record(_container(lib, plan), host_record=host, host_runner=_runner([]))
    assert validate_record(record) == []
    return plan, record


def _idle(record):
    """compute.gpu.idle per subject, a device's subject by its UUID without prefix (CUDA's bytes carry none: the probe
    writes every UUID it reads as GPU-...)."""
    return dict((_probe.norm_uuid(c["subject"][4:]) if c["subject"].startswith("GPU ") else c["subject"], c["status"])
                for c in record["checks"] if c["id"] == "compute.gpu.idle")


def _on(uuid):
    return _probe.norm_uuid(uuid)


# ---------------------------------------------------------------------------------------------------------------
# an instance NVML did not enumerate: nothing on that node can be left alone by UUID, so nothing is touched

@pytest.mark.parametrize("host,named", [
    # the parent places pid 4242 on GPU instance 3, which no MIG device handle gave
    (_mig_host(parent=[(4242, 3, 0)]), "gi 3 ci 0"),
    # ... on a compute instance of an enumerated GPU instance that NVML did not give as a MIG device
    (_mig_host(parent=[(4242, 1, 1)]), "gi 1 ci 1"),
    # MIG on, a process on the parent, and no instance enumerated at all (with and without its instance ids)
    (_mig_host(parent=[(4242, 1, 0)], instances=()), "gi 1 ci 0"),
    (_mig_host(parent=[55], instances=()), "gi None ci None"),
])
def test_a_process_on_an_instance_nvml_did_not_enumerate_keeps_the_probe_off_every_device(host, named):
    lib = fakecuda.FakeCuda([A, B, C])  # CUDA lists the instance NVML did not give, under a UUID unknown here
    plan, record = _compute_on(host, lib)
    assert plan["skip_reason"] and "MIG instance (%s) of %s" % (named, PARENT) in plan["skip_reason"]
    assert lib.touched() == []
    assert record["status"] == "NOT_RUN" and "MIG instance (%s) of %s" % (named, PARENT) in record["reason"]
    assert _idle(record) == {"compute processes": "NOT_RUN"}
    verdict = node_verdict({"compute": record})   # the only layer record here (the host's is NVML's reading alone)
    assert verdict["verdict"] == INCONCLUSIVE and "MIG instance (%s) of %s" % (named, PARENT) in verdict["reason"]


# ---------------------------------------------------------------------------------------------------------------
# an old driver names every MIG device by its parent's UUID (cuDeviceGetUuid without _v2): which instance a device
# is cannot be told, so a busy or unknown instance of that GPU keeps the probe off all of them

class _OldDriver(fakecuda.FakeCuda):
    """A libcuda without cuDeviceGetUuid_v2, whose unversioned cuDeviceGetUuid gives a MIG device its parent's UUID."""

    def __getattribute__(self, name):
        if name == "cuDeviceGetUuid_v2":
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def cuDeviceGetUuid(self, ref, dev):
        return fakecuda.FakeCuda.cuDeviceGetUuid_v2(self, ref, dev)


@pytest.mark.parametrize("host", [
    _mig_host(parent=[(4242, 1, 0)], instances=((1, [(4242, 1, 0)]), (2, ()))),                 # A busy
    _mig_host(instances=((1, ()), (2, ())), fail={((0, 1), PROCS): nv.NVML_ERROR_NOT_SUPPORTED}),  # B unknown
    _mig_host(parent=[55]),                                                                       # both unknown
])
def test_a_device_named_by_its_parents_uuid_is_never_touched_while_an_instance_is_busy_or_unknown(host):
    lib = _OldDriver([PARENT, PARENT])
    plan, record = _compute_on(host, lib)
    assert PARENT in plan["skip_uuids"]
    assert lib.touched() == []
    assert _idle(record)[_on(PARENT)] == "NOT_RUN"
    assert all(r["status"] == "NOT_RUN" for r in record["evidence"]["gpus"])


def test_a_device_named_by_its_parents_uuid_runs_when_every_instance_is_known_idle():
    lib = _OldDriver([PARENT])
    plan, record = _compute_on(_mig_host(), lib)
    assert plan == {"busy": [], "skip_uuids": [], "skip_reason": None}
    assert lib.touched() == [0] and _idle(record) == {_on(PARENT): "PASS"}


def test_a_device_without_a_uuid_is_never_idle_while_another_is_busy():
    class NoUuid(fakecuda.FakeCuda):
        """Device 1's UUID cannot be read (CUDA_ERROR_UNKNOWN): the probe lists it without one."""

        def cuDeviceGetUuid_v2(self, ref, dev):
            if dev.value == 1:
                self._rc("cuDeviceGetUuid", 1)
                return 999
            return fakecuda.FakeCuda.cuDeviceGetUuid_v2(self, ref, dev)
    lib = NoUuid([A, B])
    host = _mig_host(parent=[(4242, 1, 0)], instances=((1, [(4242, 1, 0)]), (2, ())))
    _plan, record = _compute_on(host, lib)
    assert lib.touched() == []
    assert "PASS" not in _idle(record).values()


# ---------------------------------------------------------------------------------------------------------------
# the instance's own list x the parent's list: idle only where the instance's own list is empty and nothing on the
# parent could be on it

OWN = {"null": None, "empty": (), "busy": [(7, 1, 0)]}
PARENTS = {"unreadable": None, "empty": [], "ids on A": [(7, 1, 0)], "ids on B": [(8, 2, 0)], "no ids": [9]}


def _expected_a(own, parent):
    if own == "busy" or parent == "ids on A":
        return "busy"
    if own == "null" or parent == "no ids":
        return "unknown"
    return "idle"


@pytest.mark.parametrize("own,parent", list(itertools.product(OWN, PARENTS)))
def test_instance_state_matrix(own, parent):
    fail = {}
    if OWN[own] is None:
        fail[((0, 0), PROCS)] = nv.NVML_ERROR_NOT_SUPPORTED
    if PARENTS[parent] is None:
        fail[(0, PROCS)] = nv.NVML_ERROR_NO_PERMISSION
    host = _mig_host(parent=PARENTS[parent] or (), instances=((1, OWN[own] or ()), (2, ())), fail=fail)
    busy = _busy.gpu_compute_processes(host)
    on_a = [p for p in busy if p["gpu_uuid"] == A]
    state = "idle" if not on_a else ("unknown" if all(_busy.is_unknown(p) for p in on_a) else "busy")
    assert state == _expected_a(own, parent)
    lib = fakecuda.FakeCuda([A])
    plan, record = _compute_on(host, lib)
    assert lib.touched() == ([0] if state == "idle" else [])
    assert _idle(record)[_on(A)] == ("PASS" if state == "idle" else "NOT_RUN")
    assert (A in plan["skip_uuids"]) == (state != "idle")


# ---------------------------------------------------------------------------------------------------------------
# MIG mode: the current one counts (a pending mode applies after a reset)

@pytest.mark.parametrize("mig,parent,instances,untouched", [
    # MIG pending on, current off: CUDA sees the whole GPU; the parent's list says it is busy
    ((0, 1), [4242], (), [PARENT]),
    ((0, 1), [], (), []),
    # MIG current on, pending off: the instances count until the reset
    ((1, 0), [(4242, 1, 0)], ((1, [(4242, 1, 0)]), (2, ())), [A]),
    ((1, 0), [], ((1, ()), (2, ())), []),
])
def test_the_current_mig_mode_decides(mig, parent, instances, untouched):
    host = _mig_host(parent=parent, instances=instances, mig=mig)
    seen = [PARENT] if mig[0] == 0 else [A, B]
    lib = fakecuda.FakeCuda(seen)
    plan, record = _compute_on(host, lib)
    assert lib.touched() == [i for i, u in enumerate(seen) if u not in untouched]
    for uuid in seen:
        assert _idle(record)[_on(uuid)] == ("NOT_RUN" if uuid in untouched else "PASS")
    assert plan["skip_reason"] is None


# ---------------------------------------------------------------------------------------------------------------
# procfs: GPUs no NVML process list covers

def test_nvml_that_did_not_count_the_gpus_leaves_the_node_unknown(tmp_path):
    """nvmlDeviceGetCount failed: NVML answered (ok) with no GPU, the inventory comes from procfs (no process list):
    before, an empty busy list let the probe touch every GPU."""
    root = hf.build_node(tmp_path, gpus=2, procfs=True)
    fake = hf.fake_pynvml(hf.node_gpus(2))

    def count():
        raise nv.NVMLError(nv.NVML_ERROR_UNKNOWN)
    fake.nvmlDeviceGetCount = count
    host = _host.collect_host(root=root, pynvml_module=fake)
    assert [row["source"] for row in host["evidence"]["gpus"]] == ["procfs", "procfs"]
    lib = fakecuda.FakeCuda([PARENT, GPU1])
    plan, record = _compute_on(host, lib)
    assert plan["busy"] is None and plan["skip_reason"] == _busy.UNKNOWN_BUSY
    assert lib.touched() == [] and record["status"] == "NOT_RUN"


def test_a_gpu_the_driver_lists_and_nvml_does_not_is_never_touched(tmp_path):
    root = hf.build_node(tmp_path, gpus=2, procfs=True)
    host = _host.collect_host(root=root, pynvml_module=hf.fake_pynvml([hf.gpu(0)]))
    lib = fakecuda.FakeCuda([PARENT, GPU1])
    plan, record = _compute_on(host, lib)
    assert plan["skip_uuids"] == [GPU1] and plan["skip_reason"] is None
    assert lib.touched() == [0]
    assert _idle(record) == {_on(PARENT): "PASS", _on(GPU1): "NOT_RUN"}
    assert "the driver lists GPU %s" % GPU1 in [r for r in record["evidence"]["gpus"] if _on(r["uuid"]) == _on(GPU1)][0]["reason"]
    # the host layer FAILs the disagreement itself (host.gpu.identity): never verified, whatever compute did
    assert node_verdict({"host": host, "compute": record})["verdict"] == "FAILED_AT_HOST"
