"""Fault injection against real podman + runc (issue 11): concurrent self-built runs, leftover specs of crashed
runs and of other kinds, SIGINT/SIGTERM/SIGKILL in the middle of a probe, cleanup beside another run's live
probe, ansible-playbook interrupted. Real processes throughout; synthetic char devices (mknod, harmless majors)
and synthetic library files stand in for the GPU. docs/safety.md's fault-injection table comes from these."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

import hostfixture  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from test_runtime_podman import IMAGE, Lab, _podman_env, probe_image, podman_env  # noqa: F401  pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import signals as _common_signals
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _runtime_cleanup
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner

yaml = pytest.importorskip("yaml")

pytestmark = pytest.mark.integration

SPEC_DIR = "/var/run/cdi"
DRIVER = "580.159.04"
KEEP_YOUNG = 10 ** 9  # sweeps in these tests remove only what a gone owner left, never by age (other runs share this machine)


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def synthetic_node(root):
    """A node tree: two 'GPUs' and the control nodes as harmless char devices, fake driver libraries."""
    hostfixture.spec_host_tree(root, (("/dev/nvidia0", 1, 3), ("/dev/nvidia1", 1, 5), ("/dev/nvidiactl", 1, 7),
                                      ("/dev/nvidia-uvm", 1, 8), ("/dev/nvidia-uvm-tools", 1, 9)),
                               content=b"not an ELF file\n", version=DRIVER)
    return root


# One self-built run, as the verify role does it: cdi_spec -> cdi_facts -> runtime_facts -> cdi_spec absent.
# Both runs write their spec, then wait for each other, so that both specs (and the leftovers) are in
# /var/run/cdi while each one resolves and runs.
SELF_BUILT_RUN = textwrap.dedent("""
    import json, os, sys, time
    sys.path[:0] = json.loads(sys.argv[1])
    args = json.loads(sys.argv[2])
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
    from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict
    run_id = args["run_id"]
    spec = _cdi_spec.ensure_spec(run_id, spec_dir=args["spec_dir"], root=args["root"], driver_root="/usr/local/nvidia",
                                 gpus=[args["gpu"]], max_age=10 ** 9)
    open(args["ready"], "w").close()
    deadline = time.time() + 60
    while not all(os.path.exists(p) for p in args["wait_for"]) and time.time() < deadline:
        time.sleep(0.05)
    present = sorted(os.listdir(args["spec_dir"]))
    try:
        device = [d for d in spec["devices"] if not d.endswith("=all")][0]
        # the host record as the host layer writes it over the tree: its root, the driver root as a node path
        host = {"layer": "host", "evidence": {"root": args["root"], "driver_root": "/usr/local/nvidia",
                                              "nvml": {"driver_version": "%s"}}}
        cdi = _cdi_layer.record(spec_dirs=[args["spec_dir"]], discover_runtime_dirs_=False, devices=[device],
                             kinds=[spec["kind"]], host=host, root="/")
        runtime, probe = _runtime_layer.record({"run_id": run_id, "image": args["image"], "cdi_devices": [device],
                                                 "expected_edits": cdi["evidence"].get("expected_edits") or {},
                                                 "runtime": "podman", "timeout": 120, "compute": False})
        verdict = node_verdict({"cdi": cdi, "runtime": runtime})
        seen = sorted(p for p, n in ((probe or {}).get("inventory") or {}).get("nodes", {}).items() if n.get("present"))
        print(json.dumps({"present": present, "kind": spec["kind"], "device": device, "cdi": cdi["status"], "cdi_reason": cdi.get("reason"),
                          "runtime": runtime["status"], "runtime_reason": runtime.get("reason"),
                          "verdict": verdict["verdict"], "seen": seen, "swept": spec["swept"]}))
    finally:
        _cdi_spec.ensure_spec(run_id, state="absent", spec_dir=args["spec_dir"])
