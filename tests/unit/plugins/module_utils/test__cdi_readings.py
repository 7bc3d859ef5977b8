"""A spec is read as the runtime's own CDI library version reads it (readings.py), not as the newest library with a
cdiVersion cap: the members of issue 32, each through the reader alone and through the whole cdi layer for a node
whose runtime links that library (upstream tags and distribution builds, compat.DISTRIBUTION_BUILDS)."""
import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import byruntime, compat, readings
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.validate import load_spec_data
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, cdi_for_runtime

KIND = "example.com/dev"

# the members: (name, spec text, device, {reading: accepted})
ZERO_HOSTPATH = """cdiVersion: 0.3.0
kind: example.com/dev
devices:
- name: "0"
  containerEdits:
    env: [GPUPROBE_READ=yes]
    deviceNodes: [{path: /dev/null, hostPath: /dev/null}]
"""
SPEC_080 = """cdiVersion: 0.8.0
kind: example.com/dev
devices:
- name: gpu0
  containerEdits: {env: [GPUPROBE_READ=yes]}
"""
PERMISSIONS_NONE = """cdiVersion: 0.5.0
kind: example.com/dev
devices:
- name: gpu0
  containerEdits:
    deviceNodes: [{path: /dev/null, type: c, major: 1, minor: 3, permissions: none}]
"""
BAD_ANNOTATION_KEY = """cdiVersion: 0.6.0
kind: example.com/dev
annotations: {"bad key!": "x"}
devices:
- name: gpu0
  annotations: {"also bad!": "y"}
  containerEdits: {env: [GPUPROBE_READ=yes]}
"""
NO_DEVICES = """cdiVersion: 0.5.0
kind: example.com/dev
devices: []
containerEdits: {env: [GPUPROBE_READ=yes]}
"""
R = readings.READINGS

MEMBERS = [
    # a 0.3.0 spec with a device named "0" and hostPath: 0.5.2 has no minimum-version check (podman 4.3.1, seen)
    ("zero_hostpath_0.5.2", ZERO_HOSTPATH, {"v0.5.2": True, "v0.5.3": True, "v0.5.4": False, "v0.8.0": False, "main": False}),
    # a 0.8.0 spec: read by the 0.8 libraries (Debian 13's containerd 1.7.24~ds1 links 0.8.0), not by 0.7.2
    ("spec_0.8.0", SPEC_080, {"v0.7.2": False, "v0.8.0": True, "v0.8.1": True, "main": True}),
    # permissions none: every released library rejects it ("invalid permissions"), the project's reading accepts it
    ("permissions_none", PERMISSIONS_NONE, {"v0.5.2": False, "v0.8.0": False, "specs-go/v1.1.0": False, "main": True}),
    # annotation keys: 0.6 to 0.8.1 never validate them; 1.0+ do; 0.5 has no annotations field at all
    ("bad_annotation_key", BAD_ANNOTATION_KEY, {"v0.5.2": False, "v0.6.1": True, "v0.6.2": True, "v0.7.2": True, "v0.8.0": True,
                                                "v0.8.1": True, "specs-go/v1.0.0": False, "main": False}),
    # devices: []: no "no devices" check before 1.0.0
    ("no_devices", NO_DEVICES, {"v0.5.2": True, "v0.6.2": True, "v0.8.0": True, "specs-go/v1.0.0": False, "main": False}),
]


@pytest.mark.parametrize("name, text, expect", MEMBERS, ids=[m[0] for m in MEMBERS])
def test_each_library_version_reads_the_member_as_its_source_does(name, text, expect):
    for library, accepted in expect.items():
        reading = readings.DEFAULT if library == "main" else R[library]
        spec, errors, _model = load_spec_data(text.encode(), ".yaml", reading)
        assert (spec is not None) == accepted, (library, errors)


def _host(tools):
    return {"layer": "host", "evidence": {"tools_probed": True, "tools": dict(
        (n, {"path": "/usr/bin/" + n, "version": v, "error": None}) for n, v in tools.items())}}


