"""CDI injection through the runtimes the workloads use: containerd 1.7 over the CRI (the kubelet's path) and
dockerd 26 with its CDI feature, both Debian 13's, started on private sockets by scripts/engines.sh.

A real CDI spec in /var/run/cdi (a kind unique to the test session) gives a synthetic char device (mknod), an
env variable and a bind mount of a synthetic file; the container prints what it sees (stat of the node, its env,
the file, /proc/self/mountinfo) and the test reads it from the CRI log file or docker's output. Without the CDI
device the same container sees none of it (the control). Cleanup leaves no sandbox or container.

Skipped only when the engines were not fetched (scripts/engines.sh fetch; scripts/bootstrap.sh --test does it).
"""
import json
import os
import socket
import stat
import subprocess
import sys
import time
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINES = os.environ.get("GPUPROBE_ENGINES_DIR", os.path.join(ROOT, ".build", "engines"))
SCRIPT = os.path.join(ROOT, "scripts", "engines.sh")
IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
CRI_SOCKET = os.path.join(ENGINES, "run", "containerd", "containerd.sock")
DOCKER = os.path.join(ENGINES, "docker-cli", "usr", "bin", "docker")
DOCKER_HOST = "unix://" + os.path.join(ENGINES, "run", "dockerd", "docker.sock")
SPEC_DIR = "/var/run/cdi"
DEV_IN_CONTAINER = "/dev/gpuprobe-engines0"
FILE_IN_CONTAINER = "/usr/lib/gpuprobe-engines/libsynthetic.so.1"
LABEL = "gpuprobe.run"

# what the container reports: printed as one JSON line, read back from the CRI log or docker's stdout
PROBE = r"""
import json, os, stat
out = {"env": os.environ.get("GPUPROBE_ENGINES_TOKEN")}
try:
    st = os.stat(%(dev)r)
    out["dev"] = {"char": stat.S_ISCHR(st.st_mode), "major": os.major(st.st_rdev), "minor": os.minor(st.st_rdev)}
except OSError as exc:
    out["dev"] = str(exc)
try:
    out["file"] = open(%(file)r).read()
except OSError as exc:
    out["file"] = str(exc)
out["mounted"] = any(line.split()[4] == %(file)r for line in open("/proc/self/mountinfo"))
out["uid"] = [os.getuid(), os.getgid()]
print(json.dumps(out))
""" % {"dev": DEV_IN_CONTAINER, "file": FILE_IN_CONTAINER}


def _fetched(name):
    return os.path.isfile(os.path.join(ENGINES, name, ".deb"))


def _engines(*args, timeout=300):
    return subprocess.run(["bash", SCRIPT] + list(args), capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module", autouse=True)
def needs_engines():
    if os.geteuid() != 0:
        pytest.skip("needs root (engines run containers)")
    missing = [n for n in ("containerd", "docker.io", "docker-cli", "golang-github-kubernetes-cri-api-dev") if not _fetched(n)]
    if missing:
        pytest.skip("engines not fetched (%s): run scripts/engines.sh fetch" % ", ".join(missing))


@pytest.fixture(scope="module")
def run_id():
    return "eng" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="module")
def cdi_spec(run_id, tmp_path_factory):
    """A spec of a kind unique to this module: device d0 = a synthetic char node + env + a bind-mounted file."""
    yaml = pytest.importorskip("yaml")
    d = tmp_path_factory.mktemp("engines-host")
    node = d / "node0"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(241, 17))
    lib = d / "libsynthetic.so.1"
    lib.write_text("synthetic " + run_id)
    kind = "gpuprobe-%s.example/dev" % run_id
    spec = {"cdiVersion": "0.6.0", "kind": kind, "devices": [{"name": "d0", "containerEdits": {
        "deviceNodes": [{"path": DEV_IN_CONTAINER, "hostPath": str(node), "type": "c", "major": 241, "minor": 17}],
        "env": ["GPUPROBE_ENGINES_TOKEN=" + run_id],
        "mounts": [{"hostPath": str(lib), "containerPath": FILE_IN_CONTAINER, "options": ["ro", "nosuid", "bind"]}]}}]}
    os.makedirs(SPEC_DIR, exist_ok=True)
    path = os.path.join(SPEC_DIR, "gpuprobe-%s.yaml" % run_id)
    with open(path, "w") as f:
        yaml.safe_dump(spec, f)
    try:
        yield {"device": kind + "=d0", "token": run_id, "file": "synthetic " + run_id}
    finally:
        os.unlink(path)


def _assert_stopped(engine):
    """stop leaves no process, no pid file and no mount of this engine under its private run directory."""
    d = os.path.join(ENGINES, "run", engine)
    assert not os.path.exists(os.path.join(d, "pid"))
    with open("/proc/self/mountinfo") as f:
        assert [line for line in f if " %s/" % d in line] == []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        assert d + "/" not in cmdline, (pid, cmdline)


