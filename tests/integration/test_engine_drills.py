"""The drill set through every engine (issue 25): podman 4.3.1, containerd 1.7.24 over the CRI (the kubelet's path) and
dockerd 26.1.5, each REAL, with synthetic char devices (mknod), real library files and a REAL CDI spec in
/var/run/cdi. Every drill is one test parametrized over the engines, with ONE expected outcome: the runtime
records' statuses, signatures and points_to, and the node verdicts, must agree across engines.

For containerd and docker, podman (and every other engine's CLI) is hidden from PATH while the layer runs: a
containerd-only node (nothing on PATH at all: the CRI is a socket) and a docker-only node (the docker CLI alone).
containerd and dockerd run on private sockets (scripts/engines.sh start), skipped when not fetched.

Also per engine: the fake driver (identity lies, and its control: COMPUTE_VERIFIED), attribution to the spec,
cleanup (probe_cleanup finds our leftovers and never touches another's), SIGTERM during the probe leaves nothing,
SIGKILL's leftovers are found, two runs at once.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

import verdictlab  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from test_attribution_podman import _node_edits, _records as _attribution_records, _undeclared
from test_fake_driver_podman import DRIVER, _build as _build_driver, _records as _fake_driver_records
from test_probe_failures_podman import CRASHES, _build
from test_runtime_podman import GPU_A, IMAGE, LIB_IN_CONTAINER, Lab, _checks, _podman_env, expected_gpus, idle_host

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import signals as _common_signals
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _runtime_cleanup
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import adapters as _runtime_adapters
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import run as _run
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINES = os.environ.get("GPUPROBE_ENGINES_DIR", os.path.join(ROOT, ".build", "engines"))
SCRIPT = os.path.join(ROOT, "scripts", "engines.sh")
CRI_ENDPOINT = "unix://" + os.path.join(ENGINES, "run", "containerd", "containerd.sock")
DOCKER_HOST = "unix://" + os.path.join(ENGINES, "run", "dockerd", "docker.sock")
DOCKER_BIN = os.path.join(ENGINES, "docker-cli", "usr", "bin")
KEEP_YOUNG = 10 ** 9  # sweeps remove only what a gone owner left, never by age (other runs share this machine)
ENGINE_NAMES = ["podman", "containerd", "docker"]


def _sh(*args, timeout=300):
    return subprocess.run(["bash", SCRIPT] + list(args), capture_output=True, text=True, timeout=timeout, check=False,
                          env=dict(os.environ, PYTHON=sys.executable))


class Engine(object):
    """One engine as the layer reaches it: the runtime_facts options, the PATH of a node that has only it."""

    def __init__(self, name, path_dirs, params, env=None):
        self.name, self.path_dirs, self.params, self.env = name, path_dirs, params, env or {}
        self.info = None

    @contextlib.contextmanager
    def only(self):
        """PATH (and the engine's env) of a node where this engine is the only one: podman hidden from PATH."""
        saved = dict(os.environ)
        os.environ["PATH"] = os.pathsep.join(self.path_dirs) if self.path_dirs is not None else saved["PATH"]
        os.environ.update(self.env)
        try:
            if self.name != "podman":
                assert _run.which("podman") is None
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def adapter(self):
        with self.only():
            info = _runtime_adapters.detect_runtime(self.name, endpoint=self.params.get("runtime_endpoint"),
                                                    descriptor=self.params.get("cri_descriptor"))
        assert info["usable"], info
        return _runtime_adapters.adapter(info)

    def cleanup(self, **kwargs):
        with self.only():
            return _runtime_cleanup.cleanup(runtime=self.name, endpoint=self.params.get("runtime_endpoint"),
                                            descriptor=self.params.get("cri_descriptor"), **kwargs)


def _start(name, config):
    """Start an engine for the session; one this session started (not one already running) is stopped when the
    session ends, whichever test modules ran (tests/integration/test_engines.py stops them too)."""
    if not os.path.isfile(os.path.join(ENGINES, name, ".deb")):
        pytest.skip("engines not fetched (%s): run scripts/engines.sh fetch" % name)
    daemon = "containerd" if name == "containerd" else "dockerd"
    r = _sh("start", daemon)
    assert r.returncode == 0, r.stderr
    if "already running" not in r.stderr + r.stdout:
        config.add_cleanup(lambda: _sh("stop", daemon, timeout=120))


@pytest.fixture(scope="module", params=ENGINE_NAMES)
def engine(request, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    name = request.param
    if name == "podman":
        if not _run.which("podman"):
            pytest.skip("needs podman")
        yield Engine("podman", None, {"runtime": "podman"}, {"CONTAINERS_CONF": _podman_env().get("CONTAINERS_CONF", "")})
        return
    if name == "containerd":
        r = _sh("stubs", timeout=120)
        if r.returncode != 0:
            pytest.skip("no CRI descriptor: %s" % r.stderr[-300:])
        descriptor = r.stdout.strip()
        _start("containerd", request.config)
        empty = str(tmp_path_factory.mktemp("no-engine-on-path"))
        eng = Engine("containerd", [empty], {"runtime": "containerd", "runtime_endpoint": CRI_ENDPOINT,
                                             "cri_descriptor": descriptor})
    else:
        _start("docker.io", request.config)
        eng = Engine("docker", [DOCKER_BIN], {"runtime": "docker", "runtime_endpoint": DOCKER_HOST})
    yield eng
    # the engines stay up for the other modules of the session; tests/integration/test_engines.py stops them


class EngineLab(Lab):
    """test_runtime_podman's synthetic GPU, run through ``engine``; leftovers are listed through the engine."""

    def __init__(self, base, engine):
        Lab.__init__(self, base)
        self.engine = engine
        self.adapter = engine.adapter()

    def leftovers(self):
        with self.engine.only():
            return [c["name"] for c in self.adapter.list_ours(self.run_id)]

    def cleanup(self):
        if os.path.exists(self.spec_path):
            os.unlink(self.spec_path)
        for name in self.leftovers():
            with self.engine.only():
                self.adapter.remove(name)

    def run(self, expected, compute=True, **extra):
        params = {"run_id": self.run_id, "image": IMAGE, "cdi_devices": [self.device], "expected_edits": expected,
                  "compute": compute, "timeout": 60}
        params.update(self.engine.params)
        params.update(extra)
        with self.engine.only():
            record, probe = _runtime_layer.record(params)
        assert validate_record(record) == []
        if params["cdi_devices"]:  # without a device nothing, not even the engine, is looked at
            assert record["evidence"]["engine"]["name"] == self.engine.name
            assert record["versions"]["runtime"].startswith(self.engine.name + " ")
            cleanup = record["evidence"]["container"]["cleanup"]
            assert cleanup["rc"] == 0 and cleanup["error"] is None, cleanup  # removed, or already gone: no error
        assert self.leftovers() == [], "the probe container (or sandbox) was not removed"
        return record, probe


@pytest.fixture
def lab(tmp_path, engine):  # pylint: disable=redefined-outer-name
    lab_ = EngineLab(tmp_path, engine)
    yield lab_
    lab_.cleanup()


def _outcome(record):
    return (record["status"], record.get("signature"), record.get("points_to"))


# ---- the drills: one expected outcome, every engine ------------------------------------------------------------

def test_full_spec_runtime_pass_compute_fails_at_dlopen(lab):
    edits = lab.full_edits()
    lab.write_spec(edits)
    record, probe = lab.run(edits, host=idle_host())
    assert _outcome(record) == ("PASS", None, None), record["reason"]
    assert [c["status"] for c in _checks(record, "runtime.device_node.open")] == ["PASS", "PASS"]
    assert [c["status"] for c in _checks(record, "runtime.mount.present")] == ["PASS"]
    assert [c["observed"] for c in _checks(record, "runtime.env.value")] == ["1"]
    assert probe["executed"] and probe["rc"] == 0 and probe["complete"]
    compute = _compute_layer.record(probe, record, host_record=idle_host(), host_control=False,
                                    expected_gpus=expected_gpus(GPU_A))
    assert _outcome(compute)[:2] == ("FAIL", "compute.dlopen.libcuda")
    v = node_verdict({"runtime": record, "compute": compute})
    assert (v["verdict"], v["signature"]) == ("FAILED_AT_COMPUTE", "compute.dlopen.libcuda")


def test_removed_mount(lab):
    edits = lab.full_edits()
    lab.write_spec(dict(edits, mounts=[]))
    record, _probe = lab.run(edits, compute=False)
    assert _outcome(record) == ("FAIL", "runtime.mount.present", "runtime")
    assert [c["subject"] for c in _checks(record, "runtime.mount.present", "FAIL")] == [LIB_IN_CONTAINER]


def test_removed_node(lab):
    edits = lab.full_edits()
    lab.write_spec(dict(edits, deviceNodes=edits["deviceNodes"][:1]))
    record, _probe = lab.run(edits, compute=False)
    assert _outcome(record) == ("FAIL", "runtime.device_node.present", "runtime")
    assert [c["subject"] for c in _checks(record, "runtime.device_node.present", "FAIL")] == ["/dev/nvidiactl"]


def test_cgroup_permission_r_denies_open(lab):
    edits = lab.full_edits()
    edits["deviceNodes"].append(lab.node("nvidia1", 195, 0, permissions="r"))
    lab.write_spec(edits)
    record, _probe = lab.run(edits, compute=False)
    assert _outcome(record) == ("FAIL", "runtime.device_node.open.EPERM", "runtime")
    assert [(c["subject"], c["observed"][:5]) for c in _checks(record, "runtime.device_node.open", "FAIL")] == [
        ("/dev/nvidia1", "EPERM")]


def test_missing_host_path_never_starts(lab):
    edits = lab.absent_mount_edits()
    lab.write_spec(edits)
    record, probe = lab.run(edits)
    assert _outcome(record) == ("FAIL", "runtime.start.hostpath_missing", "cdi")
    assert probe is None
    assert "absent.so.1" in _checks(record, "runtime.container.started", "FAIL")[0]["observed"]
    v = node_verdict({"runtime": record})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", "cdi")


def test_unresolvable_device(lab):
    record, probe = lab.run({}, compute=False)  # no spec at all
    assert _outcome(record) == ("FAIL", "runtime.start.cdi_unresolvable", "cdi") and probe is None


def test_missing_image(lab):
    edits = lab.full_edits()
    lab.write_spec(edits)
    record, _probe = lab.run(edits, compute=False, image="localhost/gpuprobe-absent:none")
    assert _outcome(record) == ("FAIL", "runtime.start.image_missing", "runtime")


def test_no_device_requested(lab):
    record, probe = lab.run({}, cdi_devices=[])
    assert _outcome(record) == ("NOT_RUN", None, None) and probe is None
    assert record["reason"] == "no CDI device requested (cdi_devices is empty)"


def test_no_gpu_in_the_container(lab, tmp_path):
    """A libcuda that answers and lists no GPU: the expected GPU is missing, never PASS."""
    src = tmp_path / "cuda.c"
    src.write_text("int cuInit(unsigned f){return 0;}\nint cuDriverGetVersion(int*v){*v=12080;return 0;}\n"
                   "int cuDeviceGetCount(int*c){*c=0;return 0;}\n"
                   "int cuGetErrorName(int e,const char**s){*s=\"CUDA_ERROR_NO_DEVICE\";return 0;}\n")
    lib = os.path.join(lab.lib, "libcuda-none.so.1")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, str(src)], check=True, capture_output=True)
    edits = lab.full_edits()
    edits["mounts"][0]["hostPath"] = lib
    lab.write_spec(edits)
    record, probe = lab.run(edits, host=idle_host(GPU_A))
    assert _outcome(record) == ("PASS", None, None), record["reason"]
    compute = _compute_layer.record(probe, record, host_record=idle_host(GPU_A), host_control=False,
                                    expected_gpus=expected_gpus(GPU_A))
    assert [(r["status"], r["signature"]) for r in compute["evidence"]["gpus"]] == [("FAIL", "compute.gpu.missing")]


