"""The probe sandbox's cgroup parent as the kubelet places a BestEffort Pod (issue 44): the kubelet's settings in its
precedence (fixture flags and KubeletConfiguration files, the layouts' node trees), the parent per cgroup driver,
cgroupRoot and cgroupsPerQOS, the cases where none is given, the kubelet's pod-name test and the removal of what the
runtime left (a fixture cgroup tree: plain directories with cgroup.procs files)."""
import os

import pytest

import layoutfixture  # tests/conftest.py puts tests/unit/fixtures/layouts on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import kubelet, layouts, pod_cgroup
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cri import CriAdapter

SANDBOX_ID = "7c1f" * 16
CONTAINER_ID = "a0b1" * 16


def put(root, path, text):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def settings(root, args, config=None, config_dir=None):
    return kubelet.pod_settings(str(root), args, "the running kubelet", "/proc/1/cmdline", config, config_dir)


def mounts_with(tmp_path, *cgroups):
    """Two cgroup 'mounts' (a v1 controller and v2) under tmp_path, each with the given cgroup directories."""
    mounts = [str(tmp_path / "cg" / "memory"), str(tmp_path / "cg" / "unified")]
    for m in mounts:
        os.makedirs(m, exist_ok=True)
        for c in cgroups:
            os.makedirs(m + c, exist_ok=True)
    return mounts


# ---- the kubelet's settings, in its precedence ------------------------------------------------------------

def test_flag_over_dropins_over_config_over_default(tmp_path):
    put(tmp_path, "/c/config.yaml", "kind: KubeletConfiguration\ncgroupDriver: systemd\ncgroupRoot: /from-config\n"
                                    "imageServiceEndpoint: unix:///config-images.sock\n")
    put(tmp_path, "/c/d/10.conf", "cgroupDriver: cgroupfs\ncgroupsPerQOS: false\n")
    put(tmp_path, "/c/d/20.conf", "maxPods: 10\n")
    out = settings(tmp_path, ["--config=/c/config.yaml", "--config-dir", "/c/d"])
    assert out["unknown"] is None and out["errors"] == []
    assert out["cgroup_driver"] == {"value": "cgroupfs", "source": "cgroupDriver in /c/d/10.conf (the running kubelet's --config-dir)"}
    assert out["cgroups_per_qos"]["value"] is False
    assert out["cgroup_root"] == {"value": "/from-config", "source": "cgroupRoot in /c/config.yaml"}
    assert out["image_endpoint"]["value"] == "unix:///config-images.sock"
    # flags win, a bare boolean flag is true, the last of each wins
    out = settings(tmp_path, ["--config=/c/config.yaml", "--config-dir=/c/d", "--cgroup-driver", "systemd", "--cgroups-per-qos",
                              "--image-service-endpoint=unix:///a.sock", "--image-service-endpoint=unix:///b.sock"])
    assert out["cgroup_driver"]["value"] == "systemd" and "--cgroup-driver=systemd on the running kubelet's command line" in \
        out["cgroup_driver"]["source"]
    assert out["cgroups_per_qos"]["value"] is True and out["image_endpoint"]["value"] == "unix:///b.sock"
    assert settings(tmp_path, ["--cgroups-per-qos=false"])["cgroups_per_qos"]["value"] is False
    # nothing set: the KubeletConfiguration defaults (pkg/kubelet/apis/config/v1beta1/defaults.go)
    out = settings(tmp_path, [])
    assert [out[k]["value"] for k in ("cgroup_driver", "cgroup_root", "cgroups_per_qos", "image_endpoint")] == ["cgroupfs", "", True, ""]
    assert out["cgroup_driver"]["source"] == "the KubeletConfiguration default (cgroupDriver not set)"


def test_a_file_not_read_makes_them_unknown_except_flags(tmp_path):
    put(tmp_path, "/bad.yaml", "kind: [unclosed\n")
    out = settings(tmp_path, ["--config", "/bad.yaml", "--cgroup-driver=systemd"])
    assert out["unknown"].startswith("unknown: kubelet config /bad.yaml not understood (YAML)")
    assert out["unknown"].endswith("does not fall back to its defaults, so none is assumed")
    assert out["cgroup_driver"]["value"] == "systemd"      # a flag is the kubelet's whatever its files say
    assert out["cgroup_root"]["value"] is None and out["image_endpoint"]["value"] is None
    placement = pod_cgroup.choose(out, mounts=[])
    assert placement["parent"] is None and placement["unknown"].startswith("the kubelet's cgroup settings are unknown: ")


