"""The metrics (issue 36.4, docs/usage.md "Metrics") with real parts: a real ansible-playbook run of verify-gpu.yml writes
each node's textfile (gpuprobe.layers.node_metrics, through verify_node's metrics_dir) and the fleet's OpenMetrics file;
Debian's promtool accepts both (`promtool check metrics`); Debian's prometheus-node-exporter, started on a loopback port
with only its textfile collector, reads them and serves the series, which the test scrapes. The node-problem-detector
plugin script of docs/k8s.md reads the same files. scripts/bootstrap.sh --test installs prometheus and
prometheus-node-exporter with apt (their services are not started: the test runs the binary itself); without them the
test skips, and on CI (CI=true) it fails."""
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from hostfixture import build_node

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "verify-gpu.yml")
PROMTOOL = "/usr/bin/promtool"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"


def _need(path):
    if not os.access(path, os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail("%s is missing on CI: scripts/bootstrap.sh --test installs it" % path)
        pytest.skip("%s is not installed (apt-get install prometheus prometheus-node-exporter; scripts/bootstrap.sh --test)" % path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One audit of two hosts: 'node' (a synthetic node whose spec dirs hold no spec: FAILED_AT_CDI) and 'gone' (its
    SSH port closed: not checked), with the node's textfile and the fleet file asked for."""
    base = tmp_path_factory.mktemp("metrics")
    build_node(str(base / "node"))
    textfile = base / "textfile"
    textfile.mkdir()
    inventory = {"all": {
        "vars": {"verify_root": str(base / "node"), "verify_nvml": False, "verify_k8s": False,
                 "verify_cdi_spec_dirs": ["/etc/cdi"], "verify_metrics_dir": str(textfile)},
        "hosts": {"node": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                  "gone": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                           "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes"}}}}
    (base / "hosts.yml").write_text(yaml.safe_dump(inventory))
    fleet = base / "fleet.prom"
    argv = ["ansible-playbook", "-i", str(base / "hosts.yml"), PLAYBOOK, "-e", "gpuprobe_mode=audit",
            "-e", "gpuprobe_report_dir=%s" % (base / "reports"), "-e", "gpuprobe_metrics_file=%s" % fleet,
            "-e", "gpuprobe_status_file=%s" % (base / "status.json")]
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False")
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    output = r.stdout + r.stderr
    # 'gone' could not be checked: ansible-playbook says 2 (its gate task), the status file not_checked
    assert r.returncode == 2, output[-4000:]
    assert json.loads((base / "status.json").read_text())["status"] == "not_checked", output[-4000:]
    return {"base": base, "textfile": textfile, "node_file": textfile / "gpuprobe-audit.prom", "fleet": fleet, "output": output}


def test_the_run_wrote_both_files(run):
    # the node's file, mode 0644, and nothing else in the directory (no temporary file left)
    assert sorted(os.listdir(str(run["textfile"]))) == ["gpuprobe-audit.prom"], run["output"][-3000:]
    assert os.stat(str(run["node_file"])).st_mode & 0o777 == 0o644
    node = run["node_file"].read_text()
    assert 'gpuprobe_node_verdict{mode="audit",verdict="FAILED_AT_CDI"} 1\n' in node
    assert 'gpuprobe_node_failure_info{mode="audit",failing_layer="cdi",signature="cdi.discovery.spec_dirs"' in node
    assert "host=" not in node
    fleet = run["fleet"].read_text()
    assert fleet.endswith("# EOF\n")
    assert 'gpuprobe_node_state{host="gone",mode="audit",state="UNREACHABLE"} 1\n' in fleet
    assert 'gpuprobe_node_checked{host="gone",mode="audit"} 0\n' in fleet
    assert 'gpuprobe_node_verdict{host="node",mode="audit",verdict="FAILED_AT_CDI"} 1\n' in fleet
    assert 'gpuprobe_fleet_hosts{mode="audit",state="UNREACHABLE"} 1\n' in fleet


@pytest.mark.parametrize("which", ["node_file", "fleet"])
def test_promtool_accepts(run, which):
    _need(PROMTOOL)
    with open(str(run[which])) as f:
        r = subprocess.run([PROMTOOL, "check", "metrics"], stdin=f, capture_output=True, text=True, timeout=60, check=False)
    # promtool lints too (names, units, HELP): it says nothing and exits 0 when it has nothing to say
    assert (r.returncode, r.stdout + r.stderr) == (0, "")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(directory):
    _need(NODE_EXPORTER)
    port = _free_port()
    proc = subprocess.Popen([NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port, "--collector.disable-defaults",
                             "--collector.textfile", "--collector.textfile.directory=%s" % directory],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as resp:
                    return resp.read().decode("utf-8")
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError("node_exporter did not serve: %s" % (proc.communicate(timeout=5)[0] if proc.poll() is not None else "timeout"))
                time.sleep(0.2)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_node_exporter_serves_the_node_file(run):
    text = _scrape(run["textfile"])
    assert "node_textfile_scrape_error 0" in text, text[-3000:]
    assert re.search(r'^node_textfile_mtime_seconds\{file="[^"]*gpuprobe-audit\.prom"\} ', text, re.M), text[-3000:]
    assert 'gpuprobe_node_verdict{mode="audit",verdict="FAILED_AT_CDI"} 1' in text
    assert re.search(r'^gpuprobe_layer_status\{layer="cdi",mode="audit",status="FAIL"\} 1$', text, re.M), text[-3000:]
    assert "# HELP gpuprobe_node_verified " in text and "# TYPE gpuprobe_node_verified gauge" in text


def test_node_exporter_serves_the_fleet_file_next_to_a_node_file(run, tmp_path):
    """The fleet file in the same collector directory as a node's own file (the controller is a GPU node too): the same
    families with and without the host label are served side by side."""
    (tmp_path / "gpuprobe-audit.prom").write_text(run["node_file"].read_text())
    (tmp_path / "gpuprobe-fleet.prom").write_text(run["fleet"].read_text())
    text = _scrape(tmp_path)
    assert "node_textfile_scrape_error 0" in text, text[-3000:]
    assert re.search(r'^gpuprobe_node_state\{host="gone",mode="audit",state="UNREACHABLE"\} 1$', text, re.M), text[-3000:]
    assert re.search(r'^gpuprobe_node_verdict\{host="node",mode="audit",verdict="FAILED_AT_CDI"\} 1$', text, re.M)


def _npd_script():
    with open(os.path.join(ROOT, "docs", "k8s.md")) as f:
        (script,) = [b for b in re.findall(r"```bash\n(.*?)```", f.read(), re.S) if "gpuprobe-check.sh" in b]
    return script


@pytest.mark.parametrize("files,status,says", [
    ("run", 1, "gpuprobe: audit FAILED_AT_CDI"),
    ("verified", 0, "no failure in the last gpuprobe runs"),
    ("none", 2, "no gpuprobe metrics in"),
])
def test_the_npd_plugin_of_the_docs(run, tmp_path, files, status, says):
    """docs/k8s.md's node-problem-detector plugin (exit 0 OK, 1 problem, 2 unknown) over real metrics files."""
    directory = tmp_path / "textfile"
    directory.mkdir()
    if files == "run":
        (directory / "gpuprobe-audit.prom").write_text(run["node_file"].read_text())
    elif files == "verified":
        text = run["node_file"].read_text()
        text = text.replace('verdict="FAILED_AT_CDI"} 1', 'verdict="FAILED_AT_CDI"} 0').replace(
            'verdict="COMPUTE_VERIFIED"} 0', 'verdict="COMPUTE_VERIFIED"} 1')
        (directory / "gpuprobe-full.prom").write_text(text.replace('mode="audit"', 'mode="full"'))
    script = tmp_path / "gpuprobe-check.sh"
    script.write_text(_npd_script())
    r = subprocess.run(["sh", str(script)], env=dict(os.environ, GPUPROBE_METRICS_DIR=str(directory)), capture_output=True,
                       text=True, timeout=30, check=False)
    assert (r.returncode, says in r.stdout) == (status, True), r.stdout + r.stderr
