"""The cdi layer reads a spec as the CDI reference library does (docs/cdi-loader.md gives each rule's source),
and makes the library's injection-time checks (pkg/cdi/container-edits_unix.go fillMissingInfo)."""
import multiprocessing
import os
import shutil
import tempfile

import pytest

import hostfixture  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import files as _cdi_files
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import resolve as _cdi_resolve
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import validate as _cdi_validate
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import loader, schema
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN

SPEC = "cdiVersion: 0.5.0\nkind: a.com/bc\ndevices:\n- name: %s\n  containerEdits: {env: [A=1], deviceNodes: [{path: %s}]}\n"


def _load(text, ext=".yaml"):
    return _cdi_validate.load_spec_data(text.encode("utf-8") if isinstance(text, str) else text, ext)


@pytest.mark.parametrize("name, device", [
    ("1:30", "1:30"),              # no sexagesimal in go-yaml v2 (PyYAML's YAML 1.1 gives 90)
    ("1:0", "1:0"),                # MIG-style name
    ("2001-12-14", "2001-12-14"),  # a timestamp decodes into interface{} as its own text
    ("1.0", "1"),                  # float -> FormatFloat(f, 'g', -1, 32)
    ("1e3", "1000"),
    ("3.14159265358979", "3.1415927"),
    ("0x1F", "31"), ("0o17", "15"), ("017", "15"), ("0b101", "5"), ("1_000", "1000"),
    ("08", "8"),                   # not octal, not int: a float
    ("y", "true"), ("No", "false"), ("on", "true"),
    ('"1:30"', "1:30"), ("'0x1F'", "0x1F"),
    ("!!str 017", "017"), ("!!float 1", "1"),
])
def test_device_name_scalars_resolve_as_go_yaml_v2_and_sigs_yaml(name, device):
    spec, errors, _model = _load(SPEC % (name, "/dev/x"))
    assert errors == [] and spec["devices"][0]["name"] == device


@pytest.mark.parametrize("path", ["1:30", "12:30:00"])
def test_unquoted_path_stays_text(path):
    spec, errors, _model = _load(SPEC % ("x", path))
    assert errors == [] and spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"] == path


def test_only_the_first_document_is_read():
    spec, errors, _model = _load(SPEC % ("x", "/dev/x") + "---\nnot: [valid\n")
    assert errors == [] and spec["devices"][0]["name"] == "x"


def test_json_slash_escape_is_rejected_and_yaml_quote_escape_accepted():
    text = '{"cdiVersion": "0.3.0", "kind": "a.com/bc", "devices": [{"name": "x", "containerEdits": {"env": ["A=%s"]}}]}'
    spec, errors, _model = _load(text % "\\/", ".json")
    assert spec is None and "unknown escape character" in errors[0][1]
    spec, errors, _model = _load(text % "it\\'s", ".json")
    assert errors == [] and spec["devices"][0]["containerEdits"]["env"] == ["A=it's"]


def test_only_a_yaml_1_1_directive_is_read():
    # go-yaml v2 (parserc.go yaml_parser_process_directives): any other %YAML version is an incompatible document
    assert loader.load_first_document(b"%YAML 1.1\n---\na: 1\n") == [("a", 1)]
    for version in (b"1.2", b"1.0", b"2.0"):
        with pytest.raises(loader.YAMLError, match="found incompatible YAML document"):
            loader.load_first_document(b"%YAML " + version + b"\n---\na: 1\n")


@pytest.mark.parametrize("tag", ["!!merge", "!!seq", "!!map", "!!set", "!!omap", "!!pairs", "!!value", "!!yaml"])
def test_a_yaml_org_tag_go_yaml_does_not_resolve_keeps_the_scalars_text(tag):
    # resolve.go resolvableTag: "", str, bool, int, float, null, timestamp; any other tag leaves the text
    assert loader.load_first_document(("a: [%s 1, %s x]\n" % (tag, tag)).encode()) == [("a", ["1", "x"])]
    with pytest.raises(loader.YAMLError, match="cannot decode"):
        loader.load_first_document(b"a: !!int x\n")