""" % DRIVER)


def _leftover_legacy_spec(root, run_id, owner):
    """What a crashed run of the old code left: kind gpuprobe.local/gpu, devices 0/1/all."""
    spec = _cdi_spec.build_spec(run_id, root=str(root), driver_root="/usr/local/nvidia", owner=owner)
    spec["kind"] = _cdi_spec.LEGACY_KIND
    return _cdi_spec.write_spec(spec, SPEC_DIR, run_id)


def test_two_concurrent_self_built_runs_beside_leftovers_and_a_foreign_spec(tmp_path, probe_image):  # noqa: F811
    root = synthetic_node(tmp_path / "node")
    tag = uuid.uuid4().hex[:8]
    runs = {"a": ("sa-%s" % tag, "0"), "b": ("sb-%s" % tag, "1")}
    # two leftovers of the SAME old kind and device names (a CDI conflict for anyone resolving that kind), from
    # a controller on another host (their owner cannot be checked here: they stay while the runs resolve) ...
    remote = {"host": "controller.example", "pid": 4242, "started": 1}
    kept = [_leftover_legacy_spec(root, "crashed1-%s" % tag, remote), _leftover_legacy_spec(root, "crashed2-%s" % tag, remote)]
    # ... and one whose owner (a process of this host) is gone: over, swept
    dead = [_leftover_legacy_spec(root, "crashed3-%s" % tag, {"host": _owner.this_host(), "pid": _dead_pid(), "started": 1})]
    legacy = kept + dead
    foreign = os.path.join(SPEC_DIR, "gpuprobe-foreign-%s.yaml" % tag)  # our file name and run-id env, another kind
    with open(foreign, "w") as f:
        yaml.safe_dump({"cdiVersion": "0.5.0", "kind": "vendor.example/gpu",
                        "containerEdits": {"env": ["GPUPROBE_RUN_ID=foreign-%s" % tag]},
                        "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/null"}]}}]}, f)
    procs = {}
    try:
        for key, (run_id, gpu) in runs.items():
            other = [k for k in runs if k != key][0]
            args = {"run_id": run_id, "gpu": gpu, "root": str(root), "spec_dir": SPEC_DIR, "image": IMAGE,
                    "ready": str(tmp_path / key), "wait_for": [str(tmp_path / key), str(tmp_path / other)]}
            procs[key] = subprocess.Popen([sys.executable, "-c", SELF_BUILT_RUN, json.dumps(sys.path), json.dumps(args)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_podman_env())
        results = {}
        for key, proc in procs.items():
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            results[key] = json.loads(out.strip().splitlines()[-1])
        for key, (run_id, gpu) in runs.items():
            r = results[key]
            assert r["kind"] == "gpuprobe.local/gpu-%s" % run_id
            assert r["cdi"] in ("PASS", "WARN"), r["cdi_reason"]
            assert r["runtime"] == "PASS", r["runtime_reason"]
            assert r["verdict"] not in ("FAILED_AT_CDI", "FAILED_AT_RUNTIME"), r
            # each container got its own run's GPU only, never the other run's
            assert "/dev/nvidia%s" % gpu in r["seen"] and "/dev/nvidia%s" % (1 - int(gpu)) not in r["seen"]
            assert not os.path.exists(os.path.join(SPEC_DIR, "gpuprobe-%s.yaml" % run_id))
            # while it resolved and ran: the other run's spec, the conflicting leftovers and the foreign spec were there
            other = [k for k in runs if k != key][0]
            assert set(["gpuprobe-%s.yaml" % runs[other][0], os.path.basename(foreign)]
                       + [os.path.basename(p) for p in kept]) <= set(r["present"]), r["present"]
        # control: the leftovers really conflict for their own (old, shared) kind; that is what used to turn a healthy
        # node FAILED_AT_CDI when every run used it
        control = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=["gpuprobe.local/gpu=0"],
                                    kinds=[_cdi_spec.LEGACY_KIND], host={"evidence": {"nvml": {"driver_version": DRIVER}}})
        assert control["status"] == "FAIL", control["reason"]
        print("control (old shared kind):", control["signature"], control["reason"])
        # the concurrent runs never swept each other, nor a leftover whose owner cannot be checked
        for r in results.values():
            assert not any(runs[k][0] in p for k in runs for p in r["swept"])
            assert not set(kept) & set(r["swept"])
        # the leftover whose owner is gone was swept (by a run's write or by this sweep); the kept ones and the
        # other kind's spec stay
        swept = _runtime_cleanup.cleanup(runtime="podman", max_age=KEEP_YOUNG)
        assert not os.path.exists(dead[0])
        assert all(os.path.exists(p) for p in kept) and not set(kept) & set(swept["specs"])
        assert os.path.exists(foreign) and foreign not in swept["specs"]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
        for path in legacy + [foreign]:
            if os.path.exists(path):
                os.unlink(path)


MODULE_LIKE = textwrap.dedent("""
    import json, os, sys
    sys.path[:0] = json.loads(sys.argv[1])
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import signals as _common_signals
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
    try:
        record, probe = _runtime_layer.record(json.loads(sys.argv[2]))
        print(json.dumps({"status": record["status"]}))
    except _common_signals.Interrupted as exc:
        print(json.dumps({"interrupted": exc.signum}))
        sys.exit(130)
