"""Issue 25 items 2 and 3 against the real podman of this machine (Debian 12: podman 4.3.1 + runc, no kubelet, a docker
CLI whose daemon is not running): ``runtime: auto`` chooses podman and says why; a spec that sits only in a directory
podman's containers.conf lists in ``cdi_spec_dirs`` is a cdi FAIL for podman (cdi.engine.config) before any container
starts, because podman before 5.5 does not hand that list to its CDI library - and real podman indeed refuses the
device ("unresolvable CDI devices"); the same spec in /var/run/cdi passes the check and podman injects it.
Specs use a kind unique to the run (/var/run/cdi, or a temporary dir) and are removed."""
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _node_inspect
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args

pytestmark = pytest.mark.integration
IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
SPEC = "cdiVersion: 0.5.0\nkind: %s\ndevices:\n- name: d0\n  containerEdits:\n    env: [GPUPROBE_ENGINE_TEST=%s]\n"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINES = os.path.realpath(os.environ.get("GPUPROBE_ENGINES_DIR", os.path.join(ROOT, ".build", "engines")))


def _no_lab_dockerd():
    """The engines lab's own dockerd stopped: test_engine_drills starts it for the session (its engine fixture starts
    it again for a later module that needs it), and auto rightly chooses a running docker daemon over podman."""
    if os.path.exists(os.path.join(ENGINES, "run", "dockerd", "pid")):
        r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "engines.sh"), "stop", "dockerd"], capture_output=True,
                           text=True, timeout=180, check=False, env=dict(os.environ, PYTHON=sys.executable))
        assert r.returncode == 0, r.stderr[-2000:]


def _dockerd_running():
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open("/proc/%s/comm" % pid) as fh:
                if fh.read().strip() == "dockerd":
                    return True
        except OSError:
            continue
    return False


def _podman_version():
    out = subprocess.run(["podman", "--version"], capture_output=True, text=True, check=False).stdout
    return out.split()[-1] if out.strip() else None


@pytest.fixture()
def lab(tmp_path, monkeypatch):
    if os.geteuid() != 0 or not shutil.which("podman") or not shutil.which("runc"):
        pytest.skip("needs root, podman and runc")
    if shutil.which("kubelet") or os.path.exists("/var/lib/kubelet/config.yaml"):
        pytest.skip("a kubelet is installed here: auto would (rightly) choose its CRI runtime")
    _no_lab_dockerd()
    if _dockerd_running() or shutil.which("docker") and subprocess.run(
            ["docker", "info"], capture_output=True, check=False, timeout=30).returncode == 0:
        pytest.skip("a docker daemon is running here: auto would (rightly) choose docker")
    if subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        pytest.skip("the probe image %s is not built (scripts/build-probe-image.sh)" % IMAGE)
    run = uuid.uuid4().hex[:10]
    kind = "gpuprobe-test-%s.example.com/engine" % run
    own_dir = tmp_path / "vendor-cdi"
    own_dir.mkdir()
    conf = tmp_path / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
                    'events_logger = "file"\ncdi_spec_dirs = ["%s", "/etc/cdi", "/var/run/cdi"]\n' % own_dir)
    monkeypatch.setenv("CONTAINERS_CONF", str(conf))
    written = []
    yield {"kind": kind, "run": run, "own_dir": str(own_dir), "written": written}
    for path in written:
        if os.path.lexists(path):
            os.unlink(path)


def _write(lab, directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "gpuprobe-test-%s.yaml" % lab["run"])
    with open(path, "w") as fh:
        fh.write(SPEC % (lab["kind"], lab["run"]))
    lab["written"].append(path)
    return path


def _inspect(lab, spec_dir, probe_follows=False):
    p = dict((name, spec.get("default")) for name, spec in _args.NODE_LAYERS_ARGSPEC.items())
    p.update(layers=["cdi"], nvml=False, cdi_spec_dirs=[spec_dir], cdi_kinds=[lab["kind"]],
             cdi_devices=["%s=d0" % lab["kind"]], runtime="auto")
    return _node_inspect.inspect(p, probe_follows=probe_follows)["records"]["cdi"]


def _podman_run(lab):
    proc = subprocess.run(["podman", "run", "--rm", "--network=none", "--device", "%s=d0" % lab["kind"], "--entrypoint",
                           "/usr/bin/python3", IMAGE, "-c", "import os; print(os.environ.get('GPUPROBE_ENGINE_TEST'))"],
                          capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout.strip(), proc.stderr


def _engine_checks(cdi):
    return [c for c in cdi["checks"] if c["id"] == "cdi.engine.config"]


def test_auto_chooses_podman_and_fails_a_spec_in_a_dir_podman_does_not_read(lab):
    _write(lab, lab["own_dir"])
    cdi = _inspect(lab, lab["own_dir"])
    [engine] = cdi["evidence"]["engines"]
    version = _podman_version()
    assert engine["name"] == "podman" and engine["version"] == version
    assert "no kubelet installed" in engine["selected_because"] and "podman %s is installed" % version in engine["selected_because"]
    assert engine["cdi_library"]["library"] and engine["label"].startswith("podman %s (" % version)
    cfg = engine["cdi_config"]
    assert cfg["configured_spec_dirs"] == [lab["own_dir"], "/etc/cdi", "/var/run/cdi"]
    [check] = _engine_checks(cdi)
    assert engine["usable"] is None  # an audit asks podman's version only
    # node_verify's inspect stage (the probe follows) detects podman in full (podman info) and judges the same
    full = _inspect(lab, lab["own_dir"], probe_follows=True)
    [full_engine] = full["evidence"]["engines"]
    assert full_engine["usable"] is True and full_engine["oci_runtime"].startswith("runc")
    assert (full_engine["version"], full_engine["cdi_config"], full_engine["selected_because"]) == (
        version, cfg, engine["selected_because"])
    assert [(c["status"], c["observed"]) for c in _engine_checks(full)] == [(check["status"], check["observed"])]
    major_minor = tuple(int(x) for x in version.split(".")[:2])
    if major_minor < (5, 5):
        # podman < 5.5 reads only the library's default dirs: the check FAILs and says why
        assert check["status"] == FAIL and cdi["status"] == FAIL
        assert "podman %s ignores the configured cdi_spec_dirs" % version in check["observed"]
        assert "which podman does not read" in check["observed"]
        # ... and the real podman agrees: the device does not resolve
        rc, _out, err = _podman_run(lab)
        assert rc != 0 and "unresolvable CDI devices" in err
    else:
        assert check["status"] == PASS
        rc, out, _err = _podman_run(lab)
        assert rc == 0 and out == lab["run"]


def test_spec_in_a_dir_podman_reads_passes_and_is_injected(lab):
    _write(lab, "/var/run/cdi")
    cdi = _inspect(lab, "/var/run/cdi")
    [check] = _engine_checks(cdi)
    assert check["status"] == PASS and "podman" in check["subject"] and check["runtime"] == "podman"
    rc, out, err = _podman_run(lab)
    assert rc == 0 and out == lab["run"], err
