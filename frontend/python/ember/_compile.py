"""ember.compile: torch.compile's signature and behaviour, with ember as the backend."""
import functools
import inspect
import types
import warnings

import torch

from . import _report, _warm
from ._C import DispatchCall as _DispatchCall
from ._C import Tensor as _EmberTensor
from .dynamo import check_settings, make_backend, option_text


def compile(model=None, *, mode="default", fullgraph=False, dynamic=None, options=None):
    """Compiles an nn.Module or a function with ember; usable as a decorator with or without
    arguments. A compiled module is the original module seen through a subclass whose forward
    is compiled: it shares the original's attributes (parameters, buffers, submodules, training
    flag), so state_dict() keys are the original's (no `_orig_mod.` prefix) and model.eval()
    reaches it, as it reaches torch.compile's result.
    `fullgraph=True` makes a graph break an error; `dynamic` is torch.compile's (None: sizes
    become symbolic once they change). A ValueError names the valid modes and options."""
    mode, options = check_settings(mode, options)
    if model is None:
        return functools.partial(compile, mode=mode, fullgraph=fullgraph, dynamic=dynamic, options=options)
    report = _report.Report()
    report.notes = _report.untraced_modules(model)
    for note in report.notes:
        warnings.warn(f"ember: {note}", RuntimeWarning, stacklevel=2)
    backend = make_backend(mode, options, report)
    if isinstance(model, torch.nn.Module):
        settings = {"mode": mode, "fullgraph": fullgraph, "dynamic": dynamic, "options": options}
        return _compiled_module(model, backend, settings, report)
    if not callable(model):
        raise TypeError(f"ember.compile takes an nn.Module or a function, not {type(model).__name__}")
    tracer_options = {"mode": mode, "fullgraph": option_text(bool(fullgraph)),
                      "dynamic": "none" if dynamic is None else option_text(bool(dynamic)),
                      **{key: option_text(value) for key, value in options.items()}}
    compiled = torch.compile(model, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
    if _warm.enabled() and isinstance(model, types.FunctionType):  # not a method, partial or callable object
        settings = {"mode": mode, "fullgraph": fullgraph, "dynamic": dynamic, "options": options}
        compiled = _warm.WarmStart(model, compiled, settings, report)
    return CompiledFunction(model, compiled, tracer_options, report)


class CompiledFunction(_DispatchCall):
    """A compiled function: over PyTorch tensors through Dynamo and the ember backend; over ember
    tensors (ember.Tensor) through ember's own tracer. The choice is made in C (_C.DispatchCall),
    with no frame of Python per call: one was about 0.8 us of a tiny compiled call (issue 26)."""

    def __init__(self, fn, torch_fn, tracer_options, report):
        super().__init__(torch_fn, self._call_ember, _EmberTensor)
        functools.update_wrapper(self, fn)
        self._fn, self._torch_fn, self._tracer_options = fn, torch_fn, tracer_options
        self._tracer = None
        self._ember_report = report
        self._ember_code = getattr(fn, "__code__", None)

    def _call_ember(self, *args, **kwargs):
        from . import _C
        if kwargs:
            raise TypeError("a function compiled over ember tensors takes positional arguments only")
        if self._tracer is None:
            self._tracer = _C.CompiledFunction(self._tracer_options)
            self._ember_report.tracer = self._tracer
        return self._tracer(self._fn, args)


def _compiled_module(model, backend, settings, report):
    """`model` seen through a subclass of its class whose forward is compiled. The instance
    shares the original's __dict__: one set of parameters, buffers, hooks and flags."""
    cls = type(model)
    if "forward" in model.__dict__:  # the shared __dict__'s own forward would shadow the compiled one
        raise TypeError("ember.compile: a module instance with its own `forward` attribute is not supported; "
                        "compile the function instead")
    def compile_forward(forward):
        ordinary = torch.compile(forward, backend=backend, fullgraph=settings["fullgraph"], dynamic=settings["dynamic"])
        return _warm.WarmStart(forward, ordinary, settings, report, cls=cls) if _warm.enabled() else ordinary

    # A forward patched onto the class after compile is compiled too, once: by the attribute as the
    # class holds it (a partialmethod's cls.forward is a new object at each access).
    by_attribute = {}  # id of the attribute -> (the attribute, its compiled form)

    def compiled_now():
        attribute = inspect.getattr_static(cls, "forward")
        held = by_attribute.get(id(attribute))
        if held is None:
            held = by_attribute[id(attribute)] = attribute, compile_forward(cls.forward)
        return held[1]

    current = [(cls.forward, compiled_now())]  # the class's forward, and its compiled form

    def forward(self, *args, **kwargs):
        traced, compiled_forward = current[0]
        now = cls.forward
        if now is not traced:
            current[0] = traced, compiled_forward = now, compiled_now()
        return compiled_forward(self, *args, **kwargs)

    def __reduce_ex__(self, protocol):
        # Pickle (torch.save) finds classes by name, and this one shares its name with the
        # original: the module is saved as the original and compiled again when loaded.
        original = object.__new__(cls)
        original.__dict__ = self.__dict__
        return _compile_again, (original, settings)

    sub = type(cls.__name__, (cls,), {"forward": forward, "__reduce_ex__": __reduce_ex__,
                                      "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                      "_ember_report": report, "_ember_code": cls.forward.__code__})
    compiled = object.__new__(sub)
    compiled.__dict__ = model.__dict__
    return compiled


def _compile_again(module, settings):
    """A compiled module read back by pickle: its original, compiled with the same settings."""
    return compile(module, **settings)


def report_of(compiled):
    """The report of what ember.compile made of this module or function so far."""
    report = getattr(compiled, "_ember_report", None)
    if report is None:
        raise ValueError("not a result of ember.compile")
    report.collect_recompiles(getattr(compiled, "_ember_code", None))
    return report
