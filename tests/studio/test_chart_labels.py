"""Model ids on the published-figures chart are broken into short lines, so that
neighbouring tick labels do not overlap (the browser test measures them)."""

from __future__ import annotations

import pytest

from studio.components.charts import wrapped_label


@pytest.mark.parametrize(
    ("label", "shown"),
    [
        ("llama-3.3-70b-versatile", "llama-3.3-<br>70b-<br>versatile"),
        ("openai/gpt-oss-120b", "openai/gpt-<br>oss-120b"),
        ("qwen/qwen3.6-27b", "qwen/<br>qwen3.6-27b"),
        ("m-a", "m-a"),
        ("a" * 30, "a" * 30),  # nowhere to break: kept whole
        ("&lt;b&gt;-x", "&lt;b&gt;-x"),  # escaped text is never cut inside an entity
    ],
)
def test_long_model_ids_are_broken_after_separators(label: str, shown: str) -> None:
    assert wrapped_label(label) == shown
    assert wrapped_label(label).replace("<br>", "") == label
