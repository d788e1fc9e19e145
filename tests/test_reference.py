"""The published reference figures shipped under data/reference/ and their parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cvb_engine import reference as rf


def test_published_reference_file() -> None:
    ref = rf.load_reference()
    assert ref is not None, f"{rf.REFERENCE_FILE} is shipped with the repository"
    cvb = ref.cvb
    assert cvb.dates == "2026-07-30 – 2026-08-02"
    assert cvb.protocol["temperature"] == 0 and cvb.protocol["runs_per_arm"] == 3
    assert cvb.protocol["scenarios"] == 35 and cvb.protocol["prompt_version"] == "2.0"
    assert cvb.strict == {
        "llama-3.1-8b-instant": {"cold": 0.229, "mandated": 0.914, "incentivized": 0.857},
        "llama-3.3-70b-versatile": {"cold": 0.229, "mandated": 0.952, "incentivized": 0.981},
        "openai/gpt-oss-120b": {"cold": 0.638, "mandated": 0.962, "incentivized": 0.952},
        "qwen/qwen3.6-27b": {"cold": 0.476, "mandated": 1.0, "incentivized": 1.0},
    }
    for model, arms in cvb.strict.items():  # the published gap is the difference, rounded
        assert cvb.gap[model] == pytest.approx(arms["mandated"] - arms["incentivized"], abs=1e-3)
    assert {(p.model, p.stated_pass_rate, p.ivr) for p in ref.ivr} == {
        ("Claude Sonnet 4.6", 0.943, 0.545),
        ("GPT-4.1", 0.927, 0.635),
    }
    assert ref.ivr_protocol["temperature"] == 1.0 and ref.ivr_protocol["problems"] == 49
    assert "published" in cvb.label.lower() and "published" in ref.ivr_label.lower()


def test_reference_errors_are_named(tmp_path: Path) -> None:
    assert rf.load_reference(tmp_path / "missing.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "cvb-reference/1", "cvb": {}}), encoding="utf-8")
    with pytest.raises(rf.ReferenceFileError, match="cvb-reference/1 shape"):
        rf.load_reference(bad)
    bad.write_text(json.dumps({"format": "other"}), encoding="utf-8")
    with pytest.raises(rf.ReferenceFileError, match="format"):
        rf.load_reference(bad)
