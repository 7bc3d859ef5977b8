"""The exit contract of playbooks/verify-gpu.yml (docs/usage.md, "Exit statuses"), over real ansible-playbook
runs: a synthetic node tree (hostfixture.build_node, real mknod devices) reached through the local
connection, a host whose SSH port is closed (unreachable) and one without a usable Python. Audit mode
starts no container, and the unreachable cases run full and postcheck without a reachable node, so no GPU
and no podman are needed."""
import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

from hostfixture import build_node

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "verify-gpu.yml")
STOPPED = "invalid options, no node was run"
NO_NODE = "no node would be verified"
NO_TARGET = "leaves us with no hosts to target"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("exit-contract")
    build_node(str(base / "node"))
    inventory = {"all": {
        "vars": {"verify_root": str(base / "node"), "verify_nvml": False, "verify_k8s": False,
                 "verify_cdi_spec_dirs": ["/etc/cdi"]},
        "hosts": {
            "node": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "gone": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                     "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes"},
            "nopython": {"ansible_connection": "local", "ansible_python_interpreter": "/nonexistent/bin/python3"},
        },
        # a group of the node (docs/fleet.md's canary), a group without hosts (an empty new_nodes) and a model group
        # whose group_vars misspell a pin
        "children": {"canary": {"hosts": {"node": None}}, "new_nodes": {"hosts": {}},
                     "h200_r580": {"hosts": {"pinned": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
                                   "vars": {"gpuprobe_pins": {"drver_version": "580.95.05"}}}}}}
    (base / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return base


def _junit_latest_is_a_directory(reports):
    os.makedirs(str(reports))
    (reports / "gpuprobe-report-latest.json").write_text('{"previous": true}\n')
    os.makedirs(str(reports / "gpuprobe-report-latest.junit.xml"))


def _report_dir_cannot_be_created(reports):
    # the tests run as root, which a read-only mode does not stop: the report dir's parent is a regular file
    reports.parent.write_text("")


CASES = [
    # id, extra vars, --limit, expected status, text the output must hold, set-up of the report dir
    ("audit-ok", ["gpuprobe_mode=audit"], "node", 0, "1 host: ", None),
    ("unknown-mode", ["gpuprobe_mode=bogus"], "node", 2, "gpuprobe_mode is 'bogus': must be one of audit, full, postcheck", None),
    ("cdi-source-typo", ["gpuprobe_cdi_source=selfbuilt"], "node", 2, "gpuprobe_cdi_source is 'selfbuilt'", None),
    ("timeout-abc", ["gpuprobe_mode=audit", "verify_probe_timeout=abc"], "node", 2, "verify_probe_timeout", None),
    ("timeout-0", ["gpuprobe_mode=audit", "verify_layer_timeout=0"], "node", 2,
     "verify_layer_timeout is 0: must be a whole number of seconds greater than 0 and at most 86400", None),
    # issue 19.7: values that passed the option check and failed each node after it ran
    ("timeout-above-ansibles-limit", ["gpuprobe_mode=audit", "verify_probe_timeout=99999999999"], "node", 2,
     "verify_probe_timeout is 99999999999: must be a whole number of seconds greater than 0 and at most 86400", None),
    ("report-dir-empty", ["gpuprobe_mode=audit", "gpuprobe_report_dir="], "node", 2,
     "gpuprobe_report_dir is '': must be a non-empty text on one line", None),
    ("image-looks-like-an-option", ["verify_probe_image=--privileged"], "node", 2,
     "verify_probe_image is '--privileged': must be valid: probe_image '--privileged' is not an image reference", None),
    ("audit-self-built", ["gpuprobe_mode=audit", "gpuprobe_cdi_source=self-built"], "node", 2,
     "gpuprobe_mode=audit with gpuprobe_cdi_source=self-built", None),
    ("misspelt-mode", ["gpuprobe_mdoe=audit"], "node", 2, "unknown variable gpuprobe_mdoe: did you mean gpuprobe_mode?", None),
    # issue 22.3: a misspelt pin name was caught only in the report's drift table, after every node ran
    ("misspelt-pin-extra-var", ["gpuprobe_mode=audit", '{"gpuprobe_pins": {"cuda_api": "12.8"}}'], "node", 2,
     "has unknown pin names cuda_api: did you mean cuda_driver_api?", None),
    ("misspelt-pin-group-var", ["gpuprobe_mode=full"], "node,pinned", 2,
     "has unknown pin names drver_version: did you mean driver_version? (known: cdi_spec_digest, cuda_driver_api, "
     "driver_version, runtime_version) [pinned]", None),
    ("pattern-matches-nothing", ["gpuprobe_mode=postcheck", "gpuprobe_hosts=gpu_nodse"], None, 2,
     "gpuprobe_hosts 'gpu_nodse' matches no host of the inventory", None),
    # issue 22.1: --limit narrowed the run to no node, and the run ended with exit 0, no report (the pattern check
    # ran on localhost, which --limit leaves out); the class: every mode, a pattern and a limit that are disjoint,
    # a pattern of nothing within a limit, a limit matching nothing or an empty group (Ansible's own error, exit 1)
] + [
    ("pattern-and-limit-disjoint-%s" % mode, ["gpuprobe_mode=%s" % mode, "gpuprobe_hosts=gone"], "node", 2,
     "gpuprobe_hosts 'gone' and --limit 'node' have no host in common: " + NO_NODE, None) for mode in ("audit", "full", "postcheck")
] + [
    ("pattern-matches-nothing-within-limit-%s" % mode, ["gpuprobe_mode=%s" % mode, "gpuprobe_hosts=nosuch"], "canary", 2,
     "gpuprobe_hosts 'nosuch' matches no host of the inventory: " + NO_NODE, None) for mode in ("audit", "postcheck")
] + [
    ("group-pattern-and-limit-disjoint", ["gpuprobe_mode=postcheck", "gpuprobe_hosts=canary"], "gone,nopython", 2,
     "gpuprobe_hosts 'canary' and --limit 'gone,nopython' have no host in common", None),
    ("limit-matches-nothing", ["gpuprobe_mode=postcheck"], "nosuch", 1, NO_TARGET, None),
    ("limit-is-an-empty-group", ["gpuprobe_mode=postcheck"], "new_nodes", 1, NO_TARGET, None),
    ("limit-within-pattern", ["gpuprobe_mode=audit", "gpuprobe_hosts=all"], "canary", 0, "1 host: ", None),
    ("postcheck-not-verified", ["gpuprobe_mode=postcheck"], "node", 2,
     "not COMPUTE_VERIFIED: FAILED_AT_CDI", None),
    ("unreachable-audit", ["gpuprobe_mode=audit"], "node,gone,nopython", 2, "not checked: UNREACHABLE", None),
    ("unreachable-full", ["gpuprobe_mode=full"], "gone,nopython", 2, "not checked: RUN_FAILED", None),
    ("unreachable-postcheck", ["gpuprobe_mode=postcheck"], "gone", 2, "not checked: UNREACHABLE", None),
    ("report-dir-not-creatable", ["gpuprobe_mode=audit"], "node", 2, "gpuprobe report not written to", _report_dir_cannot_be_created),
    ("junit-latest-is-a-dir", ["gpuprobe_mode=audit"], "node", 2, "gpuprobe report not written to", _junit_latest_is_a_directory),
]


# the gate's status (README, "Exit statuses") of each case that writes the status file; the others: invalid_invocation
GATE = {"audit-ok": "passed", "limit-within-pattern": "passed", "postcheck-not-verified": "not_verified",
        "unreachable-audit": "not_checked", "unreachable-full": "not_checked", "unreachable-postcheck": "not_checked",
        "report-dir-not-creatable": "report_not_written", "junit-latest-is-a-dir": "report_not_written"}
EXIT = {"passed": 0, "not_verified": 1, "not_checked": 2, "report_not_written": 3, "invalid_invocation": 5}


@pytest.mark.parametrize("name,extra,limit,status,text,setup", CASES, ids=[c[0] for c in CASES])
def test_exit_status(lab, tmp_path, name, extra, limit, status, text, setup):
    reports = tmp_path / ("not-a-dir/reports" if setup is _report_dir_cannot_be_created else "reports")
    if setup:
        setup(reports)
    status_file = tmp_path / "status.json"
    retry_file = tmp_path / "retry.txt"
    argv = ["ansible-playbook", "-i", str(lab / "hosts.yml"), PLAYBOOK] + (["--limit", limit] if limit else []) + [
        "-e", "gpuprobe_report_dir=%s" % reports, "-e", "gpuprobe_status_file=%s" % status_file,
        "-e", "gpuprobe_retry_file=%s" % retry_file]
    for item in extra:
        argv += ["-e", item]
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, check=False)
    output = r.stdout + r.stderr
    assert (r.returncode, text in output) == (status, True), output[-4000:]

    if status != 0 and name not in GATE:
        # stopped before any node ran: no node task, no report; the status file says invalid_invocation (the preflight
        # wrote it), except when Ansible itself stopped before any play (a --limit that matches no host)
        assert STOPPED in output or NO_NODE in output or NO_TARGET in output
        assert "Verify the GPU layers of this node" not in output
        assert not reports.exists() and not retry_file.exists()
        if NO_TARGET in output:
            assert not status_file.exists()
        else:
            state = json.loads(status_file.read_text())
            assert (state["status"], state["exit_status"], state["report"], state["hosts"]) == (
                "invalid_invocation", 5, "not written", 0)
            assert text in state["error"]
        return
    state = json.loads(status_file.read_text())
    assert (state["status"], state["exit_status"]) == (GATE[name], EXIT[GATE[name]]), state
    failing = sorted(state["failing"])
    assert retry_file.read_text().split() == failing
    # the last play fails exactly the hosts the status file names, each with one line that says its state (the status
    # file says each host's why, the summary each cause's)
    kinds = dict([(h, "not checked: UNREACHABLE") for h in state["unreachable"]] + [(h, "not checked: RUN_FAILED") for h in state["run_failed"]])
    for host in failing:
        why = kinds.get(host) or "not COMPUTE_VERIFIED: "
        assert "fatal: [%s]: FAILED! => {\"changed\": false, \"msg\": \"%s" % (host, why) in output, host
        assert state["failing"][host].startswith(host + " ")
    if setup:
        assert state["report"] == "failed" and "gpuprobe report not written" in state["error"]
        # nothing of this run was kept, no temporary file left; the previous latest.* are untouched
        left = sorted(os.listdir(str(reports))) if reports.is_dir() else []
        assert [f for f in left if not f.startswith("gpuprobe-report-latest")] == []
        if setup is _junit_latest_is_a_directory:
            assert (reports / "gpuprobe-report-latest.json").read_text() == '{"previous": true}\n'
            assert left == ["gpuprobe-report-latest.json", "gpuprobe-report-latest.junit.xml"]
        return
    assert state["report"] == "written"
    files = sorted(os.path.basename(p) for p in glob.glob(str(reports / "*")))
    # one run directory with the four files, the latest symlink to it and the four latest.* symlinks through it
    assert len(files) == 6 and not [f for f in os.listdir(str(reports)) if f.startswith(".")], files
    assert len(os.listdir(str(reports / "gpuprobe-report-latest"))) == 4
    junit = (reports / "gpuprobe-report-latest.junit.xml").read_text()
    unverifiable = sorted(state["unverifiable"])
    assert unverifiable == sorted(h for h in limit.split(",") if h not in ("node", "canary"))
    # one list per case: an unreachable host is not INCONCLUSIVE in the status file, it has no verdict there
    assert sorted(state["unreachable"]) == (["gone"] if "gone" in limit else [])
    assert sorted(state["run_failed"]) == (["nopython"] if "nopython" in limit else [])
    assert sorted(state["verdicts"]) == sorted(set(state["verified"]) | set(state["not_verified"]))
    assert not set(state["verdicts"]) & set(unverifiable)
    if "gone" in limit:
        # the screen (issue 36.6): the unreachable node's result is short with Ansible's default callback
        (line,) = [ln for ln in output.splitlines() if ln.startswith("fatal: [gone]: UNREACHABLE!")]
        assert len(line) < 700, line
        assert "the play recap counts" in output and "failed=1 by the final gate" in output
    for host in unverifiable:
        # a node that could not be verified is an <error> in JUnit, in every mode: once (issue 22.4), of the type of its
        # state (unreachable, or its verify run failed), its layers that could not run skipped
        suite = junit.split('<testsuite name="%s"' % host, 1)[1].split("</testsuite>", 1)[0]
        assert suite.count("<error ") == 1 and 'errors="1"' in suite and suite.count("<skipped") == 5, suite
        assert ('type="gpuprobe.unreachable"' if host == "gone" else 'type="gpuprobe.run_failed"') in suite
    if set(limit.split(",")) & {"node", "canary"}:
        node = junit.split('<testsuite name="node"', 1)[1].split("</testsuite>", 1)[0]
        assert 'errors="0"' in node and "<error " not in node


