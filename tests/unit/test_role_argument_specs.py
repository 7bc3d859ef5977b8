"""Every role states its inputs: meta/argument_specs.yml documents exactly the options of defaults/main.yml,
with the same default values (STYLE.md 11)."""
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = os.path.join(ROOT, "roles")


def roles():
    if not os.path.isdir(ROLES):
        return []
    return sorted(r for r in os.listdir(ROLES) if os.path.isfile(os.path.join(ROLES, r, "tasks", "main.yml")))


def load(role, *parts):
    path = os.path.join(ROLES, role, *parts)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_roles_found():
    assert "verify" in roles()


@pytest.mark.parametrize("role", roles())
def test_argument_specs_equal_defaults(role):
    specs = load(role, "meta", "argument_specs.yml")
    assert specs, "roles/%s has no meta/argument_specs.yml" % role
    options = specs["argument_specs"]["main"]["options"]
    defaults = load(role, "defaults", "main.yml") or {}
    public_defaults = dict((k, v) for k, v in defaults.items() if not k.startswith("__"))
    optional = dict((k, v) for k, v in options.items() if not v.get("required"))
    assert sorted(optional) == sorted(public_defaults), "options without a default or defaults without a spec"
    for name, spec in optional.items():
        assert "default" in spec, "%s: option %s documents no default" % (role, name)
        assert spec["default"] == public_defaults[name], "%s: %s default differs" % (role, name)
        assert spec.get("description"), "%s: %s has no description" % (role, name)
        assert name.startswith(role + "_"), "%s: public option %s is not prefixed with the role name" % (role, name)
    for name, spec in options.items():
        if spec.get("required"):
            assert name not in public_defaults, "%s: required option %s has a default" % (role, name)
