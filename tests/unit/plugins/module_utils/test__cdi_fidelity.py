"""CDI fidelity (issue 18, 'CDI fidelity'): what the reference library does at injection and when decoding, modelled
by the cdi layer. Sources (container-device-interface v1.1.0 and main @ 05ae4b5, sigs.k8s.io/yaml v1.4.0-v1.6.0):

(a) pkg/cdi/container-edits.go ``Apply``: every visited node of type b/c gets ``AddLinuxResourcesDevice``; a node
    replaced later at the same path is removed (``RemoveDevice``), its cgroup rule is not: the access is the union;
(b) ``Apply`` runs ``fillMissingInfo`` on every node entry, also one replaced later: a missing host path fails it;
(c) container-edits_unix.go ``fillMissingInfo``: a declared type without a major is compared with the host node's;
(d) yaml.go ``convertToJSONableObject``: a string field gets the scalar's go-yaml v2 value written as text (an int,
    float or bool becomes its Go text; ``1:30`` and ``2001-12-14`` are text already); the other fields are typed.
"""
import os

import pytest

import hostfixture  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import validate as _cdi_validate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN


def _host(tmp_path):
    root = tmp_path / "host"
    hostfixture.mknod_under(root, "/dev/nvidia0", 195, 0)
    hostfixture.mknod_under(root, "/dev/nvidiactl", 195, 255)
    hostfixture.mknod_under(root, "/dev/nvidia-uvm", 238, 0)
    hostfixture.mknod_under(root, "/dev/alias0", 195, 0)  # another path, the same device number
    os.mknod(str(root / "dev/blk0"), 0o600 | 0o060000, os.makedev(7, 200))  # a block device
    os.mkfifo(str(root / "dev/fifo0"))
    (root / "etc/cdi").mkdir(parents=True)
    return root


def _layer(root, spec, devices=("v.com/cc=d",)):
    (root / "etc/cdi/v.yaml").write_text(spec)
    return _cdi_layer.record(spec_dirs=["/etc/cdi"], root=str(root), discover_runtime_dirs_=False, devices=list(devices), kinds=["v.com/cc"])


def _spec(spec_nodes, device_nodes, version="0.5.0", second=None):
    text = "cdiVersion: %s\nkind: v.com/cc\n" % version
    if spec_nodes:
        text += "containerEdits:\n  deviceNodes: %s\n" % spec_nodes
    text += "devices:\n- name: d\n  containerEdits:\n    env: [A=1]\n    deviceNodes: %s\n" % device_nodes
    if second:
        text += "- name: e\n  containerEdits:\n    env: [B=1]\n    deviceNodes: %s\n" % second
    return text


def _node(rec, path):
    (n,) = [n for n in rec["evidence"]["expected_edits"]["deviceNodes"] if n["path"] == path]
    return n


# (a) the union of the cgroup rules ----------------------------------------------------------------

@pytest.mark.parametrize("spec_level, device_level, access, rules", [
    ("permissions: r", "permissions: w", "rw", ["r", "w"]),
    ("permissions: r", "", "rwm", ["r", "rwm"]),          # the last entry alone would say r... here the first
    ("", "permissions: r", "rwm", ["rwm", "r"]),          # the last entry alone would say r: the union is rwm
    ("permissions: m", "permissions: none", "m", ["m", ""]),
    ("permissions: rw", "permissions: rw", "rw", ["rw", "rw"]),
])
def test_a_node_given_twice_keeps_both_cgroup_rules_and_gets_their_union(tmp_path, spec_level, device_level, access, rules):
    root = _host(tmp_path)
    sl = "{path: /dev/nvidia0%s}" % (", " + spec_level if spec_level else "")
    dl = "{path: /dev/nvidia0%s}" % (", " + device_level if device_level else "")
    rec = _layer(root, _spec("[%s]" % sl, "[%s, {path: /dev/nvidiactl}, {path: /dev/nvidia-uvm}]" % dl))
    assert _node(rec, "/dev/nvidia0")["permissions"] == access
    got = [r["access"] for r in rec["evidence"]["cgroup_rules"] if (r["major"], r["minor"]) == (195, 0)]
    assert got == rules
    write = [c for c in rec["checks"] if c["id"] == "cdi.nvidia.cgroup_write"][0]
    assert write["status"] == (PASS if "w" in access else WARN)


