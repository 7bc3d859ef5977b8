"""Issue 42 item 3, the probe's side: every driver library mapped in the probe's process is reported (its
mapped_libraries line) with its digest: by name (libcuda*, libnvidia-*, ...) or because it lies under a spec mount's
container path (config spec_mounts). The real probe script runs as a process here, on shared objects built by the test
and loaded the ways a container's loader gives them to it (the loader path, LD_PRELOAD)."""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe

SOURCE = "int nvmlInit_v2(void) { return 9; }\nint cuInit(unsigned int f) { (void)f; return 100; }\n"


def _so(path, mark):
    """A shared object at ``path`` whose content differs by ``mark``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("needs a C compiler")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    src = path + ".c"
    with open(src, "w") as f:
        f.write(SOURCE + 'const char mark[] = "%s";\n' % mark)
    subprocess.run([cc, "-shared", "-fPIC", "-o", path, src], check=True, capture_output=True, timeout=60)
    os.unlink(src)
    return path


def _run(tmp_path, env, spec_mounts=()):
    config = {"nodes": [], "compute": False, "token": "t" * 16, "spec_mounts": list(spec_mounts)}
    proc = subprocess.run([sys.executable, "-I", "-S", _probe.__file__, json.dumps(config)], env=dict(env, PATH="/usr/bin:/bin"),
                          capture_output=True, text=True, timeout=60, cwd=str(tmp_path), check=False)
    parsed = _probe_contract.parse_output(proc.stdout, token="t" * 16)
    assert parsed["complete"], proc.stderr
    return parsed


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# (file name, where: lib (the loader path) / spec (a spec mount's directory) / other, how: dlopen by the probe itself or
# LD_PRELOAD, why the probe reports it (None: it does not))
CASES = [
    ("libnvidia-ml.so.1", "lib", "dlopen", "name"),
    ("libcuda.so.1", "lib", "dlopen", "name"),
    ("libnvidia-ml.so.1", "spec", "dlopen", "name, spec mount"),
    ("libevil.so", "spec", "preload", "spec mount"),
    ("libnvidia-ptxjitcompiler.so.1", "other", "preload", "name"),
    ("libnvidia-gpucomp.so.580.159.04", "other", "preload", "name"),
    ("libbenign.so", "other", "preload", None),
]


@pytest.mark.parametrize("name,where,how,why", CASES, ids=["%s-%s-%s" % c[:3] for c in CASES])
def test_the_probe_reports_each_driver_library_it_mapped(tmp_path, name, where, how, why):
    dirs = {"lib": str(tmp_path / "lib"), "spec": str(tmp_path / "spec"), "other": str(tmp_path / "other")}
    path = _so(os.path.join(dirs[where], name), name)
    env = {"LD_LIBRARY_PATH": "%s:%s" % (dirs["lib"], dirs["spec"])}
    if how == "preload":
        env["LD_PRELOAD"] = path
    parsed = _run(tmp_path, env, spec_mounts=[dirs["spec"]])
    report = parsed["mapped_libraries"]
    assert report is not None and report["scans"] >= 3, parsed  # after each load and at the end
    found = [m for m in report["libraries"] if m["path"] == path]
    if why is None:
        assert found == [], report
        return
    assert [m["why"] for m in found] == [why], report
    identity = found[0]["identity"]
    st = os.stat(path)
    assert (identity["sha256"], identity["size"], identity["ino"]) == (_sha(path), st.st_size, st.st_ino)


def test_the_report_lists_the_libcuda_the_dlopen_step_loaded(tmp_path):
    """cross_check: the dlopen step's libcuda must be one of the mapped libraries (a forged step is inconsistent)."""
    lib = str(tmp_path / "lib")
    _so(os.path.join(lib, "libcuda.so.1"), "libcuda")
    config = {"nodes": [], "compute": True, "token": "t" * 16}
    proc = subprocess.run([sys.executable, "-I", "-S", _probe.__file__, json.dumps(config)],
                          env={"LD_LIBRARY_PATH": lib, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60,
                          check=False)
    parsed = _probe_contract.parse_output(proc.stdout, token="t" * 16)
    assert parsed["inconsistent"] == [] and parsed["steps"][0]["ok"], parsed["inconsistent"]
    forged = "\n".join(line for line in proc.stdout.splitlines() if '"mapped_libraries"' not in line) + "\n" + json.dumps(
        {"kind": "mapped_libraries", "libraries": [], "token": "t" * 16})
    assert any("which the mapped libraries do not list" in x
               for x in _probe_contract.parse_output(forged, token="t" * 16)["inconsistent"])


@pytest.mark.parametrize("path,roots,why", [
    ("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04", (), "name"),
    ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", (), "name"),
    ("/usr/lib/x86_64-linux-gnu/libnvoptix.so.1", (), "name"),
    ("/usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0", (), "name"),
    ("/usr/lib/x86_64-linux-gnu/libc.so.6", (), None),
    ("/usr/lib/x86_64-linux-gnu/libcudart.so.12", (), None),  # the CUDA runtime is the image's, no driver file
    ("/opt/spec/libx.so", ("/opt/spec",), "spec mount"),
    ("/opt/spec", ("/opt/spec",), "spec mount"),
    ("/opt/spectre/libx.so", ("/opt/spec",), None),
])
def test_which_mapped_files_are_driver_libraries(path, roots, why):
    assert _probe.is_driver_library(path, roots) == why
