"""Where (issue 36.2): every inventory group a host is in and the values of the group_by variables, counted by state;
a cause's hosts said concentrated in one place only when they are (most of them there, and that many there would be
rare by chance); the ids of the causes the same from one run to the next."""
import pytest
from replayfleet import replay_fleet

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as V
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import states as ST
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import where as W


def test_a_host_s_places():
    where = W.host_where(["zone_c", "all", "rack_r03", "zone_c"], {"rack": "r03", "bmc": {"fw": [1, 2]}, "none": None, "empty": ""})
    assert where == {"groups": ["rack_r03", "zone_c"], "vars": {"bmc": '{"fw": [1, 2]}', "rack": "r03"}}
    assert W.places(where) == [("group", "rack_r03"), ("group", "zone_c"), ("bmc", '{"fw": [1, 2]}'), ("rack", "r03")]
    assert W.host_where(None, None) == {"groups": [], "vars": {}}
    assert len(W.host_where([], {"x": "y" * 500})["vars"]["x"]) == W.VALUE_LIMIT


def _fleet(n_racks, rack_size, failing):
    """Where of a fleet of n_racks racks (groups rack_rNN and zone_a/zone_b, variable rack): ``failing`` -> the
    members (their where) of one cause."""
    members, tally = [], W.WhereTally(["rack"])
    for r in range(n_racks):
        for s in range(rack_size):
            where = W.host_where(["gpu_nodes", "rack_r%02d" % r, "zone_%s" % "ab"[r % 2]], {"rack": "r%02d" % r})
            state = "FAILED_AT_CDI" if (r, s) in failing else "COMPUTE_VERIFIED"
            tally.add({"where": where, "state": state})
            if (r, s) in failing:
                members.append(where)
    return members, tally.summary("COMPUTE_VERIFIED"), n_racks * rack_size


@pytest.mark.parametrize("failing,said", [
    # 40 of a cause's 45 hosts in rack 3 (of 40 racks): said, the rack (not its zone, which also holds them)
    ({(3, s) for s in range(40)} | {(r, 0) for r in range(10, 15)}, ("rack_r03", 40)),
    # 4 hosts, all in one rack of 4 (of 10): rare by chance, said
    ({(2, s) for s in range(4)}, ("rack_r02", 4)),
    # 2 hosts in one rack of 4 (of 10): not rare enough for a fleet of 20 places
    ({(2, 0), (2, 1)}, None),
    # spread over the racks: nowhere
    ({(r, 0) for r in range(40)}, None),
    # 20 of 21 in zone_a, which holds half the fleet: that would be rare by chance too (gpu_nodes, which holds every
    # host, is never a place of concentration)
    ({(r, 0) for r in range(0, 40, 2)} | {(1, 0)}, ("zone_a", 20)),
    # 12 of 21 in zone_a: a majority, but not rare for a half of the fleet
    ({(r, 0) for r in range(0, 24, 2)} | {(r, 0) for r in range(1, 19, 2)}, None),
    # one host: never
    ({(5, 0)}, None),
])
def test_a_cause_is_said_concentrated_only_where_it_is(failing, said):
    racks = 40 if len(failing) > 30 or any(r >= 10 for r, _s in failing) else 10
    members, summary, total = _fleet(racks, 40 if racks == 40 else 4, failing)
    got = W.concentration(members, summary["places"], total)
    assert (got["concentrated"]["value"], got["concentrated"]["hosts"]) == said if said else got["concentrated"] is None, got
    # the places listed: the group and the variable that hold the same hosts are one place
    labels = [W.place_label(p["dim"], p["value"]) for p in got["places"]]
    assert not [x for x in labels if x.startswith("rack=") and "rack_" + x[len("rack="):] in labels]


