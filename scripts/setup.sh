#!/usr/bin/env bash
# Install CVB Studio and everything its tests need, on a fresh Debian/Python 3.11 machine.
#   scripts/setup.sh            the package, the studio and the dev tools
#   CVB_SETUP_BROWSER=1 ...     also Debian's chromium + Playwright (browser tests)
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet -e '.[dev]'

if [ "${CVB_SETUP_BROWSER:-0}" = "1" ]; then
  if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq chromium >/dev/null
  fi
  python3 -m pip install --quiet 'playwright>=1.40'
fi
mkdir -p data
echo "setup done: try 'cvb lint scenarios' and 'cvb --help'"
