"""The options of a fleet run checked before any node runs (plugins/module_utils/_fleet_options.py), against the
verify role's real meta/argument_specs.yml, and the filter that reads them from hostvars."""
import os
import re

import pytest

from ansible_collections.gpuprobe.layers.plugins.filter.options import option_errors_filter, role_options
from ansible_collections.gpuprobe.layers.plugins.module_utils import _fleet_options as opts

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
    ({"verify_layer_timeout": "0"}, ["verify_layer_timeout is 0: must be a whole number of seconds greater than 0"]),
    ({"verify_probe_timeout": -5}, ["verify_probe_timeout is -5: must be a whole number of seconds greater than 0"]),
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
    ({"verify_layer_timeout": 0}, ["verify_layer_timeout is 0: must be a whole number of seconds greater than 0"]),
])
def test_value_and_name_errors(values, expected):
    errors = opts.unknown_name_errors(values, ROLE) + opts.value_errors(values, ROLE)
    assert errors == expected


def test_type_errors_come_from_the_role_argument_specs():
    errors = opts.value_errors({"verify_probe_timeout": "abc", "verify_cdi_devices": {"not": "a list"}}, ROLE)
    assert len(errors) == 2
    assert "verify_probe_timeout" in errors[1] and "int" in errors[1]
    assert "verify_cdi_devices" in errors[0] and "list" in errors[0]


def test_unrelated_names_and_collection_facts_are_not_errors():
    names = {"gpu_count": 1, "verity_x": 1, "ansible_host": "x", "gpuprobe_fleet": "x", "verify_result": {}}
    assert opts.candidate_names(names) == ["gpuprobe_fleet", "verify_result", "verity_x"]
    assert opts.unknown_name_errors({"gpuprobe_fleet": "x", "verify_result": {}}, ROLE) == []


def test_errors_name_their_hosts():
    errors = opts.option_errors({"a": {"gpuprobe_mode": "bogus"}, "b": {"gpuprobe_mode": "bogus", "verify_probe_timeout": 0}}, ROLE)
    assert errors == ["gpuprobe_mode is 'bogus': must be one of audit, full, postcheck [every host]",
                      "verify_probe_timeout is 0: must be a whole number of seconds greater than 0 [b]"]


def test_filter_reads_hostvars_and_play_level_variables():
    hostvars = {"a": {"verify_probe_timeout": 0, "ansible_host": "x"}, "b": {"gpuprobe_mdoe": "audit"}}
    # current: the context of host a, plus a play-level variable of an importing playbook
    errors = option_errors_filter(hostvars, ["a", "b"], {"verify_probe_timeout": 0, "gpuprobe_mode": "bogus"}, "a")
    assert errors == [
        "gpuprobe_mode is 'bogus': must be one of audit, full, postcheck [every host]",
        "unknown variable gpuprobe_mdoe: did you mean gpuprobe_mode? (gpuprobe_* and verify_* variables must be "
        "options of playbooks/verify-gpu.yml or of the gpuprobe.layers.verify role) [b]",
        "verify_probe_timeout is 0: must be a whole number of seconds greater than 0 [a]"]


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
