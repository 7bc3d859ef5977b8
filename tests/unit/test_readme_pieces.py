"""The README's table of the collection's pieces names every module, role and playbook (issue 22.9: node_probe,
the node side of runtime and compute, was missing)."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pieces_table():
    text = open(os.path.join(ROOT, "README.md")).read()
    table = text.split("| piece | what it is |", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"`(?:gpuprobe\.layers\.)?([\w/.-]+)`", table)) | set(re.findall(r"(?:, |`)([\w-]+\.yml)", table))


def _names():
    modules = [f[:-3] for f in os.listdir(os.path.join(ROOT, "plugins", "modules")) if f.endswith(".py") and not f.startswith("_")]
    roles = os.listdir(os.path.join(ROOT, "roles"))
    # the hyphenated playbooks (the underscored ones are their collection names' aliases)
    playbooks = [f for f in os.listdir(os.path.join(ROOT, "playbooks")) if f.endswith(".yml") and "-" in f]
    return sorted(modules + roles + playbooks)


@pytest.mark.parametrize("name", _names())
def test_every_module_role_and_playbook_is_in_the_readme_table(name):
    assert name in _pieces_table() or "playbooks/%s" % name in _pieces_table(), name
