"""cdi.host.libcuda_identity: the spec alone says whether the file it mounts as libcuda is the driver root's
libcuda.so.<running driver> (issue 18 item 1, "where the spec alone predicts the failure, the cdi layer says so
before any container starts"). The class: the driver root's own file (directly, through a symlink, or a copy of
the same content) PASSes; any other file (a stub, another driver's, an impostor named like the driver's, one of
another size) WARNs; what cannot be told is NOT_RUN with why. Real files in a tmp tree; the cdi layer reads them."""
import os
import shutil

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import digest as _digest
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, WARN

DRIVER = "580.159.04"
LIBCUDA = b"\x7fELF the driver's libcuda " * 64


def _tree(tmp_path):
    root = tmp_path / "node"
    lib = root / "usr" / "local" / "nvidia" / "lib64"
    lib.mkdir(parents=True)
    (lib / ("libcuda.so.%s" % DRIVER)).write_bytes(LIBCUDA)
    os.symlink("libcuda.so.%s" % DRIVER, str(lib / "libcuda.so.1"))
    other = root / "opt" / "other"
    other.mkdir(parents=True)
    (other / ("libcuda.so.%s" % DRIVER)).write_bytes(LIBCUDA[:-1] + b"!")          # same size, other content
    (other / "libcuda.so.1").write_bytes(b"\x7fELF a smaller impostor")            # other size
    shutil.copyfile(str(lib / ("libcuda.so.%s" % DRIVER)), str(other / "copy.so"))  # a copy: other inode, same content
    stubs = root / "usr" / "local" / "cuda" / "lib64" / "stubs"
    stubs.mkdir(parents=True)
    (stubs / "libcuda.so").write_bytes(b"\x7fELF the toolkit stub")
    return root


def _host(driver_root="/usr/local/nvidia"):
    nvml = {"ok": True, "driver_version": DRIVER, "gpus": []}
    return {"layer": "host", "status": "PASS", "evidence": {"driver_root": driver_root, "nvml": nvml}}


def _identity(root, host_path, host):
    spec_dir = root / "cdi"  # spec dirs are read under the node's root, as every host path is
    spec_dir.mkdir(exist_ok=True)
    (spec_dir / "lab.yaml").write_text(
        "cdiVersion: 0.5.0\nkind: lab.example/gpu\ndevices:\n- name: '0'\n  containerEdits:\n    env: [X=1]\n"
        "containerEdits:\n  mounts:\n  - {hostPath: %s, containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1, "
        "options: [ro, nosuid, nodev, bind]}\n" % host_path)
    record = _cdi_layer.record(spec_dirs=["/cdi"], discover_runtime_dirs_=False, devices=["lab.example/gpu=0"],
                               kinds=["lab.example/gpu"], host=host, root=str(root))
    return [c for c in record["checks"] if c["id"] == "cdi.host.libcuda_identity"]


@pytest.mark.parametrize("host_path,status,words", [
    ("/usr/local/nvidia/lib64/libcuda.so.%s" % DRIVER, PASS, "the same file"),
    ("/usr/local/nvidia/lib64/libcuda.so.1", PASS, "the same file"),
    ("/opt/other/copy.so", PASS, "the same content"),
    ("/opt/other/libcuda.so.%s" % DRIVER, WARN, "sha256"),
    ("/opt/other/libcuda.so.1", WARN, "bytes, not"),
    ("/usr/local/cuda/lib64/stubs/libcuda.so", WARN, "bytes, not"),
])
def test_the_mounted_libcuda_is_the_driver_roots(tmp_path, host_path, status, words):
    root = _tree(tmp_path)
    checks = _identity(root, host_path, _host())
    assert [c["status"] for c in checks] == [status], checks
    assert words in checks[0]["observed"], checks[0]
    if status == WARN:
        assert "compute.driver.binding" in checks[0]["hint"]


@pytest.mark.parametrize("host,words", [
    (None, "no driver root"),
    (_host(driver_root=None), "no driver root"),
    (_host(driver_root="/nowhere"), "no libcuda.so.%s in the driver root /nowhere" % DRIVER),
])
def test_what_cannot_be_told_is_not_run(tmp_path, host, words):
    root = _tree(tmp_path)
    checks = _identity(root, "/usr/local/nvidia/lib64/libcuda.so.1", host)
    assert [c["status"] for c in checks] == [NOT_RUN], checks
    assert words in checks[0]["observed"] or "running driver" in checks[0]["observed"], checks[0]


def test_the_content_is_hashed_only_when_the_inodes_differ(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    hashed = []
    real = _digest.file_digest
    monkeypatch.setattr(_digest, "file_digest", lambda p: hashed.append(p) or real(p))
    _identity(root, "/usr/local/nvidia/lib64/libcuda.so.1", _host())
    assert hashed == []  # the driver root's own file: one stat each, no read of ~100 MB
    _identity(root, "/opt/other/copy.so", _host())
    assert len(hashed) == 2
