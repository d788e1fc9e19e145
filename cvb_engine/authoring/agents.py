"""The agent arm on the Run page: the variants a form's settings give, and what they cost.

The Run page's agent builder (``studio/components/agent_builder.py``) collects
where the rules live (``rules``, one variant per choice), the loads, the
position, the superseded decisions (``stale``) and the byte budgets the rules
files are cut to (``budget``), one variant per choice of each, whether the root
rules file is also preloaded, the tool rounds (``steps``), or a user's own agent
program (``command``, ``timeout``);
:func:`agent_arms` turns them into canonical variant names such as
``agent@rules=nested,load=10``, checked as ``cvb run`` checks them, so they join
the run's arms like the memory sweep's variants do. :func:`episode_cost` says
what the chosen variants send: an episode is one cell of the matrix, and a
tool-loop episode makes up to ``steps + 1`` requests.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import get_args

from cvb_engine.arms import ArmError, arm_kind, arm_order, canonical_arm, parse_arm
from cvb_engine.metrics import is_agent_arm

AGENT = "agent"


def choices(field: str) -> list[str]:
    """The values a Literal parameter of the agent arm takes, in its declared order."""
    return [str(v) for v in get_args(arm_kind(AGENT).params.model_fields[field].annotation)]


def default(field: str) -> object:
    """The agent arm's default for ``field``."""
    return getattr(arm_kind(AGENT).params(), field)


@dataclass(frozen=True)
class AgentForm:
    """The agent arm as the Run page sets it up."""

    rules: tuple[str, ...] = ("agents-md",)
    loads: tuple[int, ...] = (0,)
    position: str = "spread"
    preload: tuple[bool, ...] = (False,)
    #: ``none``, ``with``, ``only``: the superseded decisions beside or instead of the rules
    stale: tuple[str, ...] = ("none",)
    #: bytes the rules files share (None: no budget): a budget curve, one variant each
    budgets: tuple[int | None, ...] = (None,)
    steps: int = 12
    command: str = ""  # empty: the built-in tool loop
    timeout_s: float = 600.0


@dataclass(frozen=True)
class Variants:
    """What a form gives: the variant names, and the combinations left out (with why)."""

    names: list[str]
    skipped: list[str]


def agent_arms(form: AgentForm) -> Variants:
    """The canonical agent variants of ``form``: one per rules place, load, stale setting,
    budget and preload choice, in the matrix's order. ``rules=adr`` has no root rules file, so its preloaded
    combination is left out (and named in ``skipped``).

    Raises:
        ArmError: a setting that ``cvb run`` would refuse; the message says which.
    """
    command = form.command.strip()
    if "," in command:
        # arm parameters are separated by commas (README: Bring your own agent)
        raise ArmError(
            "the command cannot contain a comma (arm parameters are separated by commas): "
            "put such a command in a script"
        )
    names: list[str] = []
    skipped: list[str] = []
    preloads = (False,) if command else (form.preload or (False,))
    for rules, load, stale, budget, preload in itertools.product(
        form.rules or ("agents-md",),
        form.loads or (0,),
        form.stale or ("none",),
        form.budgets or (None,),
        preloads,
    ):
        items = [f"rules={rules}", f"load={int(load)}"]
        if int(load):
            items.append(f"position={form.position}")
        if stale != "none":
            items.append(f"stale={stale}")
        if budget is not None:
            items.append(f"budget={int(budget)}")
        if command:
            items += [f"command={command}", f"timeout={float(form.timeout_s):g}"]
        else:
            items += [f"preload={'true' if preload else 'false'}", f"steps={int(form.steps)}"]
        text = AGENT + "@" + ",".join(items)
        if preload and rules == "adr":
            skipped.append("rules=adr with preload (decision records have no root rules file)")
            continue
        name = canonical_arm(text)
        parse_arm(name)  # the checks cvb run makes
        names.append(name)
    return Variants(arm_order(list(dict.fromkeys(names))), list(dict.fromkeys(skipped)))


@dataclass(frozen=True)
class EpisodeCost:
    """What the agent variants among a run's arms send, per (scenario, repetition, model)."""

    episodes: int  # agent cells (each one episode)
    max_requests: int  # tool-loop requests at most: steps + 1 per episode
    commands: int  # episodes run by a user's agent program (its requests are its own)


def episode_cost(arms: Iterable[str]) -> EpisodeCost:
    """The agent variants' cost per (scenario, repetition, model): episodes, and the most
    requests the tool loop makes for them (an arm that does not parse counts nothing)."""
    episodes = requests = commands = 0
    for arm in arms:
        if not is_agent_arm(arm):
            continue
        try:
            params = parse_arm(arm).params
        except ArmError:
            continue
        episodes += 1
        if getattr(params, "command", None):
            commands += 1
        else:
            requests += int(getattr(params, "steps", 0)) + 1
    return EpisodeCost(episodes, requests, commands)
