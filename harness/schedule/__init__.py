"""What an example asks of the link and of the application: typed impairment
schedules (``types``), the transfer plan (``plan``), the Hypothesis strategies that
draw both and shrink toward no impairment (``strategies``), and unit parsing
(``units``). It imports only the RFCs' constants (harness.rfc)."""

from harness.schedule.plan import Flow, TransferPlan
from harness.schedule.types import (
    ACTIONS,
    DIRECTIONS,
    PROTOS,
    Action,
    FlowSelector,
    GilbertElliottLoss,
    IidLoss,
    LinkSettings,
    Loss,
    Phase,
    Schedule,
    loss_from_json,
)

__all__ = [
    "ACTIONS", "DIRECTIONS", "PROTOS", "Action", "Flow", "FlowSelector", "GilbertElliottLoss", "IidLoss", "LinkSettings",
    "Loss", "Phase", "Schedule", "TransferPlan", "loss_from_json",
]
