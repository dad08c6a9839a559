"""segdiff from Python: run a model under a matrix of configurations, or open a cache or a
bundle, and ask the runs the questions the ``segdiff`` commands ask, with numpy arrays and
tables (pandas DataFrames where pandas is installed) that display themselves in Jupyter.

>>> import segdiff_gui as segdiff
>>> study = segdiff.run(segdiff.demo_model(), segdiff.demo_images(),
...                     configs=["device=cpu,batch=1", "device=cpu,batch=64"], repeats=2)
>>> study.compare(cutoff=0.5).table          # every run against cpu b1 r0
>>> study.map("cpu b64 r0")                  # the float32 map, bit-exact from the cache
>>> study.diagnose()                         # is it normal, why, how to avoid it

Inference runs in child processes, as in the CLI and the window: this package never imports
TensorFlow, and a kernel's own TensorFlow or environment does not reach the runs.
"""

from segdiff_gui.api.collection import Runs, open_bundle, open_cache
from segdiff_gui.api.pipeline import Reproduced, import_maps, reproduce
from segdiff_gui.api.results import Comparison, Diagnosis, Explanation, Sweep
from segdiff_gui.api.running import devices, run, sweep
from segdiff_gui.api.study import Run, Study
from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.resources import demo_images, demo_model

__all__ = [
    "Comparison",
    "Diagnosis",
    "Explanation",
    "InputError",
    "Preprocessing",
    "Reproduced",
    "Run",
    "RunConfig",
    "Runs",
    "Study",
    "Sweep",
    "demo_images",
    "demo_model",
    "devices",
    "import_maps",
    "open_bundle",
    "open_cache",
    "reproduce",
    "run",
    "sweep",
]
