"""_cri's pure parts: the CRI log format, endpoints, the cdi.k8s.io annotation, and the clear errors when the
client cannot be made (libraries or descriptor missing). The calls themselves run against a real containerd in
tests/integration/test_engines.py."""
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri


@pytest.mark.parametrize("data,expected", [
    ("2026-12-03T12:00:00.000000001Z stdout F hello\n", ("hello\n", "")),
    ("2026-12-03T12:00:00Z stdout P hel\n2026-12-03T12:00:00Z stdout F lo\n", ("hello\n", "")),
    ("2026-12-03T12:00:00Z stderr F oops\n2026-12-03T12:00:00Z stdout F out\n", ("out\n", "oops\n")),
    ("2026-12-03T12:00:00Z stdout F a b  c\n", ("a b  c\n", "")),
    ("2026-12-03T12:00:00Z stdout F \n", ("\n", "")),
    ("garbage\n2026-12-03T12:00:00Z other F x\n", ("", "")),
    ("", ("", "")),
])
def test_parse_cri_log(data, expected):
    assert _cri.parse_cri_log(data) == expected


@pytest.mark.parametrize("endpoint,target", [
    ("unix:///run/containerd/containerd.sock", "unix:///run/containerd/containerd.sock"),
    ("/run/crio/crio.sock", "unix:///run/crio/crio.sock"),
    ("unix:///var/run/cri-dockerd.sock", "unix:///var/run/cri-dockerd.sock"),
])
def test_endpoint_target(endpoint, target):
    assert _cri.endpoint_target(endpoint) == target


@pytest.mark.parametrize("endpoint", ["tcp://1.2.3.4:10010", "containerd.sock", "npipe:////./pipe/containerd"])
def test_endpoint_target_refuses_what_is_not_a_unix_socket(endpoint):
    with pytest.raises(ValueError):
        _cri.endpoint_target(endpoint)


@pytest.mark.parametrize("devices,expected", [
    (["nvidia.com/gpu=0"], {"cdi.k8s.io/gpuprobe": "nvidia.com/gpu=0"}),
    (["nvidia.com/gpu=0", "nvidia.com/gpu=1"], {"cdi.k8s.io/gpuprobe": "nvidia.com/gpu=0,nvidia.com/gpu=1"}),
    ([], {}),
])
def test_cdi_annotations(devices, expected):
    assert _cri.cdi_annotations(devices) == expected


def test_missing_libraries_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_cri, "HAS_CRI_LIBS", False)
    monkeypatch.setattr(_cri, "CRI_IMPORT_ERROR", ImportError("No module named 'grpc'"))
    with pytest.raises(_cri.CRIUnavailable, match="grpcio and protobuf are not installed: No module named 'grpc'"):
        _cri.CRIClient("/run/containerd/containerd.sock", "/nonexistent")


@pytest.mark.parametrize("descriptor,match", [
    (None, "no CRI API descriptor: give its path or set GPUPROBE_CRI_DESCRIPTOR"),
    ("/nonexistent/api.desc", "cannot read the CRI API descriptor /nonexistent/api.desc"),
])
def test_missing_descriptor_is_a_clear_error(monkeypatch, descriptor, match):
    pytest.importorskip("grpc")
    monkeypatch.delenv(_cri.DESCRIPTOR_ENV, raising=False)
    with pytest.raises(_cri.CRIUnavailable, match=match):
        _cri.CRIClient("/run/containerd/containerd.sock", descriptor)


@pytest.mark.parametrize("data,match", [
    (b"\xff\xff\xff not a descriptor set", "cannot read the CRI API descriptor"),
    (b"", "is not the CRI API"),
    ("other.proto", "is not the CRI API"),   # a valid set with one file and no services
])
def test_descriptor_that_is_not_the_cri_api_is_a_clear_error(tmp_path, data, match):
    pytest.importorskip("grpc")
    if isinstance(data, str):
        from google.protobuf import descriptor_pb2
        data = descriptor_pb2.FileDescriptorSet(file=[descriptor_pb2.FileDescriptorProto(name=data)]).SerializeToString()
    bad = tmp_path / "api.desc"
    bad.write_bytes(data)
    with pytest.raises(_cri.CRIUnavailable, match=match):
        _cri.CRIClient("/run/containerd/containerd.sock", str(bad))


@pytest.mark.parametrize("code,timeout", [("DEADLINE_EXCEEDED", True), ("UNAVAILABLE", False), ("NOT_FOUND", False)])
def test_cri_error_says_timeout(code, timeout):
    e = _cri.CRIError("RunPodSandbox", code, "x")
    assert e.timeout is timeout
    assert str(e) == "RunPodSandbox: %s: x" % code


# ---- the runtime layer through a CRI runtime that cannot be reached: NOT_RUN with the reason, never a traceback ----

RUNTIME_RECORD = r"""
import json, sys
if sys.argv[1] == "no-grpc":
    sys.modules["grpc"] = None  # an interpreter without grpcio: 'import grpc' raises ImportError, as on such a node
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
record, probe = _runtime_layer.record(json.loads(sys.argv[2]))
print(json.dumps({"status": record["status"], "reason": record["reason"], "probe": probe,
                  "engine": record["evidence"].get("engine")}))
"""


