"""The README and docs/ stand on their own: no reference to files outside the repository (the design notes
and GPU-lab bundle of the development set-up are not part of it: docs/contract.md and docs/lab.md say it in
the repo's words), and every relative link points at a file of the repository."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md", "docs/evidence/README.md"] + sorted(
    "docs/" + name for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md"))
OUTSIDE = re.compile(r"\.\./shared|\.gpu-lab|DESIGN\.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", DOCS)
def test_no_reference_outside_the_repository(doc):
    with open(os.path.join(ROOT, doc)) as f:
        found = [(n, line.strip()) for n, line in enumerate(f, 1) if OUTSIDE.search(line)]
    assert found == []


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    with open(os.path.join(ROOT, doc)) as f:
        text = f.read()
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), target.split("#")[0]))
        if not path.startswith(ROOT + os.sep) or not os.path.exists(path):
            broken.append(target)
    assert broken == []
