"""The options of a fleet run checked before any node runs (plugins/plugin_utils/_report/options.py), against the
verify role's real meta/argument_specs.yml, and the filter that reads them from hostvars."""
import os
import re

import pytest

from ansible_collections.gpuprobe.layers.plugins.filter.option_errors import option_errors_filter, role_options
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import options as opts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ROLE = role_options()


@pytest.mark.parametrize("values,expected", [
    ({}, []),
    ({"gpuprobe_mode": "audit", "verify_probe_timeout": "30", "verify_cdi_devices": ["nvidia.com/gpu=0"]}, []),
    ({"gpuprobe_mode": "postcheck", "gpuprobe_cdi_source": "self-built", "verify_self_built_variant": "no_uvm_node"}, []),
    ({"gpuprobe_mode": "bogus"}, ["gpuprobe_mode is 'bogus': must be one of audit, full, postcheck"]),
    ({"gpuprobe_mode": "drill"}, ["gpuprobe_mode=drill is no longer a mode of verify-gpu.yml: run the fault drills with "
                                  "ansible-playbook playbooks/fault-drills.yml -e gpuprobe_dedicated_node=true"]),
    ({"gpuprobe_cdi_source": "selfbuilt"}, ["gpuprobe_cdi_source is 'selfbuilt': must be one of node, self-built"]),
    ({"gpuprobe_mode": "audit", "gpuprobe_cdi_source": "self-built"},
     ["gpuprobe_mode=audit with gpuprobe_cdi_source=self-built: audit is read-only and writes no spec; "
      "use gpuprobe_mode=full (or postcheck) with a self-built spec"]),
    ({"verify_layer_timeout": "0"}, ["verify_layer_timeout is 0: must be a whole number of seconds greater than 0 and at most 86400"]),
    ({"verify_probe_timeout": -5}, ["verify_probe_timeout is -5: must be a whole number of seconds greater than 0 and at most 86400"]),
    ({"gpuprobe_mdoe": "audit"}, ["unknown variable gpuprobe_mdoe: did you mean gpuprobe_mode? (gpuprobe_* and verify_* "
                                  "variables must be options of playbooks/verify-gpu.yml or of the gpuprobe.layers.verify role)"]),
    ({"verify_probe_timout": 10}, ["unknown variable verify_probe_timout: did you mean verify_probe_timeout? (gpuprobe_* "
                                   "and verify_* variables must be options of playbooks/verify-gpu.yml or of the "
                                   "gpuprobe.layers.verify role)"]),
    ({"gpuprob_hosts": "gpu"}, ["unknown variable gpuprob_hosts: did you mean gpuprobe_hosts? (gpuprobe_* and verify_* "
                                "variables must be options of playbooks/verify-gpu.yml or of the gpuprobe.layers.verify role)"]),
    ({"verify_mode": "audit"}, ["verify_mode is set by verify-gpu.yml from gpuprobe_mode: set gpuprobe_mode instead"]),
    ({"verify_self_built_variant": "no_uvm_node"},
     ["verify_self_built_variant is only used with gpuprobe_cdi_source=self-built (the source is node)"]),
    ({"gpuprobe_cdi_source": "self-built", "verify_self_built_spec_dir": "/etc/cdi/x"},
     ["verify_self_built_spec_dir is /etc/cdi/x: a self-built spec is never written to /etc/cdi"]),
    ({"verify_run_id": "Run 1"}, ["verify_run_id is 'Run 1': only a-z, 0-9 and '-' (at most 63, starting with a letter or digit)"]),
    ({"verify_run_id": "-x"}, ["verify_run_id is '-x': only a-z, 0-9 and '-' (at most 63, starting with a letter or digit)"]),
    ({"verify_layer_timeout": 0}, ["verify_layer_timeout is 0: must be a whole number of seconds greater than 0 and at most 86400"]),
    # thresholds per group: the same names and values host_facts accepts; a dcgmi level longer than the layer's time
    ({"verify_health_thresholds": {"pcie_replay_warn": 50, "retired_pages_fail": None}}, []),
    ({"verify_health_thresholds": {"pcie_replay": 50}},
     ["verify_health_thresholds is {'pcie_replay': 50}: must be valid: health_thresholds: unknown threshold 'pcie_replay' "
      "(known: ecc_uncorrected_aggregate_warn, ecc_uncorrected_volatile_fail, mig_sram_uncorrected_fail, "
      "nvlink_inactive_fail, pcie_replay_rate_percent, pcie_replay_warn, retired_pages_fail, row_remap_banks_exhausted_warn, "
      "temperature_margin_c)"]),
    ({"verify_dcgm_diag": 1}, []),
    ({"verify_dcgm_diag": 2}, ["verify_dcgm_diag is 2: dcgmi diag -r 2 may take 900 s, more than verify_layer_timeout (300 s); raise it"]),
    ({"verify_dcgm_diag": 2, "verify_layer_timeout": 1200}, []),
])
def test_value_and_name_errors(values, expected):
    errors = opts.unknown_name_errors(values, ROLE) + opts.value_errors(values, ROLE)
    assert errors == expected