def _layer(tmp_path, text, tools, device, engines=None):
    d = tmp_path / "var/run/cdi"
    d.mkdir(parents=True, exist_ok=True)
    (d / "member.yaml").write_text(text)
    return _cdi_layer.record(spec_dirs=["/var/run/cdi"], discover_runtime_dirs_=False, devices=[device], root=str(tmp_path),
                             host=_host(tools), engines=engines)


def _status(record, check_id, subject=None):
    return [c["status"] for c in record["checks"] if c["id"] == check_id and (subject is None or c["subject"] == subject)]


# (member, runtime, version, device, resolves)
LAYER = [
    ("zero_hostpath_0.5.2", ZERO_HOSTPATH, "podman", "4.3.1", KIND + "=0", True),         # seen: podman run --device KIND=0
    ("zero_hostpath_0.5.2", ZERO_HOSTPATH, "podman", "4.5.0", KIND + "=0", False),        # 0.5.4 checks the minimum version
    ("spec_0.8.0", SPEC_080, "containerd", "1.7.24~ds1", KIND + "=gpu0", True),           # Debian 13: CDI 0.8.0 (seen, CRI)
    ("spec_0.8.0", SPEC_080, "containerd", "1.7.24", KIND + "=gpu0", False),              # upstream go.mod: v0.7.2
    ("permissions_none", PERMISSIONS_NONE, "podman", "4.3.1", KIND + "=gpu0", False),     # 0.5.2: invalid permissions
    ("permissions_none", PERMISSIONS_NONE, "containerd", "1.7.24~ds1", KIND + "=gpu0", False),  # 0.8.0
    ("bad_annotation_key", BAD_ANNOTATION_KEY, "containerd", "1.7.24~ds1", KIND + "=gpu0", True),
    ("bad_annotation_key", BAD_ANNOTATION_KEY, "docker", "26.1.5+dfsg1", KIND + "=gpu0", True),  # Debian 13's docker.io: 0.7.2
    ("bad_annotation_key", BAD_ANNOTATION_KEY, "docker", "27.0.3", KIND + "=gpu0", True),
    ("bad_annotation_key", BAD_ANNOTATION_KEY, "docker", "28.2.2", KIND + "=gpu0", False),  # 1.0.1 validates the keys
    ("no_devices", NO_DEVICES, "podman", "4.3.1", KIND + "=all", False),                  # read, but provides no device
]


@pytest.mark.parametrize("member, text, runtime, version, device, resolves", LAYER,
                         ids=["%s-%s-%s" % (m[0], m[2], m[3]) for m in LAYER])
def test_the_cdi_layer_reads_for_the_nodes_runtime(tmp_path, member, text, runtime, version, device, resolves):
    record = _layer(tmp_path, text, {runtime: version}, device)
    assert _status(record, "cdi.resolve.device", device) == [PASS if resolves else FAIL], record["checks"]
    spec_checks = [c for c in record["checks"] if c["id"].startswith("cdi.spec.") and c["subject"].endswith("member.yaml")]
    assert all(c["status"] != FAIL for c in spec_checks) == (resolves or member == "no_devices"), spec_checks
    (group,) = record["evidence"]["readings"]
    assert group["runtimes"] == [runtime] and group["reading"]


def test_no_devices_is_read_and_warns_nothing_for_the_libraries_before_1_0(tmp_path):
    record = _layer(tmp_path, NO_DEVICES, {"podman": "4.3.1"}, KIND + "=gpu0")
    files = record["evidence"]["files"]
    assert files[0]["ok"] is True and files[0]["reading"] == "v0.5.2"