def test_timeout_kills_and_removes(lab):
    edits = lab.hanging_edits()
    lab.write_spec(edits)
    record, _probe = lab.run(edits, compute=False, timeout=3)
    assert record["status"] == "FAIL" and record["evidence"]["container"]["timed_out"] is True
    assert record["signature"] in ("runtime.start.timeout", "runtime.probe.inventory")


@pytest.mark.parametrize("name,source,said", CRASHES[:1], ids=[c[0] for c in CRASHES[:1]])
def test_a_crash_names_its_step_and_signal(lab, name, source, said):  # pylint: disable=unused-argument
    edits = lab.full_edits()
    edits["mounts"][0]["hostPath"] = _build(lab.lib, "libcuda-crash.so.1", source)
    lab.write_spec(edits)
    runtime, probe = lab.run(edits, host=idle_host(GPU_A))
    assert runtime["status"] == "PASS" and probe["timed_out"] is False
    compute = _compute_layer.record(probe, runtime, host_record=idle_host(GPU_A), host_control=False,
                                    expected_gpus=expected_gpus(GPU_A))
    assert compute["signature"] == "compute.probe.crashed" and said in compute["reason"]


def test_spec_without_nvidiactl_points_at_cdi(lab):
    if not verdictlab.have_tools():
        pytest.skip("needs root, cc and unshare")
    edits = _node_edits(lab)
    edits["deviceNodes"] = [n for n in edits["deviceNodes"] if n["path"] != "/dev/nvidiactl"]
    records = _attribution_records(lab, edits)
    assert _outcome(records["runtime"]) == ("PASS", None, None)
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_COMPUTE", "compute.cuda.CUDA_ERROR_NO_DEVICE", "cdi")
    assert _undeclared(lab)[0][:2] == ("FAILED_AT_CDI", "cdi.trust.accounted")  # the lab's driver, undeclared