@pytest.mark.parametrize("pins,named", [
    # issue 22.3: a misspelt pin name is named with its close match, as a misspelt variable is
    ({"drver_version": "580"}, "drver_version: did you mean driver_version?"),
    ({"driver_verison": "580"}, "driver_verison: did you mean driver_version?"),
    ({"cuda_api": "12.8"}, "cuda_api: did you mean cuda_driver_api?"),
    ({"runtime_versions": "5.4"}, "runtime_versions: did you mean runtime_version?"),
    ({"cdi_digest": "ab"}, "cdi_digest: did you mean cdi_spec_digest?"),
    ({"gpu_count": 8}, "gpu_count (known: "),
    ({"drver_version": "580", "zzz": 1}, "drver_version: did you mean driver_version?; zzz (known: "),
])
def test_a_misspelt_pin_name_is_refused_with_its_close_match(pins, named):
    errors = opts.value_errors({"gpuprobe_pins": pins}, ROLE)
    assert len(errors) == 1 and "has unknown pin names " + named in errors[0], errors


def test_type_errors_come_from_the_role_argument_specs():
    errors = opts.value_errors({"verify_probe_timeout": "abc", "verify_cdi_devices": {"not": "a list"}}, ROLE)
    assert len(errors) == 2
    assert "verify_probe_timeout" in errors[1] and "int" in errors[1]
    assert "verify_cdi_devices" in errors[0] and "list" in errors[0]


def test_unrelated_names_and_collection_facts_are_not_errors():
    names = {"gpu_count": 1, "verity_x": 1, "ansible_host": "x", "gpuprobe_fleet": "x", "verify_result": {}}
    assert opts.candidate_names(names) == ["gpuprobe_fleet", "verify_result", "verity_x"]
    assert opts.unknown_name_errors({"gpuprobe_fleet": "x", "verify_result": {}}, ROLE) == []


def test_a_value_outside_the_choices_is_one_error():
    """Issue 46: verify_dcgm_diag=9 was refused twice, by the argument spec's choices and by its domain."""
    assert opts.value_errors({"verify_dcgm_diag": 9}, ROLE) == ["verify_dcgm_diag is 9: must be one of 0, 1, 2, 3, 4"]


@pytest.mark.parametrize("name", sorted(n for n, o in ROLE.items() if o.get("choices")))
def test_every_choice_option_is_checked_by_its_domain(name):
    errors = opts.value_errors({name: 99 if ROLE[name].get("type") == "int" else "not-one-of-the-choices"}, ROLE)
    assert len(errors) == 1 and errors[0].startswith(name), errors


def test_errors_name_their_hosts():
    errors = opts.option_errors({"a": {"gpuprobe_mode": "bogus"}, "b": {"gpuprobe_mode": "bogus", "verify_probe_timeout": 0}}, ROLE)
    assert errors == ["gpuprobe_mode is 'bogus': must be one of audit, full, postcheck [every host]",
                      "verify_probe_timeout is 0: must be a whole number of seconds greater than 0 and at most 86400 [b]"]


