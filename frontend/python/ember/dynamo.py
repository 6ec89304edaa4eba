"""ember as a TorchDynamo backend: Dynamo captures, AOTAutograd lowers to core ATen (forward and
backward graphs), ember compiles each graph (_translate.py). Registered under the entry point
"torch_dynamo_backends" as "ember", so `torch.compile(model, backend="ember")` works without
importing ember first.
"""
import functools
import time
import warnings

import torch
from torch._dynamo.backends.common import aot_autograd

from . import _C, _express, _report
from ._symbols import Unsupported

MODES = tuple(_C.mode_names())
# Each option and the Python types it takes; the core checks the values (_C.check_options).
OPTIONS = {"strict": (bool,), "autotune_budget_s": (int, float), "autotune_search": (str,),
           "static_plan_mb": (int, float)}


def check_settings(mode, options):
    """A ValueError naming the valid choices for an unknown mode, option or option value."""
    mode = "default" if mode is None else mode
    if mode not in MODES:
        raise ValueError(f"ember: unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
    options = dict(options or {})
    for key, value in options.items():
        if key not in OPTIONS:
            raise ValueError(f"ember: unknown option {key!r}; valid options: {', '.join(sorted(OPTIONS))}")
        types = OPTIONS[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            names = " or ".join(t.__name__ for t in types)
            raise ValueError(f"ember: option {key!r} takes {names}, not {type(value).__name__}")
    _C.check_options({k: option_text(v) for k, v in options.items()})
    return mode, options


def option_text(value):
    """An option's value as the core's options spell it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def make_backend(mode="default", options=None, report=None, savable=False):
    """A Dynamo backend compiling with ember under `mode`; each graph it compiles is recorded in
    `report` (an ember Report), or in the process-wide one. `savable`: each graph is a WarmGraph,
    which AOTAutograd can save ([Note: the warm start])."""
    mode, options = check_settings(mode, options)
    strict = options.get("strict", False)
    report = report if report is not None else _report.GLOBAL

    def compiler(kind, piece, lifted, made, gm, example_inputs):
        express = _express.plan_of(kind, gm, lifted)
        if savable:
            from ._warm import WarmGraph
            compiled = WarmGraph(gm, kind, mode, options, _visible_outputs(kind), piece, report, express)
        else:
            compiled = _compile_graph(gm, kind, mode, options, report, _visible_outputs(kind), piece)
        made.append((compiled, express))
        return compiled

    def backend(gm, example_inputs):
        """AOTAutograd, then ember on each graph it makes. A graph AOTAutograd cannot prepare
        (`x.data = y` beside another mutation of x: its assertion) runs as Dynamo captured it, on
        PyTorch, with a warning: the program goes on, as it does when ember's own compile fails."""
        start = time.perf_counter()
        report.note_break(gm)
        piece = split_reason(gm)
        lifted = next(gm.parameters(), None) is not None or next(gm.buffers(), None) is not None
        made = []  # (compiled graph, its express plan), for each graph AOTAutograd makes
        aot = aot_autograd(
            fw_compiler=functools.partial(compiler, "forward", piece, lifted, made),
            bw_compiler=functools.partial(compiler, "backward", piece, lifted, made),
            inference_compiler=functools.partial(compiler, "inference", piece, lifted, made),
            decompositions=decompositions(),
        )
        try:
            chain = aot(gm, example_inputs)
            if savable or len(made) != 1 or made[0][1] is None:  # a warm entry is expressed when bound
                return chain
            return _express.Express(chain, made[0][0], made[0][1])
        except Exception as e:
            # Dynamo's own signals (a restart of its analysis, a frame to skip) are not failures;
            # the warm start's trace fails whole, and its module goes the ordinary way.
            if strict or savable or isinstance(e, torch._dynamo.exc.TorchDynamoException):
                raise
            reason = short_reason(e)
            warnings.warn(f"ember: AOTAutograd could not prepare a graph; it runs on PyTorch instead ({reason})",
                          RuntimeWarning, stacklevel=2)
            report.add_graph(_report.GraphRecord.fallback("captured", gm, reason, time.perf_counter() - start, piece))
            return gm.forward

    backend.__name__ = "ember"
    return backend


def short_reason(e):
    """An exception as one line: its type and the first line of its message."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


# Kept whole: PyTorch's decomposition of the fused CPU attention computes a logsumexp that its
# backward kernel (which the joint graph still calls) does not expect, and GPT-2's gradients came
# out wrong by as much as their size (the same happens with aot_eager and these decompositions).
# std is decomposed into sqrt(var) in the input's dtype, which overflows float32 where eager's
# std (accumulated in double, rounded once) is finite: ember's std is computed as eager's.
# native_batch_norm_backward: ember's lowering sums in float64, as eager does (_lower.py).
# native_layer_norm_backward: ember's lowering recomputes the statistics that autocast's meta
# rounds to 16 bits (_lower.py).
# index_add: its decomposition, an index_put, counts a negative index from the end where
# index_add raises.
_KEEP_WHOLE = ("aten._scaled_dot_product_flash_attention_for_cpu", "aten.std.correction",
               "aten.native_batch_norm_backward", "aten.native_layer_norm_backward", "aten.index_add")


@functools.cache
def decompositions():
    """PyTorch's core-ATen decompositions, but for the ops in _KEEP_WHOLE."""
    from torch._decomp import core_aten_decompositions
    table = core_aten_decompositions()
    return {op: fn for op, fn in table.items() if not str(op).startswith(_KEEP_WHOLE)}


def ember_backend(gm, example_inputs, mode=None, options=None):
    """The "ember" backend of torch.compile; torch.compile's `mode` and `options` arrive here."""
    return make_backend(mode, options)(gm, example_inputs)


def _visible_outputs(kind):
    """How many of a training forward graph's outputs its caller sees (effect tokens, mutated
    inputs, the model's outputs, bases of aliased outputs); the rest are saved for the backward
    graph. AOTAutograd says so in the tracing context, as it does to Inductor. None: all."""
    if kind != "forward":
        return None
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    returns = getattr(metadata, "num_forward_returns", None)
    if returns is None:
        return None
    return len(getattr(metadata, "tokens", None) or ()) + returns  # tokens come first, uncounted


def eager_fallback(gm):
    """gm run by PyTorch, its tensor inputs first put in the layout AOTAutograd traced them with:
    a backward graph's saved values come from ember's forward in ember's layout (an elided
    .contiguous() is a strided view), and an eager `view` of one may refuse it."""
    from functorch.compile import make_boxed_func
    run = make_boxed_func(gm)
    layouts = [_traced_strides(n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"]

    def call(args):
        for i, (a, strides) in enumerate(zip(args, layouts)):
            if strides is not False and isinstance(a, torch.Tensor) and a.stride() != strides:
                args[i] = a.contiguous() if strides is None else \
                    torch.empty_strided(a.shape, strides, dtype=a.dtype, device=a.device).copy_(a)
        return run(args)

    call._boxed_call = True
    return call


def _traced_strides(val):
    """The strides a traced tensor input had: a tuple; None when they are symbolic and the
    tensor was contiguous (a contiguous copy serves); False for anything else (left alone)."""
    if not isinstance(val, torch.Tensor):
        return False
    if all(isinstance(s, int) for s in val.stride()):
        return tuple(val.stride())
    try:
        return None if val.is_contiguous() else False
    except Exception:  # a symbolic check that cannot be decided without a guard
        return False


def split_reason(gm):
    """Why Dynamo handed this graph over as one piece of a larger one, or None: DDP's optimizer
    (torch._dynamo.config.optimize_ddp) splits a graph at the boundaries of DDP's gradient
    buckets, so that each bucket's all-reduce starts while the backward of the rest goes on, and
    marks each piece with its reason."""
    reason = getattr(getattr(gm, "compile_subgraph_reason", None), "reason", "")
    if reason.startswith("DDPOptimizer"):
        return ("a piece of a graph that DDP's optimizer split at gradient-bucket boundaries, so that all-reduce "
                "overlaps the backward (torch._dynamo.config.optimize_ddp = False keeps it whole)")
    return None


def _compile_graph(gm, kind, mode, options, report, visible_outputs=None, piece=None):
    from ._translate import compile_fx
    start = time.perf_counter()
    try:
        compiled = compile_fx(gm, mode, options, visible_outputs)
    except Exception as e:  # any failure of ours: this graph runs on PyTorch, the program goes on
        if options.get("strict", False):
            raise
        reason = f"{type(e).__name__}: {e}"
        article = "an" if kind[0] in "aeiou" else "a"
        warnings.warn(f"ember: compiling {article} {kind} graph failed; it runs on PyTorch instead ({reason})",
                      RuntimeWarning, stacklevel=2)
        report.add_graph(_report.GraphRecord.fallback(kind, gm, reason, time.perf_counter() - start, piece))
        return eager_fallback(gm)
    report.add_graph(_report.GraphRecord.compiled(kind, gm, compiled, time.perf_counter() - start, piece))
    return compiled
