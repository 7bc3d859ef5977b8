#!/usr/bin/env bash
# ansible-test sanity on a copy of the tracked tree laid out as ansible_collections/gpuprobe/layers.
# The ignore files under tests/sanity stay empty: fix the finding instead.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
dest=$root/.build/sanity/ansible_collections/gpuprobe/layers
rm -rf "$root/.build/sanity"; mkdir -p "$dest"
# docs/evidence/ is left out: it holds the untouched output of real runs (logs, records), kept byte for byte, which
# is no collection content for sanity to judge (a GNU tool's own quotes in a log are not ours to change)
git ls-files -co --exclude-standard -z | grep -zv '^docs/evidence/' | xargs -0 -I{} cp --parents {} "$dest/" 2>/dev/null || true
# ansible-test bootstraps pip in its sanity virtualenvs with a get-pip script from a host that this
# network does not reach; give it an equivalent from PyPI's pip wheel (the path it documents for that case).
pip_version=$(python - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
class P:
    version = "3.11"
print(get_venv_packages(P)["pip"])
PY
)
# ansible-test keeps its sanity virtualenvs and caches under ~/.ansible/test: give it a home under .build, so that
# what it creates stays with the checkout (removed with .build); the first run there builds its virtualenvs
test_home=$root/.build/ansible-test-home
mkdir -p "$test_home"
cache=$test_home/.ansible/test/cache
shim=$cache/get_pip_${pip_version//./_}.py
if [ ! -f "$shim" ]; then
  mkdir -p "$cache"
  python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$cache" "pip==$pip_version"
  cat > "$shim" <<PY
# Stand-in for ansible-test's get-pip-$pip_version.py: installs pip from the pip wheel beside it.
import glob, os, runpy, sys
wheel = glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-$pip_version-*.whl"))[0]
sys.path.insert(0, wheel)
sys.argv = ["pip", "install"] + [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
PY
fi
cd "$dest"
git init -q . && git add -A >/dev/null 2>&1
for f in tests/sanity/ignore-*.txt; do
  if [ -s "$f" ]; then echo "sanity: $f is not empty" >&2; exit 1; fi
done
HOME=$test_home ansible-test sanity --python "$(python -c 'import sys;print("%d.%d" % sys.version_info[:2])')" \
  --requirements --color no "$@"
