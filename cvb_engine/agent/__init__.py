"""The ``agent`` arm: a coding agent in a repository built from the scenario (README: Agent arm).

* :mod:`~cvb_engine.agent.trace` — what a record stores about an episode.
* :mod:`~cvb_engine.agent.workspace` — the workspace, built without a model.
* :mod:`~cvb_engine.agent.tools` — the five tools over the workspace.
* :mod:`~cvb_engine.agent.episode` — the tool loop over the OpenAI tools API.
* :mod:`~cvb_engine.agent.command` — the user's own agent program (``agent@command=...``).
* :mod:`~cvb_engine.agent.run` — the runner's glue.
"""
