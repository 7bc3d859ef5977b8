"""An interrupt during the host control (issue 19 item 6), with real processes and real signals: the node probe
(``_node_probe.probe`` in a fresh interpreter) runs the host control on a libcuda whose load hangs (a constructor
that sleeps, as a stuck driver would); SIGTERM/SIGINT to the node probe kills the host probe's process group,
removes its temp dir and this run's spec. A SIGKILLed node probe (no handler runs) leaves a temp dir named after
it, which the sweep removes once that process is gone.
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import yaml

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _runtime_cleanup
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec

pytestmark = pytest.mark.integration

U0 = "GPU-00000000-1111-2222-3333-444444444444"
HANGING_LIBCUDA = "#include <unistd.h>\n__attribute__((constructor)) static void hang(void) { sleep(300); }\nint cuInit(unsigned f) { return 0; }\n"

NODE_PROBE = textwrap.dedent("""
    import json, sys, threading
    sys.path[:0] = json.loads(sys.argv[1])
    from ansible_collections.gpuprobe.layers.plugins.module_utils._node import probe as _node_probe
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import result as _result

    def runtime_facts(params, check_mode=False):
        # the container side is not under test here: a runtime that did not run (the host control still runs);
        # it says whether the host control is already running beside it
        beside = any(t.name == "gpuprobe-host-control" for t in threading.enumerate())
        print("host control beside the container: %s" % beside, file=sys.stderr, flush=True)
        return _result.not_run("runtime", "not under test"), None

    _node_probe.runtime_record = runtime_facts
    print(json.dumps(_node_probe.probe(json.loads(sys.argv[2]))), flush=True)
""")


def _compile(path, source):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("needs a C compiler")
    src = path + ".c"
    with open(src, "w") as f:
        f.write(source)
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", path, src], check=True)
    os.unlink(src)


def _probe_pids(marker):
    """Processes whose command line holds ``marker`` (this test's temp dir): the host probe."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmd and "gpuprobe_probe.py" in cmd:
            pids.append(int(pid))
    return pids


class HostControlRun(object):
    """``concurrent``: the host record says two contexts are allowed on the GPU (compute mode Default, MIG off), so
    the host control runs in a thread of its own beside the probe container (_compute.EarlyControl); else after it."""

    def __init__(self, tmp_path, concurrent=False):
        self.run_id = "t" + os.urandom(5).hex()
        self.concurrent = concurrent
        self.tmp = str(tmp_path / "tmp")
        self.spec_dir = str(tmp_path / "cdi")
        lib_dir = str(tmp_path / "lib")
        os.makedirs(self.tmp)
        os.makedirs(self.spec_dir)
        os.makedirs(lib_dir)
        _compile(os.path.join(lib_dir, "libcuda.so.1"), HANGING_LIBCUDA)
        self.spec = os.path.join(self.spec_dir, "gpuprobe-%s.yaml" % self.run_id)
        kind = _cdi_spec.run_kind(self.run_id)
        with open(self.spec, "w") as f:
            yaml.safe_dump({"cdiVersion": "0.5.0", "kind": kind, "devices": [{"name": "0", "containerEdits": {
                "deviceNodes": [{"path": "/dev/null"}]}}],
                "containerEdits": {"env": ["GPUPROBE_RUN_ID=%s" % self.run_id]}}, f)
        gpu = {"index": 0, "uuid": U0, "compute_processes": []}
        if concurrent:
            gpu.update(compute_mode="Default", mig_mode={"current": 0, "pending": 0})
        host = {"layer": "host", "status": "PASS", "evidence": {"nvml": {"ok": True, "gpus": [gpu]}}}
        with open(self.spec, "rb") as f:  # what the cdi layer read: the probe call rechecks it before the container
            digest = hashlib.sha256(f.read()).hexdigest()
        cdi = {"layer": "cdi", "status": "PASS", "evidence": {"requested_devices": ["%s=0" % kind], "identity": {
            "expected_gpus": [{"uuid": U0, "index": 0, "minor": 0, "name": "x", "mig_uuid": None}]},
            "device_sources": {"%s=0" % kind: self.spec}, "files": [{"path": self.spec, "sha256": digest}]}}
        params = {"records": {"host": host, "cdi": cdi}, "run_id": self.run_id, "runtime": "podman", "image": "i",
                  "timeout": 200, "user": "", "environment": {}, "isolation": "shared", "allow_busy_gpu": False,
                  "host_control": True, "self_built_spec_dir": self.spec_dir, "remove_spec": True}
        env = dict(os.environ, TMPDIR=self.tmp, LD_LIBRARY_PATH=lib_dir, CUDA_VISIBLE_DEVICES="7")
        self.proc = subprocess.Popen([sys.executable, "-c", NODE_PROBE, json.dumps(sys.path), json.dumps(params)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        while not _probe_pids(self.tmp):
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the host control never started"
            time.sleep(0.1)
        self.probe_pids = _probe_pids(self.tmp)

    def dirs(self):
        return [n for n in os.listdir(self.tmp) if n.startswith("gpuprobe-")]

    def close(self):
        for pid in _probe_pids(self.tmp):
            os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(params=[False, True], ids=["after-the-container", "beside-the-container"])
def control(tmp_path, request):
    run = HostControlRun(tmp_path, concurrent=request.param)
    yield run
    run.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_an_interrupt_during_the_host_control_leaves_nothing(control, sig):
    assert control.dirs() and os.path.exists(control.spec)
    control.proc.send_signal(sig)
    out, err = control.proc.communicate(timeout=30)
    result = json.loads(out.strip().splitlines()[-1])
    assert "interrupted by signal %d" % sig in result["interrupted"], err
    assert "host control beside the container: %s" % control.concurrent in err
    assert "spec %s was removed" % control.spec in result["interrupted"]
    assert not os.path.exists(control.spec)
    assert control.dirs() == []                 # the probe's temp dir is gone
    time.sleep(0.5)
    assert _probe_pids(control.tmp) == []        # and so is the host probe (its process group was killed)
    for pid in control.probe_pids:
        assert not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z"


def test_a_killed_node_probe_leaves_a_temp_dir_the_sweep_finds(control):
    names = control.dirs()
    assert len(names) == 1 and _runtime_cleanup.PROBE_DIR_RE.match(names[0])
    assert int(names[0].split("-")[2]) == control.proc.pid  # named after the node probe that owns it
    assert _runtime_cleanup.sweep_probe_dirs(control.tmp) == []     # its owner is alive: not touched
    control.proc.send_signal(signal.SIGKILL)
    control.proc.wait(timeout=10)
    assert control.dirs() == names                          # SIGKILL: no handler ran
    assert _runtime_cleanup.sweep_probe_dirs(control.tmp) == [os.path.join(control.tmp, names[0])]
    assert control.dirs() == []
