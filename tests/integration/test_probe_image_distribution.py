"""The probe image reaches an air-gapped node: real ``podman save`` to a tar, real ``podman load`` into an
EMPTY image store (a node that never saw the image), under a new name, through scripts/probe-image.sh.

The node is simulated by a storage.conf of its own (CONTAINERS_STORAGE_CONF, vfs driver, graphroot in a
temporary directory): podman and the runtime layer see only what was loaded there. Before the load the
runtime layer FAILs with ``runtime.start.image_missing`` and a hint that names the three ways to bring the
image (build, pull by digest, load a saved tar); after the load the same call starts the probe container.
"""
import os
import shutil
import subprocess
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record

yaml = pytest.importorskip("yaml")

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "probe-image.sh")
SOURCE_IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
SPEC_DIR = "/var/run/cdi"


def _script(*args, env=None, check=True):
    r = subprocess.run(["bash", SCRIPT] + list(args), env=env, capture_output=True, text=True, timeout=300, check=False)
    if check and r.returncode != 0:
        raise AssertionError("probe-image.sh %s: rc %s\n%s\n%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


@pytest.fixture(scope="module")
def env():
    if os.geteuid() != 0 or not shutil.which("podman") or not shutil.which("runc"):
        pytest.skip("needs root, podman and runc")
    e = dict(os.environ)
    if os.environ.get("GPUPROBE_TEST_CONTAINERS_CONF"):
        e["CONTAINERS_CONF"] = os.environ["GPUPROBE_TEST_CONTAINERS_CONF"]
    e.pop("CONTAINERS_STORAGE_CONF", None)
    if subprocess.run(["podman", "image", "exists", SOURCE_IMAGE], env=e, check=False).returncode != 0:
        _script("build", SOURCE_IMAGE, env=e)
    return e


@pytest.fixture
def air_gapped_node(env, tmp_path, monkeypatch):
    """The environment of a node with an empty image store of its own."""
    store = tmp_path / "store"
    conf = tmp_path / "storage.conf"
    conf.write_text('[storage]\ndriver = "vfs"\ngraphroot = "%s/graph"\nrunroot = "%s/run"\n' % (store, store))
    node = dict(env, CONTAINERS_STORAGE_CONF=str(conf))
    for key in ("CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF"):
        if key in node:
            monkeypatch.setenv(key, node[key])  # the runtime layer's podman calls inherit the process environment
    yield node
    subprocess.run(["podman", "rmi", "-a", "-f"], env=node, capture_output=True, check=False, timeout=120)


@pytest.fixture
def cdi_device():
    """A CDI device of a kind unique to this test (an env edit only: the image is what is under test)."""
    run_id = "img" + uuid.uuid4().hex[:10]
    kind = "gpuprobe.local/%s" % run_id
    path = os.path.join(SPEC_DIR, "gpuprobe-%s.yaml" % run_id)
    os.makedirs(SPEC_DIR, exist_ok=True)
    with open(path, "w") as f:
        yaml.safe_dump({"cdiVersion": "0.5.0", "kind": kind,
                        "devices": [{"name": "probe", "containerEdits": {"env": ["GPUPROBE_IMAGE_TEST=1"]}}]}, f)
    yield run_id, "%s=probe" % kind
    os.unlink(path)


def _runtime_record(run_id, image, device):
    params = {"run_id": run_id, "image": image, "cdi_devices": [device], "expected_edits": {"env": ["GPUPROBE_IMAGE_TEST=1"]},
              "compute": False, "timeout": 60, "runtime": "podman"}
    record, _probe = _runtime_layer.record(params)
    assert validate_record(record) == []
    return record


def _check(record, check_id):
    found = [c for c in record["checks"] if c["id"] == check_id]
    assert len(found) == 1, record["checks"]
    return found[0]


def test_save_then_load_on_an_empty_node_under_a_new_name(env, air_gapped_node, cdi_device, tmp_path):
    run_id, device = cdi_device
    new_name = "localhost/gpuprobe-probe:airgap-%s" % run_id
    source_id = _script("id", SOURCE_IMAGE, env=env).stdout.strip()
    assert source_id.startswith("sha256:") and len(source_id) == 71

    # 1. on the connected machine: save to a tar, with its checksum beside it
    tar = str(tmp_path / "gpuprobe-probe.tar")
    _script("save", SOURCE_IMAGE, tar, env=env)
    assert os.path.getsize(tar) > 1024 * 1024 and os.path.isfile(tar + ".sha256")

    # 2. on the node, before the load: the image is absent, and the runtime layer says how to bring it
    assert subprocess.run(["podman", "image", "exists", SOURCE_IMAGE], env=air_gapped_node, check=False).returncode == 1
    missing = _script("check", new_name, env=air_gapped_node, check=False)
    assert missing.returncode == 1 and "podman load" in missing.stderr and "digest" in missing.stderr
    before = _runtime_record(run_id, new_name, device)
    assert before["status"] == "FAIL" and before["signature"] == "runtime.start.image_missing", before["reason"]
    hint = _check(before, "runtime.container.started")["hint"]
    for way in ("scripts/build-probe-image.sh", "digest", "podman load", "docs/probe-image.md"):
        assert way in hint, hint

    # 3. the load, under a new name; the image id survives save/load unchanged (what a pin by id relies on)
    loaded = _script("load", tar, new_name, env=air_gapped_node)
    assert "loaded %s (%s)" % (new_name, source_id) in loaded.stdout
    assert _script("check", new_name, source_id, env=air_gapped_node).returncode == 0
    wrong = _script("check", new_name, "sha256:" + "0" * 64, env=air_gapped_node, check=False)
    assert wrong.returncode == 1 and "expected sha256:" in wrong.stderr

    # 4. the same runtime call now starts the probe container from the loaded image, with the CDI device
    after = _runtime_record(run_id, new_name, device)
    started = _check(after, "runtime.container.started")
    assert started["status"] == "PASS", (started, after["reason"])
    assert after["evidence"]["container"]["image"] == new_name
    assert after["evidence"]["container"]["cleanup"]["error"] is None


def test_a_corrupted_tar_is_refused_before_podman_sees_it(env, tmp_path):
    tar = str(tmp_path / "probe.tar")
    _script("save", SOURCE_IMAGE, tar, env=env)
    with open(tar, "ab") as f:
        f.write(b"truncated copy")
    r = _script("load", tar, env=env, check=False)
    assert r.returncode != 0 and "FAILED" in r.stdout + r.stderr and "Loaded image" not in r.stdout
