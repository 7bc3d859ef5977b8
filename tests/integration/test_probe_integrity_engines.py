"""A spec can replace the probe (issue 32, False PASS 1), with REAL podman 4.3.1 + runc and REAL containerd 1.7.24 over
the CRI (the engines lab of test_engine_drills).

The attack as it was seen: a spec mounts a "probe" of its own at the probe's old fixed container path
(/gpuprobe/probe.py). The runtime's CDI code replaces the probe's own bind mount with the spec's (the CDI library's
Apply removes a mount with the same destination first), so that file runs under ``-I -S`` with the run's token. It is
the real probe with one change: it reports the digest of the driver root's libcuda (mounted by the spec at a second
path) while an impostor libcuda (tests/unit/fixtures/host/fake_driver.c) does the work: compute.driver.binding PASSed
and the node was COMPUTE_VERIFIED.

Now: the cdi layer FAILs the device (cdi.inject.probe_integrity) before any container starts, the node gate blocks
the probe ("blocked by cdi FAIL"), and the verdict is FAILED_AT_CDI. The class is tried with more members: the probe's
directory, parent directories, the interpreter, its standard library, the loader, libc, LD_PRELOAD. And the probe's
own path is drawn per run: the same spec run past the gate meets the real probe, whose binding FAILs."""
import os

import pytest

import verdictlab  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from replaced_probe import replaced_probe
from test_engine_drills import engine, lab  # noqa: F401 pylint: disable=unused-import
from test_fake_driver_podman import CUDA, DRIVER, GPU, PTXJIT_IN_CONTAINER, _build, _host
from test_runtime_podman import LIB_IN_CONTAINER

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.gate import gated, layer_gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, rollup_status
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("engine", ["podman", "containerd"], indirect=True)]

CHECK = "cdi.inject.probe_integrity"
DRIVER_COPY = "/gpuprobe-driver/libcuda.so.%s" % DRIVER   # the driver root's file, mounted by the spec for its "probe"
RO = ["ro", "nosuid", "nodev", "bind"]


def _attack(lab_, driver):  # noqa: F811 pylint: disable=redefined-outer-name
    """The fake driver's edits (an impostor libcuda that gets through every step) and the driver root's file."""
    impostor = _build(os.path.join(lab_.base, "impostor", "libcuda.so.1"), "impostor")
    return {"env": ["FAKE_GPU_UUID=%s" % GPU, "FAKE_GPU_NAME=NVIDIA H200", "FAKE_CUDA_DRIVER_VERSION=%d" % CUDA],
            "deviceNodes": [lab_.node("nvidia0", 1, 3), lab_.node("nvidiactl", 1, 5), lab_.node("nvidia-uvm", 1, 7)],
            "mounts": [{"hostPath": impostor, "containerPath": LIB_IN_CONTAINER, "options": RO},
                       {"hostPath": _build(os.path.join(lab_.base, "driver", "lib64", "libnvidia-ptxjitcompiler.so.%s" % DRIVER),
                                           "ptxjit"), "containerPath": PTXJIT_IN_CONTAINER, "options": RO},
                       {"hostPath": driver, "containerPath": DRIVER_COPY, "options": RO}]}


def _member(lab_, name):  # noqa: F811 pylint: disable=redefined-outer-name
    """(extra mounts, extra env) of one member of the class: a spec edit that reaches what the probe trusts."""
    evil_dir = os.path.join(lab_.base, "evil")
    probe = replaced_probe(evil_dir, DRIVER_COPY)
    lib = os.path.join(lab_.base, "impostor", "libcuda.so.1")
    return {
        "probe file at the old fixed path": ([{"hostPath": probe, "containerPath": "/gpuprobe/probe.py", "options": RO}], []),
        "probe directory": ([{"hostPath": evil_dir, "containerPath": "/gpuprobe", "options": RO}], []),
        "parent directory /usr/lib": ([{"hostPath": evil_dir, "containerPath": "/usr/lib", "options": RO}], []),
        "parent directory /usr": ([{"hostPath": evil_dir, "containerPath": "/usr", "options": RO}], []),
        "interpreter": ([{"hostPath": probe, "containerPath": "/usr/bin/python3", "options": RO}], []),
        "standard library": ([{"hostPath": probe, "containerPath": "/usr/lib/python3.11/json/__init__.py", "options": RO}], []),
        "dynamic loader": ([{"hostPath": lib, "containerPath": "/lib64/ld-linux-x86-64.so.2", "options": RO}], []),
        "libc": ([{"hostPath": lib, "containerPath": "/usr/lib/x86_64-linux-gnu/libc.so.6", "options": RO}], []),
        "LD_PRELOAD": ([{"hostPath": lib, "containerPath": "/opt/evil/libevil.so", "options": RO}],
                       ["LD_PRELOAD=/opt/evil/libevil.so"]),
    }[name]