def test_filter_reads_hostvars_and_play_level_variables():
    hostvars = {"a": {"verify_probe_timeout": 0, "ansible_host": "x"}, "b": {"gpuprobe_mdoe": "audit"}}
    # current: the context of host a, plus a play-level variable of an importing playbook
    errors = option_errors_filter(hostvars, ["a", "b"], {"verify_probe_timeout": 0, "gpuprobe_mode": "bogus"}, "a")
    assert errors == [
        "gpuprobe_mode is 'bogus': must be one of audit, full, postcheck [every host]",
        "unknown variable gpuprobe_mdoe: did you mean gpuprobe_mode? (gpuprobe_* and verify_* variables must be "
        "options of playbooks/verify-gpu.yml or of the gpuprobe.layers.verify role) [b]",
        "verify_probe_timeout is 0: must be a whole number of seconds greater than 0 and at most 86400 [a]"]


def _yaml_files(*dirs):
    for top in dirs:
        for base, _dirs, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if name.endswith((".yml", ".yaml")):
                    yield os.path.join(base, name)


def test_every_variable_the_playbooks_and_roles_use_is_known():
    """A variable added to a playbook or role without adding it to _options (or the role's argument specs)
    would be refused by the preflight of every run."""
    used = set()
    for path in _yaml_files("playbooks", "roles/verify", "molecule"):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        used.update(re.findall(r"(?<![\w.])((?:gpuprobe|verify)_[a-z0-9_]+)\b", text))
    not_variables = {"verify_gpu"}  # the collection's playbook name gpuprobe.layers.verify_gpu
    unknown = sorted(n for n in used - not_variables if n not in opts.known_names(ROLE))
    assert unknown == []


