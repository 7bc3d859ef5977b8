"""What the spec alone says about the libraries it mounts and the access its nodes get (issue 32, "the spec did it" and
"the right name on the wrong library"): the cdi layer on a node tree with REAL shared objects (gcc, each with a chosen
-Wl,-soname) and a real spec file.

- cdi.host.library_soname: the ELF SONAME of a file mounted at a library name is that library;
- cdi.host.driver_library: a driver library mounted is the driver root's file of the running driver;
- cdi.nvidia.cgroup_read / cgroup_write: the nodes' cgroup permissions allow the driver's open(O_RDWR);
- cdi.nvidia.<lib>_noexec, cdi.nvidia.<lib>_path: the probe's libraries on a noexec mount, or where no loader looks.
"""
import os
import shutil
import struct
import subprocess

import pytest
import yaml

import hostfixture

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import attribution as _attribution
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.elf import read_library
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, LayerBuilder, validate_record

DRIVER = hostfixture.DRIVER
LIBDIR = "/usr/local/nvidia/lib64"
IN = "/usr/lib/x86_64-linux-gnu"
HOOK = "/usr/bin/nvidia-cdi-hook"


def _cc():
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("needs a C compiler")
    return cc


def build_so(path, soname=None, symbol="gpuprobe_test"):
    """A real shared object at ``path`` whose ELF SONAME is ``soname`` (None: none)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    src = path + ".c"
    with open(src, "w") as f:
        f.write("int %s(void) { return 1; }\n" % symbol)
    cmd = [_cc(), "-shared", "-fPIC", "-o", path, src] + (["-Wl,-soname,%s" % soname] if soname else [])
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    os.unlink(src)
    return path


class Tree(object):
    """A node tree with real device nodes and a driver root whose libraries are real ELF files with their own SONAMEs."""

    def __init__(self, tmp_path):
        self.root = hostfixture.build_node(str(tmp_path / "node"))
        for lib in ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler"):
            real = self.under("%s/%s.so.%s" % (LIBDIR, lib, DRIVER))
            os.unlink(real)
            build_so(real, "%s.so.1" % lib)
        # NVIDIA's hook program where the toolkit installs it (root's, 0755): the hooks of the specs below name it
        hook = self.under(HOOK)
        os.makedirs(os.path.dirname(hook), exist_ok=True)
        with open(hook, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(hook, 0o755)
        b = LayerBuilder("host")
        b.evidence = {"driver_root": "/usr/local/nvidia", "nvml": {"ok": True, "driver_version": DRIVER}}
        self.host = b.build(status=PASS)

    def under(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def lib(self, name):
        return "%s/%s.so.%s" % (LIBDIR, name, DRIVER)

    def spec(self, mounts=None, perms=None, env=None, hooks=None):
        nodes = [{"path": p} for p in ("/dev/nvidiactl", "/dev/nvidia-uvm")]
        gpu = {"path": "/dev/nvidia0"}
        for n in nodes + [gpu]:
            if perms is not None:
                n["permissions"] = perms
        if mounts is None:
            mounts = [self.mount(self.lib("libcuda"), IN + "/libcuda.so.1"),
                      self.mount(self.lib("libnvidia-ptxjitcompiler"), IN + "/libnvidia-ptxjitcompiler.so.1"),
                      self.mount(self.lib("libnvidia-ml"), IN + "/libnvidia-ml.so.1")]
        edits = {"deviceNodes": nodes, "mounts": mounts}
        if env:
            edits["env"] = env
        if hooks:
            edits["hooks"] = hooks
        return {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
                "devices": [{"name": "0", "containerEdits": {"deviceNodes": [gpu]}}], "containerEdits": edits}

    @staticmethod
    def mount(host_path, container_path, *extra):
        return {"hostPath": host_path, "containerPath": container_path, "options": ["ro", "nosuid", "nodev", "bind"] + list(extra)}

    def cdi(self, spec, host=True, trusted_edits=None):
        """The cdi layer's record of ``spec``; ``trusted_edits``: the lab's own edits declared (cdi.trust.accounted)."""
        d = self.under("/var/run/cdi")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "nvidia.yaml"), "w") as f:
            yaml.safe_dump(spec, f)
        record = _cdi_layer.record(spec_dirs=["/var/run/cdi"], discover_runtime_dirs_=False, devices=["nvidia.com/gpu=0"],
                                   host=self.host if host else None, root=self.root, trusted_edits=trusted_edits)
        assert validate_record(record) == []
        return record


@pytest.fixture
def tree(tmp_path):
    return Tree(tmp_path)


def _checks(record, check_id):
    return [(c["status"], c["subject"], c["observed"]) for c in record["checks"] if c["id"] == check_id]


# ---------------------------------------------------------------------------------------------------
# the ELF reader: bounded, never raising

def test_the_elf_reader_reads_the_soname_of_real_libraries(tmp_path):
    assert read_library(build_so(str(tmp_path / "a.so"), "libnvidia-ml.so.1"))["soname"] == "libnvidia-ml.so.1"
    none = read_library(build_so(str(tmp_path / "b.so")))
    assert none["elf"] and none["soname"] is None and "DT_SONAME" in none["soname_why"]
    assert read_library("/nonexistent/x.so")["why"].startswith("cannot open")
    assert read_library(str(tmp_path))["why"] == "a directory"


@pytest.mark.parametrize("header", [
    b"\x7fELF",                                                     # truncated identification
    b"\x7fELF\x07\x01" + b"\0" * 58,                                # unknown class
    b"\x7fELF\x02\x01\x01" + b"\0" * 25 + struct.pack("<Q", 1 << 60) + b"\0" * 14 + struct.pack("<HH", 56, 65535),
    b"\x7fELF\x02\x01\x01" + b"\0" * 25 + struct.pack("<Q", 64) + b"\0" * 14 + struct.pack("<HH", 56, 1)
    + struct.pack("<IIQQQQQQ", 2, 0, 1 << 40, 0, 0, 1 << 40, 0, 0),  # a dynamic section far past the end
])
def test_a_malformed_elf_file_is_read_without_raising(tmp_path, header):
    path = tmp_path / "libbad.so.1"
    path.write_bytes(header)
    found = read_library(str(path))
    assert found["soname"] is None


# ---------------------------------------------------------------------------------------------------
# cdi.host.library_soname: the right name on the wrong library (the class, several members)

@pytest.mark.parametrize("name,soname,status", [
    ("libnvidia-ptxjitcompiler.so.1", "libnvidia-ml.so.1", FAIL),   # NVML's library as the JIT compiler (the H200 case)
    ("libcuda.so.1", "libnvidia-ml.so.1", FAIL),
    ("libnvidia-ml.so.1", "libcuda.so.1", FAIL),
    ("libnvidia-ptxjitcompiler.so.1", "libz.so.1", FAIL),           # any library under a driver library's name
    ("libfoo.so.1", "libbar.so.1", WARN),                           # not the driver's: a WARN
    ("libnvidia-ml.so.1", "libnvidia-ml.so.2", WARN),               # the same library, another major version
    ("libcuda.so.1", "libcuda.so.1", PASS),
    ("libcuda.so.%s" % DRIVER, "libcuda.so.1", PASS),               # nvidia-ctk mounts the versioned file name
    ("libcuda.so", "libcuda.so.1", PASS),
    ("libGLX_indirect.so.0", "libGLX_nvidia.so.0", PASS),           # GLVND's vendor-neutral name, on purpose
])
def test_a_library_mounted_under_another_library_s_name_is_said_before_any_container(tree, tmp_path, name, soname, status):
    source = build_so(tree.under("/opt/libs/%s-file" % soname), soname)
    spec = tree.spec()
    spec["containerEdits"]["mounts"].append(tree.mount(source[len(tree.root):], "/opt/x/" + name))
    # the lab's library is no file of the driver: declared, so that the soname check alone decides the layer
    record = tree.cdi(spec, trusted_edits=[{"hostPath": "/opt/libs/*", "containerPath": "/opt/x/*", "why": "the lab's library"}])
    found = [c for c in _checks(record, "cdi.host.library_soname") if c[1] == "/opt/x/" + name]
    assert [c[0] for c in found] == [status], found
    assert soname in found[0][2]
    assert (record["status"] == FAIL) == (status == FAIL)
    # undeclared, the same mount is an edit no generator writes: the layer FAILs by cdi.trust.accounted, the soname
    # check says what it said
    undeclared = tree.cdi(spec)
    assert undeclared["status"] == FAIL
    assert [(c[0], c[2].split(":")[0]) for c in _checks(undeclared, "cdi.trust.accounted")] == [
        (FAIL, "mount %s -> /opt/x/%s" % (source[len(tree.root):], name))]
    assert [c for c in _checks(undeclared, "cdi.host.library_soname") if c[1] == "/opt/x/" + name] == found


def test_a_library_without_soname_is_not_judged(tree):
    source = build_so(tree.under("/opt/libs/plain.so"))
    spec = tree.spec()
    spec["containerEdits"]["mounts"].append(tree.mount("/opt/libs/plain.so", "/opt/x/libplain.so.1"))
    found = [c for c in _checks(tree.cdi(spec), "cdi.host.library_soname") if c[1] == "/opt/x/libplain.so.1"]
    assert [c[0] for c in found] == [NOT_RUN] and source


def test_the_honest_driver_libraries_pass(tree):
    record = tree.cdi(tree.spec())
    assert set(c[0] for c in _checks(record, "cdi.host.library_soname")) == {PASS}
    assert [c[0] for c in _checks(record, "cdi.host.driver_library")] == [PASS, PASS]  # ptxjit, nvml (libcuda: its own)
    assert record["status"] == PASS, record["reason"]


@pytest.mark.parametrize("swap,status", [
    ("libnvidia-ml", WARN),          # NVML's file mounted as the JIT compiler: not the driver root's JIT compiler
    ("other-driver", WARN),          # a JIT compiler of another build (another file, other content)
    (None, PASS),
])
def test_a_driver_library_is_the_driver_root_s_file_of_the_running_driver(tree, swap, status):
    spec = tree.spec()
    ptx = [m for m in spec["containerEdits"]["mounts"] if "ptxjit" in m["containerPath"]][0]
    if swap == "libnvidia-ml":
        ptx["hostPath"] = tree.lib("libnvidia-ml")
    elif swap == "other-driver":
        build_so(tree.under("/opt/old/libnvidia-ptxjitcompiler.so.%s" % DRIVER), "libnvidia-ptxjitcompiler.so.1", "other")
        ptx["hostPath"] = "/opt/old/libnvidia-ptxjitcompiler.so.%s" % DRIVER
    found = [c for c in _checks(tree.cdi(spec), "cdi.host.driver_library") if c[1] == ptx["containerPath"]]
    assert [c[0] for c in found] == [status], found


def test_without_a_host_record_the_driver_library_is_not_run(tree):
    assert set(c[0] for c in _checks(tree.cdi(tree.spec(), host=False), "cdi.host.driver_library")) == {NOT_RUN}


def test_nvml_as_the_jit_compiler_explains_the_jit_failure_through_the_table(tree):
    spec = tree.spec()
    [m for m in spec["containerEdits"]["mounts"] if "ptxjit" in m["containerPath"]][0]["hostPath"] = tree.lib("libnvidia-ml")
    record = tree.cdi(spec)
    assert record["signature"] == "cdi.host.library_soname"
    because = [b["check"] for b in _attribution.explain("compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", record)]
    assert "cdi.host.library_soname" in because and "cdi.host.driver_library" in because


# ---------------------------------------------------------------------------------------------------
# the nodes' cgroup permissions: the driver opens them O_RDWR, so r and w are both needed

@pytest.mark.parametrize("perms,write,read", [
    ("r", WARN, PASS), ("rm", WARN, PASS), ("w", PASS, WARN), ("wm", PASS, WARN), ("m", WARN, WARN),
    ("rw", PASS, PASS), ("rwm", PASS, PASS), (None, PASS, PASS),
])
def test_cgroup_permissions_lacking_r_or_w_are_said_before_any_container(tree, perms, write, read):
    record = tree.cdi(tree.spec(perms=perms))
    assert [c[0] for c in _checks(record, "cdi.nvidia.cgroup_write")] == [write]
    assert [c[0] for c in _checks(record, "cdi.nvidia.cgroup_read")] == [read]
    for check, status in (("cdi.nvidia.cgroup_write", write), ("cdi.nvidia.cgroup_read", read)):
        assert (_attribution.PREDICTS[check] == "cuInit")
        if status == WARN:
            assert check in [b["check"] for b in _attribution.explain("runtime.device_node.open.EPERM", record)]


# ---------------------------------------------------------------------------------------------------
# the probe's libraries: on a noexec mount (certain failure), or where no loader looks (a WARN: the image may)

@pytest.mark.parametrize("key,container_path,step", [
    ("libcuda", IN + "/libcuda.so.1", "dlopen"),
    ("ptxjit", IN + "/libnvidia-ptxjitcompiler.so.1", "cuModuleLoadData"),
    ("nvml", IN + "/libnvidia-ml.so.1", None),
])
def test_a_library_the_probe_loads_on_a_noexec_mount_is_said_before_any_container(tree, key, container_path, step):
    spec = tree.spec()
    for m in spec["containerEdits"]["mounts"]:
        if m["containerPath"] == container_path:
            m["options"].append("noexec")
    record = tree.cdi(spec)
    check = "cdi.nvidia.%s_noexec" % key
    assert [c[0] for c in _checks(record, check)] == [WARN]
    others = [c for k in ("libcuda", "ptxjit", "nvml") if k != key for c in _checks(record, "cdi.nvidia.%s_noexec" % k)]
    assert set(c[0] for c in others) == {PASS}
    assert _attribution.PREDICTS.get(check) == step


LIBCUDA_AT = "/opt/gpu/libcuda.so.1"


@pytest.mark.parametrize("container_path,env,hooks,status", [
    (LIBCUDA_AT, None, None, WARN),                                           # no loader looks in /opt/gpu
    (LIBCUDA_AT, ["LD_LIBRARY_PATH=/opt/gpu"], None, PASS),                   # the spec tells it where
    (LIBCUDA_AT, None, [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook",
                         "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/opt/gpu"]}], PASS),
    (LIBCUDA_AT, None, [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook",
                         "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/opt/other"]}], WARN),
    ("/usr/lib64/libcuda.so.1", None, None, PASS),                            # a default directory (Fedora, RHEL)
    ("/lib/x86_64-linux-gnu/libcuda.so.1", None, None, PASS),                 # a default directory (Debian, Ubuntu)
    ("/usr/local/nvidia/lib64/libcuda.so.1", None, None, WARN),               # CUDA images' ENV covers it: still a WARN
    (IN + "/libcuda.so.%s" % DRIVER, None, None, WARN),                       # the right place, not the name asked for
    (IN + "/libcuda.so.%s" % DRIVER, None, [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook",
                                             "args": ["nvidia-cdi-hook", "create-symlinks", "--link",
                                                      "libcuda.so.%s::%s/libcuda.so.1" % (DRIVER, IN)]}], PASS),
])
def test_a_libcuda_mounted_where_no_loader_looks_is_a_warning_before_any_container(tree, container_path, env, hooks, status):
    spec = tree.spec(env=env, hooks=hooks)
    for m in spec["containerEdits"]["mounts"]:
        if m["containerPath"].endswith("/libcuda.so.1"):
            m["containerPath"] = container_path
    # /opt/gpu is no place the generators put the driver's libcuda, nor name in LD_LIBRARY_PATH or update-ldcache: the
    # lab's own edits, declared; every other row is the generators' shape and accounted for without a declaration
    lab = container_path == LIBCUDA_AT
    undeclared = tree.cdi(spec)
    assert [c[0] for c in _checks(undeclared, "cdi.trust.accounted")] == ([FAIL] * (1 + len(env or []) + len(hooks or []))
                                                                          if lab else [PASS])
    record = tree.cdi(spec, trusted_edits=[{"containerPath": LIBCUDA_AT}, {"env": "LD_LIBRARY_PATH"}, {"hook": HOOK}] if lab else None)
    assert [c[0] for c in _checks(record, "cdi.nvidia.libcuda_path")] == [status], _checks(record, "cdi.nvidia.libcuda_path")
    assert "cdi.nvidia.libcuda_path" not in _attribution.PREDICTS  # uncertain: never a contradiction
    if status == WARN:
        assert "cdi.nvidia.libcuda_path" in [b["check"] for b in _attribution.explain("runtime.loader.libcuda", record)]
    assert [c["id"] for c in record["checks"] if c["status"] == FAIL and not c["id"].startswith("cdi.host.hook")] == []


def test_a_directory_mount_holding_the_jit_compiler_is_judged_by_its_place(tree):
    d = tree.under("/opt/drv")
    os.makedirs(d)
    shutil.copy(tree.under(tree.lib("libnvidia-ptxjitcompiler")), os.path.join(d, "libnvidia-ptxjitcompiler.so.1"))
    spec = tree.spec()
    spec["containerEdits"]["mounts"] = [m for m in spec["containerEdits"]["mounts"] if "ptxjit" not in m["containerPath"]]
    spec["containerEdits"]["mounts"].append(tree.mount("/opt/drv", "/opt/drv"))
    record = tree.cdi(spec)
    assert [c[0] for c in _checks(record, "cdi.nvidia.ptxjit_path")] == [WARN]
    spec["containerEdits"]["env"] = ["LD_LIBRARY_PATH=/opt/drv"]
    assert [c[0] for c in _checks(tree.cdi(spec), "cdi.nvidia.ptxjit_path")] == [PASS]


def test_a_driver_library_the_driver_does_not_version_is_not_compared(tree):
    """libnvidia-egl-wayland.so.1.1.13 is the driver's but not named by its version: no driver root file to compare."""
    source = build_so(tree.under("/usr/local/nvidia/lib64/libnvidia-egl-wayland.so.1.1.13"), "libnvidia-egl-wayland.so.1")
    spec = tree.spec()
    spec["containerEdits"]["mounts"].append(tree.mount(source[len(tree.root):], IN + "/libnvidia-egl-wayland.so.1.1.13"))
    record = tree.cdi(spec)
    assert [c for c in _checks(record, "cdi.host.driver_library") if "wayland" in c[1]] == []
    assert [c[0] for c in _checks(record, "cdi.host.library_soname") if "wayland" in c[1]] == [PASS]


