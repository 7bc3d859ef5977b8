"""cdi.inject.probe_integrity (issue 32, "a spec can replace the probe"): a requested device whose edits reach what
the probe trusts in the container FAILs the cdi layer before any container starts, and the probe never runs. The
class: every object the probe relies on (its file and directory, python3 and what it links to, the standard
library, the loader, libc and the libraries python3 loads, the loader's configuration) and every edit that can
reach one (a mount at it, under it or over a parent directory; a device node there; a hook that writes there; an
env that redirects the interpreter or its loader). A spec as nvidia-ctk writes it PASSes. Real spec files in a tmp
tree, read by the cdi layer."""
import json
import os

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import integrity
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.gate import layer_gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN

CHECK = "cdi.inject.probe_integrity"
DEVICE = "lab.example/gpu=0"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
LIBCUDA = {"hostPath": "/drv/libcuda.so.580.159.04", "containerPath": LIBDIR + "/libcuda.so.1", "options": ["ro", "nosuid", "nodev", "bind"]}


def _checks(tmp_path, device_edits, spec_edits=None, files=()):
    root = tmp_path / "node"
    for rel in ("cdi", "drv", "evil/dir") + tuple(os.path.dirname(f) for f in files):
        (root / rel).mkdir(parents=True, exist_ok=True)
    (root / "drv" / "libcuda.so.580.159.04").write_bytes(b"\x7fELF driver")
    (root / "evil" / "probe.py").write_text("print('a verified kernel')\n")
    for f in files:
        (root / f).write_bytes(b"\x7fELF impostor")
    spec = {"cdiVersion": "0.5.0", "kind": "lab.example/gpu",
            "devices": [{"name": "0", "containerEdits": dict({"env": ["X=1"]}, **device_edits)}],
            "containerEdits": spec_edits or {"mounts": [LIBCUDA]}}
    (root / "cdi" / "lab.yaml").write_text(json.dumps(spec))
    record = _cdi_layer.record(spec_dirs=["/cdi"], discover_runtime_dirs_=False, devices=[DEVICE], kinds=["lab.example/gpu"],
                               root=str(root))
    return record, [c for c in record["checks"] if c["id"] == CHECK]


def _mount(container_path, host_path="/evil/probe.py"):
    return {"hostPath": host_path, "containerPath": container_path, "options": ["ro", "bind"]}


# (member, a container path a spec mounts a file or directory at)
MOUNTED = [
    ("probe file, the old fixed path", "/gpuprobe/probe.py"),
    ("probe directory", "/gpuprobe"),
    ("probe file, a per-run path", "/gpuprobe-0123456789abcdef/probe.py"),
    ("probe file, unclean path", "/gpuprobe//./probe.py"),
    ("interpreter on PATH", "/usr/bin/python3"),
    ("interpreter, versioned", "/usr/local/bin/python3.11"),
    ("interpreter in /bin", "/bin/python3"),
    ("interpreter, a link target elsewhere", "/opt/conda/bin/python3.12"),
    ("PATH dir", "/usr/local/bin"),
    ("stdlib module", "/usr/lib/python3.11/json/__init__.py"),
    ("stdlib dir", "/usr/local/lib/python3.12"),
    ("stdlib, lib64 form", "/usr/lib64/python3.9/os.py"),
    ("stdlib, ctypes", "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so"),
    ("loader, glibc x86_64", "/lib64/ld-linux-x86-64.so.2"),
    ("loader, its target", LIBDIR + "/ld-linux-x86-64.so.2"),
    ("loader, aarch64", "/lib/ld-linux-aarch64.so.1"),
    ("loader, musl", "/lib/ld-musl-x86_64.so.1"),
    ("libc", "/lib/x86_64-linux-gnu/libc.so.6"),
    ("libc, musl", "/lib/libc.musl-x86_64.so.1"),
    ("libm", LIBDIR + "/libm.so.6"),
    ("libz", LIBDIR + "/libz.so.1"),
    ("libexpat", LIBDIR + "/libexpat.so.1"),
    ("libpthread", LIBDIR + "/libpthread.so.0"),
    ("libdl", LIBDIR + "/libdl.so.2"),
    ("libffi (ctypes)", LIBDIR + "/libffi.so.8"),
    ("libcrypto (hashlib)", "/usr/lib64/libcrypto.so.3"),
    ("libpython", "/usr/lib64/libpython3.11.so.1.0"),
    ("libc where the image's LD_LIBRARY_PATH may look", "/usr/local/nvidia/lib64/libc.so.6"),
    ("glibc-hwcaps", LIBDIR + "/glibc-hwcaps/x86-64-v3/libc.so.6"),
    ("pyvenv.cfg next to python3 (its home moves the stdlib, -I or not)", "/usr/bin/pyvenv.cfg"),
    ("pyvenv.cfg one dir up", "/usr/pyvenv.cfg"),
    ("pybuilddir.txt", "/usr/local/bin/pybuilddir.txt"),
    ("ld.so.preload", "/etc/ld.so.preload"),
    ("ld.so.cache", "/etc/ld.so.cache"),
    ("ld.so.conf.d", "/etc/ld.so.conf.d/zz-evil.conf"),
    ("parent: /", "/"),
    ("parent: /usr", "/usr"),
    ("parent: /usr/local", "/usr/local"),
    ("parent: /usr/lib", "/usr/lib"),
    ("parent: /lib64", "/lib64"),
    ("parent: a multiarch library dir", LIBDIR),
    ("parent: /etc", "/etc"),
    ("parent: /usr/bin", "/usr/bin"),
    ("parent: unclean /usr/lib/", "/usr/../usr/lib/"),
]