@pytest.mark.parametrize("nodes, path, access", [
    # two paths, one device number: each node is opened by every rule for 195:0
    ("[{path: /dev/nvidia0, permissions: r}, {path: /dev/alias0, permissions: w}]", "/dev/nvidia0", "rw"),
    # a u node gets no rule of its own (Apply adds rules for b and c only): closed unless a c node opens its number
    ("[{path: /dev/nvidia0, type: u, major: 195, minor: 0}]", "/dev/nvidia0", ""),
    ("[{path: /dev/nvidia0, type: u, major: 195, minor: 0}, {path: /dev/alias0, permissions: rw}]", "/dev/nvidia0", "rw"),
    ("[{path: /dev/blk0, permissions: r}]", "/dev/blk0", "r"),
])
def test_the_effective_access_is_the_union_of_the_rules_for_the_device_number(tmp_path, nodes, path, access):
    rec = _layer(_host(tmp_path), _spec(None, nodes))
    assert _node(rec, path)["permissions"] == access


# (b) every entry is stat'ed, also one replaced later --------------------------------------------------

@pytest.mark.parametrize("spec_nodes, device_nodes, second, devices", [
    ("[{path: /dev/nvidia0, hostPath: /dev/gone}]", "[{path: /dev/nvidia0}]", None, ["v.com/cc=d"]),          # spec-level
    (None, "[{path: /dev/nvidia0, hostPath: /dev/gone}, {path: /dev/nvidia0}]", None, ["v.com/cc=d"]),        # same device
    (None, "[{path: /dev/nvidia0, hostPath: /dev/gone}]", "[{path: /dev/nvidia0}]", ["v.com/cc=d", "v.com/cc=e"]),  # two devices
])
def test_a_replaced_entry_with_a_missing_host_path_still_fails_injection(tmp_path, spec_nodes, device_nodes, second, devices):
    rec = _layer(_host(tmp_path), _spec(spec_nodes, device_nodes, second=second), devices=devices)
    inject = [c for c in rec["checks"] if c["id"] == "cdi.inject.device_node"]
    failed = [c for c in inject if c["status"] == FAIL]
    assert len(failed) == 1 and "replaced by a later node" in failed[0]["subject"], inject
    assert 'failed to stat CDI host device "/dev/gone"' in failed[0]["observed"]
    assert _node(rec, "/dev/nvidia0")["hostPath"] == "/dev/nvidia0"
    assert rec["status"] == FAIL


# (c) a declared type without a major is compared with the host's -------------------------------------------

@pytest.mark.parametrize("node, status, words", [
    ("{path: /dev/nvidia0, type: c}", PASS, "host c 195:0"),
    ("{path: /dev/nvidia0, type: b}", FAIL, "host type mismatch (b, c)"),
    ("{path: /dev/nvidia0, type: u}", FAIL, "host type mismatch (u, c)"),
    ("{path: /dev/nvidia0, type: p}", PASS, "host c 195:0"),     # a fifo is minimal without a major: the type is not compared
    ("{path: /dev/blk0, type: c}", FAIL, "host type mismatch (c, b)"),
    ("{path: /dev/blk0, type: b}", PASS, "host b 7:200"),
    ("{path: /dev/fifo0, type: c}", FAIL, "host type mismatch (c, p)"),
    ("{path: /dev/blk0, type: c, major: 7}", PASS, "host b 7:200"),       # a major: minimally specified, not compared
])
def test_a_declared_type_without_a_major_must_be_the_host_nodes(tmp_path, node, status, words):
    rec = _layer(_host(tmp_path), _spec(None, "[%s]" % node))
    (got,) = [c for c in rec["checks"] if c["id"] == "cdi.inject.device_node"]
    assert got["status"] == status and words in got["observed"], got


