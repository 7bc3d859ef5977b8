"""The real kubectl against a recording HTTP endpoint: what kubectl actually requests and prints on the k8s layer's
reads (core v1 and resource.k8s.io) and on k8s_publish's writes (``patch --subresource=status``).

This is not a kube-apiserver (none can be installed here): a small HTTP server that answers discovery, lists the
fixture objects (tests/unit/fixtures/k8s/dra) as an API server lists them (items without apiVersion/kind), records
every request, and answers PATCH with the Node. It proves the kubectl boundary (the URLs, verbs, patch content types
and the JSON kubectl prints), not the API server's behaviour (docs/k8s.md says what was and was not run live). The
last tests run playbooks/verify-gpu.yml (audit, a synthetic node through the local connection) with
gpuprobe_k8s_publish: the node's verdict reaches the endpoint as a Node condition and label.
"""
import json
import os
import shutil
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import layer as _k8s
from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import publish as _k8s_publish
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, validate_record

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "unit", "fixtures", "k8s", "dra"))
CORE = [("nodes", "Node", False), ("pods", "Pod", True), ("events", "Event", True)]
DRA = [("resourceslices", "ResourceSlice", False), ("deviceclasses", "DeviceClass", False),
       ("resourceclaims", "ResourceClaim", True), ("resourceclaimtemplates", "ResourceClaimTemplate", True)]


def _load(rel):
    with open(os.path.join(FIXTURES, rel)) as f:
        return json.load(f)


class Recorder(object):
    def __init__(self, dra=True, forbid_patch=(), hang_patch=False, extra_nodes=0):
        self.dra = dra
        self.forbid_patch = set(forbid_patch)
        self.hang_patch = hang_patch  # a PATCH is never answered (until the test ends: ``released``, at most 120 s)
        self.released = threading.Event()
        self.requests = []
        self.lists = dict((kind, _load(kind + ".json")) for kind, _k, _n in CORE)
        self.lists.update((kind, _load("v1/%s.json" % kind)) for kind, _k, _n in DRA)
        for i in range(extra_nodes):
            self.lists["nodes"]["items"].append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-%03d" % i, "labels": {}},
                                                 "status": {}})

    def _resources(self, table, group_version):
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": [
            {"name": name, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
             "verbs": ["get", "list", "patch"]} for name, kind, namespaced in table]
            + ([{"name": "nodes/status", "singularName": "", "namespaced": False, "kind": "Node", "verbs": ["get", "patch"]}]
               if group_version == "v1" else [])}

    def answer(self, method, path, query, body, content_type):
        self.requests.append({"method": method, "path": path, "query": query, "content_type": content_type, "body": body})
        if path == "/version":
            return 200, {"major": "1", "minor": "34", "gitVersion": "v1.34.1"}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if path == "/apis":
            groups = [{"name": "resource.k8s.io", "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}],
                       "preferredVersion": {"groupVersion": "resource.k8s.io/v1", "version": "v1"}}] if self.dra else []
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        if path == "/api/v1":
            return 200, self._resources(CORE, "v1")
        if path == "/apis/resource.k8s.io/v1" and self.dra:
            return 200, self._resources(DRA, "resource.k8s.io/v1")
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"] or parts[:3] == ["apis", "resource.k8s.io", "v1"]:
            rest = parts[2:] if parts[0] == "api" else parts[3:]
            namespace = None
            if rest[:1] == ["namespaces"]:
                namespace, rest = rest[1], rest[2:]
            kind = rest[0]
            if len(rest) == 1 and kind in self.lists:
                return 200, self._list(kind, namespace, query)
            if kind == "nodes" and len(rest) in (2, 3):
                node = next((n for n in self.lists["nodes"]["items"] if n["metadata"]["name"] == rest[1]), None)
                if node is None:
                    return 404, _status(404, "NotFound", 'nodes "%s" not found' % rest[1])
                if method == "PATCH" and self.hang_patch:
                    self.released.wait(120)
                    return 504, _status(504, "Timeout", "released by the test")
                if method == "PATCH" and rest[1] in self.forbid_patch:
                    return 403, _status(403, "Forbidden", 'nodes "%s" is forbidden: User "probe" cannot patch resource "%s" in '
                                        'API group "" at the cluster scope' % (rest[1], "/".join(["nodes"] + rest[2:])))
                return 200, node
        return 404, _status(404, "NotFound", "the server could not find the requested resource")

    def _list(self, kind, namespace, query):
        doc = json.loads(json.dumps(self.lists[kind]))
        items = [i for i in doc["items"] if namespace is None or i["metadata"].get("namespace") == namespace]
        selector = (query.get("fieldSelector") or [""])[0]
        if selector.startswith("reason="):
            items = [i for i in items if i.get("reason") == selector.split("=", 1)[1]]
        for item in items:  # an API server's list items carry neither apiVersion nor kind
            item.pop("apiVersion", None)
            item.pop("kind", None)
        api = "resource.k8s.io/v1" if kind in [d[0] for d in DRA] else "v1"
        return {"kind": dict((n, k) for n, k, _ns in CORE + DRA)[kind] + "List", "apiVersion": api,
                "metadata": {"resourceVersion": "1"}, "items": items}