def _synthetic_elf(is64, big, soname):
    """A minimal ELF shared object written byte by byte (the classes and encodings gcc does not build here): one
    PT_LOAD over the whole file, a PT_DYNAMIC with DT_STRTAB and DT_SONAME, the string table."""
    order = ">" if big else "<"
    head, phent, dynent = (64, 56, 16) if is64 else (52, 32, 8)
    ph_off = head
    dyn_off = ph_off + 2 * phent
    str_off = dyn_off + 3 * dynent
    strtab = b"\0" + soname.encode() + b"\0"
    size = str_off + len(strtab)
    ident = b"\x7fELF" + bytes([2 if is64 else 1, 2 if big else 1, 1]) + b"\0" * 9
    if is64:
        header = ident + struct.pack(order + "HHIQQQIHHHHHH", 3, 62, 1, 0, ph_off, 0, 0, head, phent, 2, 64, 0, 0)
        phdrs = struct.pack(order + "IIQQQQQQ", 1, 5, 0, 0, 0, size, size, 0x1000)
        phdrs += struct.pack(order + "IIQQQQQQ", 2, 6, dyn_off, dyn_off, dyn_off, 3 * dynent, 3 * dynent, 8)
        dynamic = struct.pack(order + "qQqQqQ", 5, str_off, 14, 1, 0, 0)
    else:
        header = ident + struct.pack(order + "HHIIIIIHHHHHH", 3, 3, 1, 0, ph_off, 0, 0, head, phent, 2, 40, 0, 0)
        phdrs = struct.pack(order + "IIIIIIII", 1, 0, 0, 0, size, size, 5, 0x1000)
        phdrs += struct.pack(order + "IIIIIIII", 2, dyn_off, dyn_off, dyn_off, 3 * dynent, 3 * dynent, 6, 4)
        dynamic = struct.pack(order + "iIiIiI", 5, str_off, 14, 1, 0, 0)
    data = header + phdrs + dynamic + strtab
    assert len(data) == size
    return data


