"""_cri's pure parts: the CRI log format, endpoints, the cdi.k8s.io annotation, and the clear errors when the
client cannot be made (libraries or descriptor missing). The calls themselves run against a real containerd in
tests/integration/test_engines.py."""
import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils import _cri


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
