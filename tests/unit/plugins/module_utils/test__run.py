"""_run: real subprocesses. ``run`` = allowlist check + ``_execute``; the capture, timeout and interrupt
behaviour is tested on ``_execute`` with real processes (python -c, head), which the allowlist refuses in
production (tests/unit/test_safety.py asserts that, and that only _run.py calls _execute)."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import allowlist as _allowlist
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import run as _run

HERE = os.path.dirname(os.path.abspath(__file__))


def test_execute_captures_output_and_rc():
    r = _run._execute([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], timeout=20)
    assert r["rc"] == 3 and r["stdout"] == "out\n" and r["stderr"] == "err\n"
    assert r["timed_out"] is False and r["error"] is None and r["duration_ms"] > 0
    assert (r["stdout_bytes"], r["stderr_bytes"], r["truncated"]) == (4, 4, False)


def test_run_missing_program_of_an_allowed_shape_does_not_raise():
    r = _run.run(["/nonexistent/gpuprobe-bin/podman", "--version"], timeout=5)
    assert r["rc"] is None and r["error"].startswith("not found")


def test_run_python_probe_shape(tmp_path):
    probe = tmp_path / "gpuprobe_probe.py"
    probe.write_text("import json, sys\nprint(json.loads(sys.argv[1])['x'], sys.flags.isolated, sys.flags.no_site)\n")
    r = _run.run([sys.executable, "-I", "-S", str(probe), json.dumps({"x": 7})], timeout=20)
    assert r["rc"] == 0 and r["stdout"] == "7 1 1\n"


@pytest.mark.parametrize("flags", [[], ["-I"], ["-S"], ["-S", "-I"], ["-E", "-S"]])
def test_the_host_probe_runs_only_isolated(flags):
    with pytest.raises(_allowlist.ForbiddenCommand):
        _allowlist.check_allowed([sys.executable] + flags + ["/tmp/d/gpuprobe_probe.py", "{}"])


def test_execute_kills_hung_process_group_including_children(tmp_path):
    marker = tmp_path / "child-survived"
    child = tmp_path / "child.py"
    child.write_text("import time\ntime.sleep(3)\nopen(%r, 'w').write('x')\n" % str(marker))
    code = "import subprocess, sys, time\nsubprocess.Popen([sys.executable, %r])\ntime.sleep(60)\n" % str(child)
    t0 = time.monotonic()
    r = _run._execute([sys.executable, "-c", code], timeout=0.5)
    assert r["timed_out"] is True and r["rc"] is None and "timeout" in r["error"]
    assert time.monotonic() - t0 < 30
    time.sleep(3.5)
    assert not marker.exists(), "the child of a timed-out command outlived it"


def test_a_cancelled_execute_kills_the_process_group_from_another_thread(tmp_path):
    """The early host control runs in a thread, where no signal handler can stop it: ``cancel`` does."""
    import threading
    marker = tmp_path / "child-survived"
    child = tmp_path / "child.py"
    child.write_text("import time\ntime.sleep(3)\nopen(%r, 'w').write('x')\n" % str(marker))
    code = "import subprocess, sys, time\nsubprocess.Popen([sys.executable, %r])\ntime.sleep(60)\n" % str(child)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t0 = time.monotonic()
    r = _run._execute([sys.executable, "-c", code], timeout=60, cancel=cancel)
    assert r["error"] == "cancelled" and r["rc"] is None and r["timed_out"] is False
    assert time.monotonic() - t0 < 10
    time.sleep(3.5)
    assert not marker.exists(), "the child of a cancelled command outlived it"


def test_a_cancel_event_never_set_changes_nothing():
    import threading
    r = _run._execute([sys.executable, "-c", "print('ok')"], timeout=20, cancel=threading.Event())
    assert (r["rc"], r["stdout"], r["error"]) == (0, "ok\n", None)
    r = _run._execute([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.3, cancel=threading.Event())
    assert r["timed_out"] is True and r["error"].startswith("timeout")


def test_execute_passes_stdin():
    r = _run._execute([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], stdin_data="abc", timeout=20)
    assert r["stdout"].strip() == "ABC"


@pytest.mark.parametrize("timeout", [0, -1, None])
def test_timeout_must_be_positive(timeout):
    with pytest.raises(ValueError, match="timeout must be > 0"):
        _run.run(["podman", "--version"], timeout=timeout)


def test_output_is_bounded_head_and_tail_kept():
    code = "import sys; w = sys.stdout.write; w('HEAD'); w('x' * (3 * 1024 * 1024)); w('TAIL')"
    r = _run._execute([sys.executable, "-c", code], timeout=30, limit=1024 * 1024)
    total = 3 * 1024 * 1024 + 8
    assert r["stdout_bytes"] == total and r["truncated"] is True
    assert r["stdout"].startswith("HEAD") and r["stdout"].endswith("TAIL")
    assert "[gpuprobe: %d bytes omitted]" % (total - 2 * 1024 * 1024) in r["stdout"]
    assert len(r["stdout"]) < 2 * 1024 * 1024 + 100


MEASURE = textwrap.dedent("""
    import json, resource, sys
    sys.path[:0] = json.loads(sys.argv[1])
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import run as _run
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = _run._execute(["head", "-c", "1G", "/dev/zero"], timeout=300)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kib": before, "after_kib": after, "bytes": r["stdout_bytes"], "truncated": r["truncated"],
                      "kept": len(r["stdout"]), "rc": r["rc"], "ms": r["duration_ms"]}))