@pytest.mark.parametrize("text, is_timestamp", [
    ("2001-12-14", True), ("2000-2-29", True), ("2001-12-14T21:59:43Z", True), ("2001-12-14t21:59:43.10-05:00", True),
    ("2001-12-14 21:59:43", True),
    ("2001-13-45", False), ("2001-2-29", False), ("2001-12-14T21:59:43", False), ("2001-12-14 21:59:43 Z", False),
    ("2001-12-14T24:00:00Z", False), ("01-12-14", False),
])
def test_a_timestamp_tag_takes_what_go_time_parse_takes(text, is_timestamp):
    # goyaml.v2 resolve.go parseTimestamp: its four layouts through time.Parse (a date in its month, fields in range)
    if is_timestamp:
        assert loader.load_first_document(("a: !!timestamp %s\n" % text).encode()) == [("a", text)]
    else:
        with pytest.raises(loader.YAMLError, match="as a !!timestamp"):
            loader.load_first_document(("a: !!timestamp %s\n" % text).encode())


def test_an_alias_names_the_node_declared_last_under_its_name():
    # go-yaml's parser names a node as it starts it: one redefined inside keeps the name; a node is not its own value
    assert loader.load_first_document(b"a: &x {b: &x [1]}\nc: *x\n") == [("a", [("b", [1])]), ("c", [1])]
    assert loader.load_first_document(b"a: &x [1]\nb: &x [2]\nc: *x\n")[2] == ("c", [2])
    with pytest.raises(loader.YAMLError, match="contains itself"):
        loader.load_first_document(b"a: &x [1, *x]\n")


def test_two_nan_keys_are_two_keys():
    # NaN is not equal to itself, in Go's map as here: never "already set"
    assert len(loader.load_first_document(b"{.nan: a, .NaN: b}\n")) == 2


@pytest.mark.parametrize("text, why", [
    ("a: 1\na: 2\n", "already set in map"),
    ("1: a\n0x1: b\n", "already set in map"),        # the same Go value
    ("yes: a\ntrue: b\n", "already set in map"),
    ("x: &m {a: 1}\ny:\n  <<: *m\n  a: 2\n", "already set in map"),  # a merged key is set twice
    ("? [a]\n: 1\n", "invalid map key"),
])
def test_duplicate_and_invalid_keys(text, why):
    with pytest.raises(loader.YAMLError, match=why):
        loader.load_first_document(text.encode())


def test_keys_that_become_one_json_key_are_rejected_not_picked_at_random():
    spec, errors, _model = _load("cdiVersion: 0.3.0\nkind: a.com/bc\nannotations: {1: a, '1': b}\ndevices: []\n")
    assert spec is None and any("at random" in e for _rule, e in errors)


def test_field_names_fold_like_encoding_json_and_sorted_keys_decide_duplicates():
    text = ("cdiVersion: 0.5.0\nkind: a.com/bc\ndevices:\n- name: x\n"
            "  containerEdits: {env: [A=1], ENV: [B=2], deviceNodes: [{path: /dev/x, ho\u017ftPath: /dev/y, major: 1.0}]}\n")
    spec, errors, _model = _load(text)
    edits = spec["devices"][0]["containerEdits"]
    assert errors == [] and edits["env"] == ["A=1"]  # "ENV" < "env": env is decoded last and wins
    assert edits["deviceNodes"] == [{"path": "/dev/x", "hostPath": "/dev/y", "major": 1}]  # U+017F folds to s


