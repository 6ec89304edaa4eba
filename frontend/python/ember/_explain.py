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
    backend = make_backend(mode, None, report)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model_or_fn)(*args, **kwargs)
    for b in explained.break_reasons:
        frame = b.user_stack[-1] if b.user_stack else None
        report.breaks.append({
            "reason": b.reason.splitlines()[0] if b.reason else "",
            "location": f"{frame.filename}:{frame.lineno}" if frame else "?",
            "source": (frame.line or "").strip() if frame else "",
            "hint": _report.hint_for(b.reason or ""),
        })
    torch._dynamo.reset()
    report.start_recompiles_here()
    torch.compile(model_or_fn, backend=backend)(*args, **kwargs)
    report.collect_recompiles()
    return report
