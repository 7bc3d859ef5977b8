#!/usr/bin/env bash
# ansible-test sanity on a copy of the tracked tree laid out as ansible_collections/gpuprobe/layers, under every
# ansible-core the collection claims (meta/runtime.yml requires_ansible >=2.17): the current one (the venv's,
# requirements-dev.txt) and 2.17 (.build/core-2.17, built by scripts/bootstrap.sh --test from
# requirements-core-2.17.txt). The two run side by side (each in its own copy and log), then each log is printed.
# GPUPROBE_SANITY_CORES="current 2.17" (the default) picks them; arguments go to both ansible-test runs
# (e.g. `bash scripts/sanity.sh --test pep8`). The ignore files under tests/sanity stay empty: fix the finding instead.
# Without arguments the current ansible-core runs every sanity test, and 2.17 those whose outcome depends on the
# ansible-core they run under (CORE_TESTS: the plugins imported and their docs read by 2.17, its metadata schema);
# the others (pylint, pep8, yamllint, shellcheck, compile and the file checks) read the same files with the same
# Python whatever the core, and ran under the current one. pylint alone took 107 s of a 150 s run here.
CORE_TESTS=(action-plugin-docs ansible-doc import runtime-metadata validate-modules)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cores=${GPUPROBE_SANITY_CORES:-current 2.17}
for f in tests/sanity/ignore-*.txt; do
  if [ -s "$f" ]; then echo "sanity: $f is not empty" >&2; exit 1; fi
done
# ansible-test keeps its sanity virtualenvs and caches under ~/.ansible/test: give it a home under .build, so that
# what it creates stays with the checkout (removed with .build); the first run there builds its virtualenvs. One home
# per ansible-core: the two run at the same time, and both name their base virtualenv alike (sanity/3.11/<hash of the
# same requirements>), which one home would have them build at once
test_home() {
  case $1 in
    current) echo "$root/.build/ansible-test-home" ;;
    *) echo "$root/.build/ansible-test-home-$1" ;;
  esac
}
rm -rf "$root/.build/sanity"

# the Python (bin directory) of each ansible-core
core_bin() {
  case $1 in
    current) dirname "$(command -v python)" ;;
    2.17) echo "$root/.build/core-2.17/bin" ;;
    *) echo "sanity: unknown ansible-core '$1' (current, 2.17)" >&2; return 1 ;;
  esac
}

# ansible-test bootstraps pip in its sanity virtualenvs with a get-pip script from a host that this
# network does not reach; give it an equivalent from PyPI's pip wheel (the path it documents for that case).
# Each ansible-core pins its own pip version.
get_pip_shim() {
  local bin=$1 home=$2 pip_version cache shim
  pip_version=$("$bin/python" - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
class P:
    version = "3.11"
print(get_venv_packages(P)["pip"])
PY
)
  cache=$home/.ansible/test/cache
  shim=$cache/get_pip_${pip_version//./_}.py
  if [ ! -f "$shim" ]; then
    mkdir -p "$cache"
    "$bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$cache" "pip==$pip_version"
    cat > "$shim" <<PY
# Stand-in for ansible-test's get-pip-$pip_version.py: installs pip from the pip wheel beside it.
import glob, os, runpy, sys
wheel = glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-$pip_version-*.whl"))[0]
sys.path.insert(0, wheel)
sys.argv = ["pip", "install"] + [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
PY
  fi
}

# one ansible-core's run, in its own copy (ansible-test writes its output under the collection's tests/output)
run_core() {
  local core=$1 bin=$2 dest=$root/.build/sanity/$1/ansible_collections/gpuprobe/layers
  shift 2
  mkdir -p "$dest"
  # docs/evidence/ is left out: it holds the untouched output of real runs (logs, records), kept byte for byte,
  # which is no collection content for sanity to judge (a GNU tool's own quotes in a log are not ours to change)
  git ls-files -co --exclude-standard -z | grep -zv '^docs/evidence/' | xargs -0 -I{} cp --parents {} "$dest/" 2>/dev/null || true
  cd "$dest"
  git init -q . && git add -A >/dev/null 2>&1
  echo "sanity: ansible-core $("$bin/python" -c 'from ansible.release import __version__; print(__version__)')"
  HOME=$(test_home "$core") PATH=$bin:$PATH "$bin/ansible-test" sanity \
    --python "$("$bin/python" -c 'import sys;print("%d.%d" % sys.version_info[:2])')" --requirements --color no "$@"
}

mkdir -p "$root/.build/sanity"
pids=()
names=()
for core in $cores; do
  bin=$(core_bin "$core")
  if [ ! -x "$bin/ansible-test" ]; then
    echo "sanity: no ansible-test for ansible-core $core in $bin (scripts/bootstrap.sh --test builds .build/core-2.17)" >&2
    exit 1
  fi
  mkdir -p "$(test_home "$core")"
  get_pip_shim "$bin" "$(test_home "$core")"
done
for core in $cores; do
  bin=$(core_bin "$core")
  args=("$@")
  if [ $# -eq 0 ] && [ "$core" != current ]; then
    for test in "${CORE_TESTS[@]}"; do args+=(--test "$test"); done
  fi
  (run_core "$core" "$bin" "${args[@]}") > "$root/.build/sanity/$core.log" 2>&1 &
  pids+=($!)
  names+=("$core")
done
failed=()
for i in "${!pids[@]}"; do
  status=0
  wait "${pids[$i]}" || status=$?
  echo "=== sanity, ansible-core ${names[$i]}: $([ "$status" = 0 ] && echo ok || echo "FAILED (rc $status)")"
  cat "$root/.build/sanity/${names[$i]}.log"
  [ "$status" = 0 ] || failed+=("${names[$i]}")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "sanity: FAILED under ansible-core ${failed[*]}" >&2
  exit 1
fi