def _status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code}


@pytest.fixture
def endpoint(tmp_path, monkeypatch):
    # kubectl keeps API discovery per host:port under ~/.kube/cache for hours: a server of an earlier test (or run) on
    # the same ephemeral port, with other API groups, would answer for this one. Each test gets its own cache.
    monkeypatch.setenv("KUBECACHEDIR", str(tmp_path / "kube-cache"))
    servers = []
    recorders = []

    def start(**kw):
        recorder = Recorder(**kw)
        recorders.append(recorder)

        class Handler(BaseHTTPRequestHandler):
            def _handle(self, method):
                url = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else None
                code, doc = recorder.answer(method, url.path, urllib.parse.parse_qs(url.query), body,
                                            self.headers.get("Content-Type"))
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 (http.server's names)
                self._handle("GET")

            def do_PATCH(self):  # noqa: N802
                self._handle("PATCH")

            def log_message(self, *args):  # pylint: disable=arguments-differ
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        kubeconfig = tmp_path / ("kubeconfig-%d" % len(servers))
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:%d'}\n"
            "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
            "current-context: x\n" % server.server_address[1])
        return recorder, str(kubeconfig)
    yield start
    for recorder in recorders:
        recorder.released.set()
    for server in servers:
        server.shutdown()
        server.server_close()


def _reads(recorder):
    return [(r["method"], r["path"], (r["query"].get("fieldSelector") or [None])[0]) for r in recorder.requests
            if r["path"] not in ("/version", "/api", "/apis", "/api/v1", "/apis/resource.k8s.io/v1")]


def test_real_kubectl_reads_give_the_same_record_as_the_fixtures(endpoint):
    recorder, kubeconfig = endpoint()
    record = _k8s.record(kubectl=KUBECTL, kubeconfig=kubeconfig, timeout=10)
    assert validate_record(record) == []
    assert _reads(recorder) == [
        ("GET", "/api/v1/nodes", None), ("GET", "/api/v1/pods", None), ("GET", "/api/v1/events", "reason=FailedScheduling"),
        ("GET", "/apis/resource.k8s.io/v1/resourceslices", None), ("GET", "/apis/resource.k8s.io/v1/deviceclasses", None),
        ("GET", "/apis/resource.k8s.io/v1/resourceclaims", None),
        ("GET", "/apis/resource.k8s.io/v1/resourceclaimtemplates", None),
        ("GET", "/api/v1/events", "reason=FailedPrepareDynamicResources"),
        ("GET", "/api/v1/events", "reason=FailedResourceClaimCreation")]
    docs = dict((kind, _load("v1/%s.json" % kind)) for kind, _k, _n in DRA)
    docs["errors"] = {}
    direct = _k8s.analyse(_load("nodes.json"), _load("pods.json"), _load("events.json"), dra_docs=docs)
    assert [(c["id"], c["status"], c["subject"], c["observed"]) for c in record["checks"]] == \
        [(c["id"], c["status"], c["subject"], c["observed"]) for c in direct["checks"]]
    # kubectl put back the apiVersion the API server leaves out of list items
    assert record["evidence"]["dra"]["api_versions"] == ["resource.k8s.io/v1"]


