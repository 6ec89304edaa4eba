"""Eager's layout of a compiled graph's outputs, and putting ember's outputs into it: where an
output's strides, offset or sharing of memory differ from what eager hands back in a way the
caller can see (split from _translate.py, whose CompiledFx calls these)."""
import sympy
import torch


class EagerLayouts:
    """Eager's layout of each tensor output and of the memory it views (its root, from
    _view_roots), as functions of a call's symbol values; None where a size is not one ember can
    evaluate."""

    def __init__(self, gm, symbols, roots):
        self.outputs = [self._layout(val, symbols) for val in output_tensor_vals(gm)]
        self.roots = [None if isinstance(root, tuple) else self._layout(root.meta.get("val"), symbols)
                      for root in roots]

    @staticmethod
    def _layout(val, symbols):
        if not isinstance(val, torch.Tensor):
            return None
        parts = [*val.shape, *val.stride(), val.storage_offset()]
        fns = []
        for p in parts:
            if isinstance(p, int):
                fns.append(p)
                continue
            expr = p.node.expr if isinstance(p, torch.SymInt) else None
            if expr is None or not expr.free_symbols <= set(symbols.ids):
                return None
            fns.append(symbols.value_function(expr))
        rank = val.dim()
        if all(isinstance(f, int) for f in fns):  # static: evaluated once
            return rank, (fns[:rank], tuple(fns[rank:2 * rank]), fns[2 * rank])
        return rank, fns

    @staticmethod
    def evaluate(layout, values):
        """(shape, strides, offset) of a layout for this call."""
        rank, fns = layout
        if isinstance(fns, tuple):
            return fns
        ints = [f if isinstance(f, int) else int(f(values)) for f in fns]
        return ints[:rank], tuple(ints[rank:2 * rank]), ints[2 * rank]


def output_tensor_vals(gm):
    """The meta values of the graph's tensor outputs."""
    out = [n for n in gm.graph.nodes if n.op == "output"][0]
    results = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
    return [r.meta.get("val") for r in results if isinstance(r, torch.fx.Node) and is_tensor_node(r)]


def contiguous_at_every_size(val):
    """Whether a tensor's strides are the contiguous ones, at offset 0, whatever values its sizes'
    symbols take (a stride that only happens to equal them at one size does not count)."""
    if not isinstance(val, torch.Tensor):
        return False
    expr = lambda v: sympy.sympify(v.node.expr if isinstance(v, torch.SymInt) else v)  # noqa: E731
    if expr(val.storage_offset()) != 0:
        return False
    expected = sympy.Integer(1)
    for size, stride in reversed(list(zip(val.shape, val.stride()))):
        if sympy.expand(expr(stride) - expected) != 0:
            return False
        expected = expected * expr(size)
    return True