def _assert_injected(seen, spec):
    assert seen["dev"] == {"char": True, "major": 241, "minor": 17}, seen
    assert seen["env"] == spec["token"], seen
    assert seen["file"] == spec["file"], seen
    assert seen["mounted"] is True, seen


def _assert_not_injected(seen):
    assert "No such file" in seen["dev"], seen
    assert seen["env"] is None, seen
    assert "No such file" in seen["file"], seen
    assert seen["mounted"] is False, seen


# ---- containerd over the CRI -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def descriptor():
    """The CRI API descriptor set, built from the fetched api.proto by this interpreter's grpcio-tools."""
    r = subprocess.run(["bash", SCRIPT, "stubs"], capture_output=True, text=True, timeout=120, check=False,
                       env=dict(os.environ, PYTHON=sys.executable))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture(scope="module")
def cri(descriptor):
    r = _engines("start", "containerd")
    try:
        assert r.returncode == 0, r.stderr
        client = _cri.CRIClient("unix://" + CRI_SOCKET, descriptor)
        try:
            yield client
        finally:
            client.close()
    finally:
        r = _engines("stop", "containerd", timeout=120)
        assert r.returncode == 0, r.stderr
        _assert_stopped("containerd")


def _cri_run(cri, spec, run_id, tmp_path, cdi_via, user=None):
    """One sandbox and one container running the probe script, mounted read-only as the runtime adapter does."""
    labels = {LABEL: run_id}
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    script.chmod(0o644)
    tmp_path.chmod(0o755)
    config = cri.sandbox_config("gpuprobe-%s" % uuid.uuid4().hex[:8], str(uuid.uuid4()), labels=labels,
                                log_directory=str(tmp_path / "logs"))
    sandbox = cri.run_pod_sandbox(config, timeout=60)
    try:
        cid = cri.create_container(sandbox, config, "probe", IMAGE, ["/usr/bin/python3", "/gpuprobe/probe.py"],
                                   cdi_devices=[spec["device"]] if cdi_via else [], cdi_via=cdi_via, labels=labels,
                                   log_path="probe.log", mounts=[(str(script), "/gpuprobe/probe.py")], user=user,
                                   timeout=60)
        cri.start_container(cid, timeout=60)
        status = cri.wait_container(cid, 60)
        assert status["state"] == _cri.STATE_EXITED, status
        stdout, stderr = cri.read_log(status["log_path"])
        assert status["exit_code"] == 0, (status, stderr)
        return json.loads(stdout)
    finally:
        cri.remove_sandbox_tree(sandbox, timeout=60)


