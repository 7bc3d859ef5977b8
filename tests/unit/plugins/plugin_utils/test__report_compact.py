"""The JSON report keeps every record without repeating what every verified host says (issue 36.1): a verified host is
written against the shape of its kind and the reader (compact.restore / expand) gives back exactly the entry that was
written, whatever the host's strings hold; the same encoding for the page's detail (page.py, report.js)."""
import copy
import json
import random

import pytest
from fleetfixture import synthetic_fleet
from replayfleet import replay_fleet

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import compact as C
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import diff as D
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import jsonfile as J

VERIFIED = "COMPUTE_VERIFIED"


def _canonical(value):
    return json.dumps(value, sort_keys=True)


@pytest.fixture(scope="module")
def replayed():
    """A report of 300 hosts replayed from the real records of docs/evidence, its JSON as written and as read."""
    report = F.build_report(replay_fleet(300), "2026-12-04T03:00:00Z", run={"mode": "full", "cdi_source": "node"})
    text = J.render_json(report)
    return report, text, json.loads(text)


def test_every_host_is_written_against_its_shape_and_read_back_whole(replayed):
    report, _text, data = replayed
    verified = [n for n, e in report["hosts"].items() if e["state"] == VERIFIED]
    # a shape per kind of verified host and per failure (each cdi, runtime, compute variant, host, unreachable, ...)
    assert len(verified) > 200 and 8 <= len(data["shapes"]) <= 24
    assert all(C.is_compact(data["hosts"][n]) for n in report["hosts"])
    expanded = C.expand(data)
    assert "shapes" not in expanded
    for name, entry in report["hosts"].items():
        assert _canonical(expanded["hosts"][name]) == _canonical(entry), name
    # what a reader of verdicts needs is on the host's own line, without the reader
    line = data["hosts"][verified[7]]
    assert all(line[k] == report["hosts"][verified[7]][k] for k in C.INLINE)


def test_a_verified_host_costs_at_most_10_kb(replayed):
    """The goal of issue 36.1: <= 10 KB per verified host in the JSON (each host's GPU UUIDs, start times, durations
    and temperatures are its own: what the patch holds)."""
    report, text, data = replayed
    sizes = [len(json.dumps(data["hosts"][n], separators=(",", ":"))) for n, e in report["hosts"].items() if e["state"] == VERIFIED]
    assert max(sizes) <= 10 * 1024, max(sizes)
    full = [len(json.dumps(e, separators=(",", ":"))) for e in report["hosts"].values() if e["state"] == VERIFIED]
    assert sum(sizes) * 20 < sum(full)          # about 70 KB each, written whole
    patch = data["hosts"][[n for n, e in report["hosts"].items() if e["state"] == VERIFIED][30]]["patch"]
    assert {op[0].rsplit("/", 1)[-1] for op in patch} <= {"started_at", "duration_ms", "observed"}, patch


NOT_VERIFIED = ("FAILED_AT_HOST", "FAILED_AT_CDI", "FAILED_AT_RUNTIME", "FAILED_AT_COMPUTE", "INCONCLUSIVE", "UNREACHABLE",
                "RUN_FAILED")


@pytest.mark.parametrize("state", NOT_VERIFIED)
def test_a_host_not_verified_is_read_back_exactly_from_its_shape(replayed, state):
    """Issue 45.2: a host of every verdict that is not verified is written against the shape of its failure (its first
    host of that kind and signature) and restore, expand and the report_expand filter give its entry back exactly."""
    from ansible_collections.gpuprobe.layers.plugins.filter.report_expand import report_expand  # pylint: disable=import-outside-toplevel
    report, _text, data = replayed
    names = [n for n, e in report["hosts"].items() if e["state"] == state]
    assert names and all(C.is_compact(data["hosts"][n]) for n in names)
    # more than the shape's own host: the others are patches against it
    assert len(set(data["hosts"][n]["shape"] for n in names)) < len(names) or len(names) == 1
    expanded, filtered = C.expand(data), report_expand(data)
    for name in names:
        assert _canonical(C.restore(data, data["hosts"][name])) == _canonical(report["hosts"][name]), name
        assert _canonical(expanded["hosts"][name]) == _canonical(report["hosts"][name]), name
        assert _canonical(filtered["hosts"][name]) == _canonical(report["hosts"][name]), name
        line = data["hosts"][name]
        assert all(line[k] == report["hosts"][name][k] for k in C.INLINE)


