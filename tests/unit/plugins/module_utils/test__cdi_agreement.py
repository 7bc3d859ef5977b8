"""Agreement with the CDI reference library's reader on thousands of generated specs and fuzzed mutants.

tests/unit/fixtures/cdi/corpus/agreement.jsonl.gz holds each spec with the verdict and the decoded Spec that
the library's own code gave (generate_agreement.py says how it was recorded); this test replays every one
through the project's loader, without Go."""
import gzip
import json
import os

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import files as _cdi_files
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import validate as _cdi_validate
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import loader, schema, validate
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.names import validate_device_name

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "fixtures", "cdi", "corpus", "agreement.jsonl.gz")


def ours(text):
    """(ok, first failing stage, model) in the library harness's order: parse, panic (nil entry), version,
    kind (a one-character vendor/class panics there), devices (names)."""
    tree, err = loader.parse_bytes(text.encode("utf-8"))
    if err or not isinstance(tree, loader.YMap):
        return False, "parse", None
    coercer = schema._Coercer()
    model = coercer.coerce(tree, (schema._OBJ, "spec"), "")
    if coercer.errors or model is None:
        return False, "parse", None
    if coercer.panics:
        return False, "panic", model
    errors = validate.validate_spec(model)
    if any(rule == "version" and ("invalid version" in m or "must be at least" in m or "missing" in m) for rule, m in errors):
        return False, "version", model
    if any(rule == "kind" for rule, _m in errors):
        return False, "kind", model
    if any(rule == "panic" for rule, _m in errors):
        return False, "panic", model
    if any(validate_device_name(d.get("name", "")) for d in model.get("devices") or []):
        return False, "devices", model
    return True, "", model


def _norm(value):
    if isinstance(value, dict):
        out = dict((k, _norm(v)) for k, v in value.items() if k not in ("__null__", "__warnings__"))
        return dict((k, v) for k, v in out.items() if v not in ("", 0, False, None, [], {}))  # encoding/json omitempty
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def test_the_loader_agrees_with_the_library_on_every_recorded_spec():
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    assert len(cases) >= 4000
    disagree = []
    for i, case in enumerate(cases):
        ok, stage, model = ours(case["text"])
        if ok != case["ok"] or (not ok and stage != case["stage"]):
            disagree.append((i, case["ok"], case["stage"], ok, stage, case["text"][:300]))
        elif ok and _norm(model) != _norm(case["spec"]):
            disagree.append((i, "decoded", _norm(model), _norm(case["spec"])))
    accepted = sum(1 for c in cases if c["ok"])
    assert not disagree, "%d of %d disagree (%d accepted by the library); first: %r" % (len(disagree), len(cases), accepted, disagree[:3])


LIBRARY = os.path.join(os.path.dirname(CORPUS), "library")
with open(os.path.join(LIBRARY, "INDEX.json")) as _f:
    INDEX = json.load(_f)


@pytest.mark.parametrize("name", sorted(INDEX["files"]))
def test_library_corpus(name):
    """The library's own test specs and spec example (v1.1.0, cited in INDEX.json): the reader stage gives the
    library reader's verdict, and the whole layer accepts exactly what the library's tests expect to be valid."""
    entry = INDEX["files"][name]
    with open(os.path.join(LIBRARY, name), encoding="utf-8") as f:
        text = f.read()
    ok, stage, _model = ours(text)
    assert (("ok" if ok else stage) == entry["library_reader"]), (name, stage, entry)
    rec = _cdi_files.load_spec_file(os.path.join(LIBRARY, name))
    assert rec["ok"] is (entry["upstream_expects"] == "valid"), (name, rec["errors"])


def test_library_corpus_covers_every_spec_version():
    versions = set()
    for name in INDEX["files"]:
        with open(os.path.join(LIBRARY, name), encoding="utf-8") as f:
            spec, _errors, model = _cdi_validate.load_spec_data(f.read().encode("utf-8"), os.path.splitext(name)[1])
        if spec:
            versions.add(spec["cdiVersion"])
    assert versions >= {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"}