def test_real_kubectl_on_a_cluster_without_resource_k8s_io(endpoint):
    _recorder, kubeconfig = endpoint(dra=False)
    record = _k8s.record(kubectl=KUBECTL, kubeconfig=kubeconfig, timeout=10)
    api = [c for c in record["checks"] if c["id"] == "k8s.dra.api"][0]
    assert api["status"] == NOT_RUN
    assert api["observed"] == 'kubectl get resourceslices: error: the server doesn\'t have a resource type "resourceslices"'
    assert record["evidence"]["dra"]["state"] == "not_served"


def test_real_kubectl_patches_the_node_status_subresource(endpoint):
    recorder, kubeconfig = endpoint(forbid_patch=["plain-0"])
    out = _k8s_publish.publish({"dra-0": "FAILED_AT_COMPUTE", "plain-0": "COMPUTE_VERIFIED"}, kubectl=KUBECTL,
                               kubeconfig=kubeconfig, timeout=10, label_key="gpuprobe.layers/verdict", now="2026-12-03T10:00:00Z")
    # the Nodes are written a few at a time: each Node's condition, then its label
    patches = [r for r in recorder.requests if r["method"] == "PATCH" and "/dra-0" in r["path"]]
    status, label = patches[0], patches[1]
    assert (status["path"], status["content_type"]) == ("/api/v1/nodes/dra-0/status", "application/strategic-merge-patch+json")
    assert status["query"]["fieldManager"] == ["kubectl-patch"]
    cond = json.loads(status["body"])["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in cond] == [("GPUComputeVerified", "False", "FAILED_AT_COMPUTE")]
    assert (label["path"], label["content_type"]) == ("/api/v1/nodes/dra-0", "application/merge-patch+json")
    assert json.loads(label["body"]) == {"metadata": {"labels": {"gpuprobe.layers/verdict": "FAILED_AT_COMPUTE"}}}
    # the refused write is reported with kubectl's own message; the node that was written is written
    assert [(p["node"], p["written"]) for p in out["published"]] == [("dra-0", True), ("plain-0", False)]
    assert out["errors"] == [{"host": "plain-0", "node": "plain-0", "error": (
        'kubectl patch node plain-0 --subresource=status --type=strategic: Error from server (Forbidden): nodes "plain-0" '
        'is forbidden: User "probe" cannot patch resource "nodes/status" in API group "" at the cluster scope')}]


# ---- issue 34.4: the whole publish is bounded, against an API server that never answers PATCH ----


def _hung(endpoint, nodes=20):
    recorder, kubeconfig = endpoint(hang_patch=True, extra_nodes=nodes)
    return recorder, kubeconfig, dict(("gpu-%03d" % i, "COMPUTE_VERIFIED") for i in range(nodes))


def test_publish_stops_after_consecutive_timeouts_and_names_the_nodes_not_written(endpoint):
    import time  # pylint: disable=import-outside-toplevel
    recorder, kubeconfig, verdicts = _hung(endpoint)
    t0 = time.monotonic()
    out = _k8s_publish.publish(verdicts, kubectl=KUBECTL, kubeconfig=kubeconfig, timeout=2, deadline=60,
                               max_consecutive_timeouts=3, workers=4, label_key="gpuprobe.layers/verdict")
    took = time.monotonic() - t0
    # one round of the small pool: the first 3 timeouts stop it; serially, 20 Nodes would take 20 x 2 s and more
    assert took < 12, took
    patches = [r for r in recorder.requests if r["method"] == "PATCH"]
    assert 3 <= len(patches) <= 4 + 3 - 1, len(patches)  # the pool's first round, and what started before the third timeout
    assert not any(p["written"] for p in out["published"])
    not_written = dict((n["node"], n["reason"]) for n in out["not_written"])
    assert len(not_written) + sum(1 for e in out["errors"] if e["node"]) == 20
    assert len(not_written) >= 16
    assert set(not_written.values()) == {"stopped after 3 consecutive kubectl timeouts (the API server does not answer)"}
    assert out["errors"][-1]["error"].startswith("%d Node(s) not written: stopped after 3 consecutive" % len(not_written))
    assert all("Timeout" in e["error"] or "timeout" in e["error"] or "deadline" in e["error"]
               for e in out["errors"] if e["node"]), out["errors"]


def test_publish_ends_at_its_deadline_whatever_the_timeouts(endpoint):
    import time  # pylint: disable=import-outside-toplevel
    _recorder, kubeconfig, verdicts = _hung(endpoint, nodes=12)
    t0 = time.monotonic()
    out = _k8s_publish.publish(verdicts, kubectl=KUBECTL, kubeconfig=kubeconfig, timeout=30, deadline=4,
                               max_consecutive_timeouts=50, workers=2)
    took = time.monotonic() - t0
    assert took < 4 + 3, took  # the calls in flight at the deadline are killed
    assert len(out["not_written"]) == 12
    assert set(n["reason"] for n in out["not_written"]) == {"the publish deadline (4 s) passed"}


# ---- the fleet playbook end to end: a node's verdict, published by the real kubectl ----

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _playbook(tmp_path, kubeconfig, *extra, more_hosts=None):
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    import yaml  # pylint: disable=import-outside-toplevel
    from hostfixture import build_node  # pylint: disable=import-outside-toplevel,import-error

    if not (tmp_path / "node").exists():
        build_node(str(tmp_path / "node"))
    inventory = {"all": {"hosts": {"dra-0": {  # the inventory name is the Node's name
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "verify_root": str(tmp_path / "node"),
        "verify_nvml": False, "verify_k8s": False, "verify_cdi_spec_dirs": ["/etc/cdi"]}}}}
    inventory["all"]["hosts"].update(more_hosts or {})
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    argv = ["ansible-playbook", "-i", str(tmp_path / "hosts.yml"), os.path.join(ROOT, "playbooks", "verify-gpu.yml"),
            "-e", "gpuprobe_mode=audit", "-e", "gpuprobe_report_dir=%s" % (tmp_path / "reports"),
            "-e", "gpuprobe_k8s_publish=true", "-e", "gpuprobe_k8s_kubeconfig=%s" % kubeconfig,
            "-e", "gpuprobe_k8s_publish_label=gpuprobe.layers/verdict"] + list(extra)
    env = dict(os.environ, ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_RETRY_FILES_ENABLED="False")
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, check=False)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.integration
def test_fleet_run_publishes_the_verdict_as_a_node_condition(endpoint, tmp_path):
    recorder, kubeconfig = endpoint()
    status, output = _playbook(tmp_path, kubeconfig)
    assert status == 0, output[-3000:]
    patches = [r for r in recorder.requests if r["method"] == "PATCH"]
    assert [p["path"] for p in patches] == ["/api/v1/nodes/dra-0/status", "/api/v1/nodes/dra-0"]
    cond = json.loads(patches[0]["body"])["status"]["conditions"][0]
    # a synthetic node with no CDI spec: FAILED_AT_CDI, as the report says
    assert (cond["type"], cond["status"], cond["reason"]) == ("GPUComputeVerified", "False", "FAILED_AT_CDI")
    assert cond["message"].startswith("gpuprobe.layers verdict FAILED_AT_CDI; signature cdi.")
    assert json.loads(patches[1]["body"]) == {"metadata": {"labels": {"gpuprobe.layers/verdict": "FAILED_AT_CDI"}}}


