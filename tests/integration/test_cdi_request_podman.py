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
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN

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


# A foreign spec (nothing requested from it) with a one-character vendor: the CDI library checks the cdiVersion before
# the name (pkg/cdi/spec.go Spec.validate), so podman drops a file whose version it cannot read and starts the
# container; with a version it reads, the name check panics podman (0.5.2: ValidateVendorName, slice bounds out of
# range). podman 4.3.1 reads only the library's default dirs, so the spec dir is bound over /var/run/cdi in a mount
# namespace of this podman call alone: a spec that panics the library never meets another podman run on the machine.
PRIVATE_CDI = 'mkdir -p /var/run/cdi && mount --bind "$0" /var/run/cdi && exec "$@"'


def _podman_private(spec_dir, device):
    if not shutil.which("unshare"):
        pytest.skip("needs unshare (util-linux)")
    env = dict(os.environ)
    if os.environ.get("GPUPROBE_TEST_CONTAINERS_CONF"):
        env["CONTAINERS_CONF"] = os.environ["GPUPROBE_TEST_CONTAINERS_CONF"]
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", PRIVATE_CDI, spec_dir,
                           "podman", "run", "--rm", "--network=none", "--device", device, "--entrypoint", "/usr/bin/python3",
                           IMAGE, "-c", "pass"], capture_output=True, text=True, timeout=120, check=False, env=env)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("version", ["0.6.0", "9.9.9", "0.5.0"])
def test_a_foreign_one_character_vendor_fails_the_layer_only_where_podman_panics(run_kind, tmp_path, version):
    kind, run, _written = run_kind
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    (spec_dir / "a-good.yaml").write_text("cdiVersion: 0.5.0\nkind: %s\ndevices:\n- name: x\n  containerEdits:\n    env: [X=1]\n" % kind)
    foreign = spec_dir / "b-foreign.yaml"
    foreign.write_text("cdiVersion: %s\nkind: g/gpuprobe-test-%s\ndevices:\n- name: d\n  containerEdits:\n    env: [F=1]\n" % (version, run))
    podman_version = subprocess.run(["podman", "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]

    rc, err = _podman_private(str(spec_dir), kind + "=x")
    panicked = "panic: runtime error: slice bounds out of range" in err
    assert rc == 0 or panicked, err
    if podman_version == "4.3.1":  # Debian 12: CDI 0.5.2 reads cdiVersion up to 0.5.0
        assert panicked is (version == "0.5.0"), err
        assert not panicked or "cdi.ValidateVendorName" in err, err
    # the requested device's env X=1 is the test's own, no generator's: declared trusted (cdi.trust.accounted)
    rec = _cdi_layer.record(spec_dirs=[str(spec_dir)], discover_runtime_dirs_=False, devices=[kind + "=x"], kinds=[kind],
                            engines=[{"name": "podman", "version": podman_version}],
                            trusted_edits=[{"env": "X", "why": "the test's device"}])
    (got,) = [c for c in rec["checks"] if c["id"] == "cdi.spec.library_panic" and c["subject"] == str(foreign)]
    assert got["status"] == (FAIL if panicked else PASS), got
    assert (rec["status"] == FAIL) is panicked, rec["reason"]
    undeclared = _cdi_layer.record(spec_dirs=[str(spec_dir)], discover_runtime_dirs_=False, devices=[kind + "=x"],
                                   kinds=[kind], engines=[{"name": "podman", "version": podman_version}])
    assert [c["observed"].split(":")[0] for c in undeclared["checks"] if c["id"] == "cdi.trust.accounted"] == ["env X=1"]
    assert undeclared["status"] == FAIL
    if panicked and podman_version == "4.3.1":
        assert "library's ValidateVendorName panic" in got["observed"], got  # the function that panicked in podman
