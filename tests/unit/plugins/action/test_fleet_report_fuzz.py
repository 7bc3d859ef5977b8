"""Issue 34, "Done when": the controller's report path fed random records shaped like the result contract, valid and
broken, with hostile strings (control characters, Markdown, HTML) in every field, for several nodes beside an honest
one. Whatever they hold: no exception, every node reported (the honest one COMPUTE_VERIFIED), every format escaped
(Markdown as a CommonMark+GFM renderer reads it, HTML, JUnit well-formed, the JSON strict) and every line printed on
the terminal one line that acts on nothing. Issue 43: numbers no report can hold (NaN, infinities, thousands of digits)
anywhere, and results that name their run beside records of another (started long before it or in the future, another
run id, container or self-built CDI kind): such a node is RUN_FAILED, never its verdict. Deterministic (derandomized,
no example database) and bounded."""
import json
import os
import shutil
import tempfile
import time

from hypothesis import HealthCheck, given, settings, strategies as st

from actionlab import make_action
from hostilefixture import HOSTILE, assert_html_safe, assert_junit_safe, assert_markdown_safe, assert_terminal_safe
from test_fleet_report import HOSTVARS, record

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, LAYERS, NOT_RUN, PASS, STATUSES, WARN, LayerBuilder
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import intake as _intake

TEXT = st.one_of(st.sampled_from(HOSTILE), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30))
# numbers a report cannot hold (issue 43.4): not finite, beyond 64 bits, thousands of digits
HOSTILE_NUMBER = st.one_of(st.sampled_from((float("nan"), float("inf"), float("-inf"), 10 ** 4000, -(10 ** 4000), 1 << 64,
                                            -(1 << 63) - 1, 1e300)), st.floats(), st.integers())
# something that is not what the contract says a field holds
JUNK = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.booleans(), TEXT, st.lists(st.integers(), max_size=3),
                 st.dictionaries(TEXT, st.integers(), max_size=2), HOSTILE_NUMBER)
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
    "spec_digest": TEXT, "note": TEXT, "reading": HOSTILE_NUMBER}))


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
            "started_at": _maybe(TEXT), "duration_ms": _maybe(st.floats(0, 1e4), HOSTILE_NUMBER),
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


RUN_ID = "20260101000000-7"
STARTED = time.time() - 60   # when "this run" (a verify_node result naming RUN_ID) started
# when a record of a result that names its run started: in the run, or long before it (replayed), or in the future
STARTED_AT = st.one_of(st.just(STARTED + 1), st.just(STARTED + 1), st.floats(0, 2e9), st.just(STARTED - 86400))
OTHER_RUN = st.sampled_from((RUN_ID, RUN_ID, "20200101000000-1", "x"))


@st.composite
def of_a_run(draw):
    """A verify_node result that names its run (run_id, run_started_at): conforming records, each started in the run or
    not, whose runtime and compute records name this run's id, containers and self-built devices, or another's."""
    out = draw(conforming())
    for layer, rec in out.items():
        rec["started_at"] = _intake.iso_time(draw(STARTED_AT))
        if layer == "runtime":
            rec["evidence"]["run_id"] = draw(OTHER_RUN)
            rec["evidence"]["container"] = {"name": "gpuprobe-%s-0a1b2c3d" % draw(OTHER_RUN)}
        if layer == "compute":
            rec["evidence"]["container"].update(container_name="gpuprobe-%s-0a1b2c3d" % draw(OTHER_RUN),
                                                cdi_devices=["gpuprobe.local/gpu-%s=0" % draw(OTHER_RUN)])
    return {"verify_result": {"records": out, "run_id": RUN_ID, "run_started_at": _intake.iso_time(STARTED)}}


def _of_this_run(result):
    """Whether every record of a result ``of_a_run`` made is this run's (then only the contract can refuse it)."""
    records = result["records"]
    runtime, compute = records.get("runtime"), records.get("compute")
    names = [runtime["evidence"]["run_id"], runtime["evidence"]["container"]["name"]] if runtime else []
    if compute:
        names += [compute["evidence"]["container"]["container_name"], compute["evidence"]["container"]["cdi_devices"][0]]
    return all(RUN_ID in n for n in names) and all(
        STARTED - 300 <= _intake.epoch_of(r["started_at"]) <= time.time() + 300 for r in records.values())


NODE = st.one_of(
    of_a_run(),
    conforming().map(lambda r: {"verify_result": {"records": r}}),
    conforming().map(lambda r: {"verify_result": {"records": r}}),
    records().map(lambda r: {"verify_result": {"records": r}}),
    st.tuples(records(), TEXT).map(lambda rt: {"verify_result": {"failed": True, "msg": rt[1], "records": rt[0]}}),
    TEXT.map(lambda t: {"verify_result": {"unreachable": True, "msg": t}}),
    st.builds(lambda status, text: {"verify_result": {"records": {"host": dict(record("host", status), reason=text)}}},
              st.sampled_from((PASS, WARN, FAIL, NOT_RUN)), TEXT),
)


def _refuse(constant):
    raise AssertionError("not strict JSON: %s" % constant)


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
        for name, hv in hostvars.items():
            result_ = hv.get("verify_result") or {}
            if result_.get("run_id") == RUN_ID and not _of_this_run(result_):
                # a record of another run is that node's RUN_FAILED, never its verdict (the contract's violations, when
                # there are any, are named first)
                why = "malformed" if _intake.violations(result_["records"]) else "record of another run"
                assert result["unverifiable"][name].startswith("verify run failed: %s record" % why
                                                               if why == "malformed" else "verify run failed: " + why), name
            if name in result["unverifiable"]:
                assert result["verdicts"][name] == "INCONCLUSIVE"
        files = result["files"]
        with open(files["markdown"]) as f:
            # (its hosts table lists the hosts not verified)
            assert_markdown_safe(f.read(), [n for n in names if result["verdicts"][n] != "COMPUTE_VERIFIED"])
        with open(files["html"]) as f:
            assert_html_safe(f.read())
        with open(files["junit"]) as f:
            assert_junit_safe(f.read())
        with open(files["json"]) as f:
            assert sorted(json.loads(f.read(), parse_constant=_refuse)["hosts"]) == names  # strict JSON: no NaN/Infinity
        with open(status) as f:
            json.loads(f.read(), parse_constant=_refuse)
        for line in result["summary_lines"] + list(result["failing"].values()):
            assert_terminal_safe(line)
    finally:
        shutil.rmtree(where, ignore_errors=True)
