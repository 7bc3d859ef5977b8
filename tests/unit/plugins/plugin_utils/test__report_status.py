"""plugin_utils/_report/status.py: the run's gate, one list per case, and its exit status (issue 36.3). The real runs
are tests/integration/test_exit_contract.py and test_verify_script.py."""
import pytest

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import status


def _hosts(**states):
    out = {}
    for name, state in states.items():
        entry = {"verdict": state, "signature": None, "reachable": True, "unverifiable": None}
        if state == "UNREACHABLE":
            entry.update(verdict="INCONCLUSIVE", reachable=False, unverifiable="host unreachable: refused")
        elif state == "RUN_FAILED":
            entry.update(verdict="INCONCLUSIVE", unverifiable="verify run failed: no python")
        elif state.startswith("FAILED_AT_"):
            entry["signature"] = "cdi.spec.version"
        out[name] = entry
    return out


@pytest.mark.parametrize("states,require,report,expected", [
    ({"a": "COMPUTE_VERIFIED"}, True, "written", ("passed", 0)),
    ({"a": "INCONCLUSIVE", "b": "FAILED_AT_CDI"}, False, "written", ("passed", 0)),   # audit/full: findings
    ({"a": "COMPUTE_VERIFIED", "b": "FAILED_AT_CDI"}, True, "written", ("not_verified", 1)),
    ({"a": "COMPUTE_VERIFIED", "b": "UNREACHABLE"}, False, "written", ("not_checked", 2)),
    ({"a": "RUN_FAILED"}, True, "written", ("not_checked", 2)),
    # a proven failure outranks a host to try again; a report not written outranks both
    ({"a": "FAILED_AT_CDI", "b": "UNREACHABLE"}, True, "written", ("not_verified", 1)),
    ({"a": "FAILED_AT_CDI", "b": "UNREACHABLE"}, True, "failed", ("report_not_written", 3)),
    ({"a": "COMPUTE_VERIFIED"}, True, "not written (check mode)", ("passed", 0)),
])
def test_status_and_exit(states, require, report, expected):
    got = status.gate(_hosts(**states), "postcheck" if require else "full", require, report)
    assert (got["status"], got["exit_status"]) == expected


def test_one_list_per_case():
    got = status.gate(_hosts(a="COMPUTE_VERIFIED", b="FAILED_AT_CDI", c="UNREACHABLE", d="RUN_FAILED"), "postcheck", True,
                      "written", failing={"b": "b is FAILED_AT_CDI", "c": "c could not", "d": "d could not"})
    assert got["verified"] == ["a"]
    assert got["not_verified"] == {"b": "FAILED_AT_CDI cdi.spec.version"}
    assert got["unreachable"] == {"c": "host unreachable: refused"}
    assert got["run_failed"] == {"d": "verify run failed: no python"}
    # an unreachable host has no verdict here (it is not INCONCLUSIVE: it was not checked)
    assert got["verdicts"] == {"a": "COMPUTE_VERIFIED", "b": "FAILED_AT_CDI"}
    assert sorted(got["unverifiable"]) == ["c", "d"]
    assert status.retry_text(got) == "b\nc\nd\n"
    lines = status.gate_lines(got, "/r/gpuprobe.retry")
    assert lines[0] == "gate: not_verified (exit status 1 with scripts/verify.sh or the status file)"
    assert lines[1] == ("the play recap counts 3 hosts failed=1 by the final gate: 1 host unreachable, 1 host whose verify "
                        "run failed, 1 host not COMPUTE_VERIFIED in this post-check (the report says why, per host); "
                        "to run them again: --limit @/r/gpuprobe.retry")


def test_nothing_to_retry():
    got = status.gate(_hosts(a="COMPUTE_VERIFIED"), "full", False, "written")
    assert status.retry_text(got) == "" and len(status.gate_lines(got)) == 1