# the layouts' node trees: what their kubelet files say, found as the endpoint is (layouts.discover)
LAYOUT_DRIVERS = {
    "kubeadm-containerd17": ("systemd", "cgroupDriver in /var/lib/kubelet/config.yaml"),
    "kubespray-crio": ("systemd", "cgroupDriver in /etc/kubernetes/kubelet-config.yaml"),
    "openshift-crio": ("systemd", "cgroupDriver in /etc/kubernetes/kubelet.conf"),
    "k3s": ("systemd", "cgroupDriver in /var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf "
                       "(the kubelet inside k3s's --config-dir)"),
    "microk8s": ("cgroupfs", "the KubeletConfiguration default (cgroupDriver not set)"),
}


@pytest.mark.parametrize("layout", sorted(LAYOUT_DRIVERS))
def test_the_layouts_kubelet_settings(tmp_path, layout):
    root = layoutfixture.build(layout, str(tmp_path / "node"))
    pod = layouts.discover(root)["pod"]
    assert (pod["cgroup_driver"]["value"], pod["cgroup_driver"]["source"]) == LAYOUT_DRIVERS[layout]
    assert pod["cgroups_per_qos"]["value"] is True and pod["image_endpoint"]["value"] == "" and pod["unknown"] is None


# ---- the parent ---------------------------------------------------------------------------------------------

def pod(driver="cgroupfs", root="", per_qos=True, image=""):
    return {"cgroup_driver": {"value": driver, "source": "d"}, "cgroup_root": {"value": root, "source": "r"},
            "cgroups_per_qos": {"value": per_qos, "source": "q"}, "image_endpoint": {"value": image, "source": "i"},
            "errors": [], "unknown": None}


PARENTS = {
    # the kubelet's QoS cgroup of a BestEffort Pod: ToCgroupfs / ToSystemd of [cgroupRoot..., kubepods, besteffort]
    ("cgroupfs", ""): "/kubepods/besteffort",
    ("cgroupfs", "/"): "/kubepods/besteffort",
    ("cgroupfs", "/custom/root"): "/custom/root/kubepods/besteffort",
    ("systemd", ""): "/kubepods.slice/kubepods-besteffort.slice",
    ("systemd", "/"): "/kubepods.slice/kubepods-besteffort.slice",
    # systemd: each part's '-' escaped to '_', the parts joined with '-' and expanded (runc's ExpandSlice)
    ("systemd", "/gpu-nodes"): "/gpu_nodes.slice/gpu_nodes-kubepods.slice/gpu_nodes-kubepods-besteffort.slice",
}


@pytest.mark.parametrize("driver, root", sorted(PARENTS), ids=lambda v: v or "unset")
def test_the_parent_is_the_besteffort_qos_cgroup(tmp_path, driver, root):
    mounts = mounts_with(tmp_path, PARENTS[(driver, root)])
    out = pod_cgroup.choose(pod(driver, root), mounts=mounts)
    assert (out["parent"], out["driver"], out["qos"], out["unknown"]) == (PARENTS[(driver, root)], driver, "besteffort", None)
    assert "a BestEffort Pod's QoS cgroup %s" % PARENTS[(driver, root)] in out["because"]
    # the runtime reporting the same driver (CRI RuntimeConfig) changes nothing
    assert pod_cgroup.choose(pod(driver, root), runtime_driver=driver, mounts=mounts)["parent"] == PARENTS[(driver, root)]


def test_containerd_reads_a_systemd_parent_as_a_slice():
    # containerd's getCgroupsPath: a parent whose base name ends in .slice is a systemd slice, any other a path
    assert os.path.basename(PARENTS[("systemd", "")]).endswith(".slice")
    assert not os.path.basename(PARENTS[("cgroupfs", "")]).endswith(".slice")


def test_no_parent_where_the_kubelet_gives_none_or_it_cannot_be_known(tmp_path):
    mounts = mounts_with(tmp_path, "/kubepods/besteffort", "/kubepods.slice/kubepods-besteffort.slice")
    out = pod_cgroup.choose(pod(per_qos=False), mounts=mounts)
    # cgroupsPerQOS false: the kubelet sends no parent either (podContainerManagerNoop): the same placement, not unknown
    assert out["parent"] is None and out["unknown"] is None and "podContainerManagerNoop" in out["because"]
    out = pod_cgroup.choose(None, mounts=mounts)
    assert out["parent"] is None and out["unknown"] is None and out["because"].startswith("no kubelet found")
    out = pod_cgroup.choose(pod(driver="weird"), mounts=mounts)
    assert out["parent"] is None and "is neither cgroupfs nor systemd" in out["unknown"]
    out = pod_cgroup.choose(pod(driver="cgroupfs"), runtime_driver="systemd", mounts=mounts)
    assert out["parent"] is None and "KubeletCgroupDriverFromCRI" in out["unknown"]
    # the QoS cgroup the settings name is not there: never made in the kubelet's place
    out = pod_cgroup.choose(pod(root="/elsewhere"), mounts=mounts)
    assert out["parent"] is None and "/elsewhere/kubepods/besteffort is not in this node's cgroup filesystem" in out["unknown"]
    out = pod_cgroup.choose(pod(driver="systemd", root="/a//b"), mounts=mounts)
    assert out["parent"] is None and "invalid slice name" in out["unknown"]


