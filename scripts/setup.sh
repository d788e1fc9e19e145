#!/usr/bin/env bash
# Install CVB Studio and everything its tests need, on a fresh Debian/Python 3.11 machine.
#   scripts/setup.sh                the package, the studio, the IVR pack's data, the dev tools,
#                                   Debian's chromium + Playwright (browser tests) and the
#                                   bundled local model
#   CVB_SETUP_BROWSER=0 ...         leave out chromium + Playwright (a lean install; the
#                                   browser tests are then skipped)
#   CVB_SETUP_POSTGRES=1 ...        also Debian's PostgreSQL server binaries (shared-store tests)
#   CVB_SETUP_LOCAL=0 ...           skip the bundled local model (cvb demo needs it, or a hosted endpoint)
#   CVB_SETUP_VENV=0 ...            install into the python3 on PATH instead of .venv/. By
#                                   default setup creates .venv/ in the checkout and installs
#                                   there, unless a virtual environment is active (then into
#                                   it): this works where the system Python refuses
#                                   `pip install` (PEP 668, Debian's and Ubuntu's).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
apt_updated=0
apt_install() {
  if [ "$apt_updated" = "0" ]; then $SUDO apt-get update -qq; apt_updated=1; fi
  $SUDO apt-get install -y -qq "$@" >/dev/null
}

# --- which Python to install into -------------------------------------------------------
in_venv() { python3 -c 'import sys; sys.exit(0 if sys.prefix != sys.base_prefix else 1)'; }
externally_managed() {
  [ -f "$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')/EXTERNALLY-MANAGED" ]
}
use_venv=1
why="CVB_SETUP_VENV=0 installs into python3 instead"
if [ "${CVB_SETUP_VENV:-1}" = "0" ]; then
  use_venv=0
  if ! in_venv && externally_managed; then
    echo "setup: CVB_SETUP_VENV=0, but python3 is externally managed (PEP 668) and refuses" \
      "pip install; drop CVB_SETUP_VENV=0 to install into .venv/" >&2
    exit 1
  fi
elif in_venv; then
  use_venv=0  # the active virtual environment is the user's choice
  echo "installing into the active virtual environment ($(python3 -c 'import sys; print(sys.prefix)'))"
fi
if [ "$use_venv" = "1" ]; then
  if [ ! -x .venv/bin/python ]; then
    echo "creating .venv/ ($why) ..."
    if ! python3 -m venv .venv 2>/dev/null; then
      # Debian and Ubuntu ship venv's pip bootstrap separately
      rm -rf .venv
      [ -f /etc/debian_version ] && apt_install python3-venv
      python3 -m venv .venv
    fi
  fi
  PY="$PWD/.venv/bin/python"
else
  PY="python3"
fi

"$PY" -m pip install --quiet --upgrade pip
"$PY" -m pip install --quiet -e '.[dev,ivr,postgres]'

# Model code runs only in bubblewrap (cvb_engine/sandbox/): without it, commands that
# execute model code refuse to start unless a weaker backend is named (--sandbox).
if [ -f /etc/debian_version ] && ! command -v bwrap >/dev/null 2>&1; then
  apt_install bubblewrap || echo "warning: could not install bubblewrap; runs that execute model code will refuse (see cvb doctor)" >&2
fi

if [ "${CVB_SETUP_POSTGRES:-0}" = "1" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt_install postgresql
fi

# The browser tests drive Debian's chromium through Playwright (no browser download).
if [ "${CVB_SETUP_BROWSER:-1}" = "1" ]; then
  command -v chromium >/dev/null 2>&1 || apt_install chromium
  "$PY" -m pip install --quiet 'playwright>=1.40'
fi

mkdir -p data

# The bundled local model for `cvb demo` / `cvb serve-local`. llama-cpp-python has no
# binary wheel and compiles from source, once. A default (native) build crashed on its
# first evaluation on the machines we test on; the portable build (GGML_NATIVE=OFF) works.
# pip stays quiet; its whole output goes to data/setup-llama.log, and a line every 30 s
# says the build is still going.
if [ "${CVB_SETUP_LOCAL:-1}" = "1" ]; then
  log="data/setup-llama.log"
  if ! "$PY" -c "import llama_cpp" >/dev/null 2>&1; then
    echo "building llama-cpp-python for the local model (about 3 minutes on 2 idle cores; log: $log) ..."
  fi
  # Only what `python -m llama_cpp.server` loads: libllama + ggml's CPU backend. Off: the
  # multimodal library (mtmd, imported only by image chat handlers), HTTPS, and llama.cpp's
  # tests, tools, examples and server binaries (already off when llama.cpp is a subproject;
  # said here so a newer llama-cpp-python cannot turn them back on).
  lean="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF"
  lean="$lean -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF"
  lean="$lean -DLLAMA_BUILD_APP=OFF"
  CMAKE_ARGS="$lean ${CMAKE_ARGS:-}" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$PY" -m pip install -v -e '.[local]' >"$log" 2>&1 &
  pid=$!
  started=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do
      sleep 1
      kill -0 "$pid" 2>/dev/null || break
    done
    if kill -0 "$pid" 2>/dev/null; then
      elapsed=$((SECONDS - started))
      # ninja's "[N/M]" lines (pip -v) say how far the compile is
      step=$(grep -o '^ *\[[0-9]*/[0-9]*\]' "$log" 2>/dev/null | tail -n 1 | tr -d ' []' || true)
      printf '  still installing the local model: %dm%02ds elapsed%s (log: %s)\n' \
        $((elapsed / 60)) $((elapsed % 60)) "${step:+, compiled $step}" "$log"
    fi
  done
  if ! wait "$pid"; then
    tail -n 30 "$log" >&2
    echo "setup: installing the local model failed; the whole log is in $log" \
      "(CVB_SETUP_LOCAL=0 scripts/setup.sh skips it)" >&2
    exit 1
  fi
fi

if [ "$use_venv" = "1" ]; then
  echo "installed into .venv/: run '. .venv/bin/activate' first (or call .venv/bin/cvb)"
fi
echo "setup took $((SECONDS / 60))m$(printf %02d $((SECONDS % 60)))s"
echo "setup done: next, 'cvb demo' (a small benchmark against the bundled model); 'cvb doctor' says what this machine offers"
