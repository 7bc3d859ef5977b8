"""Issue 34, "Done when": the controller's report path fed random records shaped like the result contract, valid and
broken, with hostile strings (control characters, Markdown, HTML) in every field, for several nodes beside an honest
one. Whatever they hold: no exception, every node reported (the honest one COMPUTE_VERIFIED), every format escaped
(Markdown as a CommonMark+GFM renderer reads it, HTML, JUnit well-formed, the JSON readable) and every line printed on
the terminal one line that acts on nothing. Deterministic (derandomized, no example database) and bounded."""
import json
import os
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings, strategies as st

from actionlab import make_action
from hostilefixture import HOSTILE, assert_html_safe, assert_junit_safe, assert_markdown_safe, assert_terminal_safe
from test_fleet_report import HOSTVARS, record

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, LAYERS, NOT_RUN, PASS, STATUSES, WARN, LayerBuilder

TEXT = st.one_of(st.sampled_from(HOSTILE), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30))
# something that is not what the contract says a field holds
JUNK = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.booleans(), TEXT, st.lists(st.integers(), max_size=3),
                 st.dictionaries(TEXT, st.integers(), max_size=2))
STATUS = st.one_of(st.sampled_from(STATUSES), st.sampled_from(STATUSES), TEXT)


def _maybe(valid, broken=JUNK):
    """Mostly a value of the contract, sometimes something else."""
    return st.one_of(valid, valid, valid, broken)


CHECK = st.fixed_dictionaries({
    "id": _maybe(TEXT), "status": STATUS, "subject": _maybe(st.one_of(st.none(), TEXT)),
    "expected": _maybe(st.one_of(st.none(), TEXT)), "observed": _maybe(st.one_of(st.none(), TEXT)),
    "hint": _maybe(st.one_of(st.none(), TEXT))})
GPU_ROW = st.fixed_dictionaries({
    "index": _maybe(st.one_of(st.none(), st.integers(0, 7))), "uuid": _maybe(TEXT), "model": _maybe(TEXT),
    "expected": _maybe(st.booleans()), "seen_in_container": st.booleans(), "ordinal": st.integers(0, 7), "status": STATUS,
    "signature": _maybe(st.one_of(st.none(), TEXT)), "reason": _maybe(st.one_of(st.none(), TEXT))})
HOST_GPU = st.fixed_dictionaries({"index": st.integers(0, 7), "uuid": TEXT, "name": _maybe(TEXT),
                                  "mig": _maybe(st.one_of(st.none(), st.fixed_dictionaries(
                                      {"instances": _maybe(st.lists(st.fixed_dictionaries({"uuid": TEXT}), max_size=2))})))})
EVIDENCE = _maybe(st.fixed_dictionaries({}, optional={
    "gpus": _maybe(st.lists(st.one_of(GPU_ROW, HOST_GPU), max_size=3)),
    "container": _maybe(st.fixed_dictionaries({"executed": st.booleans(), "cdi_devices": _maybe(st.lists(TEXT, max_size=2))})),
    "identity": _maybe(st.fixed_dictionaries({"expected_gpus": _maybe(st.lists(st.fixed_dictionaries(
        {"index": st.integers(0, 3), "uuid": TEXT, "mig_uuid": TEXT}), max_size=2))})),
    "nodes": _maybe(st.lists(st.fixed_dictionaries({"name": TEXT, "gpu_labels": _maybe(st.dictionaries(TEXT, TEXT, max_size=2))}),
                             max_size=2)),
    "spec_digest": TEXT, "note": TEXT}))


@st.composite
def records(draw):
    """layer -> a record shaped like the contract (every field mostly right, sometimes not), or something else."""
    out = {}
    for layer in draw(st.lists(st.sampled_from(LAYERS + ("gpu",)), unique=True, max_size=5)):
        status = draw(STATUS)
        out[layer] = draw(_maybe(st.fixed_dictionaries({
            "layer": _maybe(st.just(layer), st.sampled_from(LAYERS)), "status": st.just(status),
            "reason": _maybe(st.one_of(TEXT, st.just("a reason"))),
            "checks": _maybe(st.lists(_maybe(CHECK), max_size=4)), "evidence": EVIDENCE,
            "not_proven": _maybe(st.lists(TEXT, max_size=2)), "versions": _maybe(st.dictionaries(TEXT, TEXT, max_size=2)),
            "started_at": _maybe(TEXT), "duration_ms": _maybe(st.floats(0, 1e4)),
            "signature": _maybe(st.one_of(TEXT, st.just("x.failed")) if status == FAIL else st.none()),
            "points_to": _maybe(st.sampled_from((None,) + LAYERS + ("image",)))})))
    return draw(_maybe(st.just(out), JUNK))