def as_eager(tensors, group, unshare, layouts, values, layout_matters=True):
    """Puts the outputs of `group` (views of one value of eager's own memory) in eager's layout
    where ember's differs in a way the caller can see: members that eager keeps apart sharing
    memory (an elided clone of an expansion), members that eager lets share memory held apart
    (a constant and a view of it), a contiguous output that is not, or memory that ember shares
    with an input or another output. Then the group is rebuilt: one buffer in the root's
    layout, each member copied into its eager view, so in-place ops later act as in eager.
    Without `layout_matters` (values only a backward graph reads), only shared memory counts."""
    if len(group) == 1 and layout_matters and group[0] not in unshare:  # the common case, cheaply
        k = group[0]
        layout = layouts.outputs[k]
        if layout is not None and layouts.roots[k] is not None and \
                tensors[k].stride() == layouts.evaluate(layout, values)[1]:
            return
    if any(layouts.outputs[k] is None for k in group) or layouts.roots[group[0]] is None:
        for k in group:  # eager's layout is unknown: a plain copy where one is needed
            if k in unshare:
                tensors[k] = tensors[k].clone()
        return
    eager = [layouts.evaluate(layouts.outputs[k], values) for k in group]
    if not any(k in unshare for k in group):
        if not layout_matters:
            return
        if len(group) == 1 and _harmless_layout(tensors[group[0]], eager[0],
                                                layouts.evaluate(layouts.roots[group[0]], values)):
            return
        if _same_layout([tensors[k] for k in group], eager):
            return
    root_shape, root_strides, root_offset = layouts.evaluate(layouts.roots[group[0]], values)
    root = torch.empty_strided(root_shape, root_strides, dtype=tensors[group[0]].dtype, device="cpu")
    for k, (shape, strides, offset) in zip(group, eager):
        src = tensors[k]
        # The member that is the root in eager is the root itself, not a view of it: a view made
        # here (under AOTAutograd's no_grad) cannot be modified in place where grad is on.
        same = list(shape) == list(root_shape) and tuple(strides) == tuple(root_strides) and offset == root_offset
        view = root if same else root.as_strided(shape, strides, offset - root_offset)
        dst = view
        for d, (size, stride) in enumerate(zip(shape, strides)):
            if stride == 0 and size > 1:  # broadcast in eager: one slice holds every value
                dst, src = dst.narrow(d, 0, 1), src.narrow(d, 0, 1)
        if src.dtype != view.dtype:  # a member that views the root as another dtype
            tensors[k] = src.clone()
            continue
        dst.copy_(src)
        tensors[k] = view


def as_view_of(base, t):
    """t, which lies in the memory of input `base`, as a view of base. AOTAutograd rebuilds an
    output that aliases an input from the input and the output's storage offset when it cannot
    replay the views (their sizes are symbolic); imported through DLPack, t has a storage of its
    own that starts where t does, at offset 0, and x[1:n - 1] came back as x[0:n - 2]."""
    storage = base.untyped_storage()
    start = storage.data_ptr()
    if t.dtype != base.dtype or t.numel() == 0 or not start <= t.data_ptr() < start + storage.nbytes():
        return t  # another dtype's view, or memory of a copy of the input (_values_in_memory)
    return base.as_strided(t.shape, t.stride(), (t.data_ptr() - start) // t.element_size())


def _harmless_layout(t, eager, eager_root):
    """Whether a lone output's strides, other than eager's, change nothing the caller can do:
    it does not overlap itself where eager's does not, and it is contiguous where eager's is a
    view of memory laid out otherwise (GPT-2's key-value cache, a permute of a projection: a
    copy per call there bought nothing). An output that is its own memory in eager has the
    layout eager chose for it (channels_last after a convolution, the strides of a transposed
    input after an elementwise op), and gets it, as torch.compile's does."""
    shape, strides, offset = eager
    ours = t.stride()
    if any(size > 1 and a == 0 and b != 0 for size, a, b in zip(shape, ours, strides)):
        return False
    if (list(shape), tuple(strides), offset) == (list(eager_root[0]), tuple(eager_root[1]), eager_root[2]):
        return False
    return t.is_contiguous() or not _is_contiguous(shape, strides)


def _is_contiguous(shape, strides):
    expected = 1
    for size, stride in reversed(list(zip(shape, strides))):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return True


def _same_layout(tensors, eager):
    """Whether ember's tensors have eager's strides and byte offsets from one another (dims of
    size 1 do not count), so that they share memory exactly where eager's do."""
    for t, (shape, strides, _) in zip(tensors, eager):
        if any(size > 1 and a != b for size, a, b in zip(t.shape, t.stride(), strides)):
            return False
    if len(tensors) == 1:
        return True
    if any(t.numel() == 0 for t in tensors):
        return False
    first = min(t.data_ptr() for t in tensors)
    first_eager = min(offset * t.element_size() for t, (_, _, offset) in zip(tensors, eager))
    return all(t.data_ptr() - first == offset * t.element_size() - first_eager
               for t, (_, _, offset) in zip(tensors, eager))


def is_tensor_node(node):
    return isinstance(node.meta.get("val"), torch.Tensor)