@pytest.mark.parametrize("runtime, version, library, reading", [
    ("containerd", "1.7.24~ds1", "v0.8.0", "v0.8.0+go1.22"),
    ("podman", "5.4.2+ds1", "v0.8.0", "v0.8.0+go1.22"),
    ("docker", "26.1.5+dfsg1", "v0.7.2", "v0.7.2+go1.22"),
    ("podman", "4.3.1+ds1", "v0.5.2", "v0.5.2"),
    ("podman", "4.3.1", "v0.5.2", "v0.5.2"),
    ("containerd", "1.7.24", "v0.7.2", "v0.7.2"),
])
def test_distribution_builds_name_their_own_library(runtime, version, library, reading):
    row = compat.readable_versions(runtime, version)
    assert (row["status"], row["library"], row["reading"]) == ("known", library, reading), row
    assert row["build"] and ("Debian" in row["build"]) == (compat.distribution_build(version) is not None)


@pytest.mark.parametrize("version", ["4.9.3+ds1-1ubuntu0.2", "5.2.2-1.el9", "5.0.3-1.fc40", "1.7.24~ds1-99"])
def test_an_unknown_distribution_build_is_not_judged_on_a_guess(tmp_path, version):
    runtime = "containerd" if version.startswith("1.7") else "podman"
    if version == "1.7.24~ds1-99":
        runtime, version = "containerd", "1.7.22~ds1"
    row = compat.readable_versions(runtime, version)
    assert row["status"] == "unknown" and "distribution build" in row["why"]
    # the files the modelled libraries disagree on are NOT_RUN with the reason, never FAIL
    record = _layer(tmp_path, ZERO_HOSTPATH, {runtime: version}, KIND + "=0")
    assert _status(record, "cdi.resolve.device", KIND + "=0") == [NOT_RUN]
    version_checks = [c for c in record["checks"] if c["id"] == "cdi.spec.version"]
    assert [c["status"] for c in version_checks] == [NOT_RUN] and "distribution build" in version_checks[0]["observed"]
    assert FAIL not in _status(record, "cdi.runtime.spec_version")


def test_two_runtimes_reading_differently_each_get_their_own_checks(tmp_path):
    engines = [{"name": "podman", "version": "4.3.1", "usable": True, "cdi_config": {"enabled": True, "spec_dirs": ["/var/run/cdi"]}},
               {"name": "containerd", "version": "1.7.24~ds1", "usable": True,
                "cdi_config": {"enabled": True, "spec_dirs": ["/var/run/cdi"], "origin": "configured"}}]
    record = _layer(tmp_path, ZERO_HOSTPATH, {"podman": "4.3.1", "containerd": "1.7.24~ds1"}, KIND + "=0", engines=engines)
    assert [g["reading"] for g in record["evidence"]["readings"]] == ["v0.5.2", "v0.8.0+go1.22"]
    podman, containerd = cdi_for_runtime(record, "podman"), cdi_for_runtime(record, "containerd")
    assert _status(podman, "cdi.resolve.device", KIND + "=0") == [PASS]
    assert _status(containerd, "cdi.resolve.device", KIND + "=0") == [FAIL]
    reading = [c for c in podman["checks"] if c["id"].startswith(("cdi.spec.", "cdi.resolve."))]
    assert reading and FAIL not in [c["status"] for c in reading]
    assert _status(containerd, "cdi.spec.version") == [FAIL]
    # a check both readings give alike is given once for every runtime; the others once per runtime
    by_id = dict((c["id"], c.get("runtime")) for c in record["checks"] if c["id"] == "cdi.spec.parse")
    assert by_id == {"cdi.spec.parse": None}
    assert sorted((c["runtime"], c["status"]) for c in record["checks"] if c["id"] == "cdi.spec.version") == [
        ("containerd", FAIL), ("podman", PASS)]


def test_mounts_are_ordered_as_each_library_sorts_them(tmp_path):
    text = """cdiVersion: 0.5.0
kind: example.com/dev
devices:
- name: gpu0
  containerEdits:
    mounts:
    - {hostPath: /b, containerPath: /z}
    - {hostPath: /a, containerPath: /a}
"""
    for version, order in (("4.3.1", ["/a", "/z"]), ("5.5.0", ["/z", "/a"])):
        record = _layer(tmp_path, text, {"podman": version}, KIND + "=gpu0")
        assert [m["containerPath"] for m in record["evidence"]["expected_edits"]["mounts"]] == order, version


