"""Torch calls: ATen ops that run on PyTorch inside a compiled ember graph ([Note: torch calls]
in frontend/python/src/torch_calls.h). This side keeps each call's op and its non-tensor
arguments, and runs it when the plan reaches it."""
import itertools
import threading

import torch

from . import _C

_from_dlpack = getattr(torch._C, "_from_dlpack", None) or torch.from_dlpack
_calls = {}
_ids = itertools.count(1)
_state = threading.local()  # the symbol values of the call running on this thread


class Call:
    """One ATen op with its arguments: tensors by position in the node's inputs, sizes as sympy
    expressions over the graph's symbols, everything else as it was."""

    def __init__(self, target, args, kwargs, symbols, layouts, effect_only=False, declared=None):
        self.target, self.args, self.kwargs, self.symbols = target, args, kwargs, symbols
        self.layouts = layouts  # per tensor input: the strides eager gives it, or None
        self.effect_only = effect_only  # hands nothing back; its one output is an empty placeholder
        self.declared = declared  # per result: whether the graph has an output for it (a tensor in the meta)
        self.collective = is_collective(target)

    def run(self, inputs, outputs):
        values = getattr(_state, "symbol_values", None)
        tensors = [_in_layout(_from_dlpack(a.__dlpack__()), s(values) if isinstance(s, Strides) else s)
                   for a, s in zip(inputs, self.layouts)]
        args = _fill(self.args, tensors, self.symbols, values)
        kwargs = _fill(self.kwargs, tensors, self.symbols, values)
        result = self.target(*args, **kwargs)
        if self.effect_only:
            return
        seq = list(result) if isinstance(result, (tuple, list)) else [result]
        if self.declared is not None and len(seq) == len(self.declared):
            # By position: an op may leave a result undefined (None) where its meta has a tensor,
            # as mkldnn_rnn_layer's workspace in inference.
            results = [r for r, d in zip(seq, self.declared) if d]
        else:
            results = [r for r in seq if isinstance(r, torch.Tensor)]
        if len(results) != len(outputs):
            raise ResultMismatch(f"[torch] {self.target} returned {len(results)} tensors, expected {len(outputs)}")
        for dst, src in zip(outputs, results):
            out = _from_dlpack(dst.__dlpack__())
            if src is None:  # undefined in eager: nothing eager runs reads it
                out.zero_()
                continue
            # A dtype other than the meta's is converted (mixed-precision norms return float32
            # statistics where the meta says float16). A shape other than the meta's cannot be
            # held in the buffer the plan sized from it: the graph then runs on PyTorch.
            if not isinstance(src, torch.Tensor):
                raise ResultMismatch(f"[torch] {self.target} returned a {type(src).__name__}, "
                                     f"the graph expects {out.dtype}{list(out.shape)}")
            if out.shape != src.shape:
                raise ResultMismatch(f"[torch] {self.target} returned {src.dtype}{list(src.shape)}, "
                                     f"the graph expects {out.dtype}{list(out.shape)}")
            if self.collective:
                # [Note: collectives in a plan] A functional collective's result is filled in
                # asynchronously, until wait_tensor is called on that very tensor. The plan keeps
                # values in its own buffers, so the copy below would read it half done (and the
                # graph's own wait_tensor then waits on the copy, which has nothing pending):
                # it waits here, in graph order, before the copy.
                src = torch.ops._c10d_functional.wait_tensor(src)
            out.copy_(src)


# The namespaces of PyTorch's functional collectives (torch.distributed._functional_collectives),
# which Dynamo traces into graphs.
COLLECTIVE_NAMESPACES = ("_c10d_functional", "c10d_functional", "_c10d_functional_autograd")


def is_collective(target):
    """Whether an ATen op is a functional collective whose results must be waited on."""
    name = getattr(target, "_schema", None)
    name = name.name if name is not None else ""
    return getattr(target, "namespace", "") in COLLECTIVE_NAMESPACES and not name.endswith("wait_tensor")


class ResultMismatch(RuntimeError):
    """A torch call's result has another shape than PyTorch's meta gave it when the graph was
    built (the real kernel of _embedding_bag leaves offset2bag empty where its meta sizes it by
    the indices). Not the user's error: the graph falls back to PyTorch (CompiledFx)."""


class Strides:
    """Strides that depend on a call's symbol values: ints and functions of the values."""

    def __init__(self, parts):
        self.parts = parts

    def __call__(self, values):
        return tuple(p if isinstance(p, int) else p(values) for p in self.parts)


def _in_layout(t, strides):
    """`t` with the strides eager gives this input. ember keeps values in its own layouts, and
    some ATen ops depend on the layout, not only on the values: view and as_strided, and
    kernels such as flash attention's backward, which assume the strides its forward made."""
    if strides is None or t.stride() == strides or t.numel() == 0:
        return t
    return torch.empty_strided(t.shape, strides, dtype=t.dtype).copy_(t)


class TensorArg:
    def __init__(self, index):
        self.index = index


class SizeArg:
    def __init__(self, expr):
        self.expr = expr


class FloatArg:
    """A float of sizes: a function of the call's symbol values."""

    def __init__(self, value_of):
        self.value_of = value_of


def _fill(template, tensors, symbols, values):
    if isinstance(template, TensorArg):
        return tensors[template.index]
    if isinstance(template, SizeArg):
        return symbols.evaluate(template.expr, values)
    if isinstance(template, FloatArg):
        return float(template.value_of(values))
    if isinstance(template, (list, tuple)):
        return type(template)(_fill(t, tensors, symbols, values) for t in template)
    if isinstance(template, dict):
        return {k: _fill(v, tensors, symbols, values) for k, v in template.items()}
    return template


def register(call):
    cid = next(_ids)
    _calls[cid] = call
    return cid


def release(ids):
    for cid in ids:
        _calls.pop(cid, None)
    _C.release_torch_calls(list(ids))


def _run(cid, inputs, outputs):
    _calls[cid].run(inputs, outputs)


class symbol_values:
    """Makes this call's symbol values visible to the torch calls it runs."""

    def __init__(self, values):
        self.values = values

    def __enter__(self):
        self.previous = getattr(_state, "symbol_values", None)
        _state.symbol_values = self.values

    def __exit__(self, *exc):
        _state.symbol_values = self.previous


_C.set_torch_call_runner(_run)
