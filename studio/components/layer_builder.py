"""The Run page's memory-layer builder: layers for the ``memory`` and ``memory-tool`` arms.

Set up a layer (the built-in bm25, a command, or a URL with the *name* of its
key variable), the arms that use it, loads, ``k`` and ``rounds``; **Add to the
run** puts the variants it gives (:func:`cvb_engine.authoring.layers.layer_arms`) among
the run's arms, and **Probe layer** asks the layer once. :func:`render` draws
it; :func:`arms` is what the run gets. Session keys start with ``run_layer_``.

The layer's answers and messages are the layer's own words: shown as text.
"""

from __future__ import annotations

from typing import Literal

import streamlit as st

from cvb_engine import LAYER_KINDS, ArmError, arm_order, key_is_set, key_variable_problem_or_error
from cvb_engine import layer_forms as layer_config
from studio.components.text import plain

TRANSPORTS: dict[str, layer_config.Transport] = {
    "Built-in bm25": "builtin",
    "Command": "command",
    "URL (HTTP)": "url",
}
LOADS = [0, 10, 25, 50, 100, 200, 350]
ARM_HELP = (
    "memory: the layer's answer for the task goes before it · memory-tool: no memory in the "
    "prompt, the model searches it with a tool the layer answers"
)

ss = st.session_state


def _defaults() -> None:
    ss.setdefault("run_layer_transport", "Built-in bm25")
    ss.setdefault("run_layer_command", "")
    ss.setdefault("run_layer_url", "")
    ss.setdefault("run_layer_key_env", "")
    ss.setdefault("run_layer_kinds", ["memory"])
    ss.setdefault("run_layer_loads", [0])
    ss.setdefault("run_layer_k", 5)
    ss.setdefault("run_layer_rounds", 4)
    ss.setdefault("run_layer_timeout", 30.0)
    ss.setdefault("run_layer_added", [])


def form() -> layer_config.LayerForm:
    """The layer as the builder's fields set it now."""
    _defaults()
    transport = TRANSPORTS.get(ss.run_layer_transport, "builtin")
    target = {"builtin": "", "command": ss.run_layer_command, "url": ss.run_layer_url}[transport]
    return layer_config.LayerForm(
        transport=transport,
        target=str(target),
        key_env=str(ss.run_layer_key_env) if transport == "url" else "",
        kinds=tuple(ss.run_layer_kinds),
        loads=tuple(int(n) for n in ss.run_layer_loads),
        k=int(ss.run_layer_k),
        rounds=int(ss.run_layer_rounds),
        timeout_s=float(ss.run_layer_timeout),
    )


def arms() -> list[str]:
    """The memory-layer variants added to the run."""
    _defaults()
    return list(ss.run_layer_added)


def _add() -> None:
    try:
        names = layer_config.layer_arms(form())
    except ArmError as exc:
        ss.run_layer_flash = ("error", "Not added: " + plain(exc, multiline=True))
        return
    if not names:
        ss.run_layer_flash = ("warning", "Choose memory, memory-tool or both first.")
        return
    ss.run_layer_added = arm_order([*ss.run_layer_added, *names])
    ss.run_layer_flash = (
        "success",
        f"Added {len(names)} arm{'s' * (len(names) != 1)} to the run: "
        + ", ".join(plain(n) for n in names),
    )


def _remove(name: str) -> None:
    ss.run_layer_added = [n for n in ss.run_layer_added if n != name]


def _probe() -> None:
    try:
        name = layer_config.probe_name(form())
    except ArmError as exc:
        ss.run_layer_probe = layer_config.ProbeOutcome("", False, str(exc))
        return
    ss.run_layer_probe = layer_config.probe(name)


def _key_line(key_env: str) -> None:
    """Whether the layer's key variable can be used and is set (never its value)."""
    if not key_env:
        st.caption("No key variable: requests to the layer carry no Authorization header.")
        return
    problem = key_variable_problem_or_error(key_env)
    if problem:
        st.error(
            "This key variable cannot be used: " + plain(problem, multiline=True),
            icon=":material/key_off:",
        )
    elif key_is_set(key_env):
        st.success(
            # a declared key variable's name: letters, digits and "_" only
            f"Key variable `{key_env}` is set in the studio's environment. Its value is "
            "never shown, stored or logged; the layer gets it as `Authorization: Bearer`.",
            icon=":material/key:",
        )
    else:
        st.warning(
            f"The variable {plain(key_env)} is not set in the studio's environment, so the "
            f"layer would get no key. Stop the studio, run `export {key_env}=<the "
            "layer's key>` in its terminal and start it again. The studio stores only the "
            "variable's name.",
            icon=":material/key_off:",
        )


