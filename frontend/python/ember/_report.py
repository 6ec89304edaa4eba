"""What ember did with a program: each graph it compiled (ATen ops, how many ember lowered,
torch calls by op, kernels after fusion, compile time, cache hits) or left to PyTorch, plus
Dynamo's graph breaks (as each compile meets them) and recompiles. Text and JSON."""
import collections
import html
import json
import linecache
import threading
import weakref

from ._torch_calls import COLLECTIVE_NAMESPACES

# How to remove the common graph breaks, by a phrase of Dynamo's reason.
_HINTS = [
    (("item()", "data-dependent", "Data-dependent", "_local_scalar_dense"),
     "a tensor's value decides Python control flow here: keep it a tensor (torch.where, masks) or set "
     "torch._dynamo.config.capture_scalar_outputs = True"),
    (("print",), "print() runs Python at run time: move it outside the compiled region or drop it"),
    (("dynamic shape operator", "nonzero", "boolean mask", "masked_select"),
     "the output size depends on the data (boolean masks, nonzero): use torch.where with a fixed size, or set "
     "torch._dynamo.config.capture_dynamic_output_shape_ops = True"),
    (("unsupported", "Unsupported"), "this Python construct cannot be traced: move it out of the model's forward"),
]


def hint_for(reason):
    for phrases, hint in _HINTS:
        if any(p in reason for p in phrases):
            return hint
    return "see torch._dynamo.explain(fn)(*inputs) for the full reason"


def untraced_modules(model):
    """Notes on submodules Dynamo leaves to eager without a graph break or a word: recurrent
    layers (nn.LSTM, nn.GRU, nn.RNN) unless torch._dynamo.config.allow_rnn is set, and torch.nn
    containers under DDP or fully_shard (FSDP2). A forward that starts with one ran wholly on PyTorch, and the
    report said nothing."""
    import torch
    import torch._dynamo
    if not isinstance(model, torch.nn.Module):
        return []
    return _distributed_notes(model) + ([] if torch._dynamo.config.allow_rnn else _rnn_notes(model))


def _distributed_notes(model):
    """DDP and fully_shard (FSDP2) run their own forward eagerly and leave the module they wrap to
    Dynamo, which compiles no frame of torch.nn's own containers (nn.Sequential...) there."""
    import torch
    from torch._dynamo import trace_rules
    if not torch.distributed.is_available():
        return []
    from torch.distributed.fsdp import FSDPModule
    from torch.nn.parallel import DistributedDataParallel
    if isinstance(model, DistributedDataParallel) and trace_rules.check(model.module.forward):
        return [f"DDP wraps torch.nn's own {type(model.module).__name__}, in which Dynamo compiles nothing under DDP: "
                f"compile the module before wrapping it, DDP(ember.compile(model)), or wrap a module class of your "
                f"own (docs/distributed.md)"]
    if isinstance(model, FSDPModule) and trace_rules.check(model.forward):
        sharded = next(c for c in type(model).__mro__ if not issubclass(c, FSDPModule))
        return [f"fully_shard (FSDP2) shards torch.nn's own {sharded.__name__}, in which Dynamo "
                f"compiles nothing: compile its blocks with ember.compile before fully_shard, or shard a module "
                f"class of your own (docs/distributed.md)"]
    return []


def _rnn_notes(model):
    import torch
    names = sorted({type(m).__name__ for m in model.modules() if isinstance(m, torch.nn.RNNBase)})
    if not names:
        return []
    verb = "runs" if len(names) == 1 else "run"
    return [f"{', '.join(names)} {verb} on PyTorch, uncompiled: Dynamo does not trace recurrent layers unless "
            f"torch._dynamo.config.allow_rnn = True (then ember compiles them)"]


def _aten_ops(gm):
    ops = collections.Counter()
    for node in gm.graph.nodes:
        if node.op == "call_function" and hasattr(node.target, "_schema"):
            ops[str(node.target)] += 1
    return dict(ops)