@pytest.mark.parametrize("is64,big", [(True, False), (False, False), (True, True), (False, True)])
def test_the_elf_reader_reads_every_class_and_byte_order(tmp_path, is64, big):
    path = tmp_path / "libx.so.1"
    path.write_bytes(_synthetic_elf(is64, big, "libnvidia-ml.so.1"))
    found = read_library(str(path))
    assert (found["elf"], found["class"], found["soname"]) == (True, 64 if is64 else 32, "libnvidia-ml.so.1"), found


def test_a_libcuda_a_mounted_directory_holds_is_mounted(tree):
    """A directory of the driver mounted whole gives libcuda and the JIT compiler: cdi.nvidia.libcuda and
    cdi.nvidia.ptxjit do not say "no mount" (their PREDICTS rows would make a verified node INCONCLUSIVE)."""
    spec = tree.spec()
    spec["containerEdits"]["mounts"] = [tree.mount(LIBDIR, IN)]
    record = tree.cdi(spec)
    assert [c[0] for c in _checks(record, "cdi.nvidia.libcuda")] == [PASS]
    assert [c[0] for c in _checks(record, "cdi.nvidia.ptxjit")] == [PASS]
    assert [c[0] for c in _checks(record, "cdi.nvidia.libcuda_path")] == [PASS]  # libcuda.so.1 there, a default directory
