"""A spec in the shape NVIDIA's generator writes stays COMPUTE_VERIFIED on the real GPU (issue 42: the allowlist must
account for the generators' real specs in full, with nothing declared).

The GPU lab host has no NVIDIA container toolkit, so the spec is built here from the driver root's own files in the
shape ``nvidia-ctk cdi generate`` v1.18 writes for ``--driver-root`` (tests/unit/fixtures/host/generators.py and
plugins/module_utils/_cdi/legitimate.py cite the sources): the GPU's and the control device nodes, every
``lib*.so.<driver version>`` of the driver root's library directory and nvidia-smi at their paths less the driver
root (``ro, nosuid, nodev, rbind, rprivate``), ``NVIDIA_VISIBLE_DEVICES=void`` and ``NVIDIA_CTK_LIBCUDA_DIR``, and the
``createContainer`` hooks of ``/usr/local/bin/nvidia-cdi-hook``: ``create-symlinks`` (the sonames and libcuda.so),
``update-ldcache``, ``disable-device-node-modification``. The hook program is a stand-in
(tests/gpu/fixtures/stand_in_cdi_hook.py: the two subcommands that do work, done as the toolkit's hook does them),
installed root-owned for this test only and removed after. The verdict runs through podman 4.3.1 + runc and saves its
records as ``generator-shape-v1.18`` evidence."""
import glob
import os

import pytest

from test_runtime_compute_gpu import DRIVER_ROOT, host_record, run_variant, trust_checks  # noqa: F401 pylint: disable=unused-import

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs a real NVIDIA GPU (GPUPROBE_GPU=1)"),
]

HOOK = "/usr/local/bin/nvidia-cdi-hook"
STAND_IN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "stand_in_cdi_hook.py")
OPTIONS = ["ro", "nosuid", "nodev", "rbind", "rprivate"]
SONAMES = ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler")


@pytest.fixture
def stand_in_hook():
    if os.path.lexists(HOOK):
        pytest.skip("%s exists on this host: not replaced" % HOOK)
    with open(STAND_IN) as src, open(HOOK, "w") as dst:  # a program of its own: the host's python3 runs it
        dst.write("#!/usr/bin/python3\n" + src.read())
    os.chown(HOOK, 0, 0)
    os.chmod(HOOK, 0o755)
    yield HOOK
    os.unlink(HOOK)


def _hook(*args):
    return {"hookName": "createContainer", "path": HOOK, "args": ["nvidia-cdi-hook"] + list(args),
            "env": ["NVIDIA_CTK_DEBUG=false"]}


def generator_shape(host):
    """The edits nvidia-ctk v1.18 writes for this host's driver root (mode nvml, one GPU), as a function for
    run_variant's ``edit``."""
    version = host["evidence"]["nvml"]["driver_version"]
    libdirs = sorted(set(os.path.dirname(p) for p in glob.glob(os.path.join(DRIVER_ROOT, "lib*", "lib*.so.%s" % version))))
    assert libdirs, "no lib*.so.%s under %s" % (version, DRIVER_ROOT)
    libdir = libdirs[0]
    inside = libdir[len(DRIVER_ROOT.rstrip("/")):]  # the driver root stripped (internal/discover/mounts.go relativeTo)
    libs = sorted(os.path.basename(p) for p in glob.glob(os.path.join(libdir, "lib*.so.%s" % version))
                  if os.path.isfile(p) and not os.path.islink(p))
    mounts = [{"hostPath": os.path.join(libdir, name), "containerPath": "%s/%s" % (inside, name), "options": list(OPTIONS)}
              for name in libs]
    smi = os.path.join(DRIVER_ROOT, "bin", "nvidia-smi")
    if os.path.isfile(smi):
        mounts.append({"hostPath": smi, "containerPath": "/bin/nvidia-smi", "options": list(OPTIONS)})
    links = []
    for stem in SONAMES:
        if "%s.so.%s" % (stem, version) in libs:
            links += ["--link", "%s.so.%s::%s/%s.so.1" % (stem, version, inside, stem)]
    links += ["--link", "libcuda.so.1::%s/libcuda.so" % inside]
    nodes = [n for n in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset") if os.path.exists(n)]

    def edit(spec):
        gpu = [d for d in spec["devices"] if d["name"] == "0"][0]
        gpu["containerEdits"] = {"deviceNodes": [{"path": "/dev/nvidia%s" % host["evidence"]["nvml"]["gpus"][0].get("minor", 0)}]}
        spec["devices"] = [gpu]
        names = ("GPUPROBE_RUN_ID=", "GPUPROBE_OWNER=", "GPUPROBE_CREATED=")
        own = [e for e in spec["containerEdits"].get("env") or [] if e.startswith(names)]
        spec["containerEdits"] = {  # the run's own GPUPROBE_* entries kept: they say whose spec this is (cleanup)
            "env": ["NVIDIA_CTK_LIBCUDA_DIR=%s" % inside, "NVIDIA_VISIBLE_DEVICES=void"] + own,
            "deviceNodes": [{"path": n} for n in nodes],
            "mounts": mounts,
            "hooks": [_hook("create-symlinks", *links), _hook("update-ldcache", "--folder", inside),
                      _hook("disable-device-node-modification")],
        }
    return edit


def test_a_spec_as_the_generator_writes_it_is_accounted_for_and_verified(host_record, stand_in_hook):  # noqa: F811 pylint: disable=redefined-outer-name,unused-argument
    records, probe, verdict = run_variant("full", host_record, edit=generator_shape(host_record), name="generator-shape-v1.18",
                                          gate=True)
    trust = trust_checks(records["cdi"])
    assert [c["status"] for c in trust] == ["PASS"], trust
    assert "as NVIDIA's generators write them" in trust[0]["observed"] and "declared" not in trust[0]["observed"], trust
    assert probe is not None and probe["executed"], records["runtime"]["reason"]
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict
    assert "declared" not in verdict["reason"], verdict
