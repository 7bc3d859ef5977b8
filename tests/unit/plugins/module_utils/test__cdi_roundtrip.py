"""Property tests: specs generated as structures, written as JSON and as YAML, read back by the loader, give the
structure that was written (the library's reader gives it too: test__cdi_agreement.py). Strings are drawn with
the YAML 1.1 traps in (``1:30``, ``y``, ``2001-12-14``, ``0x1F``...): written quoted, they stay strings; written
plain by PyYAML (a YAML 1.1 writer), some change meaning for the library, which the last property pins."""
import json

import yaml
from hypothesis import HealthCheck, example, given, settings, strategies as st

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import loader, schema, validate

EXAMPLES = 700  # per property: 2100 generated specs in all, about 25 s on 2 cores
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TRAPS = ["1:30", "1:0", "y", "n", "yes", "off", "2001-12-14", "0x1F", "017", "1.0", "1e3", "null", "~", "true", "<<", "-",
         "a: b", "#x", "@x", "!x", "x/y", "\\/", "it's", "\u00e9", "\U0001f600", "", " lead", "1_000", ".5", "+5"]
text = st.one_of(st.sampled_from(TRAPS), st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)).filter(
    lambda s: s != "__null__")  # the model's marker of a field given as null
ints = st.integers(min_value=0, max_value=2 ** 31)
node = st.fixed_dictionaries({"path": text}, optional={"hostPath": text, "type": st.sampled_from(["c", "b", "u", "p"]),
                                                       "major": ints, "minor": ints, "permissions": st.sampled_from(["r", "rw", "rwm"]),
                                                       "fileMode": st.integers(0, 0o7777), "uid": ints, "gid": ints})
mount = st.fixed_dictionaries({"hostPath": text, "containerPath": text}, optional={"options": st.lists(text, max_size=3), "type": text})
hook = st.fixed_dictionaries({"hookName": st.sampled_from(["createContainer", "prestart"]), "path": text},
                             optional={"args": st.lists(text, max_size=3), "env": st.lists(text, max_size=2), "timeout": ints})
edits = st.fixed_dictionaries({}, optional={"env": st.lists(text, max_size=3), "deviceNodes": st.lists(node, max_size=3),
                                            "mounts": st.lists(mount, max_size=2), "hooks": st.lists(hook, max_size=2),
                                            "additionalGids": st.lists(ints, max_size=3)})
spec = st.fixed_dictionaries({
    "cdiVersion": st.sampled_from(["0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"]),
    "kind": st.sampled_from(["nvidia.com/gpu", "vendor.com/device", "example.com/class.x"]),
    "devices": st.lists(st.fixed_dictionaries({"name": text, "containerEdits": edits},
                                              optional={"annotations": st.dictionaries(text, text, max_size=2)}),
                        min_size=1, max_size=3),
}, optional={"containerEdits": edits, "annotations": st.dictionaries(text, text, max_size=2)})


def _model(data):
    tree, err = loader.parse_bytes(data)
    assert err is None, err
    coercer = schema._Coercer()
    model = coercer.coerce(tree, (schema._OBJ, "spec"), "")
    assert coercer.errors == [] and coercer.panics == [], coercer.errors
    return _clean(model)


def _clean(value):
    if isinstance(value, dict):
        return dict((k, _clean(v)) for k, v in value.items() if k != "__null__")
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


# go-yaml reads these as line breaks wherever they stand raw, JSON strings too (a key with one does not parse, NEL in a
# value is folded to a space: as the library does, tests/integration/test_cdi_differential.py); a writer escapes them
BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _dumps(value):
    """JSON of ``value`` with its text as it is but the characters YAML reads as line breaks, escaped."""
    text = json.dumps(value, ensure_ascii=False)
    for char, escaped in BREAKS.items():
        text = text.replace(char, escaped)
    return text


def _inline(value):
    if isinstance(value, (dict, list)) and not value:
        return "{}" if isinstance(value, dict) else "[]"
    return None if isinstance(value, (dict, list)) else _dumps(value)