def test_the_narrowest_place_is_named_a_rack_before_its_zone():
    """issue 43.8: 2,000 hosts, 40 racks of 50 in 4 zones; a cause of 40 hosts, all in zone_b, 21 of them in rack_r05.
    Both are rare by chance (the zone even rarer: all of them); the rack, where the operator goes, is named."""
    members, tally = [], W.WhereTally()
    for r in range(40):
        for s in range(50):
            where = W.host_where(["rack_r%02d" % r, "zone_%s" % "abcd"[r // 10]])
            bad = (r == 5 and s < 21) or (r in (6, 7) and s < 10 and (r, s) != (7, 9))
            tally.add({"where": where, "state": "FAILED_AT_CDI" if bad else "COMPUTE_VERIFIED"})
            if bad:
                members.append(where)
    assert len(members) == 40
    got = W.concentration(members, tally.summary("COMPUTE_VERIFIED")["places"], 2000)
    assert got["concentrated"] == {"dim": "group", "value": "rack_r05", "hosts": 21}


def test_the_words_of_a_concentration():
    group = {"cause": "cdi.host.library_version", "count": 59, "where": {"concentrated": {"dim": "group", "value": "rack_r03", "hosts": 40}}}
    assert W.concentration_line(group) == "cdi.host.library_version: 59 hosts, 40 of them in rack_r03"
    assert W.concentration_line(group, cause=False) == "40 of them in rack_r03"
    group = {"cause": "connection timed out", "count": 15, "where": {"concentrated": {"dim": "rack", "value": "r11", "hosts": 15}}}
    assert W.concentration_line(group) == "connection timed out: 15 hosts, all of them with rack=r11"
    assert W.concentration_line({"cause": "x", "count": 3, "where": {"places": [], "concentrated": None}}) is None


@pytest.fixture(scope="module")
def replayed():
    return F.build_report(replay_fleet(2000), "2026-12-04T03:00:00Z", run={"mode": "full", "cdi_source": "node"})


def test_the_replayed_fleet_says_where(replayed):
    report = replayed
    assert report["where"]["by"] == ["group", "rack", "zone"]
    places = report["where"]["places"]
    assert places["group"]["gpu_nodes"]["hosts"] == 2000 and places["group"]["rack_r03"]["hosts"] == 50
    assert places["rack"]["r03"] == places["group"]["rack_r03"]
    assert places["group"]["rack_r03"]["states"]["FAILED_AT_CDI"] == 40
    # every host counted once per dimension
    for dim in ("rack", "zone"):
        assert sum(row["hosts"] for row in places[dim].values()) == 2000
    # the places with the most hosts not verified first
    nv = [row["hosts"] - row["states"].get("COMPUTE_VERIFIED", 0) for row in places["rack"].values()]
    assert nv == sorted(nv, reverse=True)
    stale = next(g for g in report["groups"] if g["cause"] == "cdi.host.library_version")
    timeout = next(g for g in report["groups"] if g["cause"] == "connection timed out")
    lines = V.headlines(report)
    assert "cdi.host.library_version: {0:,} hosts, 40 of them in rack_r03".format(stale["count"]) in lines
    assert "connection timed out: 15 hosts, all of them in rack_r11" in lines
    assert [g["cause"] for g in report["groups"] if (g["where"] or {}).get("concentrated")] == [stale["cause"], timeout["cause"]]
    summary = F.summary_lines(report)
    assert any(line.endswith("; 40 of them in rack_r03)") and "cdi.host.library_version" in line for line in summary)
    md = V.render_markdown(report)
    assert "- cdi.host.library\\_version: {0:,} hosts, 40 of them in rack\\_r03".format(stale["count"]) in md
    assert "| 40 of them in rack\\_r03 |" in md


def test_the_ids_of_causes_hold_from_run_to_run(replayed):
    """A link to a cause (report.html#cause=<id>) holds the next night: the id is made of the cause, not its rank."""
    tonight = dict((g["cause"], g["id"]) for g in replayed["groups"])
    smaller = F.build_report(replay_fleet(400)[::-1], "2026-12-05T03:00:00Z")
    for g in smaller["groups"]:
        assert g["id"] == tonight[g["cause"]]
    assert tonight["cdi.host.library_version"] == "failed-at-cdi--cdi.host.library_version--cdi"
    assert len(set(tonight.values())) == len(tonight)
    assert all(set(i) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") for i in tonight.values())
    # a cause that is not one word: shortened, with a digest of the whole (two causes never share an id)
    a, b = ST.cause_id("INCONCLUSIVE", "x" * 200 + "a"), ST.cause_id("INCONCLUSIVE", "x" * 200 + "b")
    assert a != b and len(a) <= ST.ID_LIMIT and ST.cause_id("UNREACHABLE", "a b") != ST.cause_id("UNREACHABLE", "a-b")