class GraphRecord:
    def __init__(self, kind, aten_ops, seconds, split=None):
        self.kind = kind  # forward, backward or inference
        self.aten_ops = aten_ops
        self.compile_ms = seconds * 1e3
        self.lowered = {}
        self.torch_calls = {}
        self.failed_lowerings = {}  # ATen op -> the reasons its lowering failed (ember's bugs)
        self._ember = {}         # the plan's figures at compile time (kernels, interpreter ops, ...)
        self._plan = None        # the compiled plan (weakly): what its mode did, read when asked
        self.fallback = None     # why the graph runs on PyTorch, if it does
        self.split = split       # why Dynamo handed it over as a piece of a larger graph (dynamo.split_reason)
        self.warm = False        # compiled from an entry of the warm start ([Note: the warm start])

    @property
    def collectives(self):
        """The torch calls that are PyTorch's functional collectives (all_reduce, all_gather, wait_tensor...),
        by op: run in graph order, as PyTorch runs them."""
        return {op: n for op, n in self.torch_calls.items() if op.split(".")[0] in COLLECTIVE_NAMESPACES}

    @classmethod
    def compiled(cls, kind, gm, compiled, seconds, split=None):
        r = cls(kind, _aten_ops(gm), seconds, split)
        r.lowered = dict(compiled.lowered_ops)
        r.torch_calls = dict(compiled.torch_call_ops)
        r.failed_lowerings = {op: list(reasons) for op, reasons in getattr(compiled, "failed_lowerings", {}).items()}
        info = compiled.compiled.info
        r._ember = {k: info[k] for k in ("op_count", "ops", "steps", "buffers", "kernels", "kernels_compiled",
                                         "kernels_from_disk", "kernel_compile_ms", "interpreter_ops")}
        r._plan = weakref.ref(compiled.compiled)
        r._callable = weakref.ref(compiled)
        return r

    @property
    def steady_call(self):
        """Whether calls make the outputs before the plan runs ([Note: the steady call]), as
        decided by the first call; None before it, or once the graph is gone."""
        fx = self._callable() if getattr(self, "_callable", None) else None
        steady = getattr(fx, "steady", None)
        return None if steady is None else bool(steady)

    # What a mode does may happen after the compile: max-autotune tunes at the first call.
    _LIVE = ("mode", "static_plan", "held_bytes", "held_limit_bytes", "autotuned", "autotune_s", "autotune_timed",
             "tuning")

    @property
    def ember(self):
        """The plan's figures, with what its mode did so far (while the plan lives)."""
        plan = self._plan() if self._plan else None
        if plan is None:
            return self._ember
        info = plan.info
        self._ember.update({k: info[k] for k in self._LIVE})
        self._ember["mode_summary"] = plan.mode_summary
        return self._ember

    @classmethod
    def fallback(cls, kind, gm, reason, seconds, split=None):
        r = cls(kind, _aten_ops(gm), seconds, split)
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
                "failed_lowerings": self.failed_lowerings, "collectives": self.collectives,
                "ember": self.ember, "fallback": self.fallback, "split": self.split, "warm": self.warm}


def _compilation_metrics():
    try:
        from torch._dynamo.utils import get_compilation_metrics
        return list(get_compilation_metrics())
    except Exception:  # an older or newer PyTorch without them: nothing to add
        return []


