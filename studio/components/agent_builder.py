"""The Run page's agent builder: variants of the ``agent`` arm (README: Agent arm).

Choose where the rules live (``rules``: one variant per choice), the loads and
position of the distractor notes, the superseded decisions and the byte budgets
the rules files are cut to (one variant per choice: a stale drop, a budget
curve), whether the root rules file is also preloaded into the system message, the tool rounds (``steps``), or your own
agent program (``command``, with a time limit); **Add to the run** puts the
variants they give (:func:`cvb_engine.authoring.agents.agent_arms`) among the run's
arms, where the dry run counts each episode as one cell. :func:`render` draws
it; :func:`arms` is what the run gets. Session keys start with ``run_agent_``.
"""

from __future__ import annotations

import streamlit as st

from cvb_engine import ArmError, arm_order
from cvb_engine import agent_forms as agent_config
from studio.components.text import plain

LOADS = [0, 10, 25, 50, 100, 200]
STALE = ["none", "with", "only"]
BUDGETS: list[int | None] = [None, 200, 500, 1000, 2000, 4000, 8000]
PRELOAD = {False: "on disk only", True: "also in the system message"}
RULES_HELP = (
    "agents-md: AGENTS.md at the root · claude-md: CLAUDE.md · adr: one decision record per "
    "note under docs/decisions/ · readme: a Conventions section of README.md · nested: an "
    "AGENTS.md in the package folder, the root one holding only distractors"
)

ss = st.session_state


def _defaults() -> None:
    ss.setdefault("run_agent_rules", [str(agent_config.default("rules"))])
    ss.setdefault("run_agent_loads", [0])
    ss.setdefault("run_agent_position", str(agent_config.default("position")))
    ss.setdefault("run_agent_preload", [False])
    ss.setdefault("run_agent_stale", [])
    ss.setdefault("run_agent_budgets", [])
    ss.setdefault("run_agent_steps", int(str(agent_config.default("steps"))))
    ss.setdefault("run_agent_use_command", False)
    ss.setdefault("run_agent_command", "")
    ss.setdefault("run_agent_timeout", float(str(agent_config.default("timeout"))))
    ss.setdefault("run_agent_added", [])


def form() -> agent_config.AgentForm:
    """The agent arm as the builder's fields set it now."""
    _defaults()
    return agent_config.AgentForm(
        rules=tuple(ss.run_agent_rules),
        loads=tuple(int(n) for n in ss.run_agent_loads),
        position=str(ss.run_agent_position),
        preload=tuple(bool(p) for p in ss.run_agent_preload),
        stale=tuple(str(v) for v in ss.run_agent_stale),
        budgets=tuple(None if b is None else int(b) for b in ss.run_agent_budgets),
        steps=int(ss.run_agent_steps),
        command=str(ss.run_agent_command) if ss.run_agent_use_command else "",
        timeout_s=float(ss.run_agent_timeout),
    )


def arms() -> list[str]:
    """The agent variants added to the run."""
    _defaults()
    return list(ss.run_agent_added)


def _add() -> None:
    try:
        variants = agent_config.agent_arms(form())
    except ArmError as exc:
        ss.run_agent_flash = ("error", "Not added: " + plain(exc, multiline=True))
        return
    if ss.run_agent_use_command and not str(ss.run_agent_command).strip():
        ss.run_agent_flash = ("warning", "Give the agent program's command first.")
        return
    ss.run_agent_added = arm_order([*ss.run_agent_added, *variants.names])
    ss.run_agent_flash = (
        "success",
        f"Added {len(variants.names)} agent variant{'s' * (len(variants.names) != 1)} to the "
        "run: " + ", ".join(plain(n) for n in variants.names),
    )


def _remove(name: str) -> None:
    ss.run_agent_added = [n for n in ss.run_agent_added if n != name]


def _flash() -> None:
    message = ss.pop("run_agent_flash", None)
    if message:
        getattr(st, message[0])(message[1])