def _node(lab_, edits, gate=True):  # noqa: F811 pylint: disable=redefined-outer-name
    """The node's four records as the node runs them: cdi from the spec, the gate, then the probe (unless blocked)."""
    lab_.write_spec(edits)
    host = _host(os.path.join(lab_.base, "driver"))
    cdi = _cdi_layer.record(spec_dirs=[os.path.dirname(lab_.spec_path)], discover_runtime_dirs_=False,
                            devices=[lab_.device], kinds=[lab_.device.split("=")[0]])
    blocked = layer_gate({"host": host, "cdi": cdi}) if gate else ""
    if blocked:
        return dict(gated(blocked), host=host, cdi=cdi), None
    runtime, probe = lab_.run(cdi["evidence"]["expected_edits"], host=host)
    compute = _compute_layer.record(probe, runtime, host_record=host, host_runner=verdictlab.passing_control,
                                    timeout=30, expected_gpus=[{"uuid": GPU, "index": 0, "minor": 0, "name": "NVIDIA H200"}])
    return {"host": host, "cdi": cdi, "runtime": runtime, "compute": compute}, probe


@pytest.fixture
def driver(lab):  # noqa: F811 pylint: disable=redefined-outer-name
    return _build(os.path.join(lab.base, "driver", "lib64", "libcuda.so.%s" % DRIVER), "driver-root")


MEMBERS = ["probe file at the old fixed path", "probe directory", "parent directory /usr/lib", "parent directory /usr",
           "interpreter", "standard library", "dynamic loader", "libc", "LD_PRELOAD"]


@pytest.mark.parametrize("member", MEMBERS)
def test_a_spec_that_reaches_the_probe_fails_at_cdi_and_the_probe_never_runs(lab, driver, member):  # noqa: F811 pylint: disable=redefined-outer-name
    edits = _attack(lab, driver)
    mounts, env = _member(lab, member)
    edits["mounts"] += mounts
    edits["env"] += env
    records, probe = _node(lab, edits)
    v = node_verdict(records)
    assert v["verdict"] != "COMPUTE_VERIFIED", v
    fails = [c for c in records["cdi"]["checks"] if c["id"] == CHECK and c["status"] == FAIL]
    assert fails and all(c["subject"] == lab.device for c in fails), [c for c in records["cdi"]["checks"] if c["id"] == CHECK]
    assert probe is None and lab.leftovers() == []
    for layer in ("runtime", "compute"):
        assert (records[layer]["status"], records[layer]["reason"]) == (NOT_RUN, "blocked by cdi FAIL"), records[layer]
    assert (v["verdict"], v["layer"]) == ("FAILED_AT_CDI", "cdi"), v


def test_past_the_gate_the_old_path_meets_the_real_probe(lab, driver):  # noqa: F811 pylint: disable=redefined-outer-name
    """The probe's path is drawn per run: the spec's file at /gpuprobe/probe.py is not what runs. The real probe
    hashes the impostor it loaded, so the binding FAILs and the verdict still is not COMPUTE_VERIFIED (with the cdi
    record's FAIL left aside to see what the runtime alone now does)."""
    edits = _attack(lab, driver)
    edits["mounts"] += _member(lab, "probe file at the old fixed path")[0]
    records, probe = _node(lab, edits, gate=False)
    assert probe is not None and probe["executed"], records["runtime"]["reason"]
    inside = records["runtime"]["evidence"]["container"]["probe_in_container"]
    assert inside != "/gpuprobe/probe.py" and inside.startswith("/gpuprobe-"), inside
    binding = [c for c in records["compute"]["checks"] if c["id"] == "compute.driver.binding"]
    assert [c["status"] for c in binding] == [FAIL], binding
    checks = [c for c in records["cdi"]["checks"] if c["id"] != CHECK]
    records["cdi"] = dict(records["cdi"], status=rollup_status(checks), checks=checks)
    assert node_verdict(records)["verdict"] != "COMPUTE_VERIFIED"
