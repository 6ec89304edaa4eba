"""What ember did with a program: each graph it compiled (ATen ops, how many ember lowered,
torch calls by op, kernels after fusion, compile time, cache hits) or left to PyTorch, plus
Dynamo's graph breaks and recompiles when explain() gathered them. Text and JSON."""
import collections
import json
import threading


def _aten_ops(gm):
    ops = collections.Counter()
    for node in gm.graph.nodes:
        if node.op == "call_function" and hasattr(node.target, "_schema"):
            ops[str(node.target)] += 1
    return dict(ops)


class GraphRecord:
    def __init__(self, kind, aten_ops, seconds):
        self.kind = kind  # forward, backward or inference
        self.aten_ops = aten_ops
        self.compile_ms = seconds * 1e3
        self.lowered = {}
        self.torch_calls = {}
        self.ember = {}          # the plan's figures (kernels, interpreter ops, ...)
        self.fallback = None     # why the graph runs on PyTorch, if it does

    @classmethod
    def compiled(cls, kind, gm, compiled, seconds):
        r = cls(kind, _aten_ops(gm), seconds)
        r.lowered = dict(compiled.lowered_ops)
        r.torch_calls = dict(compiled.torch_call_ops)
        info = compiled.compiled.info
        r.ember = {k: info[k] for k in ("op_count", "ops", "steps", "buffers", "kernels", "kernels_compiled",
                                        "kernels_from_disk", "kernel_compile_ms", "interpreter_ops")}
        return r

    @classmethod
    def fallback(cls, kind, gm, reason, seconds):
        r = cls(kind, _aten_ops(gm), seconds)
        r.fallback = reason
        return r

    @property
    def lowered_share(self):
        """The share of the graph's ATen op calls that ember lowered (not torch calls)."""
        total = sum(self.lowered.values()) + sum(self.torch_calls.values())
        return sum(self.lowered.values()) / total if total else 0.0

    def as_dict(self):
        return {"kind": self.kind, "aten_ops": self.aten_ops, "compile_ms": self.compile_ms,
                "lowered": self.lowered, "torch_calls": self.torch_calls, "lowered_share": self.lowered_share,
                "ember": self.ember, "fallback": self.fallback}


class Report:
    def __init__(self):
        self._lock = threading.Lock()
        self.graphs = []
        self.breaks = []      # Dynamo's graph breaks: {"reason", "location", "source"}
        self.recompiles = []  # {"guard"}

    def add_graph(self, record):
        with self._lock:
            self.graphs.append(record)

    @property
    def graph_count(self):
        return sum(1 for g in self.graphs if g.fallback is None)

    def torch_call_ops(self):
        total = collections.Counter()
        for g in self.graphs:
            total.update(g.torch_calls)
        return dict(total)

    def as_dict(self):
        return {"graphs": [g.as_dict() for g in self.graphs], "graph_breaks": self.breaks,
                "recompiles": self.recompiles, "torch_calls": self.torch_call_ops()}

    def json(self):
        return json.dumps(self.as_dict(), indent=2, sort_keys=True)

    def text(self):
        lines = [f"ember: {self.graph_count} graphs compiled, {len(self.breaks)} graph breaks, "
                 f"{len(self.recompiles)} recompiles"]
        for i, g in enumerate(self.graphs):
            head = f"graph {i} ({g.kind}): {sum(g.aten_ops.values())} ATen ops"
            if g.fallback:
                lines.append(f"{head}; runs on PyTorch: {g.fallback}")
                continue
            e = g.ember
            lines.append(f"{head}, {g.lowered_share:.0%} lowered; {e['kernels']} generated kernels "
                         f"({e['kernels_compiled']} compiled now, {e['kernels_from_disk']} from the disk cache); "
                         f"compiled in {g.compile_ms:.1f} ms")
            if g.torch_calls:
                calls = ", ".join(f"{op} x{n}" for op, n in sorted(g.torch_calls.items()))
                lines.append(f"  torch calls (ATen ops ember does not lower yet): {calls}")
            if e["interpreter_ops"]:
                lines.append(f"  on the interpreter: {', '.join(e['interpreter_ops'])}")
        for b in self.breaks:
            lines.append(f"graph break at {b['location']}: {b['reason']}")
            if b.get("source"):
                lines.append(f"    {b['source']}")
            if b.get("hint"):
                lines.append(f"    hint: {b['hint']}")
        for r in self.recompiles:
            lines.append(f"recompile: {r['guard']}")
        return "\n".join(lines)

    def __str__(self):
        return self.text()


GLOBAL = Report()
