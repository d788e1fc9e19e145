#!/usr/bin/env bash
# The benchmark as a new user gets it: build the wheel, install it into a fresh virtual
# environment outside the checkout, and use `cvb` from an empty folder: --version, lint
# of the shipped library, a dry run, a short run against the test endpoint
# (tests/fake_openai.py, standard library only) and a report of it. Exits non-zero on
# the first failure. Run by .ci/run; by hand: scripts/check_wheel.sh [PYTHON]
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
# Nothing of the checkout may leak in: with the checkout on PYTHONPATH, its build's
# cvb_studio.egg-info would tell pip the package is already installed.
unset PYTHONPATH CVB_SCENARIOS CVB_DATABASE_URL VIRTUAL_ENV
python="${1:-${PYTHON:-python3}}"
work="$(mktemp -d "${TMPDIR:-/tmp}/cvb-wheel.XXXXXX")"
fake_pid=""
cleanup() {
  if [ -n "$fake_pid" ]; then kill "$fake_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
step() { printf '== %s\n' "$*"; }

step "build the wheel"
"$python" -m pip wheel "$repo" --no-deps --quiet --wheel-dir "$work/dist"
wheel="$(ls "$work"/dist/cvb_studio-*.whl)"

step "install it into a fresh virtual environment ($work/venv)"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
"$work/venv/bin/python" -m pip show --quiet cvb-studio >/dev/null

export CVB_HOME="$work/home"
cvb="$work/venv/bin/cvb"
mkdir "$work/empty"
cd "$work/empty"

site="$("$work/venv/bin/python" -c 'import cvb_engine, pathlib; print(pathlib.Path(cvb_engine.__file__).parent)')"
case "$site" in "$repo"*) echo "cvb_engine was imported from the checkout: $site" >&2; exit 1 ;; esac
before="$(cd "$site" && find . -type f ! -name '*.pyc' | sort | sha256sum)"

step "cvb --version"
"$cvb" --version

step "cvb lint (the shipped library)"
"$cvb" lint --quiet

step "cvb run --endpoint local --dry-run"
"$cvb" run --endpoint local --dry-run

step "a short run against the test endpoint"
"$work/venv/bin/python" "$repo/tests/fake_openai.py" --port 0 --models fake-model >"$work/fake.out" 2>"$work/fake.err" &
fake_pid=$!
for _ in $(seq 1 100); do
  grep -q '^READY ' "$work/fake.out" 2>/dev/null && break
  sleep 0.1
done
base_url="$(sed -n 's/^READY //p' "$work/fake.out")"
[ -n "$base_url" ] || { echo "the test endpoint did not start" >&2; cat "$work/fake.err" >&2; exit 1; }
"$cvb" run --base-url "$base_url" --api-key-env "" --models fake-model --runs 1 \
  --only http-client-choice,shell-command-runner --arms cold,mandated \
  --price-in 0.5 --price-out 1.5 --run-id wheel-check --json run.json
"$cvb" report wheel-check --markdown report.md
grep -q "wheel-check" report.md
grep -q "^## Cost" report.md

step "inspect eval cvb_engine/cvb (the [inspect] extra: inspect finds the task by its entry point)"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "cvb-studio[inspect] @ file://$wheel"
# By name, as `inspect eval cvb_engine/cvb` finds it; mockllm with its token counts given
# (without them it would download a tokenizer).
"$work/venv/bin/python" - "$work/inspect-logs" <<'PY'
import pathlib
import sys

from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model

reply = "```python\nimport httpx\n\ndef fetch_json(url):\n    return httpx.get(url, timeout=5).json()\n```"
out = ModelOutput.from_content("mockllm/model", reply)
out.usage = ModelUsage(input_tokens=100, output_tokens=20, total_tokens=120)
model = get_model("mockllm/model", custom_outputs=[out])
inspect_eval(
    "cvb_engine/cvb",
    model=model,
    task_args={"only": "http-client-choice", "arm": "mandated"},
    log_dir=sys.argv[1],
    display="none",
)
[path] = pathlib.Path(sys.argv[1]).iterdir()
log = read_eval_log(str(path))
assert log.status == "success", (log.status, log.error)
assert log.eval.task.endswith("cvb_mandated"), log.eval.task
[sample] = log.samples or []
score = (sample.scores or {})["cvb_checks"]
assert sample.id == "http-client-choice" and score.metadata["constraints"], score
print(f"{log.eval.task}: 1 sample, strict {score.value}, by cvb_checks")
PY

step "nothing was written into the installed package"
after="$(cd "$site" && find . -type f ! -name '*.pyc' | sort | sha256sum)"
[ "$before" = "$after" ] || { echo "the installed package changed during the run" >&2; exit 1; }
step "ok"