""")


def test_one_gigabyte_of_output_costs_megabytes_not_gigabytes():
    """1 GiB through the runner in a fresh interpreter (so ru_maxrss is this capture's peak, not pytest's)."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(sys.path)], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = json.loads(proc.stdout)
    print("1 GiB capture:", m)
    assert m["rc"] == 0 and m["bytes"] == 1024 ** 3 and m["truncated"] is True
    assert m["kept"] <= 2 * _run.MAX_CAPTURE + 100
    # the growth of the peak over the interpreter's own (which depends on what the import pulled in)
    grown = m["after_kib"] - m["before_kib"]
    assert grown < 96 * 1024, "peak RSS grew by %d KiB for 1 GiB of output (%r)" % (grown, m)


INTERRUPTED = textwrap.dedent("""
    import json, os, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's Ctrl-C finds it (not a background job's)
    sys.path[:0] = json.loads(sys.argv[1])
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import run as _run
    code = "import os, time; open(%r, 'w').write(str(os.getpid())); time.sleep(120)" % sys.argv[2]
    try:
        _run._execute([sys.executable, "-c", code], timeout=120)
    except KeyboardInterrupt:
        print("interrupted")
""")


def test_interrupt_kills_the_child_process_group(tmp_path):
    """SIGINT to the caller (as Ctrl-C gives a module) kills the child, which runs in its own session and so
    never gets the terminal's SIGINT itself."""
    pidfile = tmp_path / "child.pid"
    caller = subprocess.Popen([sys.executable, "-c", INTERRUPTED, json.dumps(sys.path), str(pidfile)],
                              stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    caller.send_signal(signal.SIGINT)
    out, _err = caller.communicate(timeout=30)
    assert out.strip() == "interrupted"
    # killed: gone, or a zombie nobody has reaped yet (its parent exited; no init reaps in some containers)
    deadline = time.monotonic() + 15
    while not _dead(child):
        assert time.monotonic() < deadline, "the child %d still runs after its caller was interrupted" % child
        time.sleep(0.05)


def _dead(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


# ---- the allowlist (test_safety.py enumerates every shape) ----

@pytest.mark.parametrize("argv", [
    ["modprobe", "nvidia"], ["/sbin/rmmod", "nvidia_uvm"], ["insmod", "x.ko"], ["systemctl", "restart", "containerd"],
    ["nvidia-smi", "-r"], ["nvidia-smi", "--persistence-mode", "1"], [sys.executable, "-c", "print(1)"],
])
def test_forbidden_programs_are_refused(argv):
    with pytest.raises(_allowlist.ForbiddenCommand, match="not an allowed command shape"):
        _run.run(argv)


def test_read_only_nvidia_smi_query_allowed():
    assert _allowlist.check_allowed(["nvidia-smi", "--query-gpu=name", "--format=csv"]) == "nvidia-smi query"


# issue 19 (also-check): the probe's JSON lines in the middle of more than 2 x MAX_CAPTURE of other output were
# dropped with that middle. (where the probe line goes, how the other output looks)
FLOOD = textwrap.dedent("""
    import json, sys
    w = sys.stdout.write
    size, where, shape = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    lines = [json.dumps({"kind": "start", "n": 1}), json.dumps({"kind": "inventory", "payload": "y" * 100000}),
             json.dumps({"kind": "done"})]
    junk = {"lines": "x" * 99 + "\\n", "one-line": "x" * 100, "json-like": '{x' * 50 + "\\n", "crlf": "ab\\r\\n" * 25}[shape]
    n = size // len(junk)
    w("HEAD\\n")
    for i in range(n):
        if where == "middle" and i == n // 2 or where == "chunk-edge" and i == n // 3:
            if shape == "one-line":
                w("\\n")
            for line in lines:
                w(line + "\\n")
        w(junk)
    w("\\nTAIL\\n")
""")


@pytest.mark.parametrize("where", ["middle", "chunk-edge"])
@pytest.mark.parametrize("shape", ["lines", "one-line", "json-like", "crlf"])
def test_the_probes_lines_in_the_middle_of_a_flood_are_kept(where, shape):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract  # pylint: disable=import-outside-toplevel
    r = _run._execute([sys.executable, "-c", FLOOD, str(9 * 1024 * 1024), where, shape], timeout=60, limit=1024 * 1024,
                      keep_prefix=_probe_contract.LINE_PREFIX)
    assert r["truncated"] and r["stdout"].startswith("HEAD") and r["stdout"].rstrip().endswith("TAIL")
    parsed = _probe_contract.parse_output(r["stdout"])
    assert parsed["start"] == {"kind": "start", "n": 1} and parsed["complete"] is True
    assert parsed["inventory"]["payload"] == "y" * 100000
    assert "3 line(s) starting with '{\"' kept" in r["stdout"]
    assert len(r["stdout"]) < 2 * 1024 * 1024 + 200000


def test_without_keep_the_middle_is_dropped_and_the_kept_lines_are_bounded():
    r = _run._execute([sys.executable, "-c", FLOOD, str(9 * 1024 * 1024), "middle", "lines"], timeout=60, limit=1024 * 1024)
    assert '"kind": "start"' not in r["stdout"]  # what the capture did before keep_prefix
    code = "import sys\nfor i in range(40000): sys.stdout.write('{\"k\": \"%s\"}\\n' % ('z' * 1000))\n"
    r = _run._execute([sys.executable, "-c", code], timeout=60, limit=1024 * 1024, keep_prefix=b'{"', keep_limit=4 * 1024 * 1024)
    assert "later ones not (over 4194304 bytes or 20000 lines)" in r["stdout"] and len(r["stdout"]) < 6 * 1024 * 1024 + 1000
