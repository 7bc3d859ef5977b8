"""Commands pasted from the docs work, or say what to change (issue 46). Every command block (```bash, ```sh,
```cron) of README.md, docs/*.md and the role READMEs is one of:

- run by a test: an HTML comment on the line before it, ``<!-- run by: FILE, FILE -->``, names the files that run
  it (tests, CI scripts); each names a file of the checkout, and every script, playbook or benchmark the block calls
  is named in them;
- an example to adapt: a line before it, ``*Example: `NAME` what to put there, `NAME` ...*``, names each
  placeholder (a name in backticks that opens a clause), and each named placeholder is in the block (an example without placeholders says ``*Example.*``:
  it runs as it is, where its paragraph says)."""
import glob
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for pattern in ("docs/*.md", "roles/*/README.md")
                              for p in glob.glob(os.path.join(ROOT, pattern)))
COMMAND_INFO = ("bash", "sh", "shell", "console", "cron")
RUN_BY = re.compile(r"^<!-- run by: (.+?) -->$")
EXAMPLE = re.compile(r"^\*Example[.:](.*)\*$")
CALLED = re.compile(r"(?:scripts|playbooks|benchmarks)/[\w.-]+")
# a placeholder opens a clause of the example line: "*Example: `A` what it is, `B` what it is; `C` ...*"
PLACEHOLDER = re.compile(r"(?:^|[,;]|\band)\s*`([^`]+)`")


def _blocks(path):
    """(line number, the marker line before the fence or '', the block's text) of each command block."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(```|~~~)(\S*)", lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(m.group(1))), len(lines))
        if m.group(2) in COMMAND_INFO:
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            out.append((i + 1, before.strip(), "\n".join(lines[i + 1:end])))
        i = end + 1
    return out


BLOCKS = [(path, line, marker, text) for path in DOCS for line, marker, text in _blocks(path)]


def test_there_are_blocks_of_both_kinds():
    markers = [marker for _p, _l, marker, _t in BLOCKS]
    assert len(BLOCKS) > 20
    assert any(RUN_BY.match(m) for m in markers) and any(EXAMPLE.match(m) for m in markers)


@pytest.mark.parametrize("path,line,marker,text", BLOCKS, ids=["%s:%d" % (b[0], b[1]) for b in BLOCKS])
def test_a_command_block_is_run_by_a_test_or_an_example_with_its_placeholders(path, line, marker, text):
    run_by, example = RUN_BY.match(marker), EXAMPLE.match(marker)
    assert run_by or example, "%s:%d: mark the block `<!-- run by: FILE -->` or `*Example: `NAME` ...*`" % (path, line)
    if example:
        placeholders = PLACEHOLDER.findall(example.group(1))
        assert example.group(1).strip() == "" or placeholders, "name each placeholder in backticks"
        assert [p for p in placeholders if p not in text] == []
        return
    files = [f.strip() for f in run_by.group(1).split(",")]
    assert [f for f in files if not os.path.isfile(os.path.join(ROOT, f))] == []
    named = ""
    for f in files:
        with open(os.path.join(ROOT, f), encoding="utf-8") as handle:
            named += handle.read()
    called = set(CALLED.findall("\n".join(re.sub(r"(^|\s)#.*", "", line) for line in text.splitlines())))
    if not called:  # a script of the docs' own (docs/k8s.md's plugin): the test reads it from the doc
        called = {path}
    assert sorted(c for c in called if os.path.basename(c) not in named) == []


def test_dev_env_imports_the_collection_from_the_working_tree():
    """README's development block starts with `source scripts/dev-env.sh`: the collection is then this checkout."""
    proc = subprocess.run(["bash", "-c", "source scripts/dev-env.sh && python -c 'import ansible_collections.gpuprobe."
                           "layers.plugins.module_utils._common.result as r; print(r.__file__)'"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert os.path.realpath(proc.stdout.strip()) == os.path.join(ROOT, "plugins", "module_utils", "_common", "result.py")