def _record_in_fresh_interpreter(mode, **params):
    import json
    import os
    import subprocess
    import sys
    args = {"run_id": "t-cri", "image": "localhost/gpuprobe-probe:local", "cdi_devices": ["gpuprobe.local/gpu-t=0"],
            "runtime": "containerd"}
    args.update(params)
    env = dict(os.environ)
    env.pop(_cri.DESCRIPTOR_ENV, None)
    r = subprocess.run([sys.executable, "-c", RUNTIME_RECORD, mode, json.dumps(args)], capture_output=True, text=True,
                       timeout=120, check=False, env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_no_grpc_on_the_node_is_not_run_with_missing_required_lib(tmp_path):
    import socket
    sock = str(tmp_path / "cri.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(sock)
        out = _record_in_fresh_interpreter("no-grpc", runtime_endpoint="unix://" + sock)
    assert out["status"] == "NOT_RUN" and out["probe"] is None
    assert out["reason"].startswith("Failed to import the required Python library (grpcio and protobuf)"), out["reason"]
    assert "the CRI (containerd)" in out["reason"] and "grpc" in out["reason"].split("(")[-1]
    assert out["engine"]["name"] == "containerd" and out["engine"]["usable"] is False


def test_no_descriptor_on_the_node_is_not_run_saying_how_to_build_it(tmp_path):
    pytest.importorskip("grpc")
    import socket
    sock = str(tmp_path / "cri.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(sock)
        out = _record_in_fresh_interpreter("as-is", runtime_endpoint="unix://" + sock)
        assert out["status"] == "NOT_RUN" and "no CRI API descriptor" in out["reason"]
        assert "scripts/engines.sh stubs" in out["reason"] and "cri_descriptor" in out["reason"]
        out = _record_in_fresh_interpreter("as-is", runtime_endpoint="unix://" + sock, cri_descriptor=str(tmp_path / "absent.desc"))
        assert out["status"] == "NOT_RUN" and "cannot read the CRI API descriptor" in out["reason"]


def test_no_cri_socket_is_not_run(tmp_path):
    out = _record_in_fresh_interpreter("as-is", runtime="crio", runtime_endpoint="unix://%s" % (tmp_path / "absent.sock"))
    assert out["status"] == "NOT_RUN" and out["reason"] == "crio: no CRI socket at %s" % (tmp_path / "absent.sock")


def test_the_cri_log_is_read_with_run_s_bounds_and_keeps_the_probe_lines(tmp_path):
    """A probe whose libraries flood stdout (64 MiB would not fit): the CRI log is cut as _run.run cuts a CLI's output,
    and the probe's JSON lines from the middle of the flood are kept whole (one split across P/F log lines too)."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import run as _run
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cri import CriEngine

    noise = b"2026-12-03T12:00:00Z stdout F " + b"x" * 200 + b"\n"
    n = (3 * _run.MAX_CAPTURE) // len(noise)
    path = tmp_path / "probe.log"
    with open(path, "wb") as f:
        f.write(b'2026-12-03T12:00:00Z stdout F {"kind": "start"}\n')
        f.write(noise * (n // 2))
        f.write(b'2026-12-03T12:00:00Z stdout P {"kind": "inv\n2026-12-03T12:00:00Z stderr F warning\n'
                b'2026-12-03T12:00:00Z stdout F entory"}\n')
        f.write(noise * (n // 2))
        f.write(b'2026-12-03T12:00:00Z stdout F {"kind": "done"}\n')
    out = CriEngine._read_log(str(path))  # pylint: disable=protected-access
    assert out["truncated"] is True and out["stdout_bytes"] > 2 * _run.MAX_CAPTURE
    assert len(out["stdout"]) < 2 * _run.MAX_CAPTURE + 10000
    lines = [line for line in out["stdout"].splitlines() if line.startswith('{"')]
    assert lines == ['{"kind": "start"}', '{"kind": "inventory"}', '{"kind": "done"}']
    assert out["stderr"] == "warning\n"


def test_an_unreadable_cri_log_says_so(tmp_path):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cri import CriEngine
    out = CriEngine._read_log(str(tmp_path / "absent.log"))  # pylint: disable=protected-access
    assert out["stderr"].startswith("Error: the CRI log %s cannot be read" % (tmp_path / "absent.log"))


@pytest.mark.parametrize("user,expected", [(None, None), ("", None), ("1000", (1000, None)), ("1000:44", (1000, 44))])
def test_cri_user(user, expected):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cri import _user
    assert _user(user) == expected


@pytest.mark.parametrize("user", ["nobody", "1000:video", "nobody:nogroup"])
def test_cri_user_names_are_refused(user):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cri import _user
    with pytest.raises(ValueError, match="numeric uid"):
        _user(user)


def test_grpc_is_imported_only_when_the_cri_is_used():
    """A probe through a CLI engine loads the runtime package (and this module with it) but never grpcio/protobuf;
    the first CRI use imports them."""
    code = ("import sys\n"
            "from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer, cri\n"
            "from ansible_collections.gpuprobe.layers.plugins.module_utils._node import verify as _node_verify\n"
            "from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri\n"
            "loaded = lambda: sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'google'))\n"
            "assert loaded() == [] and _cri.HAS_CRI_LIBS is None, loaded()\n"
            "assert _cri.load_libs() is True and _cri.HAS_CRI_LIBS is True and 'grpc' in loaded()\n"
            "assert _cri.grpc is sys.modules['grpc'] and _cri.load_libs() is True\n")
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
