"""Issue 43.8: the Markdown summary fits a GitHub comment (at most 65,536 characters) whatever the fleet: the 2,000
replayed hosts of docs/evidence, and 3,000 hosts that each fail their own way (every one a cause of its own). A larger
summary is made again with fewer hosts listed, then fewer names per cause, places, causes and pin values, and says
where the rest is (the JSON report)."""
from test_fleet_report import record

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as R

from replayfleet import replay_fleet  # (tests/unit/fixtures/report, on the path by tests/conftest.py)


def test_the_summary_of_2000_replayed_hosts_fits_a_github_comment():
    md = R.render_markdown(F.build_report(replay_fleet(2000), "2026-12-03T12:00:00Z", run={"mode": "full"}))
    assert len(md) <= R.MD_LIMIT == 65536
    assert "The first 250 of the 424 hosts not verified, failures first by cause (every host is in the JSON report):" in md
    # the causes are all there, with their places
    assert "| FAILED_AT_CDI | 58 | cdi.host.library\\_version |" in md


def test_a_fleet_of_3000_causes_fits_and_says_where_the_rest_is():
    hosts = [{"name": "gpu-%04d.dc1.example.com" % i, "records": {
        "host": record("host", PASS), "cdi": dict(record("cdi", FAIL), signature="cdi.vendor.failure_%04d" % i)},
        "groups": ["rack_%02d" % (i % 40)], "vars": {}, "pins": {}} for i in range(3000)]
    md = R.render_markdown(F.build_report(hosts, "2026-12-03T12:00:00Z", run={"mode": "full"}))
    assert len(md) <= R.MD_LIMIT
    assert "more causes in the JSON report's groups." in md and "more signatures in the JSON report's counts." in md
    assert "cut at" not in md