def test_every_table_library_of_0_5_2_and_later_has_a_reading():
    for lib in compat.LIBRARIES:
        if lib.startswith(("v0.5", "v0.6", "v0.7", "v0.8", "specs-go/")):
            assert readings.reading_for(lib), lib
    assert byruntime.reading_groups(None, None)[0]["reading"] is readings.DEFAULT


_NIL = "cdiVersion: %s\nkind: om/cl\ndevices:\n- name: %s\n  containerEdits:\n%s"
V052, V080 = readings.reading_for("v0.5.2"), readings.reading_for("v0.8.0", gopath_go122=True)


@pytest.mark.parametrize("version, name, edits, panics", [
    # (a spec, whether each library reaches its null entry and panics; checked against both Debian readers by
    # tests/integration/test_cdi_differential.py, whose corpus has these)
    ("9.9.9", "d", "    deviceNodes: [~]\n", (False, False)),                 # validateVersion stops first
    ("0.5.0", "d", "    deviceNodes: [~]\n", (True, True)),
    ("0.5.0", "d", "    env: [A]\n    mounts: [~]\n", (False, True)),         # 0.5.2: env first; 0.8: requiresV040 reads mounts first
    ("0.5.0", "d", "    env: [A]\n    deviceNodes: [~]\n", (False, True)),    # 0.8: requiresV050 reads the nodes' hostPath
    ("0.5.0", "1", "    env: [A]\n    deviceNodes: [~]\n", (False, False)),   # ...unless a device name starts with a digit
    ("0.5.0", "\u00e9", "    deviceNodes: [~]\n", (False, False)),          # ...or any other non-ASCII-letter (parser.IsLetter)
    ("0.5.0", "d", "    mounts: [{hostPath: /a, containerPath: /b, type: bind}, ~]\n    env: [A]\n", (False, False)),  # 0.8: V040 returns first
    ("0.5.0", "d", "    deviceNodes: [{path: ''}, ~]\n", (False, True)),       # 0.5.2: the first node's error first; 0.8: V050 reads both
    ("0.5.0", "d", "    hooks: [~]\n    deviceNodes: [{path: ''}]\n", (False, False)),  # nodes before hooks
])
def test_a_null_entry_panics_only_where_each_library_gets_to_it(version, name, edits, panics):
    for reading, panic in zip((V052, V080), panics):
        spec, errors, _model = load_spec_data((_NIL % (version, name, edits)).encode(), reading=reading)
        assert spec is None and errors  # rejected either way
        assert any(rule == "panic" for rule, _m in errors) is panic, (reading["name"], errors)


# a one-character vendor or class: the library checks the version first (and, from v0.5.4, the minimum version the
# fields need), then the vendor, then the class; the name check panics only where it is reached (pkg/cdi/spec.go
# Spec.validate at v0.5.2 and v0.8.0; tests/integration/test_cdi_differential.py has these against both Debian readers)
_ONE = "cdiVersion: %s\nkind: %s\ndevices:\n- name: d\n  containerEdits:\n%s"


@pytest.mark.parametrize("version, kind, edits, panics", [
    ("0.5.0", "g/cl", "    env: [A=1]\n", (True, True)),
    ("0.6.0", "g/cl", "    env: [A=1]\n", (False, True)),      # 0.5.2 knows versions up to 0.5.0: invalid version first
    ("9.9.9", "g/cl", "    env: [A=1]\n", (False, False)),
    ("0.5.0", "om/c", "    env: [A=1]\n", (True, True)),        # the class
    ("0.3.0", "om/c", "    deviceNodes: [{path: /dev/null, hostPath: /dev/null}]\n", (True, False)),  # 0.8: hostPath needs 0.5.0
    ("0.5.0", "1x/c", "    env: [A=1]\n", (False, False)),      # the vendor's error returns before the class
])
def test_a_one_character_vendor_or_class_panics_only_where_each_library_gets_to_it(version, kind, edits, panics):
    for reading, panic in zip((V052, V080), panics):
        spec, errors, _model = load_spec_data((_ONE % (version, kind, edits)).encode(), reading=reading)
        assert spec is None and errors  # rejected either way
        assert any(rule == "panic" for rule, _m in errors) is panic, (reading["name"], errors)
        stopped = [m for rule, m in errors if rule == "version" and m.startswith("no panic now")]
        assert bool(stopped) is (not panic and not kind.startswith("1")), (reading["name"], errors)