def test_an_impostor_libcuda_is_never_verified(lab):
    """Identity lies: a libcuda that answers every call and 'verifies' its kernel, but is not the driver root's."""
    _build_driver(os.path.join(lab.base, "driver", "lib64", "libcuda.so.%s" % DRIVER), "driver-root")
    fake = _build_driver(os.path.join(lab.base, "impostor", "libcuda.so.1"), "impostor")
    records, _probe = _fake_driver_records(lab, fake)
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_COMPUTE", "compute.driver.binding", "cdi")
    assert _undeclared(lab)[0][:2] == ("FAILED_AT_CDI", "cdi.trust.accounted")  # the impostor, undeclared


def test_the_driver_roots_own_file_is_compute_verified(lab):
    """The control of the identity drill: the driver root's own file, NVML's version -> COMPUTE_VERIFIED, through
    this engine's own CDI injection."""
    driver = _build_driver(os.path.join(lab.base, "driver", "lib64", "libcuda.so.%s" % DRIVER), "driver-root")
    records, probe = _fake_driver_records(lab, driver)
    v = node_verdict(records)
    assert v["verdict"] == "COMPUTE_VERIFIED", v
    assert probe["runtime"].startswith(lab.engine.name + " ")
    assert _undeclared(lab)[0][:2] == ("FAILED_AT_CDI", "cdi.trust.accounted")  # the lab's driver, undeclared