@pytest.mark.parametrize("field, value, ok", [
    ("major", "1.0", True), ("major", "1.5", False), ("major", "1e3", True), ("major", "1e21", False),
    ("major", ".inf", False), ("uid", "-1", False), ("uid", "4294967295", True), ("major", "'1'", False),
])
def test_integer_fields_take_what_encoding_json_takes(field, value, ok):
    text = "cdiVersion: 0.3.0\nkind: a.com/bc\ndevices:\n- name: x\n  containerEdits: {deviceNodes: [{path: /d, %s: %s}]}\n"
    spec, errors, _model = _load(text % (field, value))
    assert (spec is not None) is ok, errors


@pytest.mark.parametrize("value, text", [
    (1.0, "1"), (0.1, "0.1"), (1e6, "1e+06"), (123456.0, "123456"), (1e-5, "1e-05"), (0.0001, "0.0001"),
    (-0.0, "-0"), (float("inf"), "+Inf"), (1e39, "+Inf"), (16777217.0, "1.6777216e+07"),
])
def test_go_float32_g(value, text):
    assert schema.go_float32_g(value) == text


def test_deep_nesting_is_a_parse_error():
    spec, errors, _model = _load(b"a: " + b"[" * 100 + b"]" * 100)
    assert spec is None and errors[0][0] == "parse" and "max depth" in errors[0][1]


# ---------------------------------------------------------------------------------------------------
# Injection-time checks (fillMissingInfo on every node Apply visits)

def _layer(tmp_path, nodes_yaml, devices=None):
    root = tmp_path / "host"
    hostfixture.mknod_under(root, "/dev/nvidia0", 195, 0)
    (root / "dev/notadevice").write_text("x")
    spec = "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n- name: d\n  containerEdits:\n    deviceNodes: %s\n" % nodes_yaml
    (root / "etc/cdi").mkdir(parents=True)
    (root / "etc/cdi/v.yaml").write_text(spec)
    return _cdi_layer.record(spec_dirs=["/etc/cdi"], root=str(root), discover_runtime_dirs_=False, devices=devices or ["v.com/cc=d"],
                             kinds=["v.com/cc"])


def _inject(rec):
    return [(c["status"], c["subject"], c["observed"]) for c in rec["checks"] if c["id"] == "cdi.inject.device_node"]


@pytest.mark.parametrize("node, status, words", [
    ("{path: /dev/nvidia0}", PASS, "host c 195:0"),
    ("{path: /dev/nvidia0, type: u}", FAIL, 'CDI device ("/dev/nvidia0", "/dev/nvidia0"), host type mismatch (u, c)'),
    ("{path: /dev/nvidia0, type: b}", FAIL, "host type mismatch (b, c)"),
    ("{path: /dev/nvidia0, type: u, major: 195}", PASS, "host c 195:0"),
    ("{path: /dev/missing}", FAIL, 'failed to stat CDI host device "/dev/missing": no such file or directory'),
    ("{path: /dev/missing, type: c, major: 1}", PASS, "minimally specified"),
    ("{path: /dev/notadevice}", FAIL, "not a device node"),
])
def test_injection_checks_say_what_the_library_says(tmp_path, node, status, words):
    rec = _layer(tmp_path, "[%s]" % node)
    (got,) = _inject(rec)
    assert got[0] == status and words in got[2], got
    if status == FAIL:
        assert rec["status"] == FAIL and got[2].startswith("failed to inject devices: ")


def test_a_replaced_node_is_still_stated(tmp_path):
    rec = _layer(tmp_path, "[{path: /dev/nvidia0, hostPath: /dev/missing}, {path: /dev/nvidia0}]")
    first, second = _inject(rec)
    assert first[0] == FAIL and "replaced by a later node" in first[1] and '"/dev/missing"' in first[2]
    assert second[0] == PASS
    assert [n["hostPath"] for n in rec["evidence"]["expected_edits"]["deviceNodes"]] == ["/dev/nvidia0"]


