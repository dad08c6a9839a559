"""No Qt, no TF: plan a matrix, skip cached runs, start engine children, stream progress."""

from segdiff_gui.runner.devices import probe_devices
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.plan import MatrixPlan, batch_slots, plan_matrix
from segdiff_gui.runner.request import MatrixRequest, ModelSettings

__all__ = [
    "MatrixPlan",
    "MatrixRequest",
    "MatrixRunner",
    "ModelSettings",
    "batch_slots",
    "plan_matrix",
    "probe_devices",
]
