"""A spec cannot get its own code running in the probe (issues 32 and 42), with REAL podman 4.3.1 + runc and REAL
containerd 1.7.24 over the CRI (the engines lab of test_engine_drills).

Issue 32 saw a spec mount a "probe" of its own at the probe's old fixed path; issue 42 saw six more ways in on a real
GPU, none of them on the list of dangers the cdi layer had then: a ``python3._pth`` beside the interpreter naming a
directory the spec also mounts, a build tree's landmark (``Modules/Setup.local``) with a standard library at
``/usr/Lib``, a script over ``/usr/bin/python`` (the image's link to python3), OpenSSL's configuration (``OPENSSL_CONF``
or a mount over ``openssl.cnf``) naming a provider the spec mounts, an NVML that is not the driver's, and a hook of its
own. Trust is now an allowlist (``cdi.trust.accounted``): the lab's stand-in driver is declared by the site
(``trusted_edits``, as a site declares what it added), and every member of the class added to it is an edit that is
neither the generators' nor declared: the device FAILs at cdi, the gate blocks the probe, no container is created
through either engine, and the verdict is FAILED_AT_CDI naming the edit. The probe's own path is still drawn per run:
the old fixed path run past the gate meets the real probe, whose binding FAILs."""
import os
import shutil

import pytest

import verdictlab  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from replaced_probe import replaced_probe
from test_engine_drills import engine, lab  # noqa: F401 pylint: disable=unused-import
from test_fake_driver_podman import CUDA, DRIVER, GPU, PTXJIT_IN_CONTAINER, _build, _host
from test_runtime_podman import LIB_IN_CONTAINER

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.gate import gated, layer_gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, rollup_status
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("engine", ["podman", "containerd"], indirect=True)]

CHECK = "cdi.trust.accounted"
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


