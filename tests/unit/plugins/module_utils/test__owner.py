"""Run ownership (_owner), the runtime's labels and ps parsing, its version parsing and option checks, and the
option checks of compute_facts/probe_cleanup/host_facts: bad input is a clear error, never a traceback."""
import json
import os
import subprocess
import sys
import time

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import engines as _runtime_engines
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as _runtime_select
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
from ansible_collections.gpuprobe.layers.plugins.modules import compute_facts, host_facts, probe_cleanup, runtime_facts


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_owner_round_trip_and_liveness():
    me = _owner.normalize({"pid": os.getpid()})
    assert me["host"] == _owner.this_host() and me["started"] == _owner.proc_started(os.getpid())
    assert _owner.parse_owner(_owner.format_owner(me)) == me
    assert _owner.alive(me) is True
    assert _owner.alive(dict(me, started=me["started"] + 1)) is False  # the pid now belongs to another process
    assert _owner.alive({"host": _owner.this_host(), "pid": _dead_pid(), "started": None}) is False
    assert _owner.alive({"host": "elsewhere.example", "pid": os.getpid(), "started": None}) is None
    assert _owner.alive({"host": _owner.this_host(), "pid": None, "started": None}) is None


def test_a_zombie_owner_is_gone():
    """A controller that has exited but was not yet collected by its parent (a zombie) no longer runs anything."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)  # pylint: disable=protected-access
    try:
        deadline = time.monotonic() + 10
        while _owner._state(pid) != "Z" and time.monotonic() < deadline:  # pylint: disable=protected-access
            time.sleep(0.01)
        zombie = {"host": _owner.this_host(), "pid": pid, "started": _owner.proc_started(pid)}
        assert zombie["started"] is not None and _owner.alive(zombie) is False
    finally:
        os.waitpid(pid, 0)
    assert _owner.format_owner({"host": "h", "pid": None}) == "h:-:-"
    for bad in ("", "h:x:1", "h:1", "a b:1:2", None):
        assert _owner.parse_owner(bad) is None


def test_the_ownership_rule():
    now = time.time()
    live = _owner.normalize({"pid": os.getpid()})
    dead = {"host": _owner.this_host(), "pid": _dead_pid(), "started": 5}
    far = {"host": "controller.example", "pid": 1, "started": None}
    assert _owner.is_over("r1", live, now, run_id="r1", now=now)[0] is True      # the caller's own run
    assert _owner.is_over("r1", live, now, run_id="r10", now=now)[0] is False    # exact, never a prefix/substring
    assert _owner.is_over("r2", live, now, now=now) == (False, "its owner %s is running" % _owner.format_owner(live))
    assert _owner.is_over("r2", dead, now, now=now)[0] is True
    assert _owner.is_over("r2", far, now - 10, max_age=3600, now=now)[0] is False
    assert _owner.is_over("r2", far, now - 3601, max_age=3600, now=now)[0] is True
    assert _owner.is_over("r2", None, None, now=now)[0] is False                  # nothing known: never removed


def test_controller_is_found_among_ancestors(tmp_path):
    """A process named ansible-playbook (as the controller is) above a module-like child is its owner."""
    fake = tmp_path / "ansible-playbook"
    fake.write_text("#!%s\nimport subprocess, sys\nsubprocess.run([sys.executable, '-c', sys.argv[1]])\n" % sys.executable)
    fake.chmod(0o755)
    code = ("import json, sys; sys.path[:0] = %r\n"
            "from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner\n"
            "print(json.dumps(_owner.controller()))" % sys.path)
    out = subprocess.run([str(fake), code], capture_output=True, text=True, timeout=60, check=True).stdout
    found = json.loads(out)
    assert found["host"] == _owner.this_host() and found["pid"] > 1 and found["started"] is not None
    assert _owner.controller() is None or _owner.controller()["pid"] != found["pid"]


def test_build_argv_labels_run_owner_and_creation_time():
    owner = {"host": "h1", "pid": 12, "started": 34}
    argv = _runtime_engines.build_argv({"name": "podman", "path": "/usr/bin/podman"}, "gpuprobe-r1-abc", "r1", "img:1",
                                       ["gpuprobe.local/gpu-r1=0"], "/tmp/d/gpuprobe_probe.py", {}, owner=owner, created=99)
    labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert labels == ["gpuprobe.run=r1", "gpuprobe.owner=h1:12:34", "gpuprobe.created=99"]
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import allowlist as _allowlist
    assert _allowlist.check_allowed(argv) == "engine run probe"


def test_ps_rows_of_podman_and_docker():
    podman = json.dumps([{"Names": ["gpuprobe-r1-x"], "State": "running", "Created": 100,
                          "Labels": {"gpuprobe.run": "r1", "gpuprobe.owner": "h:1:2", "gpuprobe.created": "90"}},
                         {"Names": ["gpuprobe-old-y"], "State": "exited", "Created": 50, "Labels": {"gpuprobe.run": "old"}}])
    rows = _runtime_engines._parse_ps(podman)
    assert rows[0] == {"name": "gpuprobe-r1-x", "run_id": "r1", "owner": {"host": "h", "pid": 1, "started": 2},
                       "created": 90, "state": "running"}
    assert rows[1]["owner"] is None and rows[1]["created"] == 50
    docker = '{"Names":"gpuprobe-r2-z","State":"running","Labels":"gpuprobe.run=r2,gpuprobe.owner=h:3:-"}\n'
    assert _runtime_engines._parse_ps(docker)[0]["owner"] == {"host": "h", "pid": 3, "started": None}
    assert _runtime_engines._parse_ps("") == []


@pytest.mark.parametrize("text, parsed", [("4.3.1", "4.3.1"), ("24.0.7", "24.0.7"), ("4.9.3-dev", "4.9.3-dev"),
                                          ("v1.1.5", "v1.1.5"), ("garbage; rm -rf /", "unknown"), ("", "unknown"),
                                          (None, "unknown"), ("4.3.1\n<script>", "unknown")])
def test_runtime_version_is_parsed_or_unknown(text, parsed):
    assert _runtime_select.version_or_unknown(text) == parsed


@pytest.mark.parametrize("params, msg", [
    ({"timeout": 0}, "timeout must be a number of seconds > 0"),
    ({"timeout": -5}, "timeout must be a number of seconds > 0"),
    ({"cdi_devices": ["gpu0"]}, "is not a fully qualified CDI device name"),
    ({"expected_edits": {"deviceNodes": "x"}}, "expected_edits.deviceNodes must be a list"),
    ({"expected_edits": {"mounts": ["x"]}}, "expected_edits.mounts must be a list of dicts"),
    ({"user": "0; rm"}, "user '0; rm' must be uid[:gid]"),
    ({"owner": {"pid": "abc"}}, "owner.pid 'abc' is not an integer"),
])
def test_runtime_options_are_checked_before_anything_runs(params, msg):
    base = {"run_id": "r1", "image": "i", "cdi_devices": ["k.example/c=0"], "timeout": 60}
    base.update(params)
    with pytest.raises(ValueError, match=msg.replace("[", r"\[").replace("(", r"\(")):
        _runtime_layer.record(base)


def _main(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("module, args, msg", [
    (compute_facts, {"container_probe": {"inventory": "x"}}, "container_probe.inventory must be dict or null (got str)"),
    (compute_facts, {"container_probe": {"cdi_devices": 5}}, "container_probe.cdi_devices must be list or null (got int)"),
    (compute_facts, {"container_probe": {"steps": ["x"]}}, "container_probe.steps[0] must be a dict"),
    (compute_facts, {"runtime_record": {"evidence": "x"}}, "runtime_record.evidence must be dict or null"),
    (compute_facts, {"host": {"evidence": {"nvml": "x"}}}, "host.evidence.nvml must be dict or null"),
    (compute_facts, {"host": {"layer": "cdi"}}, "host is a cdi record, expected host"),
    (compute_facts, {"timeout": 0}, "timeout must be a number of seconds > 0"),
    (host_facts, {"root": "/nonexistent/gpuprobe-root"}, "root /nonexistent/gpuprobe-root is not a directory"),
    (host_facts, {"nvml_timeout": -1}, "nvml_timeout must be a number of seconds > 0"),
    (runtime_facts, {"image": "i", "run_id": "r1", "timeout": 0}, "timeout must be a number of seconds > 0"),
    (runtime_facts, {"image": "i", "run_id": "r1", "cdi_devices": ["/tmp/x:/dev/y=z"]}, "is not a fully qualified CDI device name"),
    (runtime_facts, {"image": "i", "run_id": "r1", "cdi_devices": ["/dev/sda"]}, "is not a fully qualified CDI device name"),
    (runtime_facts, {"image": "--privileged", "run_id": "r1", "cdi_devices": ["k.example/c=0"]}, "is not an image reference"),
    # issue 19.7: above Ansible's limit (and any sane one): refused before anything runs
    (runtime_facts, {"image": "i", "run_id": "r1", "timeout": 99999999999}, "timeout must be a number of seconds > 0 and at most 86400"),
    (compute_facts, {"timeout": 86401}, "timeout must be a number of seconds > 0 and at most 86400"),
    (host_facts, {"nvml_timeout": 2 ** 31}, "nvml_timeout must be a number of seconds > 0 and at most 86400"),
    (probe_cleanup, {"timeout": 99999999999}, "timeout must be a number of seconds > 0 and at most 86400"),
    (probe_cleanup, {"environment": {"A B": "1"}}, "environment: 'A B' is not an environment variable name"),
    (probe_cleanup, {"spec_dir": "relative"}, "spec_dir 'relative' must be an absolute path"),
    (runtime_facts, {"image": "i", "run_id": "r1", "user": "-u"}, "user '-u' must be uid[:gid]"),
    (probe_cleanup, {"max_age": -1}, "max_age must be an integer >= 0"),
    (probe_cleanup, {"timeout": 0}, "timeout must be a number of seconds > 0"),
    (probe_cleanup, {"run_id": "../x"}, "run_id '../x'"),
])
def test_malformed_module_options_fail_with_one_clear_message(module, args, msg, capsys):
    out = _main(module, args, capsys)
    assert out.get("failed") is True and msg in out["msg"], out
    assert "Traceback" not in json.dumps(out)


@pytest.fixture
def live_process():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("max_age", [0, 1, 5, 3600])
@pytest.mark.parametrize("age", [0, 6, 10 ** 6])
def test_a_live_owner_is_never_over_whatever_its_age(live_process, max_age, age):
    """issue 19.4: the age rule was checked before liveness, so max_age=5 listed a running run's items for removal."""
    now = time.time()
    owner = _owner.normalize({"pid": live_process.pid})
    over, why = _owner.is_over("r2", owner, now - age, max_age=max_age, now=now)
    assert (over, why) == (False, "its owner %s is running" % _owner.format_owner(owner))
    # an owner that cannot be checked from here is still judged by its age
    far = {"host": "controller.example", "pid": live_process.pid, "started": owner["started"]}
    assert _owner.is_over("r2", far, now - age, max_age=max_age, now=now)[0] is (age > max_age)
    live_process.kill()
    live_process.wait()
    assert _owner.is_over("r2", owner, now - age, max_age=max_age, now=now)[0] is True  # gone: over at once