@pytest.mark.parametrize("mode", ["audit", "full", "postcheck"])
def test_an_inventory_without_hosts_verifies_nothing_and_fails(tmp_path, mode):
    """-i narrowed the run to no node: only the implicit localhost, which the pattern 'all' does not match."""
    inventory = tmp_path / "empty.yml"
    inventory.write_text("all: {}\n")
    reports = tmp_path / "reports"
    r = subprocess.run(["ansible-playbook", "-i", str(inventory), PLAYBOOK, "-e", "gpuprobe_mode=%s" % mode,
                        "-e", "gpuprobe_report_dir=%s" % reports], capture_output=True, text=True, timeout=120, check=False)
    output = r.stdout + r.stderr
    assert (r.returncode, "gpuprobe_hosts 'all' matches no host of the inventory: " + NO_NODE in output) == (2, True), output[-3000:]
    assert "Verify the GPU layers of this node" not in output and not reports.exists()


@pytest.mark.parametrize("mode,status", [("audit", 0), ("full", 0), ("postcheck", 2)])
def test_check_mode_writes_nothing_in_every_mode(lab, tmp_path, mode, status):
    """docs/usage.md, "Check mode": --check builds and summarises the report but writes no file (the previous
    latest.* stay), says so in the status file; a post-check cannot pass without its compute layer."""
    reports = tmp_path / "reports"
    _junit_latest_is_a_directory(reports)  # a previous run's latest.*: left as they are
    before = sorted(os.listdir(str(reports)))
    status_file = tmp_path / "status.json"
    argv = ["ansible-playbook", "--check", "-i", str(lab / "hosts.yml"), PLAYBOOK, "--limit", "node", "-e", "gpuprobe_mode=%s" % mode,
            "-e", "gpuprobe_report_dir=%s" % reports, "-e", "gpuprobe_status_file=%s" % status_file]
    r = subprocess.run(argv, env=dict(os.environ, ANSIBLE_RETRY_FILES_ENABLED="False"), capture_output=True, text=True,
                       timeout=240, check=False)
    output = r.stdout + r.stderr
    assert (r.returncode, "report: (check mode: not written)" in output) == (status, True), output[-4000:]
    state = json.loads(status_file.read_text())
    assert (state["report"], state["files"], state["unverifiable"], list(state["verdicts"])) == (
        "not written (check mode)", {}, {}, ["node"])
    assert sorted(os.listdir(str(reports))) == before
    if mode == "postcheck":
        assert "not COMPUTE_VERIFIED: %s" % state["verdicts"]["node"] in output


