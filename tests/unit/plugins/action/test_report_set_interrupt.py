"""write_report_set under real signals: a writer process is stopped at each step (through the module's test-only
step hook, set by the writer script below, never reachable from options or variables) or at random moments, and
killed with SIGTERM or SIGINT while an Ansible worker's handler is installed (re-raise with the default action, then
os._exit: no Python cleanup would run; the writer puts its own in place while it writes, _signals.interruptible),
with SIGINT as a KeyboardInterrupt, and with SIGKILL. Whatever the moment, every <basename>-latest<suffix> reads the
previous set or the new one, never a mix; every run directory is complete; after SIGTERM or SIGINT nothing of the run
is left; the next run removes what a SIGKILL left and switches cleanly."""
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import files as W

SUFFIXES = (".json", ".md", ".html", ".junit.xml")
BASE = "gpuprobe-report"

WRITER = r'''
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's Ctrl-C finds it (not a background job's)
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import files as W
report_dir, stamp, tag, pause_at, handler, size = sys.argv[1:7]
if handler == "ansible-worker":   # ansible.executor.process.worker.WorkerProcess._term
    def _term(signum, frame):
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(1)
    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
def hook(name):
    if name == pause_at:
        sys.stdout.write("paused %s\n" % name)
        sys.stdout.flush()
        # short sleeps: a signal that lands before a long sleep starts would run its Python handler only after it
        for _ in range(600):
            time.sleep(0.1)
W._STEP_HOOK = hook
texts = dict((sfx, tag + sfx + "\n" + "x" * int(size)) for sfx in (".json", ".md", ".html", ".junit.xml"))
sys.stdout.write("writing\n")
sys.stdout.flush()
start = time.monotonic()
W.write_report_set(report_dir, "gpuprobe-report", stamp, texts)
sys.stdout.write("done %f\n" % (time.monotonic() - start))
sys.stdout.flush()
'''


def _texts(tag, size=0):
    return dict((sfx, tag + sfx + "\n" + "x" * size) for sfx in SUFFIXES)


def _writer(report_dir, stamp, tag, pause_at="", handler="ansible-worker", size=0):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(report_dir), stamp, tag, pause_at, handler, str(size)],
                            stdout=subprocess.PIPE, text=True)


def _latest_tags(report_dir):
    """The tag each <basename>-latest<suffix> reads (None: absent), and whether each file was complete."""
    tags = {}
    for sfx in SUFFIXES:
        path = os.path.join(str(report_dir), BASE + "-latest" + sfx)
        tags[sfx] = open(path).read().split(".", 1)[0] if os.path.exists(path) else None
    return tags


def _assert_invariant(report_dir, old, new, size):
    tags = set(_latest_tags(report_dir).values())
    assert tags in ({old}, {new}), "latest.* mixed: %s" % _latest_tags(report_dir)
    for name in os.listdir(str(report_dir)):
        path = os.path.join(str(report_dir), name)
        if name.startswith(".") or os.path.islink(path) or not os.path.isdir(path):
            continue
        # a run directory that is visible is a complete set
        assert sorted(os.listdir(path)) == sorted(BASE + sfx for sfx in SUFFIXES), name
        for sfx in SUFFIXES:
            text = open(os.path.join(path, BASE + sfx)).read()
            assert text == _texts(text.split(".", 1)[0], size)[sfx], "%s%s is not complete" % (name, sfx)
    return tags.pop()


def _next_run_cleans_up(report_dir):
    W.write_report_set(str(report_dir), BASE, "20261203T235959Z", _texts("next"))
    assert set(_latest_tags(report_dir).values()) == {"next"}
    assert not [n for n in os.listdir(str(report_dir)) if n.startswith(".")]


STEPS = ["temp_dir", "file.json", "file.md", "file.html", "file.junit.xml", "run_dir", "migrated", "latest_files", "latest"]
KILLS = [("ansible-worker", signal.SIGTERM), ("ansible-worker", signal.SIGINT), ("python", signal.SIGINT),
         ("python", signal.SIGKILL)]


