import sys
import time

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils import _run


def test_run_captures_output_and_rc():
    r = _run.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], timeout=20)
    assert r["rc"] == 3 and r["stdout"] == "out\n" and r["stderr"] == "err\n"
    assert r["timed_out"] is False and r["error"] is None and r["duration_ms"] > 0


def test_run_missing_program_does_not_raise():
    r = _run.run(["/nonexistent/gpuprobe-no-such-program"], timeout=5)
    assert r["rc"] is None and r["error"].startswith("not found")


def test_run_kills_hung_process_group_including_children(tmp_path):
    marker = tmp_path / "child-survived"
    child = tmp_path / "child.py"
    child.write_text("import time\ntime.sleep(3)\nopen(%r, 'w').write('x')\n" % str(marker))
    code = "import subprocess, sys, time\nsubprocess.Popen([sys.executable, %r])\ntime.sleep(60)\n" % str(child)
    t0 = time.monotonic()
    r = _run.run([sys.executable, "-c", code], timeout=0.5)
    assert r["timed_out"] is True and r["rc"] is None and "timeout" in r["error"]
    assert time.monotonic() - t0 < 30
    time.sleep(3.5)
    assert not marker.exists(), "the child of a timed-out command outlived it"


def test_run_passes_stdin():
    r = _run.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], stdin_data="abc", timeout=20)
    assert r["stdout"].strip() == "ABC"


@pytest.mark.parametrize("argv", [
    ["modprobe", "nvidia"], ["/sbin/rmmod", "nvidia_uvm"], ["insmod", "x.ko"], ["systemctl", "restart", "containerd"],
    ["nvidia-smi", "-r"], ["nvidia-smi", "--persistence-mode", "1"],
])
def test_forbidden_programs_are_refused(argv):
    with pytest.raises(_run.ForbiddenCommand):
        _run.run(argv)


def test_read_only_nvidia_smi_query_allowed():
    _run.check_allowed(["nvidia-smi", "--query-gpu=name", "--format=csv"])