@pytest.mark.parametrize("name,argv,status,text", [
    ("bad-option", ["--no-such-option"], 2, "usage: ansible-playbook"),
    ("playbook-unreadable", ["-i", "{hosts}", "{missing}/verify-gpu.yml"], 1, "the playbook"),
    ("inventory-missing", ["-i", "{missing}/hosts.yml"], 2, "gpuprobe_hosts 'all' matches no host of the inventory: " + NO_NODE),
    ("inventory-unparsable", ["-i", "{bad}"], 2, "gpuprobe_hosts 'all' matches no host of the inventory: " + NO_NODE),
], ids=lambda v: v if isinstance(v, str) and v[0].isalpha() and " " not in v else None)
def test_ansible_itself_failed(lab, tmp_path, name, argv, status, text):
    """docs/usage.md's row "Ansible itself failed", by real runs: never 0, never a report."""
    (tmp_path / "bad.yml").write_text("all: [unclosed\n")
    argv = [a.format(hosts=lab / "hosts.yml", missing=tmp_path / "missing", bad=tmp_path / "bad.yml") for a in argv]
    if not any(a.endswith("verify-gpu.yml") for a in argv):
        argv.append(PLAYBOOK)
    reports = tmp_path / "reports"
    r = subprocess.run(["ansible-playbook"] + argv + ["-e", "gpuprobe_report_dir=%s" % reports], capture_output=True,
                       text=True, timeout=120, check=False)
    output = r.stdout + r.stderr
    assert (r.returncode, text in output) == (status, True), output[-3000:]
    assert "Verify the GPU layers of this node" not in output and not reports.exists()


