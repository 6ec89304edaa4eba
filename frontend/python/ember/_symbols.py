"""Sizes: PyTorch's symbolic sizes (sympy expressions over Dynamo's symbols) as ember dims.

An ember dim is an integer polynomial over symbols named s0, s1, ... by their ids in one ember
graph. Each Dynamo symbol gets an id the first time it is seen, and the graph records where its
value comes from at run time: a dim of a tensor input, or an int input.
"""
import math

import sympy
import torch

from . import _C


class Unsupported(Exception):
    """What the translation cannot express; the graph (or node) runs on PyTorch instead."""


class NonPolynomialSize(Unsupported):
    """A size that is not a polynomial of the input sizes (floor division, as strided windows
    give): ember dims cannot hold it, so the graph is compiled per set of sizes instead."""


class FloatSize:
    """A SymFloat's value (size / 2): a sympy expression of the symbols, or the graph argument
    that holds it (a backward graph's input)."""

    def __init__(self, expr=None, arg=None):
        self.expr, self.arg = expr, arg

    def __eq__(self, other):
        return isinstance(other, FloatSize) and (self.expr, self.arg) == (other.expr, other.arg)

    def __hash__(self):
        return hash((self.expr, self.arg))


class Symbols:
    """Without `fixed`, Dynamo's symbols become ember symbols. With `fixed` (sympy symbol -> int),
    every size is evaluated at those values and the graph is static."""

    def __init__(self, graph, fixed=None):
        self._graph = graph
        self.fixed = fixed
        self.ids = {}       # sympy symbol -> ember id
        self.sources = {}   # ember id -> ("size", input index, dim) or ("int", input index)

    def dim(self, size):
        """An ember dim (int or text) for an int, a SymInt or a sympy expression."""
        if isinstance(size, torch.SymInt):
            if size.node.is_nested_int():
                raise Unsupported("nested ints")
            expr = size.node.expr
        elif isinstance(size, int):
            return size
        else:
            expr = size
        if self.fixed is not None:
            return self._fixed_value(expr)
        expr = sympy.expand(expr)
        if expr.is_Integer:
            return int(expr)
        # ember's own spelling: shapes are compared as text ("4*s0", not "(4)*(s0)").
        return _C.canonical_dim(self._text(expr))

    def shape(self, sizes):
        return [self.dim(s) for s in sizes]

    def bind(self, size, source):
        """Records `source` as where a bare symbol's value comes from (first source wins)."""
        if not isinstance(size, torch.SymInt) or self.fixed is not None:
            return
        expr = size.node.expr
        if isinstance(expr, sympy.Symbol):
            sid = self._id(expr)
            self.sources.setdefault(sid, source)

    def check_bound(self):
        missing = [str(s) for s, i in self.ids.items() if i not in self.sources]
        if missing:
            raise Unsupported(f"symbols {missing} are not the size of any input")

    def value_function(self, expr):
        """A function of a call's symbol values (see values()) that gives expr's value, an int
        or a float (a SymFloat's expression: size / 2)."""
        expr = sympy.sympify(expr)
        if self.fixed is not None:
            # xreplace hands back a replacement as it is: a Python int when expr is one symbol.
            value = sympy.sympify(expr.xreplace(self.fixed))
            if value.free_symbols:
                raise Unsupported(f"size {expr} depends on symbols no input size gives")
            value = int(value) if value.is_Integer else float(value)
            return lambda values: value
        symbols = sorted(expr.free_symbols, key=str)
        ids = [self._id(s) for s in symbols]
        def exact(*args):
            value = expr.xreplace(dict(zip(symbols, args)))
            return int(value) if value.is_Integer else float(value)

        try:  # as Python code: PyTorch's printer knows its own functions (FloorDiv, IntTrueDiv)
            from torch.utils._sympy.printers import PythonPrinter
            code = f"lambda {', '.join(map(str, symbols))}: {PythonPrinter().doprint(expr)}"
            fast = eval(code, {"math": math, "torch": torch})  # noqa: S307 (printed from a sympy expression)
        except Exception:  # noqa: BLE001 (an expression the printer does not know: slower, exact)
            fast = exact

        def value(values):
            args = [values[i] for i in ids]
            try:
                return fast(*args)
            except Exception:  # noqa: BLE001 (printed code that does not run: the exact way)
                return exact(*args)
        return value

    def values(self, args):
        """This call's value of every symbol, from its arguments."""
        out = [0] * len(self.ids)
        for sid, src in self.sources.items():
            out[sid] = args[src[1]].shape[src[2]] if src[0] == "size" else int(args[src[1]])
        return out

    def evaluate(self, expr, values):
        """A sympy expression's value under this call's symbol values."""
        if isinstance(expr, int):
            return expr
        if self.fixed is not None:
            return self._fixed_value(expr)
        return int(expr.subs({s: values[i] for s, i in self.ids.items()}))

    def _fixed_value(self, expr):
        value = sympy.sympify(sympy.sympify(expr).xreplace(self.fixed))
        if not value.is_Integer:
            raise Unsupported(f"size {expr} depends on symbols no input size gives")
        return int(value)

    def _id(self, symbol):
        if symbol not in self.ids:
            self.ids[symbol] = self._graph.symbol(2)
        return self.ids[symbol]

    def _text(self, expr):
        if isinstance(expr, sympy.Symbol):
            return f"s{self._id(expr)}"
        if expr.is_Integer:
            return str(int(expr))
        if isinstance(expr, sympy.Add):
            return " + ".join(f"({self._text(a)})" for a in expr.args)
        if isinstance(expr, sympy.Mul):
            return "*".join(f"({self._text(a)})" for a in expr.args)
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
            return "*".join([f"({self._text(expr.base)})"] * int(expr.exp))
        raise NonPolynomialSize(f"size {expr} is not a polynomial of the input sizes")


def input_size_symbols(gm):
    """Where each bare symbol of a graph's input sizes comes from, in a fixed order:
    [(symbol, ("size", input index, dim) or ("int", input index), its value in the example)]."""
    found, index = {}, 0
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        sizes = list(enumerate(val.shape)) if isinstance(val, torch.Tensor) else [(None, val)]
        for d, size in sizes:
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                source = ("size", index, d) if d is not None else ("int", index)
                found.setdefault(size.node.expr, (source, size.node.hint))
        index += 1
    return [(symbol, source, hint) for symbol, (source, hint) in found.items()]