def test_a_host_not_verified_costs_at_most_10_kb_on_average(replayed):
    """The goal of issue 45.2: <= 10 KB per host not verified on average (what its failure's hosts say alike is written
    once, in the shapes); whole, a failed 8-GPU host was 48 to 68 KB. The shapes are the fleet's, written once: here a
    shape per kind of verified host and per failure, bounded."""
    report, text, data = replayed
    sizes = dict((state, [len(json.dumps(data["hosts"][n], separators=(",", ":"))) for n, e in report["hosts"].items()
                          if e["state"] == state]) for state in NOT_VERIFIED)
    every = [size for state in NOT_VERIFIED for size in sizes[state]]
    assert len(every) >= 40 and sum(every) / len(every) <= 10 * 1024, sizes
    assert max(every) <= 10 * 1024, sizes
    whole = [len(json.dumps(e, separators=(",", ":"))) for e in report["hosts"].values() if e["state"] in ("FAILED_AT_CDI", "FAILED_AT_HOST")]
    assert sum(sizes["FAILED_AT_CDI"] + sizes["FAILED_AT_HOST"]) * 10 < sum(whole)
    assert len(json.dumps(data["shapes"], separators=(",", ":"))) <= 1536 * 1024
    assert len(text) < 2 * 1024 * 1024


def test_an_eight_gpu_fleet_is_written_compactly_too():
    report = F.build_report(synthetic_fleet(120), "2026-12-03T12:00:00Z", run={"mode": "full"})
    data = json.loads(J.render_json(report))
    verified = [n for n, e in report["hosts"].items() if e["state"] == VERIFIED]
    assert verified and all(C.is_compact(data["hosts"][n]) for n in verified)
    assert max(len(json.dumps(data["hosts"][n])) for n in verified) <= 10 * 1024
    assert _canonical(C.expand(data)["hosts"]) == _canonical(report["hosts"])


def _tokens(entry):
    return C.host_tokens(entry)


def test_a_host_whose_strings_hold_the_shape_s_tokens_is_still_written_exactly(replayed):
    """A host that names the shape host (or its GPU) in its own records: swapping its tokens would not come back the
    same, so it is encoded without swapping (or written whole): never read back otherwise."""
    report, _text, _data = replayed
    entries = [e for e in report["hosts"].values() if e["state"] == VERIFIED]
    shapes = C.Shapes()
    for e in entries:
        shapes.add(e)
    first = entries[0]
    other = copy.deepcopy(next(e for e in entries[1:] if C.shape_key(e) == C.shape_key(first)))
    other["layers"]["host"]["checks"][0]["observed"] = "%s and %s" % (first["name"], _tokens(first)[1])
    other["layers"]["k8s"]["reason"] = "%s vs %s" % (_tokens(other)[1], _tokens(first)[1])
    line = shapes.encode(other)
    restored = C.restore({"shapes": shapes.as_json()}, json.loads(json.dumps(line)))
    assert _canonical(restored) == _canonical(other)


@pytest.mark.parametrize("change", [
    lambda e: e["layers"]["host"].update(duration_ms=1),        # an int where the shape has a float
    lambda e: e["layers"]["host"]["checks"][0].update(observed=True),
    lambda e: e["layers"]["host"]["checks"].pop(),              # a list of another length
    lambda e: e["layers"]["cdi"].pop("versions"),               # a key the shape has and this host has not
    lambda e: e["layers"]["cdi"].update({"new/key~x": {"a": [1, None]}}),   # JSON Pointer escapes
    lambda e: e["layers"]["host"].update(duration_ms=-0.0),
])
def test_what_differs_in_type_or_shape_is_restored_exactly(replayed, change):
    report, _text, _data = replayed
    entries = [e for e in report["hosts"].values() if e["state"] == VERIFIED]
    shapes = C.Shapes()
    shapes.add(entries[0])
    host = copy.deepcopy(next(e for e in entries[1:] if C.shape_key(e) == C.shape_key(entries[0])))
    change(host)
    if C.shape_key(host) != C.shape_key(entries[0]):
        pytest.skip("another kind")
    line = json.loads(json.dumps(shapes.encode(host)))
    assert json.dumps(C.restore({"shapes": shapes.as_json()}, line), sort_keys=True) == json.dumps(host, sort_keys=True)


