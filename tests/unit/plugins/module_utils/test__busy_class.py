"""The class of issue 32 item 2 (MIG busy): a device is idle only where NVML positively says no process is on it.
Every way a MIG instance's (or a GPU's) busy state can be known or unknown, from the pynvml boundary up: the fake
pynvml (tests/unit/fixtures/host/hostfixture.py) read by _nvml.read_nvml (or the whole host layer over a node tree,
where procfs is involved), judged by _busy.busy_plan, the probe's config built by the runtime layer, the probe's real
device loop on a fake libcuda (what CUDA lists in the container), and the compute record.

The probe touches only the devices on one positive list (idle_uuids: those NVML reported idle); every other device
CUDA lists is listed, never touched, "not known idle".

Members (parent = the GPU's own process list, own = the instance's MIG-handle list):
  parent process with instance ids on an enumerated instance        busy                      (test__busy.py)
  parent process without instance ids, no instance lists it         every instance unknown    (test__busy.py)
  parent process whose ids name an instance NVML did not enumerate   that instance on no list: untouched  (here)
  MIG enabled, processes on the parent, no instance enumerated      no instance idle: nothing touched    (here)
  a MIG instance / a GPU CUDA lists that NVML never listed           not known idle: untouched            (here)
  a device CUDA lists without a UUID (GPU or MIG)                    not known idle: untouched            (here)
  the idle GPU, the idle MIG instance(s)                             touched, verified (controls)         (here)
  allow_busy_gpu (no busy check asked)                               every device, WARN where not idle    (here)
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
import json
import os
import shutil
import subprocess
import sys

import pytest

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import busy as _busy
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import nvml as _nvml
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.layer import _probe_config
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import INCONCLUSIVE, node_verdict

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
    def run(_host_record, _timeout, _uuid, only_uuids=None, **scope):
        calls.append({"only_uuids": only_uuids, "idle_uuids": scope.get("idle_uuids")})
        return {"status": "PASS", "reason": None, "python": "python3", "steps": [], "facts": {}}, {}, {}
    return run


def _compute_on(host, lib):
    plan = _busy.busy_plan(host)
    record = _compute_layer.record(_container(lib, plan), host_record=host, host_runner=_runner([]))
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
# an instance NVML did not enumerate: its UUID is unknown, so it is not on the positive list (idle_uuids) and CUDA
# never gets it touched under any UUID; the instances NVML reported idle still run

@pytest.mark.parametrize("host,named,touched", [
    # the parent places pid 4242 on GPU instance 3, which no MIG device handle gave
    (_mig_host(parent=[(4242, 3, 0)]), "gi 3 ci 0", [0, 1]),
    # ... on a compute instance of an enumerated GPU instance that NVML did not give as a MIG device
    (_mig_host(parent=[(4242, 1, 1)]), "gi 1 ci 1", [0, 1]),
    # MIG on, a process on the parent, and no instance enumerated at all (with and without its instance ids)
    (_mig_host(parent=[(4242, 1, 0)], instances=()), "gi 1 ci 0", []),
    (_mig_host(parent=[55], instances=()), "gi None ci None", []),
])
def test_a_process_on_an_instance_nvml_did_not_enumerate_keeps_the_probe_off_every_device_not_known_idle(host, named, touched):
    lib = fakecuda.FakeCuda([A, B, C])  # CUDA lists the instance NVML did not give, under a UUID unknown here
    plan, record = _compute_on(host, lib)
    assert plan["skip_reason"] is None and C not in plan["idle_uuids"] and PARENT not in plan["idle_uuids"]
    assert lib.touched() == touched
    text = "MIG instance (%s) of %s" % (named, PARENT)
    rows = dict((_on(r["uuid"]), r) for r in record["evidence"]["gpus"])
    assert rows[_on(C)]["status"] == "NOT_RUN" and text in rows[_on(C)]["reason"]
    assert _idle(record) == dict((_on(u), "PASS" if i in touched else "NOT_RUN") for i, u in enumerate([A, B, C]))
    verdict = node_verdict({"compute": record})   # the only layer record here (the host's is NVML's reading alone)
    assert verdict["verdict"] == INCONCLUSIVE
    if not touched:
        assert record["status"] == "NOT_RUN" and text in verdict["reason"]


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
    assert PARENT not in plan["idle_uuids"]
    assert lib.touched() == []
    assert _idle(record)[_on(PARENT)] == "NOT_RUN"
    assert all(r["status"] == "NOT_RUN" for r in record["evidence"]["gpus"])


def test_a_device_named_by_its_parents_uuid_runs_when_every_instance_is_known_idle():
    lib = _OldDriver([PARENT])
    plan, record = _compute_on(_mig_host(), lib)
    assert (plan["busy"], plan["idle_uuids"], plan["skip_reason"]) == ([], sorted([A, B, PARENT]), None)
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
    assert (A in plan["idle_uuids"]) == (state == "idle")


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
    host = _host.record(root=root, pynvml_module=fake)
    assert [row["source"] for row in host["evidence"]["gpus"]] == ["procfs", "procfs"]
    lib = fakecuda.FakeCuda([PARENT, GPU1])
    plan, record = _compute_on(host, lib)
    assert plan["busy"] is None and plan["skip_reason"] == _busy.UNKNOWN_BUSY
    assert lib.touched() == [] and record["status"] == "NOT_RUN"


def test_a_gpu_the_driver_lists_and_nvml_does_not_is_never_touched(tmp_path):
    root = hf.build_node(tmp_path, gpus=2, procfs=True)
    host = _host.record(root=root, pynvml_module=hf.fake_pynvml([hf.gpu(0)]))
    lib = fakecuda.FakeCuda([PARENT, GPU1])
    plan, record = _compute_on(host, lib)
    assert plan["idle_uuids"] == [PARENT] and plan["skip_reason"] is None
    assert lib.touched() == [0]
    assert _idle(record) == {_on(PARENT): "PASS", _on(GPU1): "NOT_RUN"}
    assert "the driver lists GPU %s" % GPU1 in [r for r in record["evidence"]["gpus"] if _on(r["uuid"]) == _on(GPU1)][0]["reason"]
    # the host layer FAILs the disagreement itself (host.gpu.identity): never verified, whatever compute did
    assert node_verdict({"host": host, "compute": record})["verdict"] == "FAILED_AT_HOST"


# ---------------------------------------------------------------------------------------------------------------
# the positive list: the probe touches only a device whose UUID NVML reported idle (idle_uuids); every other device
# CUDA lists is left alone "not known idle", its rows and compute.gpu.idle NOT_RUN, the node INCONCLUSIVE naming it

D = hf.mig_device(0, gi=4)["uuid"]       # an instance NVML never listed, with no process naming it
NOUUID = None                            # CUDA lists a device whose UUID it cannot read (cuDeviceGetUuid fails)


def _gpu_host(*gpus):
    return {"evidence": {"nvml": _nvml.read_nvml(hf.fake_pynvml(list(gpus)))}}


# (CUDA's device list, host record, {device: why it is left alone (a text in its row), or None: idle, touched})
POSITIVE = {
    "a MIG instance NVML never listed": ([A, D], _mig_host(), {A: None, D: "NVML on the host never listed"}),
    "a GPU NVML never listed": ([PARENT, GPU1], _gpu_host(hf.gpu(0)), {PARENT: None, GPU1: "NVML on the host never listed"}),
    "a device without a UUID": ([PARENT, NOUUID], _gpu_host(hf.gpu(0)), {PARENT: None, NOUUID: "CUDA gave it no UUID"}),
    "a MIG device without a UUID": ([A, NOUUID], _mig_host(), {A: None, NOUUID: "CUDA gave it no UUID"}),
    "the idle GPU (control)": ([PARENT], _gpu_host(hf.gpu(0)), {PARENT: None}),
    "the idle MIG instance (control)": ([A], _mig_host(), {A: None}),
    "both idle MIG instances (control)": ([A, B], _mig_host(), {A: None, B: None}),
    "a busy GPU": ([PARENT, GPU1], _gpu_host(hf.gpu(0, processes=[4242]), hf.gpu(1)),
                   {PARENT: "GPU in use, not preempting: pid 4242", GPU1: None}),
    "a busy MIG instance": ([A, B], _mig_host(parent=[(4242, 1, 0)], instances=((1, [(4242, 1, 0)]), (2, ()))),
                            {A: "GPU in use, not preempting: pid 4242", B: None}),
    "a busy-unknown MIG instance": ([A, B], _mig_host(fail={((0, 1), PROCS): nv.NVML_ERROR_NOT_SUPPORTED}),
                                    {A: None, B: "busy state unknown: NVML did not list this MIG instance's processes"}),
    # a process on an instance NVML did not enumerate: that instance (C) is left alone, the ones known idle still run
    "a busy instance NVML did not enumerate": ([A, B, C], _mig_host(parent=[(4242, 3, 0)]),
                                               {A: None, B: None, C: "NVML on the host never listed"}),
}


class _Lib(fakecuda.FakeCuda):
    """A fake libcuda listing ``uuids``; a None among them is a device whose UUID cannot be read."""

    def __init__(self, uuids):
        fakecuda.FakeCuda.__init__(self, [u or PARENT for u in uuids],
                                   fail=dict((("cuDeviceGetUuid", i), 999) for i, u in enumerate(uuids) if u is None))


def _key(uuid, ordinal):
    return _on(uuid) if uuid else "#%s" % ordinal


@pytest.mark.parametrize("case", list(POSITIVE))
def test_only_a_device_nvml_reported_idle_is_touched(case):
    seen, host, why = POSITIVE[case]
    lib = _Lib(seen)
    plan = _busy.busy_plan(host)
    expected = [{"uuid": PARENT if u in (A, B, C, D) else u, "index": 0, "minor": 0, "name": "NVIDIA H200",
                 "mig_uuid": u if u in (A, B, C, D) else None} for u in seen if u]
    record = _compute_layer.record(_container(lib, plan), host_record=host, host_runner=_runner([]),
                                   expected_gpus=expected)
    assert validate_record(record) == []
    assert lib.touched() == [i for i, u in enumerate(seen) if why[u] is None]
    rows = dict((_key(r["uuid"], r["ordinal"]), r) for r in record["evidence"]["gpus"])
    idle = _idle(record)
    for ordinal, uuid in enumerate(seen):
        key = _key(uuid, ordinal)
        if why[uuid] is None:
            assert (rows[key]["status"], idle[key]) == ("PASS", "PASS")
            continue
        assert idle[key] == "NOT_RUN" and why[uuid] in rows[key]["reason"]
        # expected: its row NOT_RUN, and the node is never verified while it is (the verdict's rows name it)
        assert rows[key]["status"] == ("NOT_RUN" if rows[key]["expected"] else "WARN")
        verdict = node_verdict({"compute": record})
        assert verdict["verdict"] == INCONCLUSIVE
        assert [r for r in verdict["gpus"] if _key(r["uuid"], r["ordinal"]) == key and why[uuid] in r["reason"]]
    assert (record["status"] == "PASS") == all(w is None for w in why.values())
    if all(w is not None for u, w in why.items() if u):   # nothing requested was verified: the reason names each
        assert record["status"] == "NOT_RUN"
        assert all(u in node_verdict({"compute": record})["reason"] for u in why if u)


@pytest.mark.parametrize("case", list(POSITIVE))
def test_the_probe_config_carries_the_positive_list_alone(case):
    """What the probe touches is decided by one list, the devices NVML reported idle (no skip list beside it)."""
    _seen, host, why = POSITIVE[case]
    plan = _busy.busy_plan(host)
    config = _probe_config({}, True, plan)
    assert "skip_uuids" not in config and config["idle_uuids"] == plan["idle_uuids"]
    assert set(_on(u) for u, w in why.items() if u and w is None) <= set(_on(u) for u in config["idle_uuids"])
    assert not set(_on(u) for u, w in why.items() if u and w is not None) & set(_on(u) for u in config["idle_uuids"])


@pytest.mark.parametrize("case", ["a MIG instance NVML never listed", "a GPU NVML never listed", "a device without a UUID"])
def test_the_opt_in_to_busy_gpus_touches_every_device_and_says_which_were_not_known_idle(case):
    """allow_busy_gpu: true (no busy check asked): every device CUDA lists runs, and compute.gpu.idle WARNs on the ones
    NVML did not report idle."""
    seen, host, why = POSITIVE[case]
    lib = _Lib(seen)
    plan = _busy.busy_plan(host, allow_busy_gpu=True)
    assert "idle_uuids" not in _probe_config({}, True, plan)
    record = _compute_layer.record(_container(lib, plan), host_record=host, host_runner=_runner([]), allow_busy_gpu=True)
    assert lib.touched() == list(range(len(seen)))
    statuses = [c["status"] for c in record["checks"] if c["id"] == "compute.gpu.idle"]
    assert sorted(statuses) == sorted("PASS" if w is None else "WARN" for w in why.values())


def test_the_host_control_runs_only_on_the_devices_nvml_reported_idle():
    calls = []
    host = _mig_host()
    plan = _busy.busy_plan(host)
    _compute_layer.record(_container(_Lib([A, D]), plan), host_record=host, host_runner=_runner(calls))
    assert [[_on(u) for u in c["only_uuids"]] for c in calls] == [[_on(A)]] and calls[0]["idle_uuids"] == plan["idle_uuids"]
    assert D not in plan["idle_uuids"] and A in plan["idle_uuids"]


# ---------------------------------------------------------------------------------------------------------------
# the stand-alone probe (python3 -I -S, the file the container runs) on a compiled libcuda
# (tests/unit/fixtures/host/fake_driver.c: one device, the UUID it is told to claim)

FAKE_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "host", "fake_driver.c")


@pytest.fixture(scope="module")
def compiled_libcuda(tmp_path_factory):
    if not shutil.which("cc"):
        pytest.skip("no cc: cannot build the fake libcuda")
    path = str(tmp_path_factory.mktemp("fake-libcuda") / "libcuda.so.1")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", path, FAKE_SOURCE], check=True, timeout=120)
    return path


@pytest.mark.parametrize("uuid,host,touched", [
    (D, _mig_host(), False),                      # a MIG instance NVML never listed
    (GPU1, _gpu_host(hf.gpu(0)), False),          # a GPU NVML never listed
    (A, _mig_host(parent=[(4242, 1, 0)], instances=((1, [(4242, 1, 0)]), (2, ()))), False),   # busy
    (A, _mig_host(), True),                       # an idle MIG instance (control)
    (PARENT, _gpu_host(hf.gpu(0)), True),         # an idle GPU (control)
], ids=["mig never listed", "gpu never listed", "busy mig", "idle mig", "idle gpu"])
def test_the_stand_alone_probe_touches_only_a_device_nvml_reported_idle(compiled_libcuda, tmp_path, uuid, host, touched):
    config = dict(_probe_config({}, True, _busy.busy_plan(host)), libcuda=compiled_libcuda)
    _unused, path = _probe.write_probe(directory=str(tmp_path))
    run = subprocess.run([sys.executable] + list(_probe_contract.ISOLATED_FLAGS) + [path, json.dumps(config)],
                         env=dict(os.environ, FAKE_GPU_UUID=uuid), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    parsed = _probe_contract.parse_output(run.stdout.decode(), token=config["token"], kernel=(config["a"], config["b"]))
    (device,) = parsed["facts"]["devices"]
    assert _on(device["uuid"]) == _on(uuid)
    ran = [s["step"] for s in parsed["steps"] if s.get("device") == 0 and s["step"] not in ("cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid")]
    assert bool(ran) == touched and ("verify" in ran) == touched
    assert (device["skipped"] or "").startswith("" if touched else "not known idle: the host's NVML did not report")
