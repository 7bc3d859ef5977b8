"""The issue's members through the REAL podman of this machine (Debian 12's podman 4.3.1 vendors CDI 0.5.2): whether
podman injects the device (its OCI config after ``podman init``) or refuses it, next to the cdi layer's reading of the
same spec for this podman (readings.py: the library version its release links). Specs in /var/run/cdi under a kind
unique to this run, removed afterwards, as are the containers."""
import json
import os
import shutil
import subprocess
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils import _cdi, _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._result import FAIL, PASS

pytestmark = pytest.mark.integration
IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
SPEC_DIR = "/var/run/cdi"
STORAGE = "/var/lib/containers/storage/overlay-containers"

MEMBERS = [
    # (id, spec text, device name, injected by podman 4.3.1 / CDI 0.5.2)
    ("zero_hostpath_0.3.0", "cdiVersion: 0.3.0\nkind: %(kind)s\ndevices:\n- name: \"0\"\n  containerEdits:\n"
     "    env: [GPUPROBE_READ=%(run)s]\n    deviceNodes: [{path: /dev/gx, hostPath: %(n)s/n0}]\n", "0", True),
    ("permissions_none", "cdiVersion: 0.5.0\nkind: %(kind)s\ndevices:\n- name: d\n  containerEdits:\n"
     "    env: [GPUPROBE_READ=%(run)s]\n    deviceNodes: [{path: /dev/gx, hostPath: %(n)s/n0, permissions: none}]\n", "d", False),
    ("spec_0.8.0", "cdiVersion: 0.8.0\nkind: %(kind)s\ndevices:\n- name: d\n  containerEdits: {env: [GPUPROBE_READ=%(run)s]}\n", "d", False),
    ("annotations", "cdiVersion: 0.6.0\nkind: %(kind)s\nannotations: {\"bad key!\": x}\ndevices:\n- name: d\n"
     "  containerEdits: {env: [GPUPROBE_READ=%(run)s]}\n", "d", False),
    ("no_devices_and_hook_relative", "cdiVersion: 0.5.0\nkind: %(kind)s\ndevices:\n- name: d\n  containerEdits:\n"
     "    env: [GPUPROBE_READ=%(run)s]\n    hooks: [{hookName: poststop, path: rel/hook}]\n", "d", True),
    ("mount_order", "cdiVersion: 0.5.0\nkind: %(kind)s\ndevices:\n- name: d\n  containerEdits:\n    env: [GPUPROBE_READ=%(run)s]\n"
     "    mounts: [{hostPath: %(n)s, containerPath: /zz, options: [rbind]}, {hostPath: %(n)s, containerPath: /aa, options: [rbind]}]\n", "d", True),
]


@pytest.fixture()
def lab(tmp_path):
    if os.geteuid() != 0 or not shutil.which("podman") or not shutil.which("runc"):
        pytest.skip("needs root, podman and runc")
    env = dict(os.environ)
    if os.environ.get("GPUPROBE_TEST_CONTAINERS_CONF"):
        env["CONTAINERS_CONF"] = os.environ["GPUPROBE_TEST_CONTAINERS_CONF"]
    if subprocess.run(["podman", "image", "exists", IMAGE], env=env, check=False).returncode != 0:
        pytest.skip("the probe image %s is not built (scripts/build-probe-image.sh)" % IMAGE)
    run = uuid.uuid4().hex[:10]
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    os.mknod(str(nodes / "n0"), 0o666 | 0o020000, os.makedev(1, 3))
    state = {"run": run, "kind": "gpuprobe-test-%s.example.com/rd" % run, "nodes": str(nodes), "env": env,
             "spec": os.path.join(SPEC_DIR, "gpuprobe-test-%s.yaml" % run), "containers": []}
    yield state
    for cid in state["containers"]:
        subprocess.run(["podman", "rm", "-f", cid], env=env, capture_output=True, check=False)
    if os.path.lexists(state["spec"]):
        os.unlink(state["spec"])


@pytest.mark.parametrize("member, text, name, injected", MEMBERS, ids=[m[0] for m in MEMBERS])
def test_podman_injects_what_the_cdi_layer_reads_for_it(lab, member, text, name, injected):
    version = _host.parse_tool_version(subprocess.run(["podman", "--version"], capture_output=True, text=True, check=False).stdout)
    if version != "4.3.1":
        pytest.skip("the members are recorded for podman 4.3.1 (CDI 0.5.2); this is podman %s" % version)
    os.makedirs(SPEC_DIR, exist_ok=True)
    with open(lab["spec"], "w") as f:
        f.write(text % {"kind": lab["kind"], "n": lab["nodes"], "run": lab["run"]})
    device = "%s=%s" % (lab["kind"], name)
    proc = subprocess.run(["podman", "create", "--network=none", "--device", device, "--entrypoint", "/usr/bin/python3", IMAGE, "-c", "pass"],
                          env=lab["env"], capture_output=True, text=True, timeout=120, check=False)
    config = None
    if proc.returncode == 0:
        cid = proc.stdout.strip()
        lab["containers"].append(cid)
        proc = subprocess.run(["podman", "init", cid], env=lab["env"], capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode == 0:
            with open(os.path.join(STORAGE, cid, "userdata", "config.json")) as f:
                config = json.load(f)
    host = {"layer": "host", "evidence": {"tools_probed": True, "tools": {"podman": {"path": shutil.which("podman"), "version": version}}}}
    rec = _cdi.cdi_layer(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[device], kinds=[lab["kind"]], host=host)
    resolve = [c["status"] for c in rec["checks"] if c["id"] == "cdi.resolve.device" and c["subject"] == device]
    assert (config is not None) == injected, proc.stderr
    assert resolve == [PASS if injected else FAIL], rec["checks"]
    assert rec["evidence"]["readings"][0]["reading"] == "v0.5.2"
    if injected:
        assert "GPUPROBE_READ=%s" % lab["run"] in config["process"]["env"]
        ours = [m["containerPath"] for m in rec["evidence"]["expected_edits"]["mounts"]]
        theirs = [m["destination"] for m in config["mounts"] if m["destination"] in ours]
        assert theirs == ours  # the same order (0.5.2 sorts by depth, then path)
    else:
        assert "unresolvable CDI devices" in proc.stderr
