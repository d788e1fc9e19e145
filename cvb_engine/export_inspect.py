"""A CVB run as an inspect_ai eval log (``cvb report RUN --inspect FILE``).

inspect_ai (the ``[inspect]`` extra) is imported only here and only when a log is
written: the engine's default path never needs it. The log is built from inspect's
own pydantic models and written with its ``write_eval_log``, so ``read_eval_log``
reads it and ``inspect view`` shows it:

* one sample per record: id ``model/scenario/arm``, epoch = repetition + 1; its input
  messages (rebuilt from the scenario library and checked against the record's
  ``messages_sha256``; a note in their place when they cannot be), the reply as output
  with its token usage, one score per constraint (``C`` honored / ``I`` not, the check
  reasons as explanation, the checks and their evidence as metadata) and a ``strict``
  score; model, arm, scenario, outcome and memory trace in its metadata. An error
  record is a sample with its error and no score.
* the header: the run's parameters as the eval's metadata, its sampling as the
  generate config, and the headline metrics (strict accuracy per model × arm, gap per
  model) as the ``strict`` score's metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cvb_engine.arms import build_messages
from cvb_engine.prompts import Message, messages_sha256

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog

    from cvb_engine.metrics import Summary
    from cvb_engine.scenario import LoadedScenario

__all__ = ["TASK_NAME", "inspect_log", "message_source", "write_inspect_log"]

TASK_NAME = "cvb"
_STOP = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls"}

MessagesFor = Callable[[Mapping[str, Any]], tuple[list[Message] | None, str]]


def message_source(library: Mapping[str, LoadedScenario], pool: Path | None = None) -> MessagesFor:
    """A function giving a record's input messages, rebuilt from ``library``, and a word
    on them (``verified``, ``rebuilt``, or why they are not available)."""
    from cvb_engine.arms import ArmContext, parse_arm
    from cvb_engine.library import shipped_pool

    context = ArmContext(pool or shipped_pool())
    built: dict[tuple[str, str], list[Message] | str] = {}

    def messages_for(record: Mapping[str, Any]) -> tuple[list[Message] | None, str]:
        sid, arm = str(record.get("scenario_id")), str(record.get("arm"))
        if (sid, arm) not in built:
            item = library.get(sid)
            try:
                if item is None:
                    built[(sid, arm)] = f"scenario {sid} is not in the library"
                elif parse_arm(arm).live:
                    built[(sid, arm)] = "a memory layer built this arm's context at run time"
                else:
                    built[(sid, arm)] = build_messages(item.scenario, arm, context)
            except (ValueError, OSError) as exc:  # an arm this cvb no longer builds
                built[(sid, arm)] = f"cannot rebuild: {exc}"
        found = built[(sid, arm)]
        if isinstance(found, str):
            return None, found
        stored = record.get("messages_sha256")
        if not stored:
            return found, "rebuilt (no hash stored to check them against)"
        if messages_sha256(found) != stored:
            return None, "the scenario or its prompt changed since the run (hash differs)"
        return found, "verified"

    return messages_for


def _explanation(entry: Mapping[str, Any]) -> str:
    lines = []
    for c in entry.get("checks") or []:
        mark = "passed" if c.get("passed") else "FAILED"
        lines.append(f"{c.get('kind', '?')} {c.get('id') or ''}: {mark}: {c.get('reason', '')}")
    return "\n".join(lines) or "no check ran"


def _sample(record: Mapping[str, Any], messages_for: MessagesFor | None) -> Any:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageUser,
        ModelOutput,
        ModelUsage,
    )
    from inspect_ai.scorer import Score

    model = str(record.get("model"))
    sid, arm, rep = str(record.get("scenario_id")), str(record.get("arm")), record.get("rep")
    messages, word = messages_for(record) if messages_for else (None, "no scenario library given")
    chat: list[Any] = []
    for m in messages or []:
        kind = ChatMessageSystem if m["role"] == "system" else ChatMessageUser
        chat.append(kind(content=m["content"]))
    if not chat:
        chat = [ChatMessageUser(content=f"(the input messages are not available: {word})")]
    response = str(record.get("response") or "")
    usage = record.get("usage") or {}
    p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
    output = ModelOutput.from_content(
        model,
        response,
        stop_reason=_STOP.get(str(record.get("finish_reason")), "unknown"),  # type: ignore[arg-type]
    )
    if isinstance(p, int) and isinstance(c, int):
        output.usage = ModelUsage(input_tokens=p, output_tokens=c, total_tokens=p + c)
    scores: dict[str, Any] = {}
    for cid, entry in (record.get("constraints") or {}).items():
        scores[cid] = Score(
            value="C" if entry.get("honored") else "I",
            answer=str(record.get("code") or ""),
            explanation=_explanation(entry),
            metadata={"checks": entry.get("checks") or []},
        )
    if isinstance(record.get("strict"), bool):
        scores["strict"] = Score(
            value="C" if record["strict"] else "I",
            explanation="every constraint honored"
            if record["strict"]
            else "not honored: " + ", ".join(k for k, v in scores.items() if v.value == "I"),
        )
    metadata = {
        "model": model,
        "arm": arm,
        "scenario_id": sid,
        "scenario_version": record.get("scenario_version"),
        "category": record.get("category"),
        "rep": rep,
        "status": str(record.get("status")),
        "outcome": record.get("outcome"),
        "strict": record.get("strict"),
        "stated_passed": record.get("stated_passed"),
        "memory": record.get("memory"),
        "messages": word,
        "messages_sha256": record.get("messages_sha256"),
        "scenario_sha256": record.get("scenario_sha256"),
        "prompt_version": record.get("prompt_version"),
        "scoring_version": record.get("scoring_version"),
        "latency_s": record.get("latency_s"),
        "error": record.get("error"),
    }
    error = None
    if record.get("status") != "ok":
        message = str(record.get("error") or "error record")
        error = EvalError(message=message, traceback=message, traceback_ansi=message)
    return EvalSample(
        id=f"{model}/{sid}/{arm}",
        epoch=(rep if isinstance(rep, int) else 0) + 1,
        input=chat,
        target=sorted(record.get("constraints") or {}),
        messages=[*chat, ChatMessageAssistant(content=response, model=model)],
        output=output,
        scores=scores or None,
        metadata=metadata,
        error=error,
    )


def _headline(summary: Summary | None, samples: list[Any]) -> Any:
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    scored = [s for s in samples if s.scores and "strict" in s.scores]
    strict = sum(s.scores["strict"].value == "C" for s in scored)
    metrics = {
        "accuracy": EvalMetric(name="accuracy", value=strict / len(scored) if scored else 0.0)
    }
    if summary is not None:
        for (model, arm), rate in summary.strict.items():
            if rate.value is not None:
                name = f"{model}/{arm}"
                metrics[name] = EvalMetric(name=name, value=rate.value)
        for model, gap in summary.gap.items():
            if gap is not None and gap.value is not None:
                name = f"{model}/gap"
                metrics[name] = EvalMetric(name=name, value=gap.value)
    return EvalResults(
        total_samples=len(samples),
        completed_samples=len(scored),
        scores=[
            EvalScore(
                name="strict",
                scorer="cvb_checks",
                scored_samples=len(scored),
                unscored_samples=len(samples) - len(scored),
                metrics=metrics,
            )
        ],
    )


def inspect_log(
    data: Mapping[str, Any],
    *,
    summary: Summary | None = None,
    messages_for: MessagesFor | None = None,
) -> EvalLog:
    """The eval log of a results file (``cvb-results/N``)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSpec, EvalStats
    from inspect_ai.model import GenerateConfig

    run = data.get("run") or {}
    params = dict(run.get("params") or {})
    records = [r for r in data.get("records") or [] if isinstance(r, Mapping)]
    samples = [_sample(r, messages_for) for r in records]
    models = list(dict.fromkeys(str(r.get("model")) for r in records))
    started = str(run.get("started") or datetime.now(UTC).isoformat())
    seed = params.get("seed")
    spec = EvalSpec(
        run_id=str(run.get("id") or ""),
        created=started,
        task=TASK_NAME,
        task_version=str(data.get("prompt_version") or ""),
        dataset=EvalDataset(
            name="cvb",
            samples=len(samples),
            sample_ids=list(dict.fromkeys(s.id for s in samples)),
        ),
        # inspect logs one model per eval; a CVB run may hold several (each sample names
        # its own in metadata and output)
        model=models[0] if len(models) == 1 else "mixed/" + ",".join(models),
        model_base_url=params.get("base_url"),
        model_generate_config=GenerateConfig(
            temperature=params.get("temperature"),
            max_tokens=params.get("max_tokens"),
            seed=seed if isinstance(seed, int) else None,
        ),
        config=EvalConfig(
            epochs=params.get("runs") if isinstance(params.get("runs"), int) else None
        ),
        metadata={
            "format": data.get("format"),
            "prompt_version": data.get("prompt_version"),
            "run_id": run.get("id"),
            "params": params,
            "models": models,
        },
    )
    return EvalLog(
        status="success",
        eval=spec,
        results=_headline(summary, samples),
        stats=EvalStats(started_at=started, completed_at=started),
        samples=samples,
    )