# (d) string fields keep the go-yaml v2 value as text; the others are typed ----------------------------------

@pytest.mark.parametrize("scalar, text", [
    ("1:30", "1:30"), ("2001-12-14", "2001-12-14"), ("2001-12-14T21:59:43Z", "2001-12-14T21:59:43Z"), ("12:30:00", "12:30:00"),
    ("yes", "true"), ("off", "false"), ("0o17", "15"), ("017", "15"), ("0x1F", "31"), ("1e3", "1000"), ("1.50", "1.5"),
    ("'yes'", "yes"), ('"0o17"', "0o17"), ("!!str 1e3", "1e3"),
])
def test_a_host_path_is_the_text_the_library_decodes(tmp_path, scalar, text):
    """hostPath 1:30 is the path "1:30" (statted as such); hostPath yes is the path "true", as the library reads it."""
    root = _host(tmp_path)
    hostfixture.mknod_under(root, "/" + text, 195, 0)
    rec = _layer(root, _spec(None, "[{path: /dev/nvidia0, hostPath: %s}]" % scalar))
    node = _node(rec, "/dev/nvidia0")
    assert node["hostPath"] == text and (node["major"], node["minor"]) == (195, 0), node
    (inject,) = [c for c in rec["checks"] if c["id"] == "cdi.inject.device_node"]
    assert inject["status"] == PASS


@pytest.mark.parametrize("field, scalar, value", [
    # string fields: the text of go-yaml v2's value
    ("hostPath", "2001-12-14", "2001-12-14"), ("permissions", "rw", "rw"), ("type", "c", "c"),
    # int64 / *uint32 fields: numbers as go-yaml v2 resolves them, never text
    ("major", "0x1F", 31), ("major", "1e3", 1000), ("minor", "017", 15), ("minor", "0o17", 15), ("minor", "1_0", 10),
    ("fileMode", "0644", 420), ("fileMode", "0o644", 420), ("uid", "1.0", 1), ("gid", "4294967295", 4294967295),
])
def test_device_node_fields_decode_by_their_type(field, scalar, value):
    text = "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n- name: d\n  containerEdits:\n    deviceNodes: [{path: /d, %s: %s}]\n"
    spec, errors, _model = _cdi_validate.load_spec_data((text % (field, scalar)).encode())
    assert errors == [] and spec["devices"][0]["containerEdits"]["deviceNodes"][0][field] == value


@pytest.mark.parametrize("field, scalar", [
    ("major", "'1'"), ("major", "yes"), ("major", "1:30"), ("major", "2001-12-14"), ("fileMode", "-1"), ("uid", "1.5"),
    ("gid", "4294967296"), ("major", "~x"),
])
def test_non_string_fields_refuse_text(field, scalar):
    text = "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n- name: d\n  containerEdits:\n    deviceNodes: [{path: /d, %s: %s}]\n"
    spec, errors, _model = _cdi_validate.load_spec_data((text % (field, scalar)).encode())
    assert spec is None and errors and errors[0][0] == "schema", errors


@pytest.mark.parametrize("edits, check", [
    ("hooks: [{hookName: createContainer, path: /h, timeout: 1e1}]", lambda e: e["hooks"][0]["timeout"] == 10),
    ("hooks: [{hookName: createContainer, path: /h, args: [yes, 1:30, 0x10]}]", lambda e: e["hooks"][0]["args"] == ["true", "1:30", "16"]),
    ("additionalGids: [0x10, 1e1]", lambda e: e["additionalGids"] == [16, 10]),
    ("env: [A=yes, B=1:30]", lambda e: e["env"] == ["A=yes", "B=1:30"]),   # one scalar 'A=yes': text already
    ("mounts: [{hostPath: 1:30, containerPath: 2001-12-14, options: [ro, 0o17]}]",
     lambda e: e["mounts"][0] == {"hostPath": "1:30", "containerPath": "2001-12-14", "options": ["ro", "15"]}),
])
def test_other_edit_fields_decode_by_their_type(edits, check):
    version = "0.7.0" if "additionalGids" in edits else "0.5.0"
    text = "cdiVersion: %s\nkind: v.com/cc\ndevices:\n- name: d\n  containerEdits:\n    %s\n" % (version, edits)
    spec, errors, _model = _cdi_validate.load_spec_data(text.encode())
    assert errors == [] and check(spec["devices"][0]["containerEdits"]), spec


