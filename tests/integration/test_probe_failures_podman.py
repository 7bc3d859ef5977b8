"""How the probe fails, against real podman + runc and real loaders (issue 18 items 12 and 14): a crash is read from
the container's exit status (and the host probe's signal) and named with its step and signal, never 'no answer
within N s'; a failed dlopen carries what the loader said, and a glibc too old for the library is the image's cause.
The libraries are tiny shared objects compiled here; the glibc case patches a real symbol version (GLIBC_2.14 ->
GLIBC_2.99) so the container's real ld.so refuses it in its own words.
"""
import os
import shutil
import subprocess

import pytest

from test_runtime_podman import expected_gpus, idle_host, lab, probe_image, podman_env  # noqa: F401  pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import host_control as _compute_host_control
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer

pytestmark = pytest.mark.integration

GPU_A = "GPU-0a0a0a0a-1111-2222-3333-444444444444"


def _cc():
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("needs a C compiler")
    return cc


def _build(directory, name, source, *extra):
    path = os.path.join(directory, name)
    with open(path + ".c", "w") as f:
        f.write(source)
    subprocess.run([_cc(), "-shared", "-fPIC", "-fno-builtin", "-o", path, path + ".c"] + list(extra), check=True,
                   capture_output=True)
    os.unlink(path + ".c")
    return path


def _glibc_too_new(directory):
    path = _build(directory, "libcuda-newglibc.so.1", "#include <string.h>\nvoid *f(void *d, const void *s, unsigned long n)"
                  " { return memcpy(d, s, n); }\nint cuInit(unsigned x) { (void)x; return 0; }\n")
    with open(path, "rb") as f:
        data = f.read()
    assert data.count(b"GLIBC_2.14") >= 1  # memcpy@GLIBC_2.14 (x86_64)
    with open(path, "wb") as f:
        f.write(data.replace(b"GLIBC_2.14", b"GLIBC_2.99"))
    return path


def _missing_dependency(directory):
    _build(directory, "libgpuprobedep.so.1", "int dep(void) { return 0; }\n", "-Wl,-soname,libgpuprobedep.so.1")
    path = _build(directory, "libcuda-dep.so.1", "int dep(void);\nint cuInit(unsigned x) { (void)x; return dep(); }\n",
                  "-L" + directory, "-l:libgpuprobedep.so.1")
    os.unlink(os.path.join(directory, "libgpuprobedep.so.1"))  # and it is nowhere in the container either
    return path


DLOPEN = [
    ("glibc too old for the library", _glibc_too_new, "compute.dlopen.image_glibc",
     "version `GLIBC_2.99' not found", "PASS"),
    ("a dependency missing", _missing_dependency, "compute.dlopen.dependency",
     "libgpuprobedep.so.1: cannot open shared object file", "NOT_RUN"),
    ("not an ELF file", lambda d: None, "compute.dlopen.libcuda", "file too short", "PASS"),
]


@pytest.mark.parametrize("name,make,signature,said,loader", DLOPEN, ids=[d[0] for d in DLOPEN])
def test_a_failed_dlopen_says_what_the_loader_said(lab, name, make, signature, said, loader):  # pylint: disable=too-many-arguments,unused-argument
    edits = lab.full_edits()
    path = make(lab.lib)
    if path:
        edits["mounts"][0]["hostPath"] = path
    lab.write_spec(edits)
    runtime, probe = lab.run(edits, host=idle_host(GPU_A))
    check = [c for c in runtime["checks"] if c["id"] == "runtime.loader.libcuda"][0]
    assert check["status"] == loader and said in check["observed"]
    assert "not resolved to the mounted file" not in check["observed"]
    compute = _compute_layer.record(probe, runtime, host_record=idle_host(GPU_A), host_control=False,
                                    expected_gpus=expected_gpus(GPU_A))
    assert compute["status"] == "FAIL" and compute["signature"] == signature
    assert said in compute["reason"]
    if signature == "compute.dlopen.image_glibc":
        assert compute["points_to"] == "image"


# Real faults (the probe is PID 1 in the container, where a signal it sends itself with raise() is ignored; a fault
# is not)
CRASHES = [
    ("NULL dereference in cuInit (SIGSEGV)", "int cuInit(unsigned x) { (void)x; *(volatile int *)0 = 1; return 0; }\n",
     "in cuInit (begun, never returned): SIGSEGV (exit status 139)"),
    ("illegal instruction in cuInit (SIGILL)", "int cuInit(unsigned x) { (void)x; __builtin_trap(); }\n",
     "in cuInit (begun, never returned): SIGILL (exit status 132)"),
    ("exit in cuInit", "#include <stdlib.h>\nint cuInit(unsigned x) { (void)x; exit(3); }\n",
     "in cuInit (begun, never returned): exit status 3"),
]


@pytest.mark.parametrize("name,source,said", CRASHES, ids=[c[0] for c in CRASHES])
def test_a_crash_in_the_container_names_its_step_and_signal(lab, name, source, said):  # pylint: disable=unused-argument
    edits = lab.full_edits()
    edits["mounts"][0]["hostPath"] = _build(lab.lib, "libcuda-crash.so.1", source)
    lab.write_spec(edits)
    runtime, probe = lab.run(edits, host=idle_host(GPU_A), timeout=60)
    assert runtime["status"] == "PASS" and probe["timed_out"] is False
    compute = _compute_layer.record(probe, runtime, host_record=idle_host(GPU_A), host_control=False,
                                    expected_gpus=expected_gpus(GPU_A))
    assert compute["status"] == "FAIL" and compute["signature"] == "compute.probe.crashed"
    assert said in compute["reason"] and "within" not in compute["reason"]
    finished = [c for c in compute["checks"] if c["id"] == "compute.probe.finished"]
    assert [c["status"] for c in finished] == ["FAIL"]


@pytest.mark.parametrize("name,source,said", CRASHES[:2], ids=[c[0] for c in CRASHES[:2]])
def test_a_crash_of_the_host_control_names_its_step_and_signal(tmp_path, monkeypatch, name, source, said):  # pylint: disable=unused-argument
    lib = _build(str(tmp_path), "libcuda.so.1", source, "-Wl,-soname,libcuda.so.1")
    monkeypatch.setenv("LD_LIBRARY_PATH", os.path.dirname(lib))
    result, _parsed, outcome = _compute_host_control.run_host_control(None, 60, only_uuids=[GPU_A])
    assert outcome["signature"] == "compute.probe.crashed" and result["status"] == "FAIL"
    signal_name = said.split(": ")[1].split(" ")[0]
    assert "in cuInit (begun, never returned): %s (exit status -" % signal_name in result["reason"]
    assert result["failed_step"] == "cuInit" and result["gpus"][0]["step"] == "cuInit"