VALID_ROW = st.fixed_dictionaries({
    "index": st.one_of(st.none(), st.integers(0, 7)), "uuid": TEXT, "model": TEXT, "expected": st.booleans(),
    "seen_in_container": st.booleans(), "ordinal": st.integers(0, 7), "status": st.sampled_from(STATUSES),
    "signature": st.one_of(st.none(), TEXT), "reason": st.one_of(st.none(), TEXT)})
VALID_HOST_GPU = st.fixed_dictionaries({"index": st.integers(0, 7), "uuid": TEXT, "name": TEXT, "mig": st.one_of(
    st.none(), st.fixed_dictionaries({"instances": st.lists(st.fixed_dictionaries({"uuid": TEXT}), max_size=2)}))})


@st.composite
def conforming(draw):
    """Records that conform to the contract, built with its own LayerBuilder, hostile text in every string field."""
    out = {}
    for layer in draw(st.lists(st.sampled_from(LAYERS), unique=True, min_size=1, max_size=5)):
        b = LayerBuilder(layer)
        for status, texts in draw(st.lists(st.tuples(st.sampled_from(STATUSES), st.lists(TEXT, min_size=5, max_size=5)),
                                           max_size=4)):
            b.add(texts[0], status, texts[1], texts[2], texts[3], hint=texts[4])
        if layer == "host":
            b.evidence = {"gpus": draw(st.lists(VALID_HOST_GPU, max_size=3))}
        elif layer == "compute":
            b.evidence = {"gpus": draw(st.lists(VALID_ROW, max_size=3)),
                          "container": {"executed": draw(st.booleans()), "cdi_devices": draw(st.lists(TEXT, max_size=2))}}
        elif layer == "k8s":
            b.evidence = {"nodes": [{"name": draw(TEXT), "gpu_labels": draw(st.dictionaries(TEXT, TEXT, max_size=2))}]}
        else:
            b.evidence = {"spec_digest": draw(TEXT), "identity": {"expected_gpus": [{"index": 0, "uuid": draw(TEXT)}]}}
        b.versions = draw(st.dictionaries(st.sampled_from(("driver", "runtime", "cuda_driver_api")), TEXT, max_size=2))
        status = draw(st.one_of(st.none(), st.sampled_from(STATUSES)))
        out[layer] = b.build(status=status, reason=draw(TEXT) or "r", signature=draw(TEXT) or "s",
                             points_to=draw(st.sampled_from(LAYERS + ("image",))))
    return out


NODE = st.one_of(
    conforming().map(lambda r: {"verify_result": {"records": r}}),
    conforming().map(lambda r: {"verify_result": {"records": r}}),
    records().map(lambda r: {"verify_result": {"records": r}}),
    st.tuples(records(), TEXT).map(lambda rt: {"verify_result": {"failed": True, "msg": rt[1], "records": rt[0]}}),
    TEXT.map(lambda t: {"verify_result": {"unreachable": True, "msg": t}}),
    st.builds(lambda status, text: {"verify_result": {"records": {"host": dict(record("host", status), reason=text)}}},
              st.sampled_from((PASS, WARN, FAIL, NOT_RUN)), TEXT),
)


@settings(max_examples=60, deadline=None, derandomize=True, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(NODE, min_size=1, max_size=4))
def test_random_records_never_cost_the_fleet_its_report_nor_escape_their_format(nodes):
    hostvars = dict(("node-%d" % i, hv) for i, hv in enumerate(nodes))
    hostvars["honest"] = HOSTVARS["ok"]
    names = sorted(hostvars)
    where = tempfile.mkdtemp(prefix="gpuprobe-fuzz-")
    try:
        status = os.path.join(where, "status.json")
        action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": names, "report_dir": os.path.join(where, "r"),
                                                                 "status_file": status})
        result = action.run(task_vars={"hostvars": hostvars})
        assert sorted(result["verdicts"]) == names
        assert result["verdicts"]["honest"] == "COMPUTE_VERIFIED"
        with open(status) as f:
            assert json.load(f)["report"] == "written"
        for why in result["unverifiable"].values():
            assert why.startswith(("verify run failed: ", "host unreachable: "))
        files = result["files"]
        with open(files["markdown"]) as f:
            assert_markdown_safe(f.read(), names)
        with open(files["html"]) as f:
            assert_html_safe(f.read())
        with open(files["junit"]) as f:
            assert_junit_safe(f.read())
        with open(files["json"]) as f:
            assert sorted(json.load(f)["hosts"]) == names
        for line in result["summary_lines"] + list(result["failing"].values()):
            assert_terminal_safe(line)
    finally:
        shutil.rmtree(where, ignore_errors=True)
