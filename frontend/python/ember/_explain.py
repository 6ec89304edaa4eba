"""ember.explain: one report of what Dynamo broke and what ember compiled."""
import torch

from . import _report
from .dynamo import make_backend


def explain(model_or_fn, *args, mode="default", **kwargs):
    """Compiles `model_or_fn` afresh, runs it once on the inputs and returns an ember Report:
    Dynamo's graph breaks (reason, user file:line), and each graph ember compiled."""
    import torch._dynamo
    report = _report.Report()
    report.notes = _report.untraced_modules(model_or_fn)
    backend = make_backend(mode, None, report)  # it records each graph break (Report.note_break)
    torch._dynamo.reset()
    report.start_recompiles_here()
    torch.compile(model_or_fn, backend=backend)(*args, **kwargs)
    report.collect_recompiles()
    return report
