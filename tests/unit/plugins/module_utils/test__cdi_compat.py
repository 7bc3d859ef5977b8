"""Spec version vs the node's runtime: real spec files run through the cdi layer itself (its file records and
device sources are the input), runtime versions as the host layer records them (evidence.tools), and the table's
rows checked against each other and against the real podman of this machine when it has one."""
import pytest
import yaml

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import catalogue as _cdi_catalogue
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import compat as _cdi_compat
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import ENGINES
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, LayerBuilder

KIND = "nvidia.com/gpu"
DEVICE = KIND + "=gpu0"


ETC, RUN = "/etc/cdi", "/var/run/cdi"


def write_spec(root, directory, name, version):
    """A spec at ``directory`` as seen from the node whose filesystem is ``root``."""
    d = root / directory.lstrip("/")
    d.mkdir(parents=True, exist_ok=True)
    spec = {"cdiVersion": version, "kind": KIND,
            "devices": [{"name": "gpu0", "containerEdits": {"deviceNodes": [{"path": "/dev/null"}]}}]}
    (d / name).write_text(yaml.safe_dump(spec))


def cdi_record(root, dirs=(ETC, RUN)):
    """The cdi layer's own file records and device sources for the node under ``root``."""
    record = _cdi_layer.record(spec_dirs=list(dirs), discover_runtime_dirs_=False, devices=[DEVICE], root=str(root))
    ev = record["evidence"]
    return ev["files"], ev["device_sources"]


def host_with(tools):
    """A host record whose evidence.tools is what _host.probe_tools records for these runtime versions."""
    return {"layer": "host", "evidence": {"tools_probed": True, "tools": dict(
        (name, {"path": "/usr/bin/" + name, "version": version, "error": None}) for name, version in tools.items())}}


def judge(root, host, runtime="auto", configured=None):
    files, sources = cdi_record(root, [ETC, RUN] + list(configured or []))
    names = [n for n in ENGINES if n in ((host or {}).get("evidence") or {}).get("tools", {})]
    runtime_dirs = dict((n, {"spec_dirs": list(configured)}) for n in names) if configured else None
    checks, evidence = _cdi_compat.spec_compat(files, sources, host, runtime=runtime, runtime_dirs=runtime_dirs,
                                               root=str(root))
    b = LayerBuilder("cdi", _cdi_compat.CHECKS)
    for c in checks:
        b.add(c["id"], c["status"], c["subject"], c["expected"], c["observed"], c["hint"])
    return checks, evidence


def one(checks, check_id):
    found = [c for c in checks if c["id"] == check_id]
    assert len(found) == 1, (check_id, checks)
    return found[0]


@pytest.mark.parametrize("runtime, version, spec_version, expect, max_readable", [
    ("podman", "4.3.1", "0.6.0", FAIL, "0.5.0"),    # observed on the H200
    ("podman", "4.3.1", "0.5.0", PASS, "0.5.0"),
    ("podman", "4.9.3", "0.7.0", FAIL, "0.6.0"),    # Ubuntu 24.04 vs NVIDIA Container Toolkit 1.19 specs
    ("podman", "4.9.3", "0.6.0", PASS, "0.6.0"),
    ("podman", "5.1.0", "0.7.0", PASS, "0.7.0"),
    ("podman", "4.0.3", "0.3.0", FAIL, "0.2.0"),
    ("podman", "5.5.0", "1.0.0", PASS, "1.0.0"),
    ("docker", "27.3.1", "0.8.0", FAIL, "0.7.0"),
    ("docker", "28.2.2", "0.8.0", PASS, "1.0.0"),
    ("docker", "25.0.17", "0.8.0", PASS, "0.8.0"),  # a backport inside the 25.0 series
    ("containerd", "1.7.22", "0.8.0", FAIL, "0.7.0"),
    ("containerd", "2.2.1", "1.1.0", PASS, "1.1.0"),
])
def test_spec_version_against_the_runtime(tmp_path, runtime, version, spec_version, expect, max_readable):
    write_spec(tmp_path, RUN, "nvidia.yaml", spec_version)
    checks, evidence = judge(tmp_path, host_with({runtime: version}))
    c = one(checks, "cdi.runtime.spec_version")
    assert c["status"] == expect, c
    assert one(checks, "cdi.runtime.cdi_support")["status"] == PASS
    assert one(checks, "cdi.runtime.spec_dir")["status"] == PASS
    assert evidence["runtime"]["max_readable"] == max_readable
    assert "<= %s" % max_readable in c["observed"] and "%s %s" % (runtime, version) in c["observed"]
    if expect == FAIL:  # names the runtime, its version, the max readable, the spec's version and the source row
        assert "cdiVersion %s" % spec_version in c["observed"]
        assert "go.mod @ v" in c["observed"] or "vendor.mod @ v" in c["observed"]
        assert "cncf-tags/container-device-interface" in c["observed"] and c["hint"]