@pytest.mark.parametrize("member,path", MOUNTED, ids=[m for m, _p in MOUNTED])
def test_a_mount_that_reaches_what_the_probe_trusts_fails(tmp_path, member, path):
    record, checks = _checks(tmp_path, {"mounts": [_mount(path)]})
    fails = [c for c in checks if c["status"] == FAIL]
    assert len(fails) == 1 and fails[0]["subject"] == DEVICE, (member, checks)
    assert "reaches" in fails[0]["observed"], fails[0]
    assert record["status"] == FAIL
    assert layer_gate({"host": {"status": PASS}, "cdi": record}) == "blocked by cdi FAIL"


@pytest.mark.parametrize("path", ["/usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3", "/opt/evil-libs"])
def test_a_directory_mounted_with_a_trusted_library_inside_fails(tmp_path, path):
    # the names in the host directory are looked at: a hwcaps dir (searched before its parent) holding libc.so.6;
    # a dir an LD_LIBRARY_PATH of the spec puts first
    env = ["LD_LIBRARY_PATH=%s" % path]
    _record, checks = _checks(tmp_path, {"mounts": [_mount(path, "/evil/dir")], "env": env}, files=("evil/dir/libc.so.6",))
    observed = [c["observed"] for c in checks if c["status"] == FAIL]
    assert any("puts libc.so.6 there" in o for o in observed), observed
    assert any(o.startswith("env LD_LIBRARY_PATH=") for o in observed), observed


NODES = ["/usr/bin/python3", "/etc/ld.so.preload", "/gpuprobe/probe.py", "/lib64/ld-linux-x86-64.so.2",
         LIBDIR + "/libc.so.6", "/usr/lib/python3.11/os.py"]


@pytest.mark.parametrize("path", NODES)
def test_a_device_node_at_a_trusted_path_fails(tmp_path, path):
    _record, checks = _checks(tmp_path, {"deviceNodes": [{"path": path, "type": "c", "major": 1, "minor": 3}]})
    fails = [c for c in checks if c["status"] == FAIL]
    assert len(fails) == 1 and fails[0]["observed"].startswith("device node %s reaches" % path), checks


ENVS = [
    (["LD_PRELOAD=/usr/local/nvidia/lib64/libevil.so"], "env LD_PRELOAD="),
    (["LD_AUDIT=/opt/audit.so"], "env LD_AUDIT="),
    (["GCONV_PATH=/opt/gconv"], "env GCONV_PATH="),
    (["PATH=/opt/evil/bin:/usr/bin:/bin"], "env PATH="),
    (["PATH=relative:/usr/bin"], "env PATH="),
]


