"""What a run cost, from its stored token counts and configured prices (pure).

Prices are US dollars per million tokens, input and output apart, per model. Where
they come from, first found wins:

1. ``--price-in`` / ``--price-out`` (``cvb run`` and ``cvb report``): every model of the run;
2. the prices stored with the run (``params["prices"]``, written when it started);
3. the endpoints file (``data/endpoints.json`` or ``$CVB_ENDPOINTS``): a preset's own
   ``"prices"`` map, then the file's top-level ``"prices"`` map, both
   ``{"model-id": {"input": 0.59, "output": 0.79}}``;
4. the built-in presets' lists (:data:`BUILTIN_PRICES`).

A model with no price has an **unknown** cost (``None``), never zero; so has a
(model, arm) cell with an answered record that carries no token counts. Error
records add their tokens when the server reported some (a failed call may be billed)
and are never counted as strictly accurate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cvb_engine.endpoints import PRICES_ENTRY, presets_path

__all__ = [
    "BUILTIN_PRICES",
    "COST_NOTE",
    "ArmEstimate",
    "CostRow",
    "Price",
    "PriceError",
    "RunEstimate",
    "TokenEstimate",
    "configured_prices",
    "cost_rows",
    "estimate_run",
    "estimate_tokens",
    "format_cost",
    "price_table",
    "prices_for",
    "prices_from_params",
    "prices_param",
    "run_costs",
    "total_cost",
]

#: Per preset, the prices of its models (USD per million tokens, input and output).
#: The local model costs nothing to call; Groq's figures are its published list
#: (August 2025) and change: a user's endpoints file overrides them.
BUILTIN_PRICES: dict[str, dict[str, tuple[float, float]]] = {
    "local": {"smollm2-135m": (0.0, 0.0)},
    "groq": {
        "llama-3.1-8b-instant": (0.05, 0.08),
        "llama-3.3-70b-versatile": (0.59, 0.79),
        "openai/gpt-oss-120b": (0.15, 0.75),
        "openai/gpt-oss-20b": (0.10, 0.50),
    },
}
#: Rough characters per token of English and code under BPE tokenizers: the dry run's
#: estimate (no tokenizer is shipped; the estimate says it is one).
CHARS_PER_TOKEN = 4.0


class PriceError(ValueError):
    """A malformed price (negative, not a number) in a file or a flag; says where."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens, and where the figure came from (flag, run, file, preset)."""

    input_per_m: float
    output_per_m: float
    source: str

    def of(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_m + completion_tokens * self.output_per_m) / 1e6

    def as_dict(self) -> dict[str, Any]:
        return {
            "input_per_m": self.input_per_m,
            "output_per_m": self.output_per_m,
            "source": self.source,
        }


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PriceError(f"{where}: expected a number of USD per million tokens, got {value!r}")
    if value < 0:
        raise PriceError(f"{where}: a price cannot be negative ({value})")
    return float(value)


def _table(entries: Any, where: str, source: str) -> dict[str, Price]:
    if not isinstance(entries, Mapping):
        raise PriceError(f'{where}: expected {{"model": {{"input": N, "output": N}}}}')
    out: dict[str, Price] = {}
    for model, entry in entries.items():
        at = f"{where}.{model}"
        if not isinstance(entry, Mapping) or set(entry) - {"input", "output"} or len(entry) != 2:
            raise PriceError(f'{at}: expected {{"input": N, "output": N}}')
        out[str(model)] = Price(
            _number(entry["input"], f"{at}.input"), _number(entry["output"], f"{at}.output"), source
        )
    return out