@pytest.mark.integration
def test_fleet_run_fails_when_a_write_is_refused_and_check_mode_writes_nothing(endpoint, tmp_path):
    recorder, kubeconfig = endpoint(forbid_patch=["dra-0"])
    status, output = _playbook(tmp_path, kubeconfig)
    assert status == 2 and "publishing the verdicts failed: dra-0: kubectl patch node dra-0 --subresource=status" in output
    assert (tmp_path / "reports").is_dir()  # the report was written before
    recorder.requests.clear()
    status, output = _playbook(tmp_path, kubeconfig, "--check")
    assert status == 0, output[-3000:]
    assert [r for r in recorder.requests if r["method"] == "PATCH"] == []
    assert [r["path"] for r in recorder.requests if r["path"].startswith("/api/v1/nodes")] == ["/api/v1/nodes"]


# ---- issue 43: the right Node, and only what the run decided ----


def _add_node(recorder, name, hostname, condition=None):
    recorder.lists["nodes"]["items"].append({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {"kubernetes.io/hostname": hostname}}, "status": {"conditions": [condition] if condition else []}})


def _patched(recorder):
    return [r["path"] for r in recorder.requests if r["method"] == "PATCH"]


def test_real_kubectl_writes_no_other_machines_node(endpoint):
    """A verified host with no Node of its own is not written onto the Node that shares its short name, nor onto a
    Node whose kubelet labels itself with the host's name beside it: both are unmatched, with why, and nothing is
    patched."""
    recorder, kubeconfig = endpoint()
    _add_node(recorder, "gpu-a.dc1", "gpu-a.dc1")
    _add_node(recorder, "rogue", "gpu-a")
    out = _k8s_publish.publish({"gpu-a.dc2": "COMPUTE_VERIFIED", "gpu-a": "COMPUTE_VERIFIED"}, kubectl=KUBECTL,
                               kubeconfig=kubeconfig, timeout=10, label_key="gpuprobe.layers/verdict")
    assert _patched(recorder) == [] and out["published"] == []
    assert out["unmatched"] == [
        {"host": "gpu-a", "reason": "ambiguous: Node rogue is labelled kubernetes.io/hostname=gpu-a, and Node gpu-a.dc1 "
                                    "has the short name gpu-a: not matched by label (set node_names)"},
        {"host": "gpu-a.dc2", "reason": "no Node is named gpu-a.dc2 or labelled kubernetes.io/hostname=gpu-a.dc2; Nodes "
                                        "gpu-a.dc1, rogue have the short name gpu-a, which is not a match (set node_names)"}]
    # the explicit map settles it
    out = _k8s_publish.publish({"gpu-a": "COMPUTE_VERIFIED"}, kubectl=KUBECTL, kubeconfig=kubeconfig, timeout=10,
                               node_names={"gpu-a": "gpu-a.dc1"})
    assert out["unmatched"] == [] and _patched(recorder) == ["/api/v1/nodes/gpu-a.dc1/status"]