def _evil(lab_, name, text="print('a verified kernel')\n", mode=0o644):
    """A file of the attacker's, outside what the site declared (the lab's driver, impostor and dev directories)."""
    path = os.path.join(lab_.base, "evil", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def _member(lab_, name):
    """(extra mounts, extra env, extra hooks) of one member of the class: an edit no GPU spec makes."""
    evil_dir = os.path.join(lab_.base, "evil")
    probe = replaced_probe(evil_dir, DRIVER_COPY)
    lib = os.path.join(evil_dir, "libimpostor.so.1")  # the impostor libcuda, copied outside what the site declared
    if not os.path.exists(lib):
        shutil.copy(os.path.join(lab_.base, "impostor", "libcuda.so.1"), lib)

    def ro(host, target):
        return {"hostPath": host, "containerPath": target, "options": RO}
    encodings = os.path.dirname(_evil(lab_, "lib/encodings/__init__.py", "import runpy\n"))
    return {
        # issue 42's six rows
        "python3._pth naming a mounted directory": ([ro(_evil(lab_, "python3._pth", "/opt/evil-lib\n"), "/usr/bin/python3._pth"),
                                                     ro(os.path.dirname(encodings), "/opt/evil-lib")], [], []),
        "Modules/Setup.local and /usr/Lib": ([ro(_evil(lab_, "Setup.local", ""), "/usr/bin/Modules/Setup.local"),
                                              ro(os.path.dirname(encodings), "/usr/Lib")], [], []),
        "a script over /usr/bin/python": ([ro(_evil(lab_, "python", "#!/opt/evil/python3\n", 0o755), "/usr/bin/python")], [], []),
        "OPENSSL_CONF": ([], ["OPENSSL_CONF=/opt/evil/openssl.cnf"], []),
        "a mount over openssl.cnf": ([ro(_evil(lab_, "openssl.cnf", "[openssl_init]\n"), "/usr/lib/ssl/openssl.cnf")], [], []),
        "an NVML that is not the driver's": ([ro(lib, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")], [], []),
        "a createRuntime hook of its own": ([], [], [{"hookName": "createRuntime", "path": "/bin/sh",
                                                     "args": ["sh", "-c", "sed -i s/kernel/forged/ /tmp/gpuprobe-run-*/probe.py"]}]),
        # issue 32's class
        "probe file at the old fixed path": ([ro(probe, "/gpuprobe/probe.py")], [], []),
        "probe directory": ([ro(evil_dir, "/gpuprobe")], [], []),
        "parent directory /usr/lib": ([ro(evil_dir, "/usr/lib")], [], []),
        "interpreter": ([ro(probe, "/usr/bin/python3")], [], []),
        "standard library": ([ro(probe, "/usr/lib/python3.11/json/__init__.py")], [], []),
        "libc": ([ro(lib, "/usr/lib/x86_64-linux-gnu/libc.so.6")], [], []),
        "LD_PRELOAD": ([ro(lib, "/opt/evil/libevil.so")], ["LD_PRELOAD=/opt/evil/libevil.so"], []),
    }[name]


def _declared(lab_):
    """What the site declares: the lab's stand-in driver (its files, device nodes and fake-driver env), nothing else."""
    return [{"hostPath": os.path.join(lab_.base, d, "*"), "why": "the lab's stand-in driver"} for d in ("driver", "impostor")] + \
        [{"deviceNode": "/dev/nvidia*", "hostPath": os.path.join(lab_.dev, "*")}, {"env": "FAKE_*"}]


def _node(lab_, edits, gate=True):  # noqa: F811 pylint: disable=redefined-outer-name
    """The node's four records as the node runs them: cdi from the spec, the gate, then the probe (unless blocked)."""
    lab_.write_spec(edits)
    host = _host(os.path.join(lab_.base, "driver"))
    cdi = _cdi_layer.record(spec_dirs=[os.path.dirname(lab_.spec_path)], discover_runtime_dirs_=False,
                            devices=[lab_.device], kinds=[lab_.device.split("=")[0]], host=host, trusted_edits=_declared(lab_))
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


MEMBERS = ["python3._pth naming a mounted directory", "Modules/Setup.local and /usr/Lib", "a script over /usr/bin/python",
           "OPENSSL_CONF", "a mount over openssl.cnf", "an NVML that is not the driver's", "a createRuntime hook of its own",
           "probe file at the old fixed path", "probe directory", "parent directory /usr/lib", "interpreter",
           "standard library", "libc", "LD_PRELOAD"]


def test_the_labs_declared_driver_alone_is_accounted_for(lab, driver):  # noqa: F811 pylint: disable=redefined-outer-name
    """The control: the stand-in driver the site declared is accounted for (by declaration, and said so); what fails
    it then is the rest of the cdi layer (its impostor libcuda is not the driver root's), not the allowlist."""
    records, _probe = _node(lab, _attack(lab, driver))
    trust = [c for c in records["cdi"]["checks"] if c["id"] == CHECK]
    assert [c["status"] for c in trust] == [PASS] and "declared trusted by the site" in trust[0]["observed"], trust
    assert node_verdict(records)["signature"] != CHECK


@pytest.mark.parametrize("member", MEMBERS)
def test_an_edit_no_gpu_spec_makes_fails_at_cdi_and_no_container_starts(lab, driver, member):  # noqa: F811 pylint: disable=redefined-outer-name
    edits = _attack(lab, driver)
    mounts, env, hooks = _member(lab, member)
    edits["mounts"] += mounts
    edits["env"] += env
    edits["hooks"] = edits.get("hooks", []) + hooks
    records, probe = _node(lab, edits)
    v = node_verdict(records)
    assert v["verdict"] != "COMPUTE_VERIFIED", v
    fails = [c for c in records["cdi"]["checks"] if c["id"] == CHECK and c["status"] == FAIL]
    assert fails and all(c["subject"] == lab.device and "not accounted for" in c["observed"] for c in fails), \
        [c for c in records["cdi"]["checks"] if c["id"] == CHECK]
    assert len(fails) == len(mounts) + len(env) + len(hooks), fails
    assert probe is None and lab.leftovers() == []
    for layer in ("runtime", "compute"):
        assert (records[layer]["status"], records[layer]["reason"]) == (NOT_RUN, "blocked by cdi FAIL"), records[layer]
    # the stand-in driver's nodes give no GPU the host lists, so the first cdi FAIL may be another one: the verdict's
    # layer and where it points are what matter here
    assert (v["verdict"], v["layer"], v["points_to"]) == ("FAILED_AT_CDI", "cdi", "cdi"), v


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