# ---- cleanup and interrupts, per engine ----------------------------------------------------------------------

MODULE_LIKE = """
import json, os, sys
sys.path[:0] = json.loads(sys.argv[1])
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import signals as _common_signals
try:
    record, probe = _runtime_layer.record(json.loads(sys.argv[2]))
    print(json.dumps({"status": record["status"], "signature": record.get("signature"), "reason": record["reason"]}))
except _common_signals.Interrupted as exc:
    print(json.dumps({"interrupted": exc.signum}))
    sys.exit(130)
"""


def _spawn(lab_, edits, tmp_dir, timeout=300):
    os.makedirs(tmp_dir, exist_ok=True)
    params = dict(lab_.engine.params, run_id=lab_.run_id, image=IMAGE, cdi_devices=[lab_.device], expected_edits=edits,
                  timeout=timeout, compute=False)
    with lab_.engine.only():
        env = dict(os.environ, TMPDIR=tmp_dir)
    return subprocess.Popen([sys.executable, "-c", MODULE_LIKE, json.dumps(sys.path), json.dumps(params)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _hung(lab_, tmp_dir):
    """A module-like process whose probe hangs (libcuda's constructor sleeps) in a running container."""
    edits = lab_.hanging_edits()
    lab_.write_spec(edits)
    proc = _spawn(lab_, edits, tmp_dir)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with lab_.engine.only():
            ours = lab_.adapter.list_ours(lab_.run_id)
        if ours and all(c["state"] == "running" for c in ours) and _running_probe(lab_):
            return proc, ours[0]["name"]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the probe never ran")


def _running_probe(lab_):
    """The probe itself runs (CRI: the container in our sandbox is running; the CLI engines: the container is)."""
    if lab_.engine.name not in ("containerd", "crio"):
        return True
    with _cri.CRIClient(lab_.engine.params["runtime_endpoint"], lab_.engine.params["cri_descriptor"]) as client:
        return any(c.get("state") == _cri.STATE_RUNNING for c in client.list_containers({"gpuprobe.run": lab_.run_id}))


def test_sigterm_during_the_probe_leaves_nothing(lab, tmp_path):
    tmp_dir = str(tmp_path / "tmp")
    proc, _name = _hung(lab, tmp_dir)
    try:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and json.loads(out) == {"interrupted": int(signal.SIGTERM)}, err[-2000:]
    assert lab.leftovers() == [], "the probe outlived the interrupt"
    assert os.listdir(tmp_dir) == [], "the probe's temp dir outlived the interrupt"


def test_sigkill_leftovers_are_found_by_cleanup_and_a_live_probe_is_never_touched(lab, tmp_path):
    tmp_dir = str(tmp_path / "tmp")
    proc, name = _hung(lab, tmp_dir)
    try:
        # a live probe of this run: another operator's sweep lists it as live and leaves it
        sweep = lab.engine.cleanup(specs=False, max_age=KEEP_YOUNG, tmp_dir=tmp_dir)
        assert "%s:%s" % (lab.engine.name, name) not in sweep["containers"] and sweep["errors"] == [], sweep
        assert [x["why"] for x in sweep["live"] if x.get("container") == "%s:%s" % (lab.engine.name, name)]
        assert lab.leftovers() == [name]
        proc.kill()  # SIGKILL runs no finally: the probe lives on
        proc.wait(timeout=30)
        assert lab.leftovers() == [name]
        out = lab.engine.cleanup(specs=False, max_age=KEEP_YOUNG, tmp_dir=tmp_dir)
        assert out["errors"] == [] and "%s:%s" % (lab.engine.name, name) in out["containers"], out
        assert lab.leftovers() == []
        assert out["probe_dirs"] and os.listdir(tmp_dir) == []
    finally:
        if proc.poll() is None:
            proc.kill()


def test_cleanup_never_touches_what_is_not_ours(lab, engine):  # pylint: disable=redefined-outer-name
    """A sandbox/container of someone else (no gpuprobe.run label, or a label but not our name) stays."""
    other = "other-%s" % uuid.uuid4().hex[:8]
    removers = []
    if engine.name == "containerd":
        client = _cri.CRIClient(engine.params["runtime_endpoint"], engine.params["cri_descriptor"])
        ids = []
        for labels in ({"app": "someone-else"}, {"gpuprobe.run": lab.run_id}):  # the second: our label, not our name
            cfg = client.sandbox_config(other, str(uuid.uuid4()), namespace="default", labels=labels)
            ids.append(client.run_pod_sandbox(cfg, timeout=60))
        removers.append(lambda: [client.remove_sandbox_tree(i, timeout=60) for i in ids] and client.close())

        def present():
            return sorted(i for i in ids if any(s["id"] == i for s in client.list_pod_sandboxes()))
        before = present()
    else:
        cli = {"podman": ["podman"], "docker": [os.path.join(DOCKER_BIN, "docker"), "-H", DOCKER_HOST]}[engine.name]
        env = dict(os.environ, **engine.env)
        for n, label in ((other, "app=someone-else"), (other + "-b", "gpuprobe.run=%s" % lab.run_id)):
            subprocess.run(cli + ["create", "--name", n, "--label", label, IMAGE, "python3"], env=env, check=True,
                           capture_output=True)
        removers.append(lambda: subprocess.run(cli + ["rm", "-f", other, other + "-b"], env=env, check=False,
                                               capture_output=True))

        def present():
            r = subprocess.run(cli + ["ps", "-a", "--format", "{{.Names}}"], env=env, capture_output=True, text=True,
                               check=True)
            return sorted(n for n in r.stdout.split() if n.startswith(other))
        before = present()
    try:
        assert len(before) == 2
        for kwargs in ({"run_id": lab.run_id}, {"max_age": 0}):
            out = lab.engine.cleanup(specs=False, **kwargs)
            assert out["errors"] == [] and not [c for c in out["containers"] if other in c], out
        assert present() == before
    finally:
        for remove in removers:
            remove()


def test_two_runs_at_once(engine, tmp_path):  # pylint: disable=redefined-outer-name
    labs = [EngineLab(tmp_path / str(i), engine) for i in range(2)]
    try:
        procs = []
        for i, lab_ in enumerate(labs):
            edits = lab_.full_edits()
            lab_.write_spec(edits)
            procs.append(_spawn(lab_, edits, str(tmp_path / ("tmp%d" % i)), timeout=120))
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err[-2000:]
            results.append(json.loads(out))
        assert [r["status"] for r in results] == ["PASS", "PASS"], results
        assert [lab_.leftovers() for lab_ in labs] == [[], []]
    finally:
        for lab_ in labs:
            lab_.cleanup()


def test_runtime_facts_module_through_the_engine(lab, capsys):
    """The module itself (argument spec, runtime_endpoint, cri_descriptor) through this engine only."""
    from ansible.module_utils.testing import patch_module_args
    from ansible_collections.gpuprobe.layers.plugins.modules import runtime_facts

    edits = lab.full_edits()
    lab.write_spec(edits)
    args = dict(lab.engine.params, image=IMAGE, run_id=lab.run_id, cdi_devices=[lab.device], expected_edits=edits)
    with lab.engine.only(), patch_module_args(args):
        with pytest.raises(SystemExit):
            runtime_facts.main()
    out = json.loads(capsys.readouterr().out)
    record = out["ansible_facts"]["gpuprobe_runtime"]
    assert record["status"] == "PASS", record["reason"]
    assert record["evidence"]["engine"]["name"] == lab.engine.name
    assert lab.leftovers() == []


def test_auto_on_a_node_with_only_this_engine_selects_it(lab):
    """runtime auto: a containerd-only node given its CRI endpoint (no kubelet here), a docker-only node (DOCKER_HOST,
    the docker CLI alone on PATH), a podman node: each selects its one engine, says why, and verifies the same."""
    edits = lab.full_edits()
    lab.write_spec(edits)
    auto = {"runtime": "auto"}
    if lab.engine.name != "docker":
        # a running docker daemon is rightly auto's choice: the lab's own dockerd, left up by an earlier module of the
        # session (test_docker_context), is stopped first (this module's docker cases start it again)
        from test_engine_selection_podman import _no_lab_dockerd  # pylint: disable=import-outside-toplevel
        _no_lab_dockerd()
    if lab.engine.name == "containerd":
        auto.update(runtime_endpoint=lab.engine.params["runtime_endpoint"], cri_descriptor=lab.engine.params["cri_descriptor"])
    env = {"DOCKER_HOST": lab.engine.params["runtime_endpoint"]} if lab.engine.name == "docker" else {}
    saved = dict(lab.engine.env)
    lab.engine.env.update(env)
    try:
        record, _probe = lab.run(edits, compute=False, **dict(auto, runtime_endpoint=auto.get("runtime_endpoint")))
    finally:
        lab.engine.env.clear()
        lab.engine.env.update(saved)
    assert record["status"] == "PASS", record["reason"]
    engine = record["evidence"]["engine"]
    assert engine["name"] == lab.engine.name and engine["selected_because"], engine