@pytest.mark.parametrize("flat", [False, True], ids=["previous-set", "previous-version-flat-files"])
@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("handler,sig", KILLS, ids=["TERM-worker", "INT-worker", "INT-python", "KILL"])
def test_interrupt_at_each_step_leaves_the_old_set_or_the_new_one(tmp_path, step, handler, sig, flat):
    if flat:
        for sfx in SUFFIXES:
            (tmp_path / (BASE + "-latest" + sfx)).write_text("old" + sfx + "\n")
    else:
        W.write_report_set(str(tmp_path), BASE, "20261202T000000Z", _texts("old"))
    proc = _writer(tmp_path, "20261203T000000Z", "new", pause_at=step, handler=handler)
    try:
        assert proc.stdout.readline() == "writing\n"
        line = proc.stdout.readline()
        if line.startswith("done"):   # a step this run does not take (no flat files to take over)
            assert step == "migrated" and not flat
            proc.wait(timeout=30)
            return
        assert line == "paused %s\n" % step
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    seen = _assert_invariant(tmp_path, "old", "new", 0)
    # up to the switch it is the old set; once latest was swapped, the new one
    assert seen == ("new" if step == "latest" else "old")
    if sig != signal.SIGKILL and step not in ("latest",):
        # SIGTERM/SIGINT raise inside the writer (_signals.interruptible), whose cleanup removes this run's temporary
        # and any directory not yet pointed at: nothing of the run is left for the next one to sweep
        assert [n for n in os.listdir(str(tmp_path)) if n.startswith(".")] == [], os.listdir(str(tmp_path))
    _next_run_cleans_up(tmp_path)


def test_kill_at_random_moments_leaves_the_old_set_or_the_new_one(tmp_path):
    size = 1 << 20
    reports = tmp_path / "reports"
    reports.mkdir()
    W.write_report_set(str(reports), BASE, "20261202T000000Z", _texts("old", size))
    # how long one write takes here, to spread the kills over it
    os.makedirs(str(tmp_path / "timing"))
    proc = _writer(tmp_path / "timing", "20261203T000000Z", "t", handler="python", size=size)
    out, _err = proc.communicate(timeout=60)
    duration = float(out.split("done ")[1])
    rng = random.Random(19)
    seen = {"old": 0, "new": 0}
    previous = "old"
    for i in range(12):
        handler, sig = KILLS[i % len(KILLS)]
        tag = "new%d" % i
        proc = _writer(reports, "20261203T0000%02dZ" % i, tag, handler=handler, size=size)
        assert proc.stdout.readline() == "writing\n"
        time.sleep(rng.uniform(0, duration * 1.2))
        proc.send_signal(sig)
        proc.wait(timeout=30)
        now = _assert_invariant(reports, previous, tag, size)
        seen["new" if now == tag else "old"] += 1
        previous = now
    assert seen["old"] >= 1   # kills did land inside writes (the rest landed after the switch)
    _next_run_cleans_up(reports)


@pytest.mark.parametrize("flat", [False, True], ids=["previous-set", "previous-version-flat-files"])
@pytest.mark.parametrize("nth", range(1, 12))
def test_keyboard_interrupt_just_after_any_rename_leaves_the_old_set_or_the_new_one(tmp_path, monkeypatch, nth, flat):
    """Python raises KeyboardInterrupt after a call returns: a rename that happened must not be undone as if it had not
    (the switch to latest done, then this run's directory removed, left latest dangling)."""
    if flat:
        for sfx in SUFFIXES:
            (tmp_path / (BASE + "-latest" + sfx)).write_text("old" + sfx + "\n")
    else:
        W.write_report_set(str(tmp_path), BASE, "20261202T000000Z", _texts("old"))
    calls = []

    def after(real):
        def call(src, dst):
            real(src, dst)
            calls.append(dst)
            if len(calls) == nth:
                raise KeyboardInterrupt()
        return call
    monkeypatch.setattr(W.os, "replace", after(os.replace))
    monkeypatch.setattr(W.os, "rename", after(os.rename))
    try:
        W.write_report_set(str(tmp_path), BASE, "20261203T000000Z", _texts("new"))
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    _assert_invariant(tmp_path, "old", "new", 0)
    _next_run_cleans_up(tmp_path)