def test_the_h200_row_names_its_sources(tmp_path):
    write_spec(tmp_path, ETC, "nvidia.yaml", "0.6.0")
    checks, _unused = judge(tmp_path, host_with({"podman": "4.3.1"}))
    observed = one(checks, "cdi.runtime.spec_version")["observed"]
    assert "containers/podman go.mod @ v4.3.0..v4.3.1 requires container-device-interface v0.5.2" in observed
    assert "pkg/cdi/spec.go validSpecVersions @ v0.5.2" in observed


@pytest.mark.parametrize("tools, why", [
    ({"podman": None}, "version None unknown"),
    ({"podman": "5.0.0-rc1"}, "pre-release"),
    ({"podman": "9.1.0"}, "not in the table"),
    ({"podman": "3.4.4"}, "pre-release CDI prototype"),
    ({"crio": "1.30.0"}, "no table of crio releases"),
    ({}, "no podman / docker / containerd / crio found"),
])
def test_unknown_runtime_version_is_not_run_never_pass(tmp_path, tools, why):
    write_spec(tmp_path, RUN, "nvidia.yaml", "0.3.0")
    checks, _unused = judge(tmp_path, host_with(tools))
    assert one(checks, "cdi.runtime.cdi_support")["status"] == NOT_RUN
    c = one(checks, "cdi.runtime.spec_version")
    assert c["status"] == NOT_RUN and why in c["observed"], c


@pytest.mark.parametrize("runtime, version", [("podman", "3.1.2"), ("docker", "24.0.7"), ("containerd", "1.6.28")])
def test_runtime_without_cdi_fails(tmp_path, runtime, version):
    write_spec(tmp_path, RUN, "nvidia.yaml", "0.3.0")
    checks, evidence = judge(tmp_path, host_with({runtime: version}))
    assert one(checks, "cdi.runtime.cdi_support")["status"] == FAIL
    assert one(checks, "cdi.runtime.spec_version")["status"] == FAIL
    assert not [c for c in checks if c["id"] == "cdi.runtime.spec_dir"]  # a runtime without CDI reads no dir
    assert evidence["runtime"]["status"] == "no_cdi" and "no container-device-interface requirement" in evidence["runtime"]["source"]


def test_auto_prefers_podman_and_records_every_runtime(tmp_path):
    write_spec(tmp_path, RUN, "nvidia.yaml", "0.6.0")
    both = host_with({"podman": "4.3.1", "docker": "28.2.2"})
    checks, evidence = judge(tmp_path, both)
    assert evidence["runtime"]["runtime"] == "podman" and one(checks, "cdi.runtime.spec_version")["status"] == FAIL
    assert sorted(evidence["runtimes"]) == ["docker", "podman"] and evidence["runtimes"]["docker"]["max_readable"] == "1.0.0"
    checks, evidence = judge(tmp_path, both, runtime="docker")
    assert one(checks, "cdi.runtime.spec_version")["status"] == PASS