def _quoted_yaml(value, indent=""):
    """Block YAML lines with every string double-quoted (JSON string syntax is valid YAML there)."""
    lines = []
    if isinstance(value, dict):
        for k, v in value.items():
            key = indent + _dumps(k)
            if _inline(v) is not None:
                lines.append(key + ": " + _inline(v))
            else:
                lines.append(key + ":")
                lines.extend(_quoted_yaml(v, indent + "  "))
        return lines
    for item in value:
        if _inline(item) is not None:
            lines.append(indent + "- " + _inline(item))
        else:
            sub = _quoted_yaml(item, indent + "  ")
            lines.extend([indent + "- " + sub[0][len(indent) + 2:]] + sub[1:])
    return lines


BREAKING = {"cdiVersion": "0.3.0", "kind": "nvidia.com/gpu", "devices": [{"name": "1:30", "containerEdits": {"env": ["A=\u0085"]}}],
            "annotations": {"\u2028": "1:30", "k\u2029": "\u0085"}}


@SETTINGS
@given(spec)
@example(BREAKING)
def test_json_round_trips(generated):
    assert _model(_dumps(generated).encode("utf-8")) == generated


@SETTINGS
@given(spec)
@example(BREAKING)
def test_quoted_yaml_round_trips(generated):
    assert _model(("\n".join(_quoted_yaml(generated)) + "\n").encode("utf-8")) == generated


def _as_the_library_reads(value, key=False):
    """What the library reads back for a string PyYAML wrote: unchanged when PyYAML quoted it, else go-yaml
    v2's resolution of the plain scalar, made a string again by sigs.k8s.io/yaml."""
    if isinstance(value, dict):
        return dict((_as_the_library_reads(k, True), _as_the_library_reads(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_as_the_library_reads(v) for v in value]
    if not isinstance(value, str) or yaml.safe_dump(value)[:1] in ("'", '"', "|", ">"):
        return value
    tag, resolved = loader.resolve_plain(value)
    if tag == "bool":
        return "true" if resolved else "false"
    if tag == "float":
        text = schema.go_float32_g(resolved)
        return {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(text, text) if key else text
    return str(int(resolved)) if tag == "int" else value


@SETTINGS
@given(spec)
@example({"cdiVersion": "0.3.0", "kind": "ab/cd", "devices": [{"name": "y", "containerEdits": {}, "annotations": {"true": "a", "y": "b"}}]})
def test_pyyaml_plain_scalars_read_as_the_library_reads_them(generated):
    """A spec written by PyYAML (YAML 1.1) leaves ``y``, ``n``, ``1e3``, ``08`` plain: go-yaml v2 reads a boolean,
    a float, a float (``true``, ``1000``, ``8`` in a string field); every other string comes back as written."""
    data = yaml.safe_dump(generated, allow_unicode=True).encode("utf-8")
    if _collides(generated):  # e.g. annotation keys 'true' and y: the library would keep one at random
        spec, errors, _model_ = validate.load_spec_data(data)
        assert spec is None and any("at random" in m for _rule, m in errors)
        return
    assert _model(data) == _as_the_library_reads(generated)


def _collides(value):
    if isinstance(value, dict):
        keys = [_as_the_library_reads(k, True) for k in value]
        return len(set(keys)) < len(keys) or any(_collides(v) for v in value.values())
    return isinstance(value, list) and any(_collides(v) for v in value)


def test_json_with_ascii_escaped_astral_characters_is_rejected_like_the_library():
    """json.dumps' default ensure_ascii writes U+1F600 as a surrogate pair; go-yaml rejects a surrogate escape."""
    data = json.dumps({"cdiVersion": "0.3.0", "kind": "ab/cd", "devices": [{"name": "x", "containerEdits": {"env": ["A=\U0001f600"]}}]})
    spec, errors, _model = validate.load_spec_data(data.encode(), ".json")
    assert spec is None and "invalid Unicode character escape code" in errors[0][1]