def test_swapping_in_the_json_text_is_swapping_in_every_string():
    """The writer swaps tokens in the JSON text (fast); the reader and the page's script in every string of the
    document (docs/usage.md). They must agree whatever escapes the text holds (a token after a backslash, inside a
    \\uXXXX, overlapping tokens)."""
    rng = random.Random(36)
    parts = ["a", "b", "n", "u", "0", "e", "9", "x", "-", "\\", '"', "\n", "\t", "\u00e9", "\x1b", "GPU-ab", "ab9e", "/"]
    for _n in range(3000):
        old = ["".join(rng.choice("abnu0e9x-1") for _n in range(rng.randint(6, 8))) for _n in range(2)]
        if len(set(old)) < 2:
            continue
        strings = ["".join(rng.choice(parts + old) for _n in range(rng.randint(0, 14))) for _n in range(3)]
        doc = {strings[0]: [strings[1], {"k": strings[2]}]}
        new = ["TOKEN-%d-zz" % i for i in range(2)]
        assert json.loads(C._swap(json.dumps(doc, sort_keys=True), old, new)) == C.swap_strings(doc, old, new), (doc, old)


def test_diff_and_apply_are_each_other_s_inverse():
    rng = random.Random(7)

    def value(depth=0):
        kind = rng.randint(0, 6 if depth < 3 else 3)
        if kind == 0:
            return rng.choice([None, True, False, 0, 1, 1.5, -0.0])
        if kind in (1, 2, 3):
            return rng.choice(["", "x", "a/b", "~0", "GPU-1"])
        if kind == 4:
            return [value(depth + 1) for _n in range(rng.randint(0, 3))]
        return dict((rng.choice(["a", "b", "c/d", "e~f"]), value(depth + 1)) for _n in range(rng.randint(0, 3)))
    for _n in range(2000):
        a, b = value(), value()
        patch = C.diff(a, b)
        assert json.dumps(C.apply(copy.deepcopy(a), json.loads(json.dumps(patch))), sort_keys=True) == json.dumps(b, sort_keys=True)


def test_more_kinds_than_shapes_are_written_whole(monkeypatch, replayed):
    report, _text, _data = replayed
    monkeypatch.setattr(C, "SHAPE_LIMIT", 1)
    again = F.build_report(replay_fleet(60), "t")
    data = json.loads(J.render_json(again))
    assert len(data["shapes"]) == 1
    kinds = set(C.shape_key(e) for e in again["hosts"].values() if e["state"] == VERIFIED)
    assert len(kinds) > 1
    whole = [n for n, e in again["hosts"].items() if e["state"] == VERIFIED and not C.is_compact(data["hosts"][n])]
    assert whole and _canonical(C.expand(data)["hosts"]) == _canonical(again["hosts"])


def test_a_report_without_shapes_reads_as_it_is():
    """A schema 2 report (every host whole): the reader changes nothing."""
    old = {"schema_version": 2, "hosts": {"n": {"name": "n", "verdict": VERIFIED, "layers": {"host": {"status": "PASS"}}}}}
    assert C.expand(old) == old and C.restore(old, old["hosts"]["n"]) == old["hosts"]["n"]


def test_the_comparison_of_two_reports_reads_the_verified_hosts_whole(replayed):
    report, _text, data = replayed
    newer = copy.deepcopy(report)
    name = next(n for n, e in newer["hosts"].items() if e["state"] == VERIFIED)
    newer["hosts"][name]["layers"]["host"]["versions"]["driver"] = "580.200.01"
    diff = D.diff_reports(data, json.loads(J.render_json(newer)))
    assert list(diff["changed"]) == [name]
    assert diff["changed"][name] == [{"field": "layers.host.versions.driver", "old": "580.159.04", "new": "580.200.01"}]
