"""Every read of a node file by the cdi layer is bounded (issue 19.1): non-blocking open, the opened file judged
(fstat: a regular file; its filesystem, not its path: never procfs/sysfs/devtmpfs), size and time limits, and the
layer's own time limit enforced on the node. Real FIFOs, real links into /proc, a real procfs mount elsewhere, a
regular file on devtmpfs; each layer run is in a child process that must answer within seconds (a hang fails)."""
import multiprocessing
import os
import subprocess
import time
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import host as _cdi_host
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import bounded, files
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN

# a valid spec whose one edit is accounted for (an env NVIDIA's generators write: cdi.trust.accounted PASSes)
GOOD = "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n- name: x\n  containerEdits:\n    env: [NVIDIA_VISIBLE_DEVICES=void]\n"


def _in_child(fn, *args, timeout=20):
    """fn(*args) in a forked child; its result, or a test failure when it does not answer in time (a hang)."""
    parent, child = multiprocessing.Pipe(duplex=False)

    def run():
        try:
            child.send(("ok", fn(*args)))
        except Exception as exc:  # pylint: disable=broad-except
            child.send(("error", repr(exc)))

    proc = multiprocessing.get_context("fork").Process(target=run)
    proc.start()
    ready = parent.poll(timeout)
    if not ready:
        proc.kill()
        proc.join()
        pytest.fail("the cdi layer did not answer within %d s (a blocking read)" % timeout)
    kind, value = parent.recv()
    proc.join()
    assert kind == "ok", value
    return value


def _parse_errors(spec_dir):
    rec = _cdi_layer.record(spec_dirs=[spec_dir], discover_runtime_dirs_=False, devices=["v.com/cc=x"], kinds=["v.com/cc"])
    return rec["status"], dict((os.path.basename(c["subject"]), (c["status"], c["observed"]))
                               for c in rec["checks"] if c["id"] == "cdi.spec.parse")


def _dir(tmp_path):
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "a-good.yaml").write_text(GOOD)
    return d


@pytest.mark.parametrize("target, words", [
    ("/proc/kmsg", "on proc"),              # a regular, empty-looking file whose read blocks
    ("/proc/self/status", "on proc"),       # one whose read does not block: refused for its filesystem all the same
    ("/sys/kernel/mm/transparent_hugepage/enabled", "on sysfs"),
    ("/dev/null", "not a regular file (a character device)"),
])
def test_a_link_into_a_kernel_filesystem_is_refused_without_reading_it(tmp_path, target, words):
    if not os.path.exists(target):
        pytest.skip("%s does not exist here" % target)
    d = _dir(tmp_path)
    os.symlink(target, str(d / "z-link.yaml"))
    status, parse = _in_child(_parse_errors, str(d))
    assert parse["z-link.yaml"][0] == WARN and words in parse["z-link.yaml"][1], parse
    assert parse["a-good.yaml"][0] == PASS and status == WARN


def test_a_fifo_in_the_spec_dir_is_refused_without_waiting_for_a_writer(tmp_path):
    d = _dir(tmp_path)
    os.mkfifo(str(d / "fifo.yaml"))
    os.symlink("fifo.yaml", str(d / "link-to-fifo.yaml"))
    _status, parse = _in_child(_parse_errors, str(d))
    for name in ("fifo.yaml", "link-to-fifo.yaml"):
        assert "not a regular file (a FIFO)" in parse[name][1], parse


def test_procfs_is_found_by_its_filesystem_not_by_its_path(tmp_path):
    mnt = tmp_path / "not-proc"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "proc", "proc", str(mnt)], capture_output=True, check=False).returncode != 0:
        pytest.skip("cannot mount a procfs here")
    try:
        d = _dir(tmp_path)
        os.symlink(str(mnt / "kmsg"), str(d / "z-kmsg.yaml"))
        _status, parse = _in_child(_parse_errors, str(d))
        assert "on proc" in parse["z-kmsg.yaml"][1], parse
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_regular_file_on_devtmpfs_is_refused(tmp_path):
    if os.geteuid() != 0 or "devtmpfs" not in open("/proc/self/mountinfo").read():
        pytest.skip("needs root and a devtmpfs /dev")
    target = "/dev/gpuprobe-test-%s.yaml" % uuid.uuid4().hex[:8]
    with open(target, "w") as f:
        f.write(GOOD)
    try:
        d = _dir(tmp_path)
        os.symlink(target, str(d / "z-dev.yaml"))
        _status, parse = _in_child(_parse_errors, str(d))
        assert "on devtmpfs" in parse["z-dev.yaml"][1], parse
    finally:
        os.unlink(target)


