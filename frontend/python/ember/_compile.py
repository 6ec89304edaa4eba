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
    tracer_options = {"mode": mode, "fullgraph": str(fullgraph).lower(),
                      "dynamic": "none" if dynamic is None else str(bool(dynamic)).lower(),
                      "strict": str(options.get("strict", False)).lower()}
    return CompiledFunction(model, torch.compile(model, backend=backend, fullgraph=fullgraph, dynamic=dynamic),
                            tracer_options, report)


class CompiledFunction:
    """A compiled function: over PyTorch tensors through Dynamo and the ember backend; over ember
    tensors (ember.Tensor) through ember's own tracer."""

    def __init__(self, fn, torch_fn, tracer_options, report):
        functools.update_wrapper(self, fn)
        self._fn, self._torch_fn, self._tracer_options = fn, torch_fn, tracer_options
        self._tracer = None
        self._ember_report = report
        self._ember_code = getattr(fn, "__code__", None)

    def __call__(self, *args, **kwargs):
        from . import _C
        if any(isinstance(a, _C.Tensor) for a in args) or any(isinstance(v, _C.Tensor) for v in kwargs.values()):
            if kwargs:
                raise TypeError("a function compiled over ember tensors takes positional arguments only")
            if self._tracer is None:
                self._tracer = _C.CompiledFunction(self._tracer_options)
                self._ember_report.tracer = self._tracer
            return self._tracer(self._fn, args)
        return self._torch_fn(*args, **kwargs)


def report_of(compiled):
    """The report of what ember.compile made of this module or function so far."""
    report = getattr(compiled, "_ember_report", None)
    if report is None:
        raise ValueError("not a result of ember.compile")
    report.collect_recompiles(getattr(compiled, "_ember_code", None))
    return report