# ---- safe from the kubelet's orphan sweep -------------------------------------------------------------------

@pytest.mark.parametrize("child, driver, taken", [
    ("pod" + "1b2c3d4e-5f60-4718-9a0b-1c2d3e4f5a6b", "cgroupfs", True),
    ("kubepods-besteffort-pod1b2c3d4e_5f60_4718_9a0b_1c2d3e4f5a6b.slice", "systemd", True),
    (SANDBOX_ID, "cgroupfs", False),
    ("cri-containerd-%s.scope" % SANDBOX_ID, "systemd", False),
    ("crio-%s.scope" % CONTAINER_ID, "systemd", False),
    ("crio-conmon-%s.scope" % CONTAINER_ID, "systemd", False),
    ("podpod", "cgroupfs", False),   # splits in three: the kubelet logs it and leaves it
], ids=["pod-cgroupfs", "pod-slice", "sandbox-id", "containerd-scope", "crio-scope", "crio-conmon-scope", "two-pods"])
def test_what_getallpodsfromcgroups_takes_for_a_pod(child, driver, taken):
    assert pod_cgroup.is_pod_name(child, driver) is taken


def test_the_runtimes_names_of_any_id_are_never_a_pods():
    for ident in ("0" * 64, "f" * 64, SANDBOX_ID, CONTAINER_ID):
        for driver in pod_cgroup.DRIVERS:
            assert not any(pod_cgroup.is_pod_name(n, driver) for n in pod_cgroup.child_names(driver, ident))


# ---- what the runtime left, removed -------------------------------------------------------------------------

def test_remove_only_the_probes_own_empty_cgroups(tmp_path):
    parent = "/kubepods/besteffort"
    mounts = mounts_with(tmp_path, parent + "/" + SANDBOX_ID, parent + "/" + CONTAINER_ID, parent + "/" + "e" * 64,
                         parent + "/pod1234")
    # plain directories stand for cgroups (rmdir of a plain one needs it empty: the sandbox's has no files); the
    # container's still holds a process
    for m in mounts:
        put(m, parent + "/" + CONTAINER_ID + "/cgroup.procs", "4242\n")
    placement = {"parent": parent, "driver": "cgroupfs"}
    out = pod_cgroup.remove(placement, [SANDBOX_ID, CONTAINER_ID, "../../etc", "pod1234"], mounts=mounts)
    assert sorted(out["removed"]) == sorted(m + parent + "/" + SANDBOX_ID for m in mounts)
    assert [k.split(" ")[0] for k in out["kept"]] == [m + parent + "/" + CONTAINER_ID for m in mounts]
    assert all("(pids 4242)" in k for k in out["kept"]) and out["error"].startswith("the probe's cgroups were not all removed")
    # another id's cgroup and the kubelet's Pod cgroup are never touched; a name that is not an id is not even looked at
    assert all(os.path.isdir(m + parent + "/" + "e" * 64) and os.path.isdir(m + parent + "/pod1234") for m in mounts)
    assert pod_cgroup.remove({"parent": None}, [SANDBOX_ID], mounts=mounts)["left"] == []


def test_a_systemd_scope_is_left_to_systemd(tmp_path):
    parent = "/kubepods.slice/kubepods-besteffort.slice"
    scope = parent + "/cri-containerd-%s.scope" % SANDBOX_ID
    mounts = mounts_with(tmp_path, scope)
    out = pod_cgroup.remove({"parent": parent, "driver": "systemd"}, [SANDBOX_ID], mounts=mounts)
    assert out["removed"] == [] and out["error"] is None
    assert out["kept"] == ["%s (an empty systemd scope: systemd collects it)" % (m + scope) for m in mounts]


# ---- the image service endpoint -----------------------------------------------------------------------------

@pytest.mark.parametrize("image, expected", [
    ("unix:///run/images.sock", "unix:///run/images.sock"),
    ("", None),
    ("unix:///run/containerd/containerd.sock", None),
    (None, None),
], ids=["set", "unset", "same-as-runtime", "unknown"])
def test_the_image_goes_through_the_kubelets_image_endpoint(image, expected):
    info = {"name": "containerd", "endpoint": "unix:///run/containerd/containerd.sock", "kubelet_pod": pod(image=image)}
    out = CriAdapter(info).image_service()
    assert out["endpoint"] == expected
    if expected:
        assert out["source"].startswith("the kubelet's image service endpoint unix:///run/images.sock (i), not the runtime")
    assert CriAdapter(dict(info, kubelet_pod=None)).image_service()["endpoint"] is None