def write_inspect_log(
    data: Mapping[str, Any],
    path: str | Path,
    *,
    summary: Summary | None = None,
    scenarios: str | Path | None = None,
) -> None:
    """Write ``data`` (a results file) as an inspect eval log at ``path``: ``.eval``
    (inspect's zipped format) or else JSON. Input messages are rebuilt from
    ``scenarios`` (default: :func:`cvb_engine.library.scenarios_root`).

    Raises:
        ImportError: inspect-ai is not installed (``pip install 'cvb-studio[inspect]'``).
    """
    try:
        from inspect_ai.log import write_eval_log
    except ImportError as exc:
        raise ImportError(
            "writing an inspect eval log needs inspect-ai: pip install 'cvb-studio[inspect]'"
        ) from exc
    from cvb_engine.library import scenarios_root
    from cvb_engine.scenario import ScenarioError, load_library

    root = scenarios_root(scenarios)
    try:
        library = load_library(root)
    except ScenarioError:
        library = {}  # the log is still written; each sample says why it has no messages
    own_pool = root / "memory" / "pool.yaml"
    messages_for = message_source(library, own_pool if own_pool.is_file() else None)
    log = inspect_log(data, summary=summary, messages_for=messages_for)
    target = Path(path)
    write_eval_log(log, str(target), format="eval" if target.suffix == ".eval" else "json")