def test_every_option_has_a_domain():
    """issue 19.7: every option of the playbooks, of the verify role and of verify_node is checked against its
    whole domain before any node runs (a new option without a domain fails here)."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import VERIFY_NODE_ARGSPEC
    assert set(opts.VERIFY_DOMAINS) == set(VERIFY_NODE_ARGSPEC)
    assert set(n[len("verify_"):] for n in ROLE) <= set(opts.VERIFY_DOMAINS)
    assert set(opts.PLAYBOOK_DOMAINS) == set(opts.PLAYBOOK_OPTIONS)


def test_the_defaults_are_in_their_domains():
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import VERIFY_NODE_ARGSPEC
    defaults = dict((n, spec.get("default")) for n, spec in VERIFY_NODE_ARGSPEC.items())
    assert opts.verify_value_errors(defaults) == []
    role_defaults = dict((n, o.get("default")) for n, o in ROLE.items() if n not in opts.SET_BY_PLAYBOOK)
    assert opts.value_errors(role_defaults, ROLE) == []


BAD = [
    ("verify_probe_timeout", 99999999999), ("verify_probe_timeout", 86401), ("verify_probe_timeout", 0),
    ("verify_layer_timeout", 2 ** 31), ("verify_layer_timeout", -1),
    ("verify_root", "relative/dir"), ("verify_root", ""), ("verify_driver_root", "lib64"),
    ("verify_cdi_spec_dirs", []), ("verify_cdi_spec_dirs", ["etc/cdi"]),
    ("verify_cdi_kinds", []), ("verify_cdi_kinds", ["nvidia.com"]), ("verify_cdi_kinds", ["nvidia.com/gpu=0"]),
    ("verify_cdi_devices", ["/tmp/x:/dev/y=z"]), ("verify_cdi_devices", ["/dev/sda"]), ("verify_cdi_devices", ["gpu0"]),
    ("verify_cdi_spec", {"path": "x.yaml"}), ("verify_cdi_spec", {"path": "/var/run/cdi/x.yaml", "kind": "k", "devices": []}),
    ("verify_self_built_spec_dir", "/etc/cdi"), ("verify_self_built_spec_dir", "/etc/./cdi/x"),
    ("verify_self_built_spec_dir", "/var/../etc/cdi"), ("verify_self_built_spec_dir", "run/cdi"),
    ("verify_self_built_variant", "nope"), ("verify_stub_libcuda", "stubs/libcuda.so"),
    ("verify_run_id", "Run 1"), ("verify_run_id", "x" * 64),
    ("verify_probe_image", "--privileged"), ("verify_probe_image", ""), ("verify_probe_image", "img --privileged"),
    ("verify_probe_runtime", "runc"), ("verify_probe_user", "0; rm -rf /"), ("verify_probe_user", "-u"),
    ("verify_probe_environment", {"A B": "1"}), ("verify_probe_environment", {"X": {"nested": 1}}),
    ("gpuprobe_report_dir", ""), ("gpuprobe_report_dir", "  "), ("gpuprobe_report_dir", ["a"]),
    ("gpuprobe_status_file", ""), ("gpuprobe_hosts", ""), ("gpuprobe_pins", ["driver_version"]),
    ("gpuprobe_pins", {"driver_verison": "580"}), ("gpuprobe_dedicated_node", "maybe"),
    ("gpuprobe_drill_variants", ["full", "nope"]), ("gpuprobe_drill_variants", []),
    ("verify_health_thresholds", {"temperature_margin_c": -2}), ("verify_health_thresholds", {"nvlink_inactive_fail": 0}),
    ("verify_dcgm_diag", 5), ("verify_dcgm_diag", -1),
    ("gpuprobe_k8s_publish", "maybe"), ("gpuprobe_k8s_publish_label", "Bad Key"), ("gpuprobe_k8s_publish_label", "/x"),
    ("gpuprobe_k8s_condition_type", "not a type"), ("gpuprobe_k8s_kubeconfig", ["a"]), ("gpuprobe_k8s_node_names", ["a"]),
    ("gpuprobe_k8s_node_names", {"h": ""}),
]
GOOD = [
    ("verify_probe_timeout", 1), ("verify_probe_timeout", 86400), ("verify_layer_timeout", "600"),
    ("verify_driver_root", ""), ("verify_driver_root", "/run/nvidia/driver"), ("verify_cdi_kinds", ["k8s.gpu.nvidia.com/claim"]),
    ("verify_cdi_devices", []), ("verify_cdi_devices", ["nvidia.com/gpu=all", "nvidia.com/gpu=GPU-0b4e:1"]),
    ("verify_probe_image", "registry.example/gpuprobe-probe@sha256:" + "a" * 64), ("verify_probe_user", "1000:1000"),
    ("verify_probe_environment", {"CONTAINERS_CONF": "/etc/c.conf", "N": 3}), ("verify_run_id", ""),
    ("gpuprobe_report_dir", "reports"), ("gpuprobe_pins", {"driver_version": "580.159.04"}),
    ("gpuprobe_dedicated_node", "true"), ("gpuprobe_drill_variants", ["full", "no_uvm_node"]),
    ("gpuprobe_k8s_publish", True), ("gpuprobe_k8s_publish_label", "gpuprobe.layers/verdict"), ("gpuprobe_k8s_publish_label", ""),
    ("gpuprobe_k8s_condition_type", "GPUComputeVerified"), ("gpuprobe_k8s_kubeconfig", "/home/u/.kube/config"),
    ("gpuprobe_k8s_node_names", {"gpu01.lab": "gpu01"}),
]


@pytest.mark.parametrize("name,value", BAD)
def test_each_option_outside_its_domain_is_refused_before_any_node_runs(name, value):
    values = {name: value}
    if name in opts.SELF_BUILT_ONLY or name == "verify_self_built_spec_dir":
        values["gpuprobe_cdi_source"] = "self-built"
    errors = opts.value_errors(values, ROLE)
    assert [e for e in errors if e.startswith(name)], errors


@pytest.mark.parametrize("name,value", GOOD)
def test_values_inside_the_domain_pass(name, value):
    assert opts.value_errors({name: value}, ROLE) == []
