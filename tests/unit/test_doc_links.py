"""The plugin and role documentation links to the repository's docs by URL (issue 33): an installed collection has
no docs/evidence and its readers see ansible-doc, where a path like docs/contract.md leads nowhere. Every mention of
a file under docs/ in the modules, doc fragments, filters, callbacks and role argument specs is an L()/U() link or
a seealso ``link:`` to galaxy.yml's repository, and each link names a file of this checkout and, with ``#``, one of
its headings."""
import glob
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "galaxy.yml")) as _f:
    REPOSITORY = yaml.safe_load(_f)["repository"].rstrip("/")
BLOB = REPOSITORY + "/blob/main/"
SOURCES = sorted(
    os.path.relpath(p, ROOT) for pattern in ("plugins/modules/*.py", "plugins/doc_fragments/*.py", "plugins/filter/*.yml",
                                             "plugins/filter/*.py", "plugins/callback/*.py", "plugins/action/*.py",
                                             "roles/*/meta/argument_specs.yml")
    for p in glob.glob(os.path.join(ROOT, pattern)))
DOC_PATH = re.compile(r"docs/[\w.-]+\.md")
LINK = re.compile(re.escape(BLOB) + r"([\w./-]+?)(?:#([\w-]+))?(?=[),\s\"']|$)")


def _doc_text(path):
    """The documentation blocks of a plugin (DOCUMENTATION, EXAMPLES, RETURN strings; a doc fragment's class body),
    or the whole YAML file."""
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    if path.endswith(".yml"):
        return text
    blocks = re.findall(r'^\s*(?:DOCUMENTATION|EXAMPLES|RETURN|[A-Z_]+)\s*=\s*r?("""|\'\'\')(.*?)\1', text, re.S | re.M)
    return "\n".join(body for _quote, body in blocks)


def _slug(heading):
    """GitHub's anchor of a Markdown heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(doc):
    with open(os.path.join(ROOT, doc)) as f:
        return set(_slug(line.lstrip("#")) for line in f if re.match(r"^#{1,6} ", line))


def test_there_are_sources_to_check():
    assert "plugins/modules/verify_node.py" in SOURCES and "roles/verify/meta/argument_specs.yml" in SOURCES


@pytest.mark.parametrize("path", SOURCES)
def test_no_repository_relative_docs_path(path):
    text = _doc_text(path)
    bare = []
    for m in DOC_PATH.finditer(text):
        before = text[max(0, m.start() - len(BLOB)):m.start()]
        if before.endswith(BLOB) or text[max(0, m.start() - 2):m.start()] == "L(":
            continue  # the URL itself, or the visible text of L(docs/x.md,URL)
        bare.append(text[max(0, m.start() - 40):m.end()].replace("\n", " "))
    assert bare == []


@pytest.mark.parametrize("path", SOURCES)
def test_every_link_into_the_repository_resolves(path):
    broken = []
    for target, anchor in LINK.findall(_doc_text(path)):
        if not os.path.isfile(os.path.join(ROOT, target)):
            broken.append(target)
        elif anchor and anchor not in _anchors(target):
            broken.append("%s#%s" % (target, anchor))
    assert broken == []