def test_an_oversized_file_is_not_read_past_the_cap(tmp_path):
    d = _dir(tmp_path)
    (d / "big.yaml").write_text(GOOD + "#" * (2 * 1024 * 1024))
    _status, parse = _in_child(_parse_errors, str(d))
    assert "larger than the 1048576-byte cap" in parse["big.yaml"][1]


@pytest.mark.parametrize("swap", ["fifo", "link-to-kmsg"])
def test_a_spec_swapped_between_the_listing_and_the_open_is_refused(tmp_path, monkeypatch, swap):
    """The entry was a regular file when listed and lstat'ed; at open it is a FIFO or a link into /proc."""
    d = tmp_path / "cdi"
    d.mkdir()
    path = str(d / "swapped.yaml")
    seen = os.lstat(str(tmp_path))  # any non-link stat: what lstat saw before the swap
    real_lstat = os.lstat

    def lstat_before_swap(p, *a, **kw):
        return seen if p == path else real_lstat(p, *a, **kw)

    if swap == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/proc/kmsg", path)
    monkeypatch.setattr(files.os, "lstat", lstat_before_swap)
    rec = _in_child(files.load_spec_file, path)
    assert not rec["ok"], rec
    assert ("not a regular file (a FIFO)" if swap == "fifo" else "became a symbolic link") in rec["error"], rec["error"]


def test_a_read_that_sleeps_is_interrupted_by_the_time_limit():
    r, w = os.pipe()
    try:
        started = time.monotonic()
        with pytest.raises(bounded._Expired):
            with bounded._timer(0.3):
                os.read(r, 1)  # blocks: nobody writes
        assert time.monotonic() - started < 5
    finally:
        os.close(r)
        os.close(w)


def test_the_layer_enforces_its_own_time_limit(tmp_path):
    d = _dir(tmp_path)
    for i in range(3):
        (d / ("b%d.yaml" % i)).write_text(GOOD.replace("name: x", "name: y%d" % i))
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False, devices=["v.com/cc=x"], kinds=["v.com/cc"], timeout=0)
    (limit,) = [c for c in rec["checks"] if c["id"] == "cdi.discovery.time_limit"]
    assert limit["status"] == FAIL and limit["observed"].startswith("timeout: 0 file(s) read") and "4 not read" in limit["observed"]
    (device,) = [c for c in rec["checks"] if c["id"] == "cdi.resolve.device"]
    assert device["status"] == NOT_RUN and "not read" in device["observed"]
    assert rec["status"] == FAIL
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False, devices=["v.com/cc=x"], kinds=["v.com/cc"])
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.discovery.time_limit"] == [PASS]


def test_runtime_configuration_and_the_driver_version_are_read_bounded(tmp_path):
    root = tmp_path / "host"
    (root / "etc/containers").mkdir(parents=True)
    os.symlink("/proc/kmsg", str(root / "etc/containers/containers.conf"))  # a regular file whose read blocks
    (root / "proc/driver/nvidia").mkdir(parents=True)
    os.mkfifo(str(root / "proc/driver/nvidia/version"))
    dirs = _in_child(files.discover_runtime_dirs, str(root), {})
    assert "on proc, a kernel pseudo-filesystem" in dirs["podman"]["errors"][0]
    version = _in_child(_cdi_host.running_driver_version, None, str(root))
    assert version[0] is None and "not a regular file (a FIFO)" in version[1]


def test_many_spec_files_are_bounded_per_dir(tmp_path):
    d = tmp_path / "cdi"
    d.mkdir()
    for i in range(12):
        (d / ("claim-%02d.yaml" % i)).write_text(GOOD.replace("v.com/cc", "k.com/claim").replace("name: x", "name: c%d" % i))
    (d / "a-good.yaml").write_text(GOOD)
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False, devices=["v.com/cc=x"], kinds=["v.com/cc"], max_spec_files=5)
    (count,) = [c for c in rec["checks"] if c["id"] == "cdi.discovery.spec_file_count"]
    assert count["status"] == WARN and "13 spec files: the last 8 in name order (from claim-04.yaml) were not read" in count["observed"]
    assert len(rec["evidence"]["files"]) == 5 and rec["evidence"]["requested_devices"] == ["v.com/cc=x"]
    assert rec["status"] == WARN
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False, devices=["k.com/claim=c11"], kinds=["k.com/claim"], max_spec_files=5)
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.resolve.device"] == [NOT_RUN]
    assert rec["status"] == WARN
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False, devices=["k.com/claim=c11"], kinds=["k.com/claim"], max_spec_files=1)
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.resolve.kind"] == [NOT_RUN]  # its specs are all past the limit
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False, devices=["v.com/cc=x"], kinds=["v.com/cc"])
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.discovery.spec_file_count"] == [PASS]
    assert len(rec["evidence"]["files"]) == 13
