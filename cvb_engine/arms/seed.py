"""The seed's control arms: ``cold`` (the task alone) and ``mandated`` (the constraints as orders).

Their messages are the PROMPT_VERSION 2.0 templates of :mod:`cvb_engine.prompts`,
unchanged; neither has parameters.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from cvb_engine.arms import ArmContext, Message, register_arm
from cvb_engine.prompts import MANDATED, MANDATED_ITEM, SYSTEM, task_block
from cvb_engine.scenario import Scenario


class NoParams(BaseModel):
    """No parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@register_arm(
    "cold",
    params=NoParams,
    version="2.0",
    description="The task alone: no constraint is stated (what the model does by default).",
)
def cold(scenario: Scenario, params: NoParams, context: ArmContext) -> list[Message]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task_block(scenario)},
    ]


@register_arm(
    "mandated",
    params=NoParams,
    version="2.0",
    description="The task, then every constraint as a numbered order.",
)
def mandated(scenario: Scenario, params: NoParams, context: ArmContext) -> list[Message]:
    orders = "\n".join(
        MANDATED_ITEM.format(n=i, text=c.text.strip())
        for i, c in enumerate(scenario.constraints, start=1)
    )
    user = MANDATED.format(task_block=task_block(scenario), orders=orders)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