@pytest.mark.parametrize("edits", [
    "hooks: [{hookName: createContainer, path: /h, timeout: '10'}]", "additionalGids: ['16']", "additionalGids: [-1]",
    "intelRdt: {enableMonitoring: 'yes'}",
])
def test_other_non_string_fields_refuse_text(edits):
    text = "cdiVersion: 1.1.0\nkind: v.com/cc\ndevices:\n- name: d\n  containerEdits:\n    env: [A=1]\n    %s\n" % edits
    spec, errors, _model = _cdi_validate.load_spec_data(text.encode())
    assert spec is None and any(rule == "schema" for rule, _m in errors), errors


def test_a_bool_field_takes_yaml_booleans():
    text = "cdiVersion: 1.1.0\nkind: v.com/cc\ndevices:\n- name: d\n  containerEdits:\n    intelRdt: {closID: c, enableMonitoring: yes}\n"
    spec, errors, _model = _cdi_validate.load_spec_data(text.encode())
    assert errors == [] and spec["devices"][0]["containerEdits"]["intelRdt"]["enableMonitoring"] is True


NUL_PATHS = {  # a NUL byte (a JSON \u0000 escape, a YAML "\0") in each path a spec gives: no host object has such a name
    "a device node": ('deviceNodes: [{path: "/dev/nvidia0\\0"}]', "cdi.inject.device_node"),
    "a device node's hostPath": ('deviceNodes: [{path: /dev/nvidia0, hostPath: "/dev/nvidia0\\0"}]', "cdi.inject.device_node"),
    "a mount's hostPath": ('mounts: [{hostPath: "/usr/lib/x\\0", containerPath: /a}]', "cdi.host.mount_source"),
    "a library mount": ('mounts: [{hostPath: "/usr/lib/libcuda.so.1\\0", containerPath: /usr/lib/libcuda.so.1}]',
                        "cdi.host.mount_source"),
    "a driver library mount": ('mounts: [{hostPath: "/usr/lib/libnvidia-ml.so.1\\0", containerPath: /usr/lib/libnvidia-ml.so.1}]',
                               "cdi.host.mount_source"),
    "a library directory mount": ('mounts: [{hostPath: "/usr/lib/x86_64-linux-gnu\\0", containerPath: /usr/lib/x86_64-linux-gnu}]',
                                  "cdi.host.mount_source"),
    "a mount's containerPath": ('mounts: [{hostPath: /dev, containerPath: "/a\\0b"}]', None),
    "a hook": ('hooks: [{hookName: createContainer, path: "/usr/bin/h\\0"}]', "cdi.host.hook"),
    "a mount on the library path": ('env: ["LD_LIBRARY_PATH=/a\\0"]\n    mounts: [{hostPath: /dev, containerPath: "/a\\0"}]', None),
}


@pytest.mark.parametrize("what", sorted(NUL_PATHS))
def test_a_path_with_a_nul_byte_is_judged_never_raised(tmp_path, what):
    # Go's syscalls answer EINVAL for such a name (the library fails to inject a device node: "failed to stat CDI host
    # device ...: invalid argument"); Python raises ValueError: the layer must say what the runtime will meet
    edits, check = NUL_PATHS[what]
    rec = _layer(_host(tmp_path), "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n- name: d\n  containerEdits:\n    %s\n" % edits)
    assert rec["layer"] == "cdi" and rec["status"] in (FAIL, WARN, PASS)
    if check:
        assert rec["status"] == FAIL and any(c["id"] == check and c["status"] == FAIL for c in rec["checks"]), rec["checks"]
