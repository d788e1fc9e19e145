"""Read versus obeyed: the agent arm's figures per model × agent variant (README: Agent arm).

They are defined in :mod:`cvb_engine.metrics` (beside the other metrics, so that module
imports nothing that imports it: no import cycle); this module names them for the agent
package.

Pure functions over records of ``agent`` variants (:class:`~cvb_engine.metrics.RecordRow`
with their trace, :attr:`~cvb_engine.metrics.RecordRow.agent`). Each record is
first boiled down to an :class:`Episode` (its verdicts and the few facts of
its trace the reports use), so a store of long transcripts is read in batches
and never held whole. Then, per (model, variant), :func:`agent_stats` gives an
:class:`AgentStat`:

* strict and per-constraint accuracy over scored episodes, each with a 95%
  bootstrap CI over scenarios (the project's :func:`~cvb_engine.metrics.bootstrap_ratio`);
* the gap to the mandated arm (strict(mandated) − strict(variant)), paired
  bootstrap over scenarios as the headline gap;
* *read*: the share of scored episodes in which the agent saw at least one
  constraint of its task (``AgentTrace.read``: it opened the file holding it, or
  a search showed one of its lines); a constraint that ``preload=true`` put in
  the system message (``AgentTrace.preloaded``) is counted apart, as *in the
  system message*, so a preloaded variant's "read" still says what it opened;
* strict accuracy when read and when not read, and per-constraint accuracy
  split by whether *that* constraint was read, each with its CI;
* steps (tool rounds), tool calls and tokens per episode; how episodes ended
  (``answer``, ``steps``, ``error``, ``timeout``); refused tool calls.

An agent program (``agent@command=...``) whose file reads could not be
observed (``CommandRun.reads_observed`` false) has no read flags worth the
name: its episodes are counted (``reads_unobserved``) and left out of the read
figures, never counted as "not read". Scored episodes whose trace is missing
or does not read are counted (``unavailable``) and left out of every trace-based figure, never guessed;
they still count in strict and per-constraint accuracy, which come from
the verdicts. Error records (the endpoint failed for good) are counted apart
and in no denominator, as everywhere in cvb.
"""

from __future__ import annotations

from cvb_engine.metrics import (
    AGENT_KIND,
    ENDINGS,
    AgentStat,
    Episode,
    agent_stats,
    episode,
    episodes,
    is_agent_arm,
)

__all__ = [
    "AGENT_KIND",
    "ENDINGS",
    "AgentStat",
    "Episode",
    "agent_stats",
    "episode",
    "episodes",
    "is_agent_arm",
]