# issue 43.7: the gate reads only what this run wrote. The README's and docs/usage.md's commands, run as written (the
# inventory and the node the only words replaced), in a directory where an earlier run's status.json says "passed".
STALE = '{"status": "passed", "exit_status": 0}\n'


def _block(path, heading):
    text = open(os.path.join(ROOT, path)).read().split(heading, 1)[1]
    return text.split("```bash\n", 1)[1].split("```", 1)[0]


def _readme_gate_command():
    lines = _block("README.md", "## Using it on GPU nodes").splitlines()
    start = next(i for i, line in enumerate(lines) if "gpuprobe_mode=postcheck" in line and line.endswith("\\"))
    command = lines[start][:-1] + lines[start + 1].split("#", 1)[0]
    assert "gpuprobe_status_file=status.json" in command  # relative, as the README writes it
    return command


def _run_in(cwd, script):
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    return subprocess.run(["bash", "-c", script], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=240, check=False)


def test_the_readmes_gate_command_writes_this_runs_status_where_it_was_started(lab, tmp_path):
    """The README's command with the installed collection's playbook (gpuprobe.layers.verify_gpu) and a relative status
    file: its invalid invocation (the lab's misspelt pin) writes its status in the directory the command ran in, where
    the earlier run's "passed" was, never inside the installed collection."""
    (tmp_path / "status.json").write_text(STALE)
    r = _run_in(tmp_path, _readme_gate_command().replace("fleet.yml", str(lab / "hosts.yml")))
    output = r.stdout + r.stderr
    assert r.returncode == 2 and "drver_version: did you mean driver_version?" in output, output[-3000:]
    state = json.loads((tmp_path / "status.json").read_text())
    assert (state["status"], state["exit_status"]) == ("invalid_invocation", 5)
    import ansible_collections.gpuprobe.layers as installed  # pylint: disable=import-outside-toplevel
    assert not glob.glob(os.path.join(os.path.dirname(installed.__file__), "**", "status.json"), recursive=True)