def price_table(endpoint: str | None, path: Path | None = None) -> dict[str, Price]:
    """The configured prices by model for a run against preset ``endpoint``: the built-in
    list, overlaid with the endpoints file's top-level table, then with the preset's own.

    Raises:
        PriceError: the file's prices are malformed (the message names the entry).
    """
    table = {
        model: Price(i, o, f"preset {endpoint}")
        for model, (i, o) in BUILTIN_PRICES.get(endpoint or "", {}).items()
    }
    p = path if path is not None else presets_path()
    data: Any = {}
    if p.is_file():
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PriceError(f"{p}: cannot read prices: {exc}") from None
    if not isinstance(data, dict):
        return table
    if PRICES_ENTRY in data:
        table.update(_table(data[PRICES_ENTRY], f"{p}: {PRICES_ENTRY}", f"{p.name}"))
    preset = data.get(endpoint or "")
    if isinstance(preset, dict) and PRICES_ENTRY in preset:
        where = f"{p}: {endpoint}.{PRICES_ENTRY}"
        table.update(_table(preset[PRICES_ENTRY], where, f"{p.name} {endpoint}"))
    return table


def prices_for(
    models: Iterable[str],
    *,
    price_in: float | None = None,
    price_out: float | None = None,
    stored: Mapping[str, Price] | None = None,
    table: Mapping[str, Price] | None = None,
) -> dict[str, Price | None]:
    """Each model's price (None: unknown): the flags, else the run's stored prices, else
    the configured table.

    Raises:
        PriceError: only one of ``price_in`` / ``price_out`` is given, or one is negative.
    """
    if (price_in is None) != (price_out is None):
        raise PriceError("--price-in and --price-out go together (USD per million tokens)")
    flagged = None
    if price_in is not None and price_out is not None:
        flagged = Price(
            _number(price_in, "--price-in"), _number(price_out, "--price-out"), "--price-in/out"
        )
    out: dict[str, Price | None] = {}
    for model in models:
        out[model] = flagged or (stored or {}).get(model) or (table or {}).get(model)
    return out


def configured_prices(
    models: Iterable[str],
    endpoint: str | None,
    price_in: float | None = None,
    price_out: float | None = None,
) -> dict[str, Price | None]:
    """Each model's price for a run against preset ``endpoint`` (None: unknown):
    ``--price-in``/``--price-out``, else :func:`price_table`."""
    return prices_for(models, price_in=price_in, price_out=price_out, table=price_table(endpoint))


def prices_param(prices: Mapping[str, Price | None]) -> dict[str, dict[str, Any]]:
    """The known prices as a run stores them in its parameters."""
    return {m: p.as_dict() for m, p in sorted(prices.items()) if p is not None}


def prices_from_params(params: Mapping[str, Any] | None) -> dict[str, Price]:
    """The prices a run stored when it started; a malformed entry is left out (a stored
    run is read, never refused)."""
    stored = (params or {}).get("prices")
    out: dict[str, Price] = {}
    if not isinstance(stored, Mapping):
        return out
    for model, entry in stored.items():
        try:
            i = _number(entry.get("input_per_m"), "input")
            o = _number(entry.get("output_per_m"), "output")
        except (PriceError, AttributeError):
            continue
        out[str(model)] = Price(i, o, f"run ({entry.get('source', 'stored')})")
    return out


@dataclass(frozen=True)
class CostRow:
    """The cost of one (model, arm) of a run."""

    model: str
    arm: str
    records: int  # all records, errors included
    scored: int  # answered records (status ok)
    strict: int  # strictly accurate records
    prompt_tokens: int
    completion_tokens: int
    missing_usage: int  # answered records without token counts
    price: Price | None

    @property
    def cost(self) -> float | None:
        """USD; None when the price is unknown or an answered record has no token counts."""
        if self.price is None or self.missing_usage:
            return None
        return self.price.of(self.prompt_tokens, self.completion_tokens)

    @property
    def cost_per_strict(self) -> float | None:
        """USD per strictly accurate record; None when the cost is unknown or none is."""
        cost = self.cost
        return None if cost is None or self.strict == 0 else cost / self.strict

    @property
    def why_unknown(self) -> str:
        if self.price is None:
            return "no price for this model"
        if self.missing_usage:
            return f"{self.missing_usage} answered record(s) without token counts"
        if self.strict == 0:
            return "no strictly accurate record"
        return ""