@pytest.mark.parametrize("env,words", ENVS)
def test_an_env_that_redirects_the_interpreter_or_its_loader_fails(tmp_path, env, words):
    _record, checks = _checks(tmp_path, {"env": env})
    fails = [c for c in checks if c["status"] == FAIL]
    assert len(fails) == 1 and fails[0]["observed"].startswith(words), checks


def test_ld_library_path_fails_only_where_the_spec_mounted_a_trusted_library(tmp_path):
    mounts = [_mount("/opt/evil/libc.so.6"), _mount("/usr/local/nvidia/lib64/libcuda.so.1", LIBCUDA["hostPath"])]
    env = ["LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/evil"]
    _record, checks = _checks(tmp_path, {"mounts": mounts, "env": env})
    observed = sorted(c["observed"] for c in checks if c["status"] == FAIL)
    assert len(observed) == 2 and observed[0].startswith("env LD_LIBRARY_PATH=") and "/opt/evil/<trusted library>" in observed[0]
    assert "/usr/local/nvidia/lib64/<" not in observed[0]
    assert observed[1].startswith("mount /evil/probe.py -> /opt/evil/libc.so.6 reaches")


@pytest.mark.parametrize("env", [["LD_LIBRARY_PATH=/usr/local/nvidia/lib64"], ["PATH=/usr/local/bin:/usr/bin:/bin"],
                                 ["LD_PRELOAD="], ["PYTHONPATH=/evil", "PYTHONSTARTUP=/evil/s.py", "PYTHONHOME=/evil"]])
def test_an_env_that_redirects_nothing_passes(tmp_path, env):
    _record, checks = _checks(tmp_path, {"env": env})
    assert [c["status"] for c in checks] == [PASS], checks
    if env[0].startswith("PYTHON"):
        assert "PYTHONPATH (ignored: python3 -I)" in checks[0]["observed"]


def _hook(*args, path="/usr/bin/nvidia-cdi-hook"):
    return {"hookName": "createContainer", "path": path, "args": [os.path.basename(path)] + list(args)}


HOOKS_FAIL = [
    _hook("create-symlinks", "--link", "libcuda.so.1::/usr/bin/python3"),
    _hook("create-symlinks", "--link=../evil.so::/lib64/ld-linux-x86-64.so.2"),
    _hook("create-symlinks", "--link", "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
          "--link", "/evil/probe.py::/gpuprobe/probe.py"),
    _hook("hook", "create-symlinks", "--link", "x::/etc/ld.so.preload", path="/usr/bin/nvidia-ctk"),
    _hook("chmod", "--mode", "777", "--path", "/usr/lib/python3.11"),
    _hook("--replace=/usr/lib/python3.11/os.py", path="/usr/local/bin/site-hook"),
    _hook("copy", "/evil/libc.so.6::/lib/x86_64-linux-gnu/libc.so.6", path="/usr/local/bin/site-hook"),
]


@pytest.mark.parametrize("hook", HOOKS_FAIL, ids=[" ".join(h["args"][:3]) for h in HOOKS_FAIL])
def test_a_hook_that_writes_what_the_probe_trusts_fails(tmp_path, hook):
    _record, checks = _checks(tmp_path, {"hooks": [hook]})
    assert [c["status"] for c in checks] == [FAIL], checks


def test_a_hook_that_is_not_the_nvidia_hooks_own_warns_naming_it(tmp_path):
    hooks = [_hook("--do-things", path="/usr/local/bin/site-hook"), _hook("frobnicate", "--all")]
    record, checks = _checks(tmp_path, {"hooks": hooks})
    assert [c["status"] for c in checks] == [WARN, WARN], checks
    assert "a hook of its own (/usr/local/bin/site-hook)" in checks[0]["observed"]
    assert "the NVIDIA hook's unknown subcommand 'frobnicate'" in checks[1]["observed"]
    assert layer_gate({"host": {"status": PASS}, "cdi": dict(record, status=WARN)}) == ""