@pytest.mark.parametrize("limit,exit_status,status", [
    ("node", 1, "not_verified"),     # checked, FAILED_AT_CDI
    ("nosuch", 1, None),             # ansible-playbook refuses the --limit before any play: no status file, never 0
])
def test_the_usage_wrapper_as_written(lab, tmp_path, limit, exit_status, status):
    script = _block("docs/usage.md", "## Provisioning post-check")
    script = "\n".join(line for line in script.splitlines() if not line.startswith("echo $?"))
    assert script.startswith("rm -f status.json")
    (tmp_path / "status.json").write_text(STALE)
    r = _run_in(tmp_path, script.replace("inventory.yml", str(lab / "hosts.yml")).replace(
        "playbooks/verify-gpu.yml", PLAYBOOK).replace("node42", limit))
    assert r.returncode == exit_status, (r.stdout + r.stderr)[-3000:]
    if status:
        assert json.loads((tmp_path / "status.json").read_text())["status"] == status
    else:
        assert not (tmp_path / "status.json").exists()


def test_a_run_removes_an_earlier_runs_status_before_any_node_runs(lab, tmp_path):
    """Interrupted after the preflight (here: the report play's task fails on an unwritable retry file, so the status is
    never written), the run leaves no status file at all, not the earlier "passed"."""
    (tmp_path / "status.json").write_text(STALE)
    (tmp_path / "retry-dir").mkdir()
    r = _run_in(tmp_path, "ansible-playbook -i %s %s --limit node -e gpuprobe_mode=audit -e gpuprobe_status_file=status.json "
                          "-e gpuprobe_retry_file=retry-dir -e gpuprobe_report_dir=reports" % (lab / "hosts.yml", PLAYBOOK))
    output = r.stdout + r.stderr
    assert r.returncode == 2 and "cannot write the retry file" in output, output[-3000:]
    assert not (tmp_path / "status.json").exists()