def render() -> None:
    """The builder, in an expander (open once an agent variant is added)."""
    _defaults()
    with st.expander(
        "Agent arm (a coding agent in a repository)", expanded=bool(ss.run_agent_added)
    ):
        st.caption(
            "Each cell is an episode: a small repository is built from the scenario with the "
            "constraints in its rules files, among `load` distractor notes; the model works "
            "with tools (list_files, read_file, search_files, write_file, run_tests) for at "
            "most `steps` rounds, or your own agent program runs in it, and the file it leaves "
            "is scored. Reports show whether it read the rules and whether it obeyed them."
        )
        st.multiselect(
            "Where the rules live",
            agent_config.choices("rules"),
            key="run_agent_rules",
            help=RULES_HELP,
            placeholder="agents-md",
        )
        a1, a2 = st.columns(2)
        a1.multiselect(
            "Loads",
            LOADS,
            key="run_agent_loads",
            placeholder="0",
            help="Distractor notes from the project-memory pool beside the constraints, drawn "
            "as the incentivized arm draws them: one variant per load.",
        )
        a2.selectbox(
            "Position",
            agent_config.choices("position"),
            key="run_agent_position",
            help="Where the constraints sit among the distractors (a load above 0).",
        )
        s1, s2 = st.columns(2)
        s1.multiselect(
            "Superseded notes",
            STALE,
            key="run_agent_stale",
            placeholder="none",
            help="with: each constraint's superseded decision (dated earlier) beside it in the "
            "rules files; only: the superseded decision instead of it. One variant per choice; "
            "the report shows the drop against the same variant without.",
        )
        s2.multiselect(
            "Budgets (bytes)",
            BUDGETS,
            key="run_agent_budgets",
            placeholder="no budget",
            format_func=lambda b: "no budget" if b is None else f"{b:,}",
            help="The rules files cut to this many bytes in reading order, as agent tools cut "
            "a long rules file; a constraint cut away cannot be read. One variant per choice: "
            "the report draws the budget curve.",
        )
        st.toggle(
            "Run my own agent program instead of the built-in tool loop",
            key="run_agent_use_command",
        )
        if ss.run_agent_use_command:
            c1, c2 = st.columns([3, 1])
            c1.text_input(
                "Command",
                key="run_agent_command",
                placeholder="./my-agent.sh",
                help="Runs with the workspace as its working directory and the task on stdin, "
                "under bwrap (the workspace writable, the rest read-only), with its own network "
                "access to reach its model (README: Bring your own agent).",
            )
            c2.number_input("Time limit (s)", 1.0, 7200.0, step=30.0, key="run_agent_timeout")
        else:
            b1, b2 = st.columns(2)
            b1.multiselect(
                "Root rules file",
                list(PRELOAD),
                key="run_agent_preload",
                format_func=lambda p: PRELOAD[bool(p)],
                placeholder="on disk only",
                help="preload=true also puts the root rules file's text in the system message, "
                "as several agent tools do: one variant per choice.",
            )
            b2.number_input(
                "Steps (tool rounds)",
                1,
                100,
                step=1,
                key="run_agent_steps",
                help="Tool rounds before one last request without tools: an episode makes at "
                "most steps + 1 requests.",
            )
        try:
            pending = agent_config.agent_arms(form())
            problem = None
        except ArmError as exc:
            pending, problem = agent_config.Variants([], []), str(exc)
        if problem:
            st.warning(plain(problem, multiline=True), icon=":material/block:")
        elif pending.names:
            st.caption("These settings give: " + ", ".join(plain(n) for n in pending.names))
        for why in pending.skipped:
            st.caption("Left out: " + plain(why))
        st.button(
            "Add to the run",
            key="run_agent_add",
            on_click=_add,
            icon=":material/add:",
            disabled=bool(problem) or not pending.names,
        )
        _flash()
        if ss.run_agent_added:
            st.markdown("**Agent variants in this run**")
            for name in ss.run_agent_added:
                row = st.container(horizontal=True, vertical_alignment="center")
                row.markdown(plain(name))
                row.button(
                    "Remove",
                    key=f"run_agent_remove_{name}",
                    on_click=_remove,
                    args=(name,),
                    icon=":material/close:",
                    type="tertiary",
                )