def test_cri_call_on_a_silent_socket_times_out(descriptor, tmp_path):
    """A runtime that accepts the connection and never answers: the call ends at its timeout, as a CRIError."""
    path = str(tmp_path / "silent.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        with _cri.CRIClient(path, descriptor, timeout=0.5) as client:
            t0 = time.monotonic()
            with pytest.raises(_cri.CRIError) as err:
                client.version()
            assert time.monotonic() - t0 < 5
    assert err.value.timeout, err.value


def test_cri_version(cri):
    v = cri.version()
    assert v["runtime_name"] == "containerd"
    assert v["runtime_version"].startswith("1.7."), v
    assert v["runtime_api_version"] == "v1"
    assert cri.image_present(IMAGE)


@pytest.mark.parametrize("cdi_via,user", [(("field",), None), (("annotations",), None), (("field", "annotations"), (1000, 1000))],
                         ids=["CDIDevices-field", "cdi.k8s.io-annotation", "both-as-1000"])
def test_cri_container_gets_cdi_device(cri, cdi_spec, run_id, tmp_path, cdi_via, user):
    seen = _cri_run(cri, cdi_spec, run_id, tmp_path, cdi_via, user)
    _assert_injected(seen, cdi_spec)
    assert seen["uid"] == list(user or (0, 0))
    assert cri.list_pod_sandboxes({LABEL: run_id}) == []
    assert cri.list_containers({LABEL: run_id}) == []


def test_cri_container_without_cdi_device_sees_none(cri, cdi_spec, run_id, tmp_path):
    _assert_not_injected(_cri_run(cri, cdi_spec, run_id, tmp_path, ()))
    assert cri.list_pod_sandboxes({LABEL: run_id}) == []


# containerd 1.7.24~ds1 (Debian 13) links Debian's CDI 0.8.0, built in GOPATH mode with Go 1.24 (issue 32): it injects
# a cdiVersion 0.8.0 spec and one with an annotation key 0.8 never validates; it refuses a 0.4.0 spec whose first device
# uses hostPath (its minimum-version check sees every device: no loop-variable aliasing); the cdi layer reads each so
READINGS = [
    ("spec_0.8.0", "0.8.0", {}, [], True),
    ("bad_annotation_key", "0.6.0", {"annotations": {"bad key!": "x"}}, [], True),
    ("hostpath_first_device_0.4.0", "0.4.0", {}, [{"name": "d1", "containerEdits": {"env": ["OTHER=1"]}}], False),
    ("permissions_none", "0.5.0", {"permissions": "none"}, [], False),
]


@pytest.mark.parametrize("member, version, extra, more, injected", READINGS, ids=[m[0] for m in READINGS])
def test_cri_injects_what_the_cdi_layer_reads_for_containerd(cri, run_id, tmp_path, member, version, extra, more, injected):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer  # pylint: disable=import-outside-toplevel
    yaml = pytest.importorskip("yaml")
    runtime_version = cri.version()["runtime_version"]
    if runtime_version != "1.7.24~ds1":
        pytest.skip("recorded for Debian 13's containerd 1.7.24~ds1; this is %s" % runtime_version)
    node = tmp_path / "node0"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(241, 17))
    lib = tmp_path / "libsynthetic.so.1"
    lib.write_text("synthetic " + run_id)
    kind = "gpuprobe-%s-%s.example/rd" % (run_id, member.replace("_", "-").replace(".", "-"))
    dev_node = {"path": DEV_IN_CONTAINER, "hostPath": str(node), "type": "c", "major": 241, "minor": 17}
    if "permissions" in extra:
        dev_node["permissions"] = extra["permissions"]
    spec = {"cdiVersion": version, "kind": kind, "devices": [{"name": "d0", "containerEdits": {
        "deviceNodes": [dev_node], "env": ["GPUPROBE_ENGINES_TOKEN=" + run_id],
        "mounts": [{"hostPath": str(lib), "containerPath": FILE_IN_CONTAINER, "options": ["ro", "nosuid", "bind"]}]}}] + more}
    if "annotations" in extra:
        spec["annotations"] = extra["annotations"]
    path = os.path.join(SPEC_DIR, "gpuprobe-%s-%s.yaml" % (run_id, member))
    with open(path, "w") as f:
        yaml.safe_dump(spec, f)
    try:
        device = kind + "=d0"
        tools = {"containerd": {"path": "/usr/bin/containerd", "version": runtime_version}}
        host = {"layer": "host", "evidence": {"tools_probed": True, "tools": tools}}
        rec = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[device], kinds=[kind], host=host)
        resolve = [c["status"] for c in rec["checks"] if c["id"] == "cdi.resolve.device" and c["subject"] == device]
        assert resolve == ["PASS" if injected else "FAIL"], rec["checks"]
        assert rec["evidence"]["readings"][0]["reading"] == "v0.8.0+go1.22"
        if injected:
            _assert_injected(_cri_run(cri, {"device": device, "token": run_id, "file": "synthetic " + run_id}, run_id, tmp_path,
                                      ("field",)), {"token": run_id, "file": "synthetic " + run_id})
        else:
            with pytest.raises(Exception) as exc:
                _cri_run(cri, {"device": device}, run_id, tmp_path, ("field",))
            assert "unresolvable CDI devices" in str(exc.value), exc.value
    finally:
        os.unlink(path)
        assert cri.list_pod_sandboxes({LABEL: run_id}) == []


# ---- dockerd -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def docker():
    r = _engines("start", "dockerd")
    try:
        assert r.returncode == 0, r.stderr

        def call(*args, timeout=60):
            return subprocess.run([DOCKER, "-H", DOCKER_HOST] + list(args), capture_output=True, text=True,
                                  timeout=timeout, check=False)
        yield call
    finally:
        r = _engines("stop", "dockerd", timeout=120)
        assert r.returncode == 0, r.stderr
        _assert_stopped("dockerd")


def test_docker_cdi_feature(docker):
    r = docker("info", "--format", "{{json .CDISpecDirs}} {{.ServerVersion}}")
    assert r.returncode == 0, r.stderr
    dirs, version = r.stdout.split()
    assert SPEC_DIR in json.loads(dirs)
    assert version.startswith("26."), version


@pytest.mark.parametrize("with_device", [True, False], ids=["device", "control"])
def test_docker_run_device(docker, cdi_spec, run_id, with_device):
    argv = ["run", "--rm", "--network", "host", "--label", "%s=%s" % (LABEL, run_id)]
    if with_device:
        argv += ["--device", cdi_spec["device"]]
    r = docker(*(argv + [IMAGE, "/usr/bin/python3", "-c", PROBE]))
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    if with_device:
        _assert_injected(seen, cdi_spec)
    else:
        _assert_not_injected(seen)
    r = docker("ps", "-aq", "--filter", "label=%s=%s" % (LABEL, run_id))
    assert r.returncode == 0 and r.stdout.strip() == "", r
