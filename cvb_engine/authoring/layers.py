"""Memory layers for the Run page: the variant names a layer's settings give, and a probe.

The Run page's layer builder (:mod:`studio.components.layer_builder`) collects a
layer (the built-in ``bm25``, a command, or a URL with the *name* of its key
variable), the arms that use it (``memory``, ``memory-tool``), loads, ``k`` and
``rounds``; :func:`layer_arms` turns them into canonical arm variant names such
as ``memory@command=./my_layer.py,load=10``, checked as ``cvb run`` checks
them, so they join the run's arms like the memory sweep's variants do.
:func:`probe` asks the layer once (two sample entries, one query) and says what
it answered or why it failed, in words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from cvb_engine.arms import ArmError, arm_order, canonical_arm, parse_arm
from cvb_engine.metrics import LAYER_KINDS

if TYPE_CHECKING:
    from cvb_engine.arms.layered import LayerParams

Transport = Literal["builtin", "command", "url"]


@dataclass(frozen=True)
class LayerForm:
    """A memory layer as the Run page sets it up."""

    transport: Transport = "builtin"
    target: str = ""  # the command line (command) or the base URL (url)
    key_env: str = ""  # url only: the NAME of the key variable, never a key
    kinds: tuple[str, ...] = ("memory",)
    loads: tuple[int, ...] = (0,)
    k: int = 5
    rounds: int = 4
    timeout_s: float = 30.0


def _layer_params(form: LayerForm) -> list[str]:
    """The ``key=value`` items naming the form's layer (none for the built-in bm25)."""
    target = form.target.strip()
    if form.transport == "builtin":
        return []
    what = "command" if form.transport == "command" else "URL"
    if not target:
        raise ArmError(f"give the layer's {what}")
    if "," in target:
        # arm parameters are separated by commas (README: Bring your own memory layer)
        raise ArmError(
            f"the {what} cannot contain a comma (arm parameters are separated by commas): "
            "put such a command in a script"
        )
    if form.transport == "command":
        return [f"command={target}"]
    items = [f"url={target}"]
    if form.key_env.strip():
        items.append(f"key_env={form.key_env.strip()}")
    return items


def _name(kind: str, items: Sequence[str]) -> str:
    text = kind + ("@" + ",".join(items) if items else "")
    name = canonical_arm(text)
    from cvb_engine import layer_spec

    layer_spec(cast("LayerParams", parse_arm(name).params))  # the checks cvb run makes
    return name


def layer_arms(form: LayerForm) -> list[str]:
    """The canonical arm variants of ``form``: one per chosen arm kind and load, in the
    matrix's order; none when no arm kind is chosen.

    Raises:
        ArmError: a setting that ``cvb run`` would refuse; the message says which.
    """
    if not form.kinds:
        return []
    layer = _layer_params(form)
    names = []
    for kind in form.kinds:
        if kind not in LAYER_KINDS:
            raise ArmError(f"unknown memory-layer arm {kind!r}")
        for load in form.loads or (0,):
            settings = {"load": int(load), "k": int(form.k), "timeout": float(form.timeout_s)}
            if kind == "memory-tool":
                settings["rounds"] = int(form.rounds)
            names.append(_name(kind, [*layer, *_not_default(kind, settings)]))
    return arm_order(names)


def _not_default(kind: str, settings: dict[str, float]) -> list[str]:
    """``key=value`` items for the settings that differ from the kind's defaults (so a
    message quotes the name as the user would write it)."""
    from cvb_engine import arm_kind

    defaults = arm_kind(kind).params()
    return [f"{k}={v:g}" for k, v in settings.items() if getattr(defaults, k) != v]


def probe_name(form: LayerForm) -> str:
    """The ``memory`` variant of the form's layer (what :func:`probe` asks).

    Raises:
        ArmError: the layer's settings do not work.
    """
    return _name(
        "memory", [*_layer_params(form), *_not_default("memory", {"timeout": form.timeout_s})]
    )


@dataclass(frozen=True)
class ProbeOutcome:
    """What a probe found: the layer's one-line answer, or why it failed."""

    name: str  # the variant probed (or what was asked, when it does not parse)
    ok: bool
    text: str


def probe(name: str, *, state_dir: Path | None = None) -> ProbeOutcome:
    """Ask the layer of variant ``name`` once (:func:`cvb_engine.memory_layers.probe_layer`).

    Never raises: a refused setting, a layer that fails or anything unexpected comes back
    as a message (a layer's own words are quoted in it; show them as text).
    """
    from cvb_engine import LayerError, layer_spec, probe_layer

    try:
        spec = layer_spec(cast("LayerParams", parse_arm(name).params))
        folder = state_dir if state_dir is not None else default_state_dir()
        answer = asyncio.run(probe_layer(spec, state_dir=folder))
    except (ArmError, LayerError) as exc:
        return ProbeOutcome(name, False, str(exc))
    except Exception as exc:  # the probe must say what happened, never show a traceback
        return ProbeOutcome(name, False, f"the probe failed: {type(exc).__name__}: {exc}")
    return ProbeOutcome(name, True, answer)


def default_state_dir() -> Path:
    """Where a probed command layer may keep its index: beside the runs' layer state."""
    from cvb_engine import layer_state_root

    return layer_state_root() / "studio-probe"
