"""CDI fidelity against the real runtime (issue 18, CDI fidelity): what podman's vendored CDI library writes into the
OCI spec (config.json of a created container) and where it refuses to create one, next to what the cdi layer
predicts. Synthetic char devices (mknod 1:3, the null device's number) under a temporary dir; specs in
/var/run/cdi under a kind unique to this run, removed afterwards, as are the containers."""
import json
import os
import shutil
import subprocess
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS

pytestmark = pytest.mark.integration
IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
SPEC_DIR = "/var/run/cdi"
STORAGE = "/var/lib/containers/storage/overlay-containers"


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
    state = {"run": run, "kind": "gpuprobe-test-%s.example.com/cc" % run, "nodes": str(nodes), "env": env,
             "spec": os.path.join(SPEC_DIR, "gpuprobe-test-%s.yaml" % run), "containers": []}
    yield state
    for cid in state["containers"]:
        subprocess.run(["podman", "rm", "-f", cid], env=env, capture_output=True, check=False)
    if os.path.lexists(state["spec"]):
        os.unlink(state["spec"])


def _create(lab, spec_text, name="d", host=None):
    """(rc, stderr of create or init, the OCI config podman wrote or None, the cdi layer's record) for device <kind>=<name>;
    ``host``: the host record the cdi layer reads the runtime from (its spec reading follows the runtime's CDI library)."""
    os.makedirs(SPEC_DIR, exist_ok=True)
    with open(lab["spec"], "w") as f:
        f.write(spec_text % {"kind": lab["kind"], "n": lab["nodes"], "run": lab["run"]})
    proc = subprocess.run(["podman", "create", "--network=none", "--device", "%s=%s" % (lab["kind"], name), "--entrypoint", "/usr/bin/python3",
                           IMAGE, "-c", "pass"], env=lab["env"], capture_output=True, text=True, timeout=120, check=False)
    config = None
    if proc.returncode == 0:
        # podman 4.3 generates the OCI spec, and injects the CDI devices, when the container is initialised
        cid = proc.stdout.strip()
        lab["containers"].append(cid)
        proc = subprocess.run(["podman", "init", cid], env=lab["env"], capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode == 0:
            with open(os.path.join(STORAGE, cid, "userdata", "config.json")) as f:
                config = json.load(f)
    rec = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=["%s=%s" % (lab["kind"], name)], kinds=[lab["kind"]],
                            host=host)
    return proc.returncode, proc.stderr, config, rec


HEAD = "cdiVersion: 0.5.0\nkind: %(kind)s\n"


@pytest.mark.parametrize("spec_level, device_level", [("r", "w"), ("r", "rwm"), ("m", "r")])
def test_a_node_given_twice_leaves_both_cgroup_rules_in_the_oci_spec(lab, spec_level, device_level):
    text = HEAD + ("containerEdits:\n  deviceNodes: [{path: /dev/gx, hostPath: %%(n)s/n0, permissions: %s}]\n"
                   "devices:\n- name: d\n  containerEdits:\n    deviceNodes: [{path: /dev/gx, hostPath: %%(n)s/n0, permissions: %s}]\n"
                   % (spec_level, device_level))
    rc, err, config, rec = _create(lab, text)
    assert rc == 0, err
    oci = [d["access"] for d in config["linux"]["resources"]["devices"] if (d.get("type"), d.get("major"), d.get("minor")) == ("c", 1, 3)]
    ours = [r["access"] for r in rec["evidence"]["cgroup_rules"] if (r["major"], r["minor"]) == (1, 3)]
    assert oci == ours == [spec_level, device_level]
    (node,) = [n for n in rec["evidence"]["expected_edits"]["deviceNodes"] if n["path"] == "/dev/gx"]
    assert node["permissions"] == "".join(c for c in "rwm" if c in spec_level + device_level)
    assert [d["path"] for d in config["linux"]["devices"]].count("/dev/gx") == 1


def test_a_u_node_gets_no_cgroup_rule(lab):
    rc, err, config, rec = _create(lab, HEAD + "devices:\n- name: d\n  containerEdits:\n"
                                   "    deviceNodes: [{path: /dev/gx, hostPath: %(n)s/n0, type: u, major: 1, minor: 3}]\n")
    assert rc == 0, err
    assert [d for d in config["linux"]["resources"]["devices"] if (d.get("major"), d.get("minor")) == (1, 3)] == []
    assert rec["evidence"]["cgroup_rules"] == []
    (node,) = [n for n in rec["evidence"]["expected_edits"]["deviceNodes"] if n["path"] == "/dev/gx"]
    assert node["permissions"] == ""