""")


def _delayed_lab(lab):
    edits = lab.hanging_edits()  # the probe hangs loading libcuda, as a stuck driver would
    lab.write_spec(edits)
    return edits


def _start_probe(lab, edits, tmp_dir):
    os.makedirs(tmp_dir, exist_ok=True)
    params = {"run_id": lab.run_id, "image": IMAGE, "cdi_devices": [lab.device], "expected_edits": edits,
              "runtime": "podman", "timeout": 300, "compute": False}
    env = dict(_podman_env(), TMPDIR=tmp_dir)
    proc = subprocess.Popen([sys.executable, "-c", MODULE_LIKE, json.dumps(sys.path), json.dumps(params)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        states = _states(lab.run_id)
        if "running" in states.values():
            return proc
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the probe container never ran")


def _states(run_id):
    r = subprocess.run(["podman", "ps", "-a", "--filter", "label=gpuprobe.run=%s" % run_id, "--format", "json"],
                       env=_podman_env(), capture_output=True, text=True, check=True)
    return dict((c["Names"][0], c["State"]) for c in json.loads(r.stdout or "[]"))


class HungProbe(object):
    """A module-like process (runtime_facts in a fresh interpreter) whose probe hangs in a running container."""

    def __init__(self, tmp_path):
        self.lab = Lab(tmp_path / "lab")
        self.tmp_dir = str(tmp_path / "tmp")
        self.proc = _start_probe(self.lab, _delayed_lab(self.lab), self.tmp_dir)
        self.name = list(_states(self.lab.run_id))[0]

    def states(self):
        return _states(self.lab.run_id)


@pytest.fixture
def hung_probe(tmp_path, probe_image):  # noqa: F811
    probe = HungProbe(tmp_path)
    yield probe
    if probe.proc.poll() is None:
        probe.proc.kill()
    probe.lab.cleanup()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_interrupt_in_the_middle_of_a_probe_leaves_nothing(hung_probe, sig):
    t0 = time.monotonic()
    hung_probe.proc.send_signal(sig)
    out, err = hung_probe.proc.communicate(timeout=60)
    assert hung_probe.proc.returncode == 130 and json.loads(out) == {"interrupted": int(sig)}, err[-2000:]
    assert time.monotonic() - t0 < 30
    assert hung_probe.states() == {}, "the probe container outlived the interrupt"
    assert os.listdir(hung_probe.tmp_dir) == [], "the probe's temp dir outlived the interrupt"


def test_sigkill_in_the_middle_of_a_probe_is_found_by_cleanup(hung_probe):
    hung_probe.proc.kill()
    hung_probe.proc.wait(timeout=30)
    # SIGKILL runs no finally: the container lives on. (podman's client, whose reader is gone, sometimes starts a
    # stop of its --rm container that takes the 10 s grace period, since the probe ignores SIGTERM: "stopping")
    assert hung_probe.states() in ({hung_probe.name: "running"}, {hung_probe.name: "stopping"})
    assert len(os.listdir(hung_probe.tmp_dir)) == 1
    dry = _runtime_cleanup.cleanup(runtime="podman", specs=False, max_age=KEEP_YOUNG, tmp_dir=hung_probe.tmp_dir, check_mode=True)
    assert "podman:%s" % hung_probe.name in dry["containers"] and hung_probe.states()
    out = _runtime_cleanup.cleanup(runtime="podman", specs=False, max_age=KEEP_YOUNG, tmp_dir=hung_probe.tmp_dir)
    assert out["errors"] == [] and "podman:%s" % hung_probe.name in out["containers"]
    assert hung_probe.states() == {}
    assert out["probe_dirs"] and os.listdir(hung_probe.tmp_dir) == []


def test_cleanup_beside_a_live_probe_of_another_run_never_touches_it(hung_probe):
    lab, name = hung_probe.lab, hung_probe.name
    # another operator's sweep (no run id), and another run's own cleanup (a run id that is a prefix of ours)
    sweep = _runtime_cleanup.cleanup(runtime="podman", max_age=KEEP_YOUNG, tmp_dir=hung_probe.tmp_dir)
    own = _runtime_cleanup.cleanup(run_id=lab.run_id[:-1], runtime="podman", tmp_dir=hung_probe.tmp_dir)
    assert "podman:%s" % name not in sweep["containers"] + own["containers"]
    assert hung_probe.states() == {name: "running"}
    live = [x for x in sweep["live"] if x.get("container") == "podman:%s" % name]
    assert live and live[0]["run_id"] == lab.run_id and "is running" in live[0]["why"]
    assert os.path.exists(lab.spec_path)  # a test-written spec: not ours by its content, never swept
    assert len(os.listdir(hung_probe.tmp_dir)) == 1  # the live probe's temp dir is kept too
    hung_probe.proc.send_signal(signal.SIGINT)
    hung_probe.proc.communicate(timeout=60)
    assert hung_probe.states() == {}


def test_a_second_run_with_the_same_run_id_never_removes_the_first_ones_live_probe(hung_probe):
    """issue 19 (also-check): a cleanup given the run id (the caller's own run) removed every container of that id,
    also the live probe of another run given the same fixed verify_run_id."""
    name = hung_probe.name
    for check_mode in (True, False):
        out = _runtime_cleanup.cleanup(run_id=hung_probe.lab.run_id, runtime="podman", specs=False, tmp_dir=hung_probe.tmp_dir,
                                       check_mode=check_mode)
        assert "podman:%s" % name not in out["containers"], out
        live = [x for x in out["live"] if x.get("container") == "podman:%s" % name]
        assert live and "also used by the live run" in live[0]["why"], out
        assert hung_probe.states() == {name: "running"}
    hung_probe.proc.send_signal(signal.SIGINT)
    hung_probe.proc.communicate(timeout=60)
    assert hung_probe.states() == {}


def test_max_age_0_beside_a_live_probe_never_touches_it(hung_probe):
    """issue 19.4: with the age checked before liveness, max_age=0 (as docs/safety.md suggested) listed a running
    probe for removal and removed it. A live owner is never over, whatever the age."""
    name = hung_probe.name
    time.sleep(1.1)  # older than max_age=0 by any clock
    for check_mode in (True, False):
        out = _runtime_cleanup.cleanup(runtime="podman", specs=False, max_age=0, tmp_dir=hung_probe.tmp_dir, check_mode=check_mode)
        assert "podman:%s" % name not in out["containers"], out
        live = [x for x in out["live"] if x.get("container") == "podman:%s" % name]
        assert live and "is running" in live[0]["why"], out
        assert hung_probe.states() == {name: "running"}
        assert len(os.listdir(hung_probe.tmp_dir)) == 1
    hung_probe.proc.send_signal(signal.SIGINT)
    hung_probe.proc.communicate(timeout=60)
    assert hung_probe.states() == {}


PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Write a self-built spec (owner = this ansible-playbook)
      gpuprobe.layers.cdi_spec:
        run_id: {run_id}
        root: {root}
        driver_root: /usr/local/nvidia
        max_age: 1000000000
    - name: Probe that hangs
      gpuprobe.layers.runtime_facts:
        image: {image}
        run_id: {run_id}
        runtime: podman
        cdi_devices: [{device}]
        expected_edits: {edits}
        timeout: 300
        spec_dir: {spec_dir}
      environment:
        CONTAINERS_CONF: "{conf}"
        TMPDIR: "{tmp}"
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"])
def test_ansible_playbook_interrupted_during_a_probe(tmp_path, probe_image, sig):  # noqa: F811
    """Ctrl-C (SIGINT to the foreground process group) or SIGTERM to the group (a CI job cancelled): the
    module removes its container and this run's self-built spec (runtime_facts spec_dir), which the play's
    always-cleanup never gets to remove; nothing is left for a later sweep. SIGHUP (a closed terminal) and SIGKILL
    reach only ansible-playbook (Ansible's worker runs the module in a session of its own): the module sees its
    controller gone and does the same (it ran on to its timeout before)."""
    lab = Lab(tmp_path / "lab")
    root = synthetic_node(tmp_path / "node")
    tmp_dir = str(tmp_path / "tmp")
    os.makedirs(tmp_dir)
    spec_path = os.path.join(SPEC_DIR, "gpuprobe-%s.yaml" % lab.run_id)
    try:
        edits = _delayed_lab(lab)
        # the Lab writes its own spec file name; cdi_spec writes the run's spec beside it under another name
        lab.spec_path_self = spec_path
        os.rename(lab.spec_path, os.path.join(SPEC_DIR, "gpuprobe-lab-%s.yaml" % lab.run_id))
        lab.spec_path = os.path.join(SPEC_DIR, "gpuprobe-lab-%s.yaml" % lab.run_id)
        env = _podman_env()
        playbook = tmp_path / "play.yml"
        playbook.write_text(PLAYBOOK.format(run_id=lab.run_id, root=root, image=IMAGE, device=lab.device, spec_dir=SPEC_DIR,
                                            edits=json.dumps(edits), conf=env.get("CONTAINERS_CONF", ""), tmp=tmp_dir))
        env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
        # SIGHUP as a terminal gives it: default, whatever this suite was started under (nohup ignores it, and an
        # ignored signal stays ignored in every child: ansible-playbook would then outlive the "closed terminal")
        proc = subprocess.Popen(["ansible-playbook", "-i", "localhost,", str(playbook)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
        deadline = time.monotonic() + 180
        while "running" not in _states(lab.run_id).values():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
            time.sleep(0.2)
        info = _cdi_spec.spec_owner_info(spec_path)
        assert info["ours"] and info["owner"]["pid"] == proc.pid, info  # the controller, found among the ancestors
        os.killpg(proc.pid, sig)
        out, _err = proc.communicate(timeout=120)
        # ansible-playbook is gone at once; the module process finishes its cleanup on its own
        deadline = time.monotonic() + 30
        while (_states(lab.run_id) or os.listdir(tmp_dir)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _states(lab.run_id) == {}, "the probe container outlived the interrupted play:\n" + out[-3000:]
        assert os.listdir(tmp_dir) == []  # neither the probe's temp dir nor Ansible's module payload stays
        # the run's own spec went with the container, in the interrupted module's finally path
        assert not os.path.exists(spec_path), "the interrupted run's spec is still there:\n" + out[-3000:]
        assert os.path.exists(lab.spec_path)  # another file beside it (not this run's spec) is never touched
    finally:
        if os.path.exists(spec_path):
            os.unlink(spec_path)
        lab.cleanup()