def _statuses_as_nobody(spec_dir, conn):
    """In a forked child without root's rights: the statuses of cdi.discovery.spec_dir_readable."""
    try:
        if os.geteuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
        rec = _cdi_layer.record(spec_dirs=[spec_dir], discover_runtime_dirs_=False)
        conn.send([c["status"] for c in rec["checks"] if c["id"] == "cdi.discovery.spec_dir_readable"])
    finally:
        conn.close()


def test_unreadable_spec_dir_is_a_check():
    """issue 11: an unreadable spec dir was skipped silently (as the library's filepath.Walk does)."""
    base = tempfile.mkdtemp(prefix="cdi-unreadable-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        spec_dir = os.path.join(base, "cdi")
        os.mkdir(spec_dir, 0o300)  # no read: cannot be listed, still a directory
        parent, child = multiprocessing.get_context("fork").Pipe()
        proc = multiprocessing.get_context("fork").Process(target=_statuses_as_nobody, args=(spec_dir, child))
        proc.start()
        statuses = parent.recv()
        proc.join(10)
    finally:
        os.chmod(os.path.join(base, "cdi"), 0o755)
        shutil.rmtree(base)
    assert statuses == [WARN]


def test_merging_many_devices_keeps_every_edit_in_order(tmp_path):
    """issue 11: 10k devices once took 14.5 s to merge (quadratic); the time is benchmarks/bench_cdi_merge.py's, this
    test checks what the merge of that many devices gives (every node, mount and env entry, in the devices' order)."""
    n = 10000
    devices = "".join("- name: g%d\n  containerEdits:\n    deviceNodes: [{path: /dev/g%d, type: c, major: 1, minor: %d}]\n"
                      "    mounts: [{hostPath: /h%d, containerPath: /c%d}]\n    env: [K%d=v]\n" % (i, i, i % 256, i, i, i) for i in range(n))
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "big.yaml").write_text("cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n" + devices)
    registry, _conflicts, _overrides = _cdi_resolve.build_registry([dict(_cdi_files.load_spec_file(str(d / "big.yaml"), max_size=1 << 24), priority=0)])
    names = ["v.com/cc=g%d" % i for i in range(n)]
    edits, _sources = _cdi_resolve.merge_edits(registry, names, root=str(tmp_path / "nohost"))
    assert [node["path"] for node in edits["deviceNodes"]] == ["/dev/g%d" % i for i in range(n)]
    assert sorted(m["containerPath"] for m in edits["mounts"]) == sorted("/c%d" % i for i in range(n))
    assert edits["env"] == ["K%d=v" % i for i in range(n)]


@pytest.mark.parametrize("kind, panics", [("a.com/b", True), ("a/bb", True), ("ab/cd", False), ("nvidia.com/gpu", False)])
def test_one_character_vendor_or_class_is_the_library_panic(kind, panics):
    spec, errors, _model = _load("cdiVersion: 0.3.0\nkind: %s\ndevices:\n- name: x\n  containerEdits: {env: [A=1]}\n" % kind)
    assert any(rule == "panic" and "slice bounds out of range" in e for rule, e in errors) is panics
    assert (spec is None) is panics


def test_version_check_sees_only_the_last_device_like_the_library(tmp_path):
    first = ("cdiVersion: 0.3.0\nkind: ab/cd\ndevices:\n- name: x\n  containerEdits: {deviceNodes: [{path: /d, hostPath: /e}]}\n"
             "- name: y\n  containerEdits: {env: [A=1]}\n")
    spec, errors, model = _load(first)
    assert errors == [] and spec is not None and "requiresV050" in model["__warnings__"][0]
    last = first.replace("{deviceNodes: [{path: /d, hostPath: /e}]}", "{env: [B=1]}").replace(
        "{env: [A=1]}", "{deviceNodes: [{path: /d, hostPath: /e}]}")
    spec, errors, _model = _load(last)
    assert spec is None and errors[0][0] == "version"
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "s.yaml").write_text(first)
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False, kinds=["ab/cd"])
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.spec.version_aliasing"] == [WARN]
