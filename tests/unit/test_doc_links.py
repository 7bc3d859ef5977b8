"""Every link resolves where it is read (issues 33 and 46).

- Markdown (README.md, docs/*.md, the role READMEs): a relative link names a file or directory of this checkout and,
  with ``#``, one of the target's headings (GitHub's anchors); and it still names a file in the BUILT collection (the
  installed one the tests import), so that no link points into what galaxy.yml's ``build_ignore`` leaves out: such a
  target is linked by the repository's URL instead.
- The plugin and role documentation (read through ansible-doc, where a path like docs/contract.md leads nowhere) names
  a file under docs/ only by an L()/U() link or a seealso ``link:`` to the repository.
- The project's public URLs are one setting, galaxy.yml's ``repository``: ``documentation`` and ``issues`` are made of
  it, and every URL that names the project anywhere here starts with it and, where it names a file
  (``<repository>/blob/main/<path>#<anchor>``, ``tree``, ``raw``), names a file of this checkout and one of its
  headings. Moving the project is one edit of galaxy.yml and a replacement of the old prefix in the files this test
  then lists."""
import glob
import importlib.util
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "galaxy.yml")) as _f:
    GALAXY = yaml.safe_load(_f)
REPOSITORY = GALAXY["repository"].rstrip("/")
BLOB = REPOSITORY + "/blob/main/"
PLUGIN_DOCS = sorted(
    os.path.relpath(p, ROOT) for pattern in ("plugins/modules/*.py", "plugins/doc_fragments/*.py", "plugins/filter/*.py",
                                             "plugins/callback/*.py", "plugins/action/*.py",
                                             "roles/*/meta/argument_specs.yml")
    for p in glob.glob(os.path.join(ROOT, pattern)))
MARKDOWN = ["README.md"] + sorted(os.path.relpath(p, ROOT) for pattern in ("docs/*.md", "roles/*/README.md")
                                  for p in glob.glob(os.path.join(ROOT, pattern)))
DOC_PATH = re.compile(r"docs/[\w.-]+\.md")
URL = re.compile(r"https?://[^\s)<>\]\"'`,]+")
PROJECT_FILE = re.compile(re.escape(REPOSITORY) + r"/(?:blob|tree|raw)/main/([\w./-]+?)/?(?:#([\w-]+))?$")
MD_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def _doc_text(path):
    """The documentation blocks of a plugin (DOCUMENTATION, EXAMPLES, RETURN strings; a doc fragment's class body),
    or the whole YAML file."""
    text = _read(path)
    if path.endswith(".yml"):
        return text
    blocks = re.findall(r'^\s*(?:DOCUMENTATION|EXAMPLES|RETURN|[A-Z_]+)\s*=\s*r?("""|\'\'\')(.*?)\1', text, re.S | re.M)
    return "\n".join(body for _quote, body in blocks)


def _unfenced(text):
    """Markdown without its fenced code blocks (a '# comment' there is no heading)."""
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)


def _prose(text):
    """Markdown without its fenced code blocks and code spans (their brackets are no links)."""
    return re.sub(r"(`+)[^`]*?\1", "", _unfenced(text))


def _slug(heading):
    """GitHub's anchor of a Markdown heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(doc):
    """The anchors of a Markdown file's headings; a repeated heading gets -1, -2, ... as on GitHub."""
    seen, out = {}, set()
    for line in _unfenced(_read(doc)).splitlines():
        if re.match(r"^#{1,6} ", line):
            slug = _slug(line.lstrip("#"))
            out.add(slug if slug not in seen else "%s-%d" % (slug, seen[slug]))
            seen[slug] = seen.get(slug, 0) + 1
    return out


def _relative_links(path):
    """(target path relative to the checkout or '' for the file itself, anchor) of each relative Markdown link."""
    out = []
    for target in MD_LINK.findall(_prose(_read(path))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http(s), mailto: the URL checks below
        file_part, _hash, anchor = target.partition("#")
        if file_part:
            file_part = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        out.append((file_part, anchor))
    return out


def _broken(target, anchor, source):
    where = target or source
    if not os.path.exists(os.path.join(ROOT, where)):
        return "%s (no such file)" % where
    if anchor and where.endswith(".md") and anchor not in _anchors(where):
        return "%s#%s (no such heading)" % (where, anchor)
    return None


def _installed_root():
    spec = importlib.util.find_spec("ansible_collections.gpuprobe.layers")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the built collection is not importable (scripts/bootstrap.sh installs it under .build/collections)")
    return list(spec.submodule_search_locations)[0]


def test_there_are_sources_to_check():
    assert "plugins/modules/verify_node.py" in PLUGIN_DOCS and "roles/verify/meta/argument_specs.yml" in PLUGIN_DOCS
    assert {"README.md", "docs/usage.md", "roles/verify/README.md"} <= set(MARKDOWN)


@pytest.mark.parametrize("path", MARKDOWN)
def test_markdown_links_resolve_in_the_repository(path):
    links = _relative_links(path)
    broken = [b for b in (_broken(target, anchor, path) for target, anchor in links) if b]
    assert broken == []


@pytest.mark.parametrize("path", MARKDOWN)
def test_markdown_links_resolve_in_the_built_collection(path):
    installed = _installed_root()
    if not os.path.exists(os.path.join(installed, path)):
        pytest.skip("%s is not in the built collection" % path)
    missing = sorted(set(target for target, _anchor in _relative_links(path)
                         if target and not os.path.exists(os.path.join(installed, target))))
    assert missing == [], "left out by galaxy.yml build_ignore: link them by %s/blob/main/..." % REPOSITORY


def test_the_built_collection_is_checked():
    """The links of the README and the role READMEs are checked in the built collection, not skipped."""
    installed = _installed_root()
    assert all(os.path.isfile(os.path.join(installed, p)) for p in ("README.md", "docs/usage.md", "roles/verify/README.md"))


@pytest.mark.parametrize("path", PLUGIN_DOCS)
def test_no_repository_relative_docs_path(path):
    text = _doc_text(path)
    bare = []
    for m in DOC_PATH.finditer(text):
        before = text[max(0, m.start() - len(BLOB)):m.start()]
        if before.endswith(BLOB) or text[max(0, m.start() - 2):m.start()] == "L(":
            continue  # the URL itself, or the visible text of L(docs/x.md,URL)
        bare.append(text[max(0, m.start() - 40):m.end()].replace("\n", " "))
    assert bare == []


def test_galaxy_urls_are_made_of_the_repository():
    assert REPOSITORY.startswith("https://") and "example" not in REPOSITORY
    assert (GALAXY["documentation"], GALAXY["issues"]) == (REPOSITORY + "/tree/main/docs", REPOSITORY + "/issues")
    assert GALAXY.get("homepage") in (None, REPOSITORY)


@pytest.mark.parametrize("path", MARKDOWN + PLUGIN_DOCS + ["galaxy.yml"])
def test_every_project_url_is_the_repository_and_resolves(path):
    text = _read(path) if path.endswith(".md") else _doc_text(path)
    broken = []
    for url in URL.findall(text):
        url = url.rstrip(".;:")
        if "gpuprobe" not in url:
            continue
        if url != REPOSITORY and not url.startswith(REPOSITORY + "/"):
            broken.append("%s (not under %s)" % (url, REPOSITORY))
            continue
        m = PROJECT_FILE.match(url)
        if m:
            why = _broken(m.group(1), m.group(2), path)
            if why:
                broken.append(why)
        elif url not in (REPOSITORY, REPOSITORY + "/issues"):
            broken.append("%s (names no file: <repository>/blob/main/<path>)" % url)
    assert broken == []
