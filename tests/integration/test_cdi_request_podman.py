"""Issue 18.7 against the real runtime: podman (its vendored CDI library) starts a container beside an invalid spec
file of the requested kind that provides none of the requested devices, and refuses one whose device only the
invalid file names. The cdi layer must say the same: a WARN naming the file, or a FAIL. Real podman + runc, specs in
/var/run/cdi under a kind unique to this run, removed afterwards."""
import os
import shutil
import subprocess
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, WARN

pytestmark = pytest.mark.integration
IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
SPEC_DIR = "/var/run/cdi"

# (rule check, an invalid file of the kind whose only device is 'other')
INVALID = [
    ("cdi.spec.parse", "cdiVersion: 0.5.0\nkind: %(kind)s\ndevices: [\n"),
    ("cdi.spec.schema", "cdiVersion: 0.5.0\nkind: %(kind)s\nbogus: 1\ndevices:\n- name: other\n  containerEdits:\n    env: [O=1]\n"),
    ("cdi.spec.version", "cdiVersion: 9.9.9\nkind: %(kind)s\ndevices:\n- name: other\n  containerEdits:\n    env: [O=1]\n"),
    ("cdi.spec.devices", "cdiVersion: 0.5.0\nkind: %(kind)s\ndevices:\n- name: other\n  containerEdits:\n    env: [O=1]\n"
                         "- name: other\n  containerEdits:\n    env: [P=1]\n"),
    ("cdi.spec.edits", "cdiVersion: 0.5.0\nkind: %(kind)s\ndevices:\n- name: other\n  containerEdits:\n    env: [NOEQUALS]\n"),
]


@pytest.fixture()
def run_kind():
    if os.geteuid() != 0 or not shutil.which("podman") or not shutil.which("runc"):
        pytest.skip("needs root, podman and runc")
    if subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        pytest.skip("the probe image %s is not built (scripts/build-probe-image.sh)" % IMAGE)
    run = uuid.uuid4().hex[:10]
    kind = "gpuprobe-test-%s.example.com/cc" % run
    written = []
    yield kind, run, written
    for path in written:
        if os.path.lexists(path):
            os.unlink(path)


def _write(written, name, text):
    os.makedirs(SPEC_DIR, exist_ok=True)
    path = os.path.join(SPEC_DIR, name)
    with open(path, "w") as f:
        f.write(text)
    written.append(path)
    return path


def _podman(device):
    env = dict(os.environ)
    if os.environ.get("GPUPROBE_TEST_CONTAINERS_CONF"):  # the test containers.conf of scripts/bootstrap.sh (ulimits)
        env["CONTAINERS_CONF"] = os.environ["GPUPROBE_TEST_CONTAINERS_CONF"]
    proc = subprocess.run(["podman", "run", "--rm", "--network=none", "--device", device, "--entrypoint", "/usr/bin/python3", IMAGE, "-c", "pass"],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("check, text", INVALID)
def test_the_cdi_layer_judges_an_invalid_file_as_podman_does(run_kind, check, text):
    kind, run, written = run_kind
    _write(written, "gpuprobe-test-%s-a-good.yaml" % run,
           "cdiVersion: 0.5.0\nkind: %s\ndevices:\n- name: x\n  containerEdits:\n    env: [X=1]\n" % kind)
    bad = _write(written, "gpuprobe-test-%s-b-bad.yaml" % run, text % {"kind": kind})

    rc, err = _podman(kind + "=x")
    assert rc == 0, err  # the runtime drops the invalid file and starts the container
    rec = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[kind + "=x"], kinds=[kind])
    (got,) = [c for c in rec["checks"] if c["id"] == check and c["subject"] == bad]
    assert got["status"] == WARN, got
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.resolve.device"] == ["PASS"]

    rc, err = _podman(kind + "=other")
    assert rc != 0 and "unresolvable CDI devices" in err, err
    rec = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[kind + "=other"], kinds=[kind])
    (got,) = [c for c in rec["checks"] if c["id"] == check and c["subject"] == bad]
    assert got["status"] == FAIL and "%s=other does not resolve" % kind in got["observed"], got