def _flash() -> None:
    message = ss.pop("run_layer_flash", None)
    if message:
        getattr(st, message[0])(message[1])


def render() -> None:
    """The builder, in an expander (open once a layer arm is added)."""
    _defaults()
    with st.expander(
        "Memory layers (memory and memory-tool arms)", expanded=bool(ss.run_layer_added)
    ):
        st.caption(
            "A memory layer gives the model the project's memory: the run's constraints among "
            "`load` distractor notes, under opaque ids. Set one up, probe it, then add its arms "
            "to the run (README: Bring your own memory layer)."
        )
        st.radio("Layer", list(TRANSPORTS), key="run_layer_transport", horizontal=True)
        transport = TRANSPORTS.get(ss.run_layer_transport, "builtin")
        if transport == "command":
            st.text_input(
                "Command",
                key="run_layer_command",
                placeholder="./my_layer.py  or  python -m cvb_engine.memory_layers.bm25",
                help="Run once per request, the request on stdin, the reply on stdout; split "
                "like a shell splits words, but no shell runs it. A relative path is taken "
                "from the studio's current directory. It runs as you: not sandboxed.",
            )
        elif transport == "url":
            u1, u2 = st.columns([3, 2])
            u1.text_input(
                "Base URL",
                key="run_layer_url",
                placeholder="http://127.0.0.1:8700",
                help="cvb sends POST <URL>/ingest and POST <URL>/query.",
            )
            u2.text_input(
                "Key variable (a name, optional)",
                key="run_layer_key_env",
                placeholder="MY_LAYER_API_KEY",
                help="The NAME of the environment variable holding the layer's key, never "
                "the key; it must be a declared key variable, as for endpoints.",
            )
            _key_line(str(ss.run_layer_key_env).strip())
        else:
            st.caption("bm25: top-k lexical retrieval over the ingested entries, in process.")
        a1, a2 = st.columns([2, 3])
        a1.multiselect("Arms", list(LAYER_KINDS), key="run_layer_kinds", help=ARM_HELP)
        a2.multiselect(
            "Loads",
            LOADS,
            key="run_layer_loads",
            placeholder="0",
            help="Distractor notes from the project-memory pool the layer holds beside the "
            "constraints: one arm per load (the memory-load curve).",
        )
        n1, n2, n3 = st.columns(3)
        n1.number_input("k (entries a query asks for)", 1, 50, step=1, key="run_layer_k")
        n2.number_input(
            "Rounds (memory-tool)",
            1,
            10,
            step=1,
            key="run_layer_rounds",
            disabled="memory-tool" not in ss.run_layer_kinds,
            help="Rounds of tool calls the model gets before its answer.",
        )
        n3.number_input("Timeout per layer call (s)", 0.5, 600.0, step=5.0, key="run_layer_timeout")
        try:
            pending = layer_config.layer_arms(form())
            problem = None
        except ArmError as exc:
            pending, problem = [], str(exc)
        if problem:
            st.warning(plain(problem, multiline=True), icon=":material/block:")
        elif pending:
            st.caption("These settings give: " + ", ".join(plain(n) for n in pending))
        b = st.container(horizontal=True)
        b.button(
            "Add to the run",
            key="run_layer_add",
            on_click=_add,
            icon=":material/add:",
            disabled=bool(problem) or not pending,
        )
        b.button(
            "Probe layer",
            key="run_layer_probe_button",
            on_click=_probe,
            icon=":material/network_check:",
            help="Ingests two sample entries (namespace cvb-probe) and asks one query.",
        )
        _flash()
        _probe_result()
        if ss.run_layer_added:
            st.markdown("**Memory-layer arms in this run**")
            for name in ss.run_layer_added:
                row = st.container(horizontal=True, vertical_alignment="center")
                row.markdown(plain(name))
                row.button(
                    "Remove",
                    key=f"run_layer_remove_{name}",
                    on_click=_remove,
                    args=(name,),
                    icon=":material/close:",
                    type="tertiary",
                )


def _probe_result() -> None:
    outcome: layer_config.ProbeOutcome | None = ss.get("run_layer_probe")
    if outcome is None:
        return
    about = f" ({plain(outcome.name)})" if outcome.name else ""
    kind: Literal["success", "error"] = "success" if outcome.ok else "error"
    text = (
        "The layer answered" + about + ": " + plain(outcome.text, limit=2000, multiline=True)
        if outcome.ok
        else "Probe failed" + about + ": " + plain(outcome.text, limit=2000, multiline=True)
    )
    getattr(st, kind)(text)
