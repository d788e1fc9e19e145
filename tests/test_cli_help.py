"""The CLI's help and errors: defaults are shown, typos get a suggestion."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cvb_engine import cli


def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    return capsys.readouterr().out


def error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "default"),
    [
        pytest.param("--runs RUNS", "(default: 3)", id="runs"),
        pytest.param("--temperature TEMPERATURE", "(default: 0.0)", id="zero-is-a-default"),
        pytest.param("--max-tokens MAX_TOKENS", "(default: 1024)", id="max-tokens"),
        pytest.param("--arms ARMS", "cold,mandated,incentivized", id="list"),
    ],
)
def test_run_help_shows_defaults(
    option: str, default: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = " ".join(help_of("run", capsys).split())
    options = text[text.index("options:") :]  # not the usage line
    after = options[options.index(option) :]
    assert default in after[: len(option) + 250], after[:300]


def test_help_states_no_default_twice_and_none_that_is_not_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_of("run", capsys)
    assert "(default: None)" not in text and "(default: False)" not in text
    assert text.count("default: $CVB_DATABASE_URL") == 1


def test_report_help_names_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of("report", capsys)
    assert "Markdown, JSON, CSV, HTML" in text


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        pytest.param(["rnu"], "did you mean 'run'?", id="command"),
        pytest.param(["reprot"], "did you mean 'report'?", id="command-2"),
        pytest.param(["run", "--modles", "m"], "did you mean '--models'?", id="option"),
        pytest.param(["report", "--hmtl", "x.html"], "did you mean '--html'?", id="option-2"),
    ],
)
def test_typos_get_a_suggestion(
    argv: list[str], suggestion: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert suggestion in error_of(argv, capsys)


def test_nothing_close_gets_no_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert "did you mean" not in error_of(["zzzzqqq"], capsys)


def test_listed_summaries_are_the_commands_own(capsys: pytest.CaptureFixture[str]) -> None:
    """`cvb --help` lists the plugin commands without importing them: from a copy of
    each handler's first docstring line, which must stay the same."""
    import importlib

    for name, (module, summary) in cli.PLUGINS.items():
        importlib.import_module(module)
        handler = cli._COMMANDS.lookup(name)[1]
        assert (handler.__doc__ or "").strip().splitlines()[0] == summary, name
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    for name in [*cli.PLUGINS, "lint", "report", "studio"]:
        assert name in text


HEAVY = ("numpy", "sqlmodel", "sqlalchemy", "openai", "plotly", "streamlit", "httpx2")


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        pytest.param(["--help"], (), id="help"),
        pytest.param(["lint", "--help"], (), id="lint-help"),
        pytest.param(["lint", "--quiet", "{scenario}"], (), id="lint"),
        pytest.param(["doctor"], ("sqlmodel", "sqlalchemy"), id="doctor-reads-the-store"),
    ],
)
def test_light_commands_start_without_heavy_imports(
    argv: list[str], allowed: tuple[str, ...], scenario_dir: Path, tmp_path: Path
) -> None:
    argv = [a.replace("{scenario}", str(scenario_dir)) for a in argv]
    code = (
        "import sys\n"
        "from cvb_engine import cli\n"
        "try:\n"
        f"    cli.main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "CVB_DATABASE_URL": f"sqlite:///{tmp_path / 'cvb.db'}"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    line = next(x for x in out.stdout.splitlines() if x.startswith("LOADED"))
    loaded = set(ast.literal_eval(line.removeprefix("LOADED ")))
    assert loaded <= set(allowed), (loaded, out.stderr[-2000:])


def test_help_lists_commands_in_the_order_a_user_meets_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    order = ["doctor", "demo", "run", "report", "studio", "lint", "score", "audit", "db"]
    order.append("serve-local")
    listed = [line.split()[0] for line in text.splitlines() if line.startswith("    ")]
    assert [name for name in listed if name in order] == order


def test_version_names_package_prompt_and_scoring(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    from cvb_engine.prompts import PROMPT_VERSION
    from cvb_engine.scoring import SCORING_VERSION

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.splitlines() == [
        f"cvb-studio {version('cvb-studio')}",
        f"prompt version {PROMPT_VERSION}",
        f"scoring version {SCORING_VERSION}",
    ]


def test_doctor_output_ends_with_a_newline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cvb_engine.cli", "doctor", "--db", f"sqlite:///{tmp_path}/d.db"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert done.stdout and done.stdout.endswith("\n"), repr(done.stdout[-80:])
    assert not done.stderr or done.stderr.endswith("\n")
