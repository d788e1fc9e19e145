"""Run lifecycle: launch, watch, cancel, resume and retry ``cvb run`` processes.

What a UI asks of a run, without drawing anything (the studio's Run page is one
caller): :mod:`.spec` builds the arguments of a launch and its dry run,
:mod:`.probe` asks an endpoint's catalog and checks a preset, :mod:`.process`
starts a detached ``cvb run``, finds the processes started lately and stops one
(through the store, for every runner of the run, and by signal here), and
:mod:`.resume` starts a stored run again under its id. Progress and liveness
are read from the store by :mod:`cvb_engine.monitor`.
"""

from __future__ import annotations

from cvb_engine.lifecycle.probe import (
    ProbeResult,
    endpoint_label,
    endpoint_of,
    endpoint_problems,
    is_local_endpoint,
    key_missing_message,
    latest_run_endpoint,
    parse_models,
    probe_advice,
    probe_endpoint,
    run_exists,
)
from cvb_engine.lifecycle.process import (
    CancelAsked,
    Launch,
    LaunchError,
    cancel_run,
    ended_early,
    forget_launch,
    launch_of,
    launch_run,
    log_tail,
    logs_dir,
    recent_launches,
    starting_launches,
)
from cvb_engine.lifecycle.resume import legacy_message, resume_run, retry_errors, spec_from_run
from cvb_engine.lifecycle.spec import (
    Preview,
    command_line,
    counted,
    estimate_launch,
    preview_launch,
    run_arguments,
    shell_command,
    sweep_arms,
)

__all__ = [
    "CancelAsked",
    "Launch",
    "LaunchError",
    "Preview",
    "ProbeResult",
    "cancel_run",
    "command_line",
    "counted",
    "ended_early",
    "endpoint_label",
    "endpoint_of",
    "endpoint_problems",
    "estimate_launch",
    "forget_launch",
    "is_local_endpoint",
    "key_missing_message",
    "latest_run_endpoint",
    "launch_of",
    "launch_run",
    "legacy_message",
    "log_tail",
    "logs_dir",
    "parse_models",
    "preview_launch",
    "probe_advice",
    "probe_endpoint",
    "recent_launches",
    "resume_run",
    "retry_errors",
    "run_arguments",
    "run_exists",
    "shell_command",
    "spec_from_run",
    "starting_launches",
    "sweep_arms",
]