@pytest.mark.parametrize("text, words", [
    # (b) an entry replaced later at the same path is still stat'ed: its missing host path fails the container
    (HEAD + "containerEdits:\n  deviceNodes: [{path: /dev/gx, hostPath: %(n)s/gone}]\n"
     "devices:\n- name: d\n  containerEdits:\n    deviceNodes: [{path: /dev/gx, hostPath: %(n)s/n0}]\n", "failed to stat CDI host device"),
    (HEAD + "devices:\n- name: d\n  containerEdits:\n    deviceNodes: [{path: /dev/gx, hostPath: %(n)s/gone}, {path: /dev/gx, hostPath: %(n)s/n0}]\n",
     "failed to stat CDI host device"),
    # (c) a declared type without a major is compared with the host node's
    (HEAD + "devices:\n- name: d\n  containerEdits:\n    deviceNodes: [{path: /dev/gx, hostPath: %(n)s/n0, type: b}]\n", "host type mismatch (b, c)"),
    (HEAD + "devices:\n- name: d\n  containerEdits:\n    deviceNodes: [{path: /dev/gx, hostPath: %(n)s/n0, type: u}]\n", "host type mismatch (u, c)"),
])
def test_podman_refuses_what_the_cdi_layer_predicts(lab, text, words):
    rc, err, _config, rec = _create(lab, text)
    assert rc != 0 and words in err, err
    failed = [c for c in rec["checks"] if c["id"] == "cdi.inject.device_node" and c["status"] == FAIL]
    assert len(failed) == 1 and words in failed[0]["observed"], failed


@pytest.mark.parametrize("scalar, name", [("yes", "true"), ("1:30", "1:30"), ("0o17", "15"), ("2001-12-14", "2001-12-14"), ("1e3", "1000"),
                                          ("'yes'", "yes")])
def test_a_string_field_is_the_text_the_library_decodes(lab, scalar, name):
    """(d) the device name 'yes' is the device 'true' for podman's library and for the cdi layer; '1:30' stays '1:30'."""
    text = HEAD + "devices:\n- name: %s\n  containerEdits:\n    deviceNodes: [{path: /dev/gx, hostPath: %%(n)s/n0}]\n" % scalar
    os.makedirs(SPEC_DIR, exist_ok=True)
    with open(lab["spec"], "w") as f:
        f.write(text % {"kind": lab["kind"], "n": lab["nodes"]})
    rec = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[lab["kind"] + "=" + name], kinds=[lab["kind"]])
    assert rec["evidence"]["requested_devices"] == [lab["kind"] + "=" + name]
    proc = subprocess.run(["podman", "create", "--network=none", "--device", lab["kind"] + "=" + name, "--entrypoint", "/usr/bin/python3",
                           IMAGE, "-c", "pass"], env=lab["env"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lab["containers"].append(proc.stdout.strip())
    init = subprocess.run(["podman", "init", proc.stdout.strip()], env=lab["env"], capture_output=True, text=True, timeout=120, check=False)
    assert init.returncode == 0, init.stderr
    if scalar != name and not scalar.startswith("'"):  # the name as written is not a device for the runtime, nor for the layer
        rec = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[lab["kind"] + "=" + scalar], kinds=[lab["kind"]])
        assert rec["evidence"]["requested_devices"] == [] and rec["evidence"]["unresolved"][0]["reason"] == "unresolvable CDI device"
        proc = subprocess.run(["podman", "create", "--network=none", "--device", lab["kind"] + "=" + scalar, "--entrypoint",
                               "/usr/bin/python3", IMAGE, "-c", "pass"], env=lab["env"], capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode == 0:
            lab["containers"].append(proc.stdout.strip())
            proc = subprocess.run(["podman", "init", proc.stdout.strip()], env=lab["env"], capture_output=True, text=True, timeout=120,
                                  check=False)
        assert proc.returncode != 0 and "unresolvable CDI devices" in proc.stderr, proc.stderr


# ---- issue 32: the spec read as this podman's own CDI library version reads it (4.3.1: CDI 0.5.2, readings.py)

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


@pytest.mark.parametrize("member, text, name, injected", MEMBERS, ids=[m[0] for m in MEMBERS])
def test_podman_injects_what_the_cdi_layer_reads_for_it(lab, member, text, name, injected):
    version = _host.parse_tool_version(subprocess.run(["podman", "--version"], capture_output=True, text=True, check=False).stdout)
    if version != "4.3.1":
        pytest.skip("the members are recorded for podman 4.3.1 (CDI 0.5.2); this is podman %s" % version)
    host = {"layer": "host", "evidence": {"tools_probed": True, "tools": {"podman": {"path": shutil.which("podman"), "version": version}}}}
    _rc, stderr, config, rec = _create(lab, text, name, host)
    device = "%s=%s" % (lab["kind"], name)
    resolve = [c["status"] for c in rec["checks"] if c["id"] == "cdi.resolve.device" and c["subject"] == device]
    assert (config is not None) == injected, stderr
    assert resolve == [PASS if injected else FAIL], rec["checks"]
    assert rec["evidence"]["readings"][0]["reading"] == "v0.5.2"
    if injected:
        assert "GPUPROBE_READ=%s" % lab["run"] in config["process"]["env"]
        ours = [m["containerPath"] for m in rec["evidence"]["expected_edits"]["mounts"]]
        theirs = [m["destination"] for m in config["mounts"] if m["destination"] in ours]
        assert theirs == ours  # the same order (0.5.2 sorts by depth, then path)
    else:
        assert "unresolvable CDI devices" in stderr
