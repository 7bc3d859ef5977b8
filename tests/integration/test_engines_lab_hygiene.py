"""The engines lab leaves nothing outside its own directory (issue 44 item 8), with the real containerd 1.7.24 that
scripts/engines.sh starts:

- runc's state (a Pod sandbox run through the CRI) is under the lab's directory (the runtime's ``Root``), not runc's
  default /run/containerd/runc/k8s.io;
- after ``stop``, no path under /run/containerd is left that was not there before, other than the sockets another
  containerd's live shims listen on (containerd 1.7 hard-codes its shims' socket directory /run/containerd/s: the lab
  removes it when it created it and it is empty);
- the daemon holds no descriptor of its caller's: a lock held around ``start`` (``flock``) is not kept by containerd,
  whose life would otherwise hold every later ``flock`` of that lock.
"""
import os
import subprocess
import sys
import tempfile
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINES = os.path.realpath(os.environ.get("GPUPROBE_ENGINES_DIR", os.path.join(ROOT, ".build", "engines")))
SCRIPT = os.path.join(ROOT, "scripts", "engines.sh")
LAB = os.path.join(ENGINES, "run", "containerd")
RUN = "/run/containerd"


def _sh(*args, pass_fds=()):
    return subprocess.run(["bash", SCRIPT] + list(args), capture_output=True, text=True, timeout=300, check=False,
                          pass_fds=pass_fds, env=dict(os.environ, PYTHON=sys.executable, GPUPROBE_ENGINES_NO_PROBE_IMAGE="1"))


def _tree(top):
    out = set()
    for dirpath, dirs, files in os.walk(top):
        out.update(os.path.join(dirpath, n) for n in dirs + files)
    return out | ({top} if os.path.exists(top) else set())


def _listened():
    """The unix socket paths some process listens on (/proc/net/unix, state 01)."""
    with open("/proc/net/unix") as fh:
        return set(line.split()[7] for line in list(fh)[1:] if len(line.split()) >= 8 and line.split()[5] == "01")


def _alive(pidfile):
    try:
        with open(pidfile) as fh:
            os.kill(int(fh.read().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


def test_start_and_stop_leave_nothing_outside_the_lab():
    if os.geteuid() != 0:
        pytest.skip("needs root (containerd)")
    if not os.path.isfile(os.path.join(ENGINES, "containerd", ".deb")):
        pytest.skip("engines not fetched (scripts/engines.sh fetch)")
    if _alive(os.path.join(LAB, "pid")):
        pytest.skip("this checkout's lab containerd runs already: stop it first (scripts/engines.sh stop containerd)")
    before = _tree(RUN)
    with tempfile.NamedTemporaryFile(prefix="gpuprobe-lock-") as lock:
        fd = os.open(lock.name, os.O_RDONLY)
        os.set_inheritable(fd, True)
        try:
            r = _sh("start", "containerd", pass_fds=(fd,))
        finally:
            os.close(fd)
        assert r.returncode == 0, r.stderr
        try:
            with open(os.path.join(LAB, "pid")) as fh:
                pid = int(fh.read().strip())
            held = [os.readlink("/proc/%d/fd/%s" % (pid, n)) for n in os.listdir("/proc/%d/fd" % pid)]
            assert lock.name not in held, held
            with _cri.CRIClient("unix://" + os.path.join(LAB, "containerd.sock"), os.path.join(ENGINES, "cri", "api.desc")) as cri:
                config = cri.sandbox_config("gpuprobe-hygiene-%s" % uuid.uuid4().hex[:8], str(uuid.uuid4()))
                sandbox = cri.run_pod_sandbox(config, timeout=60)
                try:
                    # runc's state of the sandbox: under the lab, not runc's default root
                    assert os.path.isdir(os.path.join(LAB, "runc", "k8s.io", sandbox)), os.listdir(LAB)
                    assert not os.path.exists(os.path.join(RUN, "runc", "k8s.io", sandbox))
                finally:
                    cri.remove_sandbox_tree(sandbox, timeout=60)
        finally:
            r = _sh("stop", "containerd")
    assert r.returncode == 0, r.stderr
    left = sorted(p for p in _tree(RUN) - before if p not in _listened()
                  and not any(q.startswith(p + "/") for q in _listened()))
    assert left == [], left