def _tokens(usage: Any, name: str) -> int | None:
    value = usage.get(name) if isinstance(usage, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def run_costs(
    data: Mapping[str, Any],
    *,
    price_in: float | None = None,
    price_out: float | None = None,
    endpoints_file: Path | None = None,
) -> list[CostRow]:
    """The cost table of a results file (``cvb-results/1``): its prices from the flags,
    else those stored with the run, else the configured table for its endpoint."""
    run = data.get("run")
    params = run.get("params") if isinstance(run, Mapping) else None
    params = params if isinstance(params, Mapping) else {}
    records = [r for r in data.get("records") or [] if isinstance(r, Mapping)]
    endpoint = params.get("endpoint")
    prices = prices_for(
        dict.fromkeys(str(r.get("model")) for r in records),
        price_in=price_in,
        price_out=price_out,
        stored=prices_from_params(params),
        table=price_table(endpoint if isinstance(endpoint, str) else None, endpoints_file),
    )
    return cost_rows(records, prices)


def cost_rows(
    records: Iterable[Mapping[str, Any]], prices: Mapping[str, Price | None]
) -> list[CostRow]:
    """Per (model, arm), in first-seen order of models and arms, the tokens and the cost of
    ``records`` (results-file records, ``cvb-results/1``)."""
    acc: dict[tuple[str, str], list[int]] = {}
    for r in records:
        key = (str(r.get("model")), str(r.get("arm")))
        a = acc.setdefault(key, [0, 0, 0, 0, 0, 0])
        ok = r.get("status") == "ok"
        a[0] += 1
        a[1] += ok
        a[2] += ok and r.get("strict") is True
        usage = r.get("usage")
        p, c = _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")
        if p is None or c is None:
            a[5] += ok  # an error without usage cost nothing we know of
        else:
            a[3] += p
            a[4] += c
    return [
        CostRow(
            model=m,
            arm=arm,
            records=a[0],
            scored=a[1],
            strict=a[2],
            prompt_tokens=a[3],
            completion_tokens=a[4],
            missing_usage=a[5],
            price=prices.get(m),
        )
        for (m, arm), a in acc.items()
    ]


def format_cost(value: float | None) -> str:
    """Dollars for a table: ``unknown`` for None, never a zero in its place."""
    if value is None:
        return "unknown"
    if value == 0:
        return "$0"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


#: The cost table's note, shown with it by every renderer.
COST_NOTE = (
    "From the stored token counts and the prices (USD per million tokens, input / output); "
    "unknown where no price is configured or an answered record has no token counts."
)


def total_cost(rows: Sequence[CostRow]) -> float | None:
    """The run's cost; None when any cell's is unknown (a partial sum would read as whole)."""
    costs = [r.cost for r in rows]
    return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)


@dataclass(frozen=True)
class TokenEstimate:
    """The dry run's estimate for one arm: calls, prompt tokens (characters / 4) and the
    completion tokens the run may use at most (``max_tokens`` per call)."""

    arm: str
    calls: int
    prompt_tokens: int
    completion_tokens_max: int

    def cost_max(self, price: Price | None) -> float | None:
        return None if price is None else price.of(self.prompt_tokens, self.completion_tokens_max)


@dataclass(frozen=True)
class ArmEstimate:
    """What one arm of a run will send, estimated before it is sent.

    ``tokens`` covers every request of the arm when ``bounded``: its messages are fixed
    in advance (the seed arms, the incentivized variants). An agent episode's first
    request is known, its later ones carry its history, so ``tokens`` is its first
    requests only and ``requests_max`` says how many it may send; an agent program's
    requests and a memory layer's context are not ours to know (``tokens`` None).
    """

    arm: str
    tokens: TokenEstimate | None
    requests_max: int | None
    bounded: bool
    why: str = ""  # what the estimate leaves out, when not bounded