def test_real_kubectl_leaves_a_node_not_decided_in_this_run_as_it_is(endpoint):
    """INCONCLUSIVE (unreachable, run failed) in any mode, and in an audit anything but FAILED_AT_HOST/CDI: no request
    touches the Node."""
    recorder, kubeconfig = endpoint()
    out = _k8s_publish.publish({"dra-0": "INCONCLUSIVE", "dra-1": "COMPUTE_VERIFIED", "plain-0": "FAILED_AT_CDI"},
                               kubectl=KUBECTL, kubeconfig=kubeconfig, timeout=10, mode="audit",
                               label_key="gpuprobe.layers/verdict")
    assert out["errors"] == [] and out["unmatched"] == []
    assert _patched(recorder) == ["/api/v1/nodes/plain-0/status", "/api/v1/nodes/plain-0"]
    assert [(k["host"], k["verdict"]) for k in out["kept"]] == [("dra-0", "INCONCLUSIVE"), ("dra-1", "COMPUTE_VERIFIED")]


@pytest.mark.integration
def test_fleet_run_keeps_an_unreachable_nodes_condition(endpoint, tmp_path):
    """The fleet playbook in an audit: the reachable node's FAILED_AT_CDI is written; the unreachable node (its Node
    dra-1 exists) is not written at all, and the publish task does not fail for it."""
    recorder, kubeconfig = endpoint()
    status, output = _playbook(tmp_path, kubeconfig, more_hosts={"dra-1": {
        "ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_ssh_timeout": 5}})
    assert status == 2, output[-3000:]   # the unreachable node fails the run, after the report and the publish
    assert "publishing the verdicts failed" not in output
    assert _patched(recorder) == ["/api/v1/nodes/dra-0/status", "/api/v1/nodes/dra-0"]