class Report:
    def __init__(self):
        self._lock = threading.Lock()
        self.graphs = []
        self.breaks = []      # Dynamo's graph breaks: {"reason", "location", "source"}
        self.recompiles = []  # {"guard", "location", "function"}
        self.warm_recompiles = []  # compiles after a warm entry's guards refused a call (_warm.py)
        self.tracer = None    # ember's own tracer, when a function ran on ember tensors
        self.notes = []       # what the user should know beyond the graphs (untraced_modules)
        self.warm = []        # the warm start's first calls: {"key", "outcome", "seconds"} (_warm.py)
        self.start_recompiles_here()

    def start_recompiles_here(self):
        """Counts only Dynamo's compilations from now on: its metrics are process-wide, and
        outlive torch._dynamo.reset(), so they held other functions' recompiles. By identity:
        they are a bounded deque, whose length stops growing."""
        self._metrics_before = _compilation_metrics()  # held, so that no id is reused
        self._ids_before = {id(m) for m in self._metrics_before}

    def add_graph(self, record):
        with self._lock:
            self.graphs.append(record)

    def note_break(self, gm):
        """The graph break that ended Dynamo's graph `gm`, if one did: Dynamo hands each graph
        to the backend with why it was cut (`compile_subgraph_reason`, the same record its own
        explain reads), so every compile's report names its breaks, not only explain's."""
        why = getattr(gm, "compile_subgraph_reason", None)
        if why is None or not getattr(why, "graph_break", False):
            return
        frame = why.user_stack[-1] if why.user_stack else None
        found = {
            "reason": why.reason.splitlines()[0] if why.reason else "",
            "location": f"{frame.filename}:{frame.lineno}" if frame else "?",
            "source": (frame.line or "").strip() if frame else "",
            "hint": hint_for(why.reason or ""),
        }
        with self._lock:
            if not any(b["location"] == found["location"] and b["reason"] == found["reason"] for b in self.breaks):
                self.breaks.append(found)  # a recompile breaks at the same place again

    def collect_recompiles(self, code=None):
        """Dynamo's recompiles (the failing guard) from its compilation metrics: of the frame of
        `code` (a function's code object), or of every frame."""
        found = []
        for m in _compilation_metrics():
            if id(m) in self._ids_before:
                continue
            reason = getattr(m, "recompile_reason", None)
            if not reason:
                continue
            if code is not None and (m.co_name != code.co_name or m.co_filename != code.co_filename
                                     or m.co_firstlineno != code.co_firstlineno):
                continue
            found.append({"guard": reason.strip(), "location": f"{m.co_filename}:{m.co_firstlineno}",
                          "function": m.co_name})
        with self._lock:
            self.recompiles = self.warm_recompiles + found

    @property
    def graph_count(self):
        return sum(1 for g in self.graphs if g.fallback is None)

    def torch_call_ops(self):
        total = collections.Counter()
        for g in self.graphs:
            total.update(g.torch_calls)
        return dict(total)

    def failed_lowering_count(self):
        """How many nodes ran as torch calls because their lowering failed (a bug, not a decline)."""
        return sum(len(reasons) for g in self.graphs for reasons in g.failed_lowerings.values())

    def as_dict(self):
        out = {"graphs": [g.as_dict() for g in self.graphs], "graph_breaks": self.breaks,
               "recompiles": self.recompiles, "torch_calls": self.torch_call_ops(), "notes": self.notes,
               "failed_lowerings": self.failed_lowering_count(), "warm_start": self.warm}
        if self.tracer is not None:
            out["ember_tensors"] = json.loads(self.tracer.report_json())
        return out

    def json(self):
        return json.dumps(self.as_dict(), indent=2, sort_keys=True)

    def text(self):
        lines = [f"ember: {self.graph_count} graphs compiled, {len(self.breaks)} graph breaks, "
                 f"{len(self.recompiles)} recompiles, {self.failed_lowering_count()} failed lowerings"]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"warm start (entry {w['key']}): {w['outcome']} in {w['seconds'] * 1e3:.0f} ms" for w in self.warm]
        pieces = sum(1 for g in self.graphs if g.split and g.kind in ("forward", "inference", "captured"))
        if pieces:
            lines.append(f"DDP's optimizer split the model's graphs into {pieces} pieces at gradient-bucket boundaries; "
                         f"ember compiles each piece (listed below with its backward)")
        for i, g in enumerate(self.graphs):
            head = f"graph {i} ({g.kind}): {sum(g.aten_ops.values())} ATen ops"
            if g.fallback:
                lines.append(f"{head}; runs on PyTorch: {g.fallback}")
                if g.split:
                    lines.append(f"  {g.split}")
                continue
            e = g.ember
            lines.append(f"{head}, {g.lowered_share:.0%} lowered; {e['kernels']} generated kernels "
                         f"({e['kernels_compiled']} compiled now, {e['kernels_from_disk']} from the disk cache); "
                         f"compiled in {g.compile_ms:.1f} ms" + (" (from the warm start's entry)" if g.warm else ""))
            if g.split:
                lines.append(f"  {g.split}")
            collectives = g.collectives
            if collectives:
                calls = ", ".join(f"{op} x{n}" for op, n in sorted(collectives.items()))
                lines.append(f"  collectives (PyTorch's, run as torch calls in graph order): {calls}")
            others = {op: n for op, n in g.torch_calls.items() if op not in collectives}
            if others:
                calls = ", ".join(f"{op} x{n}" for op, n in sorted(others.items()))
                lines.append(f"  torch calls (ATen ops ember does not lower yet): {calls}")
            for op, reasons in sorted(g.failed_lowerings.items()):
                lines.append(f"  failed lowering (a bug in ember; ran as a torch call): {op} x{len(reasons)}: "
                             f"{reasons[0]}")
            if e["interpreter_ops"]:
                lines.append(f"  on the interpreter: {', '.join(e['interpreter_ops'])}")
            lines += ["  " + line for line in e.get("mode_summary", "").splitlines()]
        for b in self.breaks:
            lines.append(f"graph break at {b['location']}: {b['reason']}")
            if b.get("source"):
                lines.append(f"    {b['source']}")
            if b.get("hint"):
                lines.append(f"    hint: {b['hint']}")
        for r in self.recompiles:
            lines.append(f"recompile of {r.get('function', '?')} ({r.get('location', '?')}): {r['guard']}")
        if self.tracer is not None:
            lines.append("over ember tensors (ember's tracer):")
            lines.append(self.tracer.report_text())
        return "\n".join(lines)

    def __str__(self):
        return self.text()

    def html(self):
        """A page with each graph break next to the user's source lines and its hint, then the
        graphs ember compiled."""
        esc = html.escape
        parts = ["<!doctype html><meta charset='utf-8'><title>ember report</title>",
                 "<style>body{font-family:sans-serif;max-width:60em}pre{background:#f4f4f4;padding:.5em}"
                 ".hit{background:#ffe08a}.hint{color:#225}</style>",
                 f"<h1>ember report</h1><p>{esc(self.text().splitlines()[0])}</p>"]
        if self.breaks:
            parts.append("<h2>Graph breaks</h2>")
        for b in self.breaks:
            parts.append(f"<h3>{esc(b['location'])}</h3><p>{esc(b['reason'])}</p>")
            parts.append(_source_block(b["location"]))
            parts.append(f"<p class='hint'>Fix: {esc(b.get('hint', ''))}</p>")
        parts.append("<h2>Graphs</h2><pre>" + esc("\n".join(self.text().splitlines()[1:])) + "</pre>")
        return "\n".join(parts)


def _source_block(location, context=2):
    """The user's lines around file:line, the line itself marked."""
    path, _, line = location.rpartition(":")
    if not line.isdigit():
        return ""
    n = int(line)
    rows = []
    for k in range(max(1, n - context), n + context + 1):
        text = linecache.getline(path, k).rstrip("\n")
        cls = " class='hit'" if k == n else ""
        rows.append(f"<span{cls}>{k:5d}  {html.escape(text)}</span>")
    return "<pre>" + "\n".join(rows) + "</pre>"


GLOBAL = Report()
