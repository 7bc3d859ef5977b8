"""Property tests: malformed YAML/JSON bytes and random spec trees never raise, and always produce a
per-file result (ok with a spec, or not ok with at least one error)."""
import json

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import catalogue as _cdi_catalogue
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import validate as _cdi_validate

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2 ** 70, max_value=2 ** 70),
                    st.floats(allow_nan=True), st.text(max_size=12))
FIELDS = ["cdiVersion", "kind", "devices", "containerEdits", "annotations", "name", "env", "deviceNodes", "mounts",
          "hooks", "path", "hostPath", "containerPath", "type", "major", "minor", "permissions", "hookName",
          "additionalGids", "intelRdt", "netDevices", "fileMode", "uid", "options", "closID", "schemata", "bogus"]
keys = st.one_of(st.sampled_from(FIELDS), st.text(max_size=8), st.integers())
trees = st.recursive(scalars, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=6)), max_leaves=40)


def _well_formed(spec, errors):
    assert isinstance(errors, list)
    for rule, message in errors:
        assert rule in _cdi_validate.RULES and isinstance(message, str) and message
    assert (spec is None) == bool(errors)


@SETTINGS
@given(st.binary(max_size=600))
def test_random_bytes_never_raise(data):
    for ext in (".yaml", ".json"):
        spec, errors, _model = _cdi_validate.load_spec_data(data, ext)
        _well_formed(spec, errors)


@SETTINGS
@given(trees)
def test_random_trees_never_raise(tree):
    try:
        data = yaml.safe_dump(tree).encode()
    except yaml.YAMLError:
        return
    spec, errors, _model = _cdi_validate.load_spec_data(data)
    _well_formed(spec, errors)


@SETTINGS
@given(st.fixed_dictionaries({
    "cdiVersion": st.one_of(st.sampled_from(_cdi_catalogue.KNOWN_VERSIONS + ("v0.6.0", "9.9.9")), scalars),
    "kind": st.one_of(st.sampled_from(["nvidia.com/gpu", "a.b/c.d", "bad", "/x"]), scalars),
    "devices": st.lists(st.fixed_dictionaries({"name": st.one_of(st.text(max_size=6), scalars), "containerEdits": trees}),
                        max_size=3),
    "containerEdits": trees,
}))
def test_random_spec_shaped_trees_never_raise(tree):
    data = json.dumps(tree, default=str).encode() if _jsonable(tree) else yaml.safe_dump(tree).encode()
    spec, errors, _model = _cdi_validate.load_spec_data(data, ".json")
    _well_formed(spec, errors)


def _jsonable(tree):
    try:
        json.dumps(tree, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


@SETTINGS
@given(st.binary(max_size=400))
def test_files_on_disk_always_get_a_record(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("cdi")
    (d / "x.yaml").write_bytes(data)
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False)
    files = rec["evidence"]["files"]
    assert len(files) == 1 and (files[0]["ok"] or files[0]["errors"])
    assert rec["status"] == "FAIL"  # random bytes never provide nvidia.com/gpu with real device nodes


def test_alias_bomb_is_bounded():
    bomb = b"a: &a [x, x, x, x, x, x, x, x, x]\n" + b"".join(
        b"%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n" % ((chr(98 + i).encode(), chr(98 + i).encode()) + (chr(97 + i).encode(),) * 9)
        for i in range(8)) + b"devices:\n- name: x\n  containerEdits: {env: *i}\n"
    spec, errors, _model = _cdi_validate.load_spec_data(bomb)
    assert spec is None and errors


def test_deep_nesting_is_an_error_not_a_crash():
    spec, errors, _model = _cdi_validate.load_spec_data(b"[" * 5000 + b"]" * 5000)
    assert spec is None and errors[0][0] == "parse"