def test_a_spec_as_nvidia_ctk_writes_it_passes(tmp_path):
    """The edits of an nvidia-ctk 1.17 spec (mounts of the driver's libraries, binaries, firmware, sockets, config
    files; the NVIDIA hook's standard subcommands)."""
    libs = ["libcuda.so.580.159.04", "libnvidia-ml.so.580.159.04", "libnvidia-ptxjitcompiler.so.580.159.04",
            "libnvidia-nvvm.so.580.159.04", "libnvidia-egl-gbm.so.1.1.2", "libnvidia-allocator.so.580.159.04",
            "libGLX_nvidia.so.580.159.04", "libnvidia-gpucomp.so.580.159.04", "vdpau/libvdpau_nvidia.so.580.159.04"]
    mounts = [_mount(LIBDIR + "/" + lib, "/drv/" + os.path.basename(lib)) for lib in libs]
    mounts += [_mount(p, p) for p in ("/usr/bin/nvidia-smi", "/usr/bin/nvidia-debugdump", "/usr/bin/nvidia-persistenced",
                                      "/usr/bin/nvidia-cuda-mps-control", "/run/nvidia-persistenced/socket",
                                      "/lib/firmware/nvidia/580.159.04/gsp_ga10x.bin", "/etc/vulkan/icd.d/nvidia_icd.json",
                                      "/usr/share/glvnd/egl_vendor.d/10_nvidia.json", "/usr/share/nvidia/nvoptix.bin",
                                      "/usr/lib/x86_64-linux-gnu/gbm/nvidia-drm_gbm.so")]
    hooks = [_hook("create-symlinks", "--link", "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
                   "--link", "libGLX_nvidia.so.580.159.04::/usr/lib/x86_64-linux-gnu/libGLX_indirect.so.0",
                   "--link", "../libnvidia-allocator.so.1::/usr/lib/x86_64-linux-gnu/gbm/nvidia-drm_gbm.so"),
             _hook("enable-cuda-compat", "--host-driver-version=580.159.04"),
             _hook("update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu", "--folder", "/usr/lib/x86_64-linux-gnu/vdpau"),
             _hook("create-soname-symlinks", "--folder", "/usr/lib/x86_64-linux-gnu"),
             _hook("disable-device-node-modification"),
             _hook("chmod", "--mode", "755", "--path", "/dev/dri"),
             _hook("hook", "update-ldcache", "--folder", "/usr/lib64", path="/usr/bin/nvidia-ctk")]
    nodes = [{"path": p} for p in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                   "/dev/dri/card1", "/dev/dri/renderD128")]
    spec_edits = {"env": ["NVIDIA_VISIBLE_DEVICES=void"], "mounts": mounts, "hooks": hooks, "deviceNodes": nodes[1:4]}
    _record, checks = _checks(tmp_path, {"deviceNodes": [nodes[0]] + nodes[4:]}, spec_edits=spec_edits)
    assert [c["status"] for c in checks] == [PASS], checks
    assert checks[0]["observed"].startswith("none of ")


def test_harmless_neighbours_of_trusted_paths_pass():
    # names and places next to the trusted ones: the check is about what the probe trusts, not a word match
    for path in ("/gpuprobe-evil", "/gpuprobe-0123/probe.py", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                 "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/bin/nvidia-smi", "/usr/local/nvidia",
                 "/usr/lib/x86_64-linux-gnu/nvidia/current", "/etc/vulkan", "/usr/share", "/usr/libexec",
                 "/usr/local/cuda/compat/libcuda.so.1", "/opt/python3-docs", "/usr/lib/libzstd.so.1"):
        assert integrity.reaches(path) is None, path


def test_every_requested_device_is_judged_on_its_own_edits(tmp_path):
    root = tmp_path / "node"
    (root / "cdi").mkdir(parents=True)
    spec = {"cdiVersion": "0.5.0", "kind": "lab.example/gpu",
            "devices": [{"name": "0", "containerEdits": {"env": ["X=1"]}},
                        {"name": "1", "containerEdits": {"mounts": [_mount("/usr/bin/python3")]}}]}
    (root / "cdi" / "lab.yaml").write_text(json.dumps(spec))
    record = _cdi_layer.record(spec_dirs=["/cdi"], discover_runtime_dirs_=False, kinds=["lab.example/gpu"], root=str(root),
                               devices=["lab.example/gpu=0", "lab.example/gpu=1"])
    rows = [(c["subject"], c["status"]) for c in record["checks"] if c["id"] == CHECK]
    assert rows == [("lab.example/gpu=0", PASS), ("lab.example/gpu=1", FAIL)], rows