@dataclass(frozen=True)
class RunEstimate:
    """A run's tokens per arm and its cost per model (:func:`estimate_run`)."""

    arms: list[ArmEstimate]
    models: list[str]
    prices: dict[str, Price | None]

    @property
    def bounded(self) -> bool:
        """Whether the cost bound covers every request of the run."""
        return all(a.bounded for a in self.arms)

    def cost_max(self, model: str) -> float | None:
        """``model``'s share of the run at most (the arms with a bound; None: no price)."""
        return self._share(model, bounded_only=True)

    def prompts_cost(self, model: str) -> float | None:
        """``model``'s prompts alone (every arm's known requests; None: no price)."""
        return self._share(model, bounded_only=False)

    def _share(self, model: str, *, bounded_only: bool) -> float | None:
        """With ``bounded_only``, prompts and completions at most of the bounded arms;
        without, the prompts of every arm whose tokens are known. Split among the models."""
        price = self.prices.get(model)
        if price is None:
            return None
        total = 0.0
        for a in self.arms:
            if a.tokens is None or (bounded_only and not a.bounded):
                continue
            completion = a.tokens.completion_tokens_max if bounded_only else 0
            total += price.of(a.tokens.prompt_tokens, completion)
        return total / (len(self.models) or 1)

    def left_out(self) -> list[str]:
        """The arms the bound leaves out, each with why."""
        return [f"{a.arm}: {a.why}" for a in self.arms if not a.bounded]


def estimate_run(
    scenarios: Sequence[Any],
    arms: Sequence[str],
    context: Any,
    *,
    runs: int,
    models: Sequence[str],
    max_tokens: int,
    endpoint: str | None,
    price_in: float | None = None,
    price_out: float | None = None,
) -> RunEstimate:
    """The tokens and cost of sending ``arms`` × ``scenarios`` × ``runs`` × ``models``
    (what ``cvb run --dry-run`` and the Run page say before a launch).

    Args:
        scenarios: The run's :class:`~cvb_engine.scenario.Scenario` objects.
        context: The arms' :class:`~cvb_engine.arms.ArmContext` (the memory pool).
    """
    from cvb_engine.arms import build_messages, parse_arm

    out: list[ArmEstimate] = []
    cells = len(scenarios) * runs * len(models)
    for arm in arms:
        variant = parse_arm(arm)
        if variant.live:
            out.append(ArmEstimate(arm, None, None, False, "a memory layer builds its context"))
            continue
        chars = [
            sum(len(str(m["content"] or "")) for m in build_messages(sc, arm, context))
            for sc in scenarios
        ]
        [tokens] = estimate_tokens(
            {arm: chars}, runs=runs, models=len(models), max_tokens=max_tokens
        )
        if variant.kind.name != "agent":
            out.append(ArmEstimate(arm, tokens, tokens.calls, True))
        elif getattr(variant.params, "command", None):
            why = "your agent program sends its own requests"
            out.append(ArmEstimate(arm, None, None, False, why))
        else:
            per_episode = int(getattr(variant.params, "steps", 12)) + 1
            why = (
                f"an episode sends up to {per_episode} requests, each carrying its history: "
                "only its first request is counted"
            )
            out.append(ArmEstimate(arm, tokens, cells * per_episode, False, why))
    prices = configured_prices(models, endpoint, price_in, price_out)
    return RunEstimate(out, list(models), prices)


def estimate_tokens(
    prompt_chars: Mapping[str, Sequence[int]], *, runs: int, models: int, max_tokens: int
) -> list[TokenEstimate]:
    """Per arm, from the character count of each scenario's messages under that arm."""
    out: list[TokenEstimate] = []
    for arm, chars in prompt_chars.items():
        calls = len(chars) * runs * models
        prompt = sum(math.ceil(c / CHARS_PER_TOKEN) for c in chars) * runs * models
        out.append(TokenEstimate(arm, calls, prompt, calls * max_tokens))
    return out