def test_runtime_reads_a_lower_priority_spec_when_the_winner_is_too_new(tmp_path):
    write_spec(tmp_path, ETC, "old.yaml", "0.5.0")
    write_spec(tmp_path, RUN, "new.yaml", "0.7.0")  # later dir = higher priority: the cdi layer resolves gpu0 to it
    files, sources = cdi_record(tmp_path)
    assert sources[DEVICE].endswith("new.yaml")
    checks, evidence = judge(tmp_path, host_with({"podman": "4.3.1"}))
    c = one(checks, "cdi.runtime.spec_version")
    assert c["status"] == WARN and "old.yaml" in c["observed"], c
    assert [p["readable_version"] for p in evidence["devices"][DEVICE]["providers"]] == [True, False]


@pytest.mark.parametrize("version, expect, why", [
    ("4.3.1", FAIL, "podman 4.3.1 ignores the configured cdi_spec_dirs /opt/cdi"),   # measured with podman 4.3.1
    ("5.4.2", FAIL, "podman 5.4.2 ignores the configured cdi_spec_dirs /opt/cdi"),
    ("5.5.0", PASS, "/opt/cdi/nvidia.yaml"),
    (None, NOT_RUN, "read by some podman versions only"),
])
def test_spec_in_a_configured_dir_is_read_only_by_podman_5_5_and_later(tmp_path, version, expect, why):
    write_spec(tmp_path, "/opt/cdi", "nvidia.yaml", "0.5.0")
    checks, _unused = judge(tmp_path, host_with({"podman": version}), configured=["/opt/cdi"])
    c = one(checks, "cdi.runtime.spec_dir")
    assert c["status"] == expect and why in c["observed"], c


def test_spec_outside_the_runtime_dirs_fails(tmp_path):
    write_spec(tmp_path, "/opt/cdi", "nvidia.yaml", "0.5.0")
    files, sources = cdi_record(tmp_path, ["/opt/cdi"])
    checks, evidence = _cdi_compat.spec_compat(files, sources, host_with({"podman": "4.3.1"}), root=str(tmp_path))
    c = one(checks, "cdi.runtime.spec_dir")
    assert c["status"] == FAIL and "/etc/cdi, /var/run/cdi (default)" in c["observed"]
    assert evidence["spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]


def test_table_rows_are_ordered_disjoint_and_resolve_to_a_library():
    for runtime in ("podman", "docker", "containerd"):
        rows = [r for r in _cdi_compat.RUNTIME_LIBRARIES if r[0] == runtime]
        assert rows[0][3] is None  # the first row is "no CDI"
        for a, b in zip(rows, rows[1:]):
            assert _cdi_compat.parse_version(a[2]) < _cdi_compat.parse_version(b[1]), (a, b)
        for r in rows:
            assert _cdi_compat.parse_version(r[1]) <= _cdi_compat.parse_version(r[2])
            assert r[3] is None or r[3] in _cdi_compat.LIBRARIES
    for max_readable, _source in _cdi_compat.LIBRARIES.values():
        assert max_readable is None or max_readable in _cdi_catalogue.KNOWN_VERSIONS


def test_this_machines_podman_is_in_the_table():
    tools = _host.probe_tools("/")
    if not tools.get("podman") or not tools["podman"]["version"]:
        pytest.skip("no podman on this machine")
    row = _cdi_compat.readable_versions("podman", tools["podman"]["version"])
    assert row["status"] in ("known", "no_cdi", "prototype"), row


def test_the_cdi_layer_judges_for_the_runtime_the_probe_will_use(tmp_path):
    """podman 5.2 reads 0.7.0, docker 25 does not: with both installed, the layer's verdict follows its
    ``runtime`` option (cdi_facts runtime, passed by the verify role from verify_probe_runtime), not 'auto'."""
    write_spec(tmp_path, RUN, "nvidia.yaml", "0.7.0")
    host = host_with({"podman": "5.2.0", "docker": "25.0.0"})
    statuses = {}
    for runtime in ("auto", "docker"):
        record = _cdi_layer.record(spec_dirs=[ETC, RUN], discover_runtime_dirs_=False, devices=[DEVICE], root=str(tmp_path),
                                   host=host, runtime=runtime)
        statuses[runtime] = [c["status"] for c in record["checks"] if c["id"] == "cdi.runtime.spec_version"]
    assert statuses == {"auto": [PASS], "docker": [FAIL]}, statuses
