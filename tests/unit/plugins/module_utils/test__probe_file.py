"""Issue 42 item 4: the probe file the runtime layer wrote on the host is looked at again once its container is gone
(runtime.probe.unchanged); any change FAILs the check, and the verdict is FAILED_AT_CDI cdi.inject.probe_integrity.
Each change is made to a real probe directory written by the probe's own write_probe."""
import os
import shutil

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import probe_file as _probe_file
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import CHECKS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, LayerBuilder


def _rewrite(d, path):
    with open(path, "a") as f:
        f.write("\nprint('forged')\n")


def _same_size_rewrite(d, path):
    with open(path, "r+b") as f:
        data = f.read()
        f.seek(0)
        f.write(data.replace(b"PROBE_VERSION", b"PROBE_VERSIOX", 1))


def _replaced(d, path):  # a new file renamed over it (what a hook that writes atomically does)
    with open(path + ".new", "w") as f:
        f.write("print('forged')\n")
    os.rename(path + ".new", path)


def _symlink(d, path):
    os.unlink(path)
    os.symlink("/etc/hostname", path)


def _removed(d, path):
    os.unlink(path)


def _extra_entry(d, path):
    with open(os.path.join(d, "sitecustomize.py"), "w") as f:
        f.write("")


def _directory_replaced(d, path):
    shutil.move(d, d + ".old")
    os.makedirs(d)
    shutil.copy(os.path.join(d + ".old", os.path.basename(path)), path)


def _cri_log(d, path):  # the CRI adapter's own log directory: the collection puts it there
    os.makedirs(os.path.join(d, "cri-log"))


def _nothing(d, path):
    pass


CHANGES = [
    (_rewrite, "sha256"), (_same_size_rewrite, "sha256"), (_replaced, "sha256"), (_symlink, "no longer a regular file"),
    (_removed, "cannot be read after the run"), (_extra_entry, "entries the collection did not put in"),
    (_directory_replaced, "was replaced"), (_cri_log, None), (_nothing, None),
]


@pytest.mark.parametrize("change,said", CHANGES, ids=[c[0].__name__.strip("_") for c in CHANGES])
def test_a_changed_probe_file_fails_the_check(tmp_path, change, said):
    d, path = _probe.write_probe(directory=str(tmp_path))
    written = _probe_file.state(d, path)
    assert written.get("sha256") and written["entries"] == ["gpuprobe_probe.py"], written
    change(d, path)
    builder = LayerBuilder("runtime", CHECKS)
    _probe_file.check(builder, written, _probe_file.state(d, path), "gpuprobe-t-1")
    check = builder.checks[0]
    assert check["id"] == "runtime.probe.unchanged" and check["subject"] == "gpuprobe-t-1"
    if said is None:
        assert (check["status"], check["observed"]) == (PASS, "unchanged after the run")
        assert builder.evidence["probe_file"][0]["changes"] == []
    else:
        assert check["status"] == FAIL and said in check["observed"], check
        assert check["hint"] == CHECKS["runtime.probe.unchanged"]["next"]
        assert builder.evidence["probe_file"][0]["changes"]