@pytest.mark.parametrize("library, kind, function, source", [
    ("v0.5.2", "g/cl", "ValidateVendorName", "pkg/cdi/qualified-device.go"),
    ("v0.5.2", "om/c", "ValidateClassName", "pkg/cdi/qualified-device.go"),
    ("v0.5.4", "om/c", "ValidateClassName", "pkg/cdi/qualified-device.go"),
    ("v0.6.2", "g/cl", "validateVendorOrClassName", "pkg/parser/parser.go"),
    ("v0.8.0", "om/c", "validateVendorOrClassName", "pkg/parser/parser.go"),
    ("specs-go/v1.1.0", "g/cl", "validateVendorOrClassName", "pkg/parser/parser.go"),
])
def test_the_panic_names_the_function_of_the_library_version_that_panics(library, kind, function, source):
    """0.5.2 (podman 4.3.1 vendors it) panics in ValidateVendorName / ValidateClassName, each its own loop
    (pkg/cdi/qualified-device.go); from v0.6.0 both call pkg/parser validateVendorOrClassName."""
    reading = R[library]
    _spec, errors, _model = load_spec_data((_ONE % ("0.5.0", kind, "    env: [A=1]\n")).encode(), reading=reading)
    (words,) = [m for rule, m in errors if rule == "panic"]
    assert "library's %s panic" % function in words and source in words and reading["name"] in words, words
    other = "validateVendorOrClassName" if function.startswith("Validate") else "ValidateVendorName"
    assert other not in words and "slice bounds out of range [1:0]" in words


def test_the_project_s_reading_names_every_released_library():
    _spec, errors, _model = load_spec_data((_ONE % ("0.5.0", "g/cl", "    env: [A=1]\n")).encode())
    (words,) = [m for rule, m in errors if rule == "panic"]
    assert "every released CDI library panic" in words and "v0.5.2-v0.5.4" in words and "guarded only after v1.1.0" in words


FOREIGN_ONE = "cdiVersion: %s\nkind: g/foreign\ndevices:\n- name: d\n  containerEdits: {env: [F=1]}\n"


@pytest.mark.parametrize("version, runtime, runtime_version, fails", [
    ("0.6.0", "podman", "4.3.1", False),           # 0.5.2 drops the file at its version: podman starts the container
    ("9.9.9", "podman", "4.3.1", False),
    ("0.5.0", "podman", "4.3.1", True),            # a version it reads: it panics (seen: podman 4.3.1)
    ("0.6.0", "containerd", "1.7.24~ds1", True),   # 0.8.0 reads 0.6.0 and panics
    ("9.9.9", "containerd", "1.7.24~ds1", False),
])
def test_a_foreign_spec_the_library_rejects_at_its_version_fails_nothing(tmp_path, version, runtime, runtime_version, fails):
    d = tmp_path / "var/run/cdi"
    d.mkdir(parents=True)
    # the requested device's one edit is accounted for (an env NVIDIA's generators write): only the foreign file is judged
    (d / "good.yaml").write_text("cdiVersion: 0.5.0\nkind: %s\ndevices:\n- name: gpu0\n  containerEdits: {env: [NVIDIA_VISIBLE_DEVICES=void]}\n" % KIND)
    record = _layer(tmp_path, FOREIGN_ONE % version, {runtime: runtime_version}, KIND + "=gpu0")
    subject = str(d / "member.yaml")
    assert _status(record, "cdi.spec.library_panic", subject) == [FAIL if fails else PASS], record["checks"]
    assert (record["status"] == FAIL) is fails, record["reason"]
    assert _status(record, "cdi.resolve.device", KIND + "=gpu0") == [PASS]
