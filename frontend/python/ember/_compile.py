"""ember.compile: torch.compile's signature and behaviour, with ember as the backend."""
import copy
import functools

import torch

from . import _report
from .dynamo import check_settings, make_backend


def compile(model=None, *, mode="default", fullgraph=False, dynamic=None, options=None):
    """Compiles an nn.Module or a function with ember; usable as a decorator with or without
    arguments. A compiled module is a shallow copy of `model` sharing its parameters and
    buffers, so state_dict() keys and parameters are the original's (no `_orig_mod.` prefix).
    `fullgraph=True` makes a graph break an error; `dynamic` is torch.compile's (None: sizes
    become symbolic once they change). A ValueError names the valid modes and options."""
    mode, options = check_settings(mode, options)
    if model is None:
        return functools.partial(compile, mode=mode, fullgraph=fullgraph, dynamic=dynamic, options=options)
    report = _report.Report()
    backend = make_backend(mode, options, report)
    if isinstance(model, torch.nn.Module):
        # The copy's own forward, compiled: hooks and train()/eval() act on the copy as on any
        # module, and its children and parameters are the original's.
        compiled = copy.copy(model)
        forward = compiled.forward
        compiled.forward = torch.compile(forward, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
        compiled._ember_report = report
        compiled._ember_code = getattr(forward, "__code__", None)
        return compiled
    if not callable(model):
        raise TypeError(f"ember.compile takes an nn.Module or a function, not {type(model).__name__}")
    fn = torch.compile(model, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
    fn._ember_report = report
    fn._ember_code = getattr(model, "__code__", None)
    return fn


def report_of(compiled):
    """The report of what ember.compile made of this module or function so far."""
    report = getattr(compiled, "_ember_report", None)
    if report is None:
        raise ValueError("not a result of ember.compile")
    report.collect_recompiles(getattr(compiled, "_ember_code", None))
    return report
