"""The warm start: a compiled module's first call in a new process reuses the traced forward that
an earlier process stored, instead of tracing it again.

[Note: the warm start]
Dynamo's bytecode tracing and AOTAutograd are most of a first call (GPT-2: 1.0 s and 0.4 s of
1.7 s), and each new process paid them again although ember's own compile of the graphs comes
from its kernel cache in milliseconds. PyTorch can save a whole traced function:
`torch.compile(fn, fullgraph=True).aot_compile(inputs)` gives an AOTCompiledFunction (Dynamo's
transformed bytecode, its guards, and the backend's result) that serializes when AOTAutograd's
compilers return OutputCode objects. ember's is WarmGraph: the ATen graph travels, pickled, and
the loading process compiles it again with ember (its kernels from the disk cache).

So the first call of a compiled module looks in the disk cache (kind "warm") under a key made
of what is known before tracing: the class, the settings, the versions, the grad mode and the
inputs' structure, dtypes and sizes. A hit is loaded and serves when its guards admit this call
and the source of every function it traced is unchanged. A miss traces the call as one graph
through aot_compile, stores it, and serves. Anything that route cannot do (a graph break, a
guard or object that does not serialize) sends the module the ordinary way (torch.compile's
lazy Dynamo) and is stored as a negative entry, so later processes do not try again. Calls that
the first entry's guards refuse (new sizes, the training flag flipped) go the ordinary way too,
where Dynamo's automatic dynamic sizes apply: only a module's first kind of call is warm. Dynamo
makes a size dynamic once it has compiled the frame at another one, and a loaded entry's sizes are
not in its records: a warm process compiled the second size static and the third dynamic, one
compile more than the cold process. So the first ordinary call marks the dims whose sizes differ
from the entry's as dynamic (maybe_mark_dynamic, taken off the caller's tensors afterwards).

Guards that cannot be saved are left out, as PyTorch's own aot_compile does: object identities
(ID_MATCH and its kin) and the contents of the forward's closure (a decorator's); the key and
the source check stand for them. EMBER_WARM_START=0 turns the warm start off.
"""
import contextlib
import functools
import hashlib
import importlib
import os
import pickle
import sys
import threading
import time
import types
import uuid

import torch
import torch._inductor.config
from torch._inductor.output_code import OutputCode

from . import _C, _report
from ._symbols import Unsupported

KIND = "warm"
FORMAT = 1
_NEGATIVE = b"ember-warm-negative\n"


def enabled():
    return os.environ.get("EMBER_WARM_START", "1") != "0"


def log(message):
    if _C.log_enabled("compile"):
        _C.log("compile", message)


# --- one graph, savable ----------------------------------------------------------------------

_loading = threading.local()  # the report of the module whose entry is being loaded


def _has_data_dependent_sizes(gm):
    """Whether a value of the graph has a size or scalar known only from the data (unbacked)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    return any(free_unbacked_symbols(node.meta.get("val")) for node in gm.graph.nodes)


class WarmGraph(OutputCode):
    """One graph of AOTAutograd's result as ember compiled it, in a form AOTAutograd can save:
    the ATen graph is pickled (GraphPickler) and compiled again where it is loaded."""

    def __init__(self, gm, kind, mode, options, visible_outputs, piece, report):
        super().__init__()
        if _has_data_dependent_sizes(gm):
            # aot_compile captures what the ordinary route breaks the graph at (a boolean mask's
            # index, nonzero): the whole graph then ran on PyTorch, where the ordinary route
            # compiles the pieces around the break. The trace fails, and the module goes that way.
            raise Unsupported("a size that depends on the data (the ordinary route breaks the graph there)")
        self._boxed_call = True
        self.kind, self.mode, self.options = kind, mode, options
        self.visible_outputs, self.piece = visible_outputs, piece
        self.gm, self.blob = gm, None
        self.run = self._compile(report)

    def _compile(self, report):
        from .dynamo import _compile_graph
        return _compile_graph(self.gm, self.kind, self.mode, self.options, report, self.visible_outputs, self.piece)

    def __call__(self, inputs):
        return self.run(inputs)

    def prepare_for_serialization(self):
        # AOTAutograd calls this on a shallow copy: the live graph keeps running.
        from torch.fx._graph_pickler import GraphPickler, Options
        for node in self.gm.graph.nodes:  # module stacks hold classes and modules; not needed to run
            for key in ("nn_module_stack", "source_fn_stack", "stack_trace", "from_node"):
                node.meta.pop(key, None)
        self.blob = GraphPickler.dumps(self.gm, Options(ops_filter=None))
        self.gm = self.run = None

    def post_compile(self, example_inputs, constants, graph_kwargs):
        if self.run is not None:
            return
        from torch.fx._graph_pickler import GraphPickler
        context = torch._guards.TracingContext.try_get()
        self.gm = GraphPickler.loads(self.blob, context.fake_mode)
        # The unpickled module has its graph but no generated forward, which a graph that ember
        # hands back to PyTorch runs (it raised NotImplementedError at the first call).
        self.gm.recompile()
        report = getattr(_loading, "report", None) or _report.GLOBAL
        before = len(report.graphs)
        self.run = self._compile(report)
        for record in report.graphs[before:]:
            record.warm = True

    def set_triton_bundle(self, triton_bundle):
        pass


# --- the key ---------------------------------------------------------------------------------

@functools.cache
def _ember_digest():
    """ember's Python sources: they decide the ATen graph (decompositions) and its translation."""
    h = hashlib.sha256(_C.__file__.encode())
    folder = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as f:
                h.update(name.encode() + f.read())
    return h.hexdigest()


def _describe(value, depth=0):
    """The structure, dtypes and sizes of a call's argument, as text for the key."""
    if isinstance(value, torch.Tensor):
        return (f"T({value.dtype},{tuple(value.shape)},{value.stride() if value.layout == torch.strided else ''},"
                f"{value.requires_grad},{value.device},{type(value).__name__})")
    if value is None or isinstance(value, (bool, int, float, str)):
        return f"{type(value).__name__}:{value!r}"
    if depth < 4 and isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[" + ",".join(_describe(v, depth + 1) for v in value) + "]"
    if depth < 4 and isinstance(value, dict):
        return "dict{" + ",".join(f"{k!r}:{_describe(v, depth + 1)}" for k, v in value.items()) + "}"
    return f"{type(value).__module__}.{type(value).__qualname__}"


def key_of(cls, settings, module, args, kwargs):
    options = sorted((k, repr(v)) for k, v in settings["options"].items())
    parts = [f"ember-warm-{FORMAT}", _ember_digest(), torch.__version__, sys.version,
             repr((settings["mode"], options, settings["fullgraph"], settings["dynamic"])),
             f"{cls.__module__}.{cls.__qualname__}", repr((torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
                                                           module.training)),
             _describe(args), _describe(kwargs)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


# --- what is saved with an entry -------------------------------------------------------------

def _closure_data(fn):
    """The forward's closure (a decorator's function): given again when loading, not pickled."""
    return {f"closure{i}": cell.cell_contents for i, cell in enumerate(fn.__closure__ or ())}


def _keep_guard(freevars):
    """Dynamo's guard filter: every guard but those that cannot be saved (an object's identity
    and its kin) and those on the forward's closure (`freevars`: not pickled, given again)."""
    from torch._dynamo.guards import CheckFunctionManager
    unsavable = CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES

    def keep(entry):
        root = entry.name.split(".")[0].split("[")[0]
        return not (root in freevars or entry.guard_type in unsavable
                    or any(t in unsavable for t in entry.derived_guard_types or ()))

    return lambda entries: [keep(e) for e in entries]


def _serialize(entry, forward, files):
    """The entry's bytes: the artifact; the modules its bytecode names by an object id
    (`___module_collections_<id>_c0`), which a new process must be given by name; and a digest
    of each source file it traced."""
    env = entry._artifacts.runtime_env
    scope = entry.fn.__globals__
    modules = {ref: scope[ref].__name__ for ref in env.external_refs if isinstance(scope.get(ref), types.ModuleType)}
    artifact = entry.serialize(entry, _closure_data(forward))
    return pickle.dumps({"format": FORMAT, "modules": modules, "sources": {f: _file_digest(f) for f in files},
                         "artifact": artifact.serialized_data})


def _file_digest(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _changed_sources(sources):
    """The traced source files that are not as they were when the entry was stored."""
    return [path for path, digest in sources.items() if digest is None or _file_digest(path) != digest]


_lean_lock = threading.Lock()


@contextlib.contextmanager
def _lean_aot_compile(files):
    """aot_compile without three things the warm start does not use, which took most of the
    difference between a cold first call through it and one through Dynamo's ordinary route
    (GPT-2: about 2.5 s of 3): AOTAutograd's cache key (it imports Inductor and hashes its
    configuration; ember's entry has its own key), AOTAutograd's copy of the entry in Inductor's
    cache folder, and the text of each traced function (inspect per function, 576 for GPT-2:
    ember keeps a digest of each traced file, in `files`, instead). Nor does it keep AOTAutograd's
    record of the entry for Dynamo's precompile packages."""
    from torch._dynamo import package
    from torch._functorch._aot_autograd import autograd_cache
    from torch._dynamo.precompile_context import PrecompileContext
    cache = autograd_cache.AOTAutogradCache
    recorded = dict(PrecompileContext._backend_artifacts_by_key)
    with _lean_lock:
        saved = (autograd_cache.autograd_cache_key, vars(cache)["_write_to_local_cache"], package.SourceInfo.add_code)
        autograd_cache.autograd_cache_key = lambda *args, **kwargs: (f"ember-warm-{uuid.uuid4().hex}", [])
        cache._write_to_local_cache = staticmethod(lambda key, content: None)
        # Code made by exec ("<string>": a dataclass's __init__) has no file to check.
        package.SourceInfo.add_code = lambda info, code: code.co_filename.startswith("<") or files.add(code.co_filename)
        try:
            yield
        finally:
            autograd_cache.autograd_cache_key, cache._write_to_local_cache, package.SourceInfo.add_code = saved
            # AOTAutograd also records the entry for Dynamo's precompile packages, process-wide
            # and never dropped: ember keeps its own copy.
            PrecompileContext._backend_artifacts_by_key = recorded


# --- a compiled module's forward -------------------------------------------------------------

def _top_level_tensors(args, kwargs):
    """The tensors among a call's arguments, by position or name."""
    found = [(i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    return found + [(name, a) for name, a in kwargs.items() if isinstance(a, torch.Tensor)]


class WarmStart:
    """The forward of a compiled module: its warm entry where the entry's guards admit the call,
    else the ordinary compiled forward (`ordinary`, torch.compile's)."""

    def __init__(self, cls, ordinary, settings, report):
        self.cls, self.ordinary, self.settings, self.report = cls, ordinary, settings, report
        self.entries = []     # AOTCompiledFunction, each with its guards
        self.tried = False    # the warm route has had its one try; misses go the ordinary way
        self.lock = threading.Lock()
        self.view = None
        self.entry_shapes = None  # the first entry's input sizes, by argument, until an ordinary call

    def __call__(self, module, args, kwargs):
        module = self._view(module)
        entry = self._admitting(module, args, kwargs)
        if entry is None and not self.tried:
            with self.lock:  # one first call at a time; the others then find its entry
                if not self.tried:
                    found = self._first(module, args, kwargs)
                    if found is not None:
                        self.entries.append(found)
                        self.entry_shapes = {key: tuple(t.shape) for key, t in _top_level_tensors(args, kwargs)}
                    self.tried = True
            entry = self._admitting(module, args, kwargs)
        if entry is not None:
            return entry.fn(module, *args, **kwargs)
        with self._changed_sizes_dynamic(args, kwargs):
            return self.ordinary(module, *args, **kwargs)

    @contextlib.contextmanager
    def _changed_sizes_dynamic(self, args, kwargs):
        """Until an ordinary call has compiled at sizes other than the entry's, the dims of the
        inputs whose sizes differ from the entry's are marked dynamic for the call."""
        marks = []
        if self.entry_shapes is not None and self.settings["dynamic"] is None:
            for key, t in _top_level_tensors(args, kwargs):
                first = self.entry_shapes.get(key)
                if first is None or len(first) != t.dim():
                    continue
                changed = [d for d, (a, b) in enumerate(zip(first, t.shape)) if a != b]
                if changed:
                    marks.append((t, getattr(t, "_dynamo_weak_dynamic_indices", None)))
                    torch._dynamo.maybe_mark_dynamic(t, changed)
        if marks:
            self.entry_shapes = None  # once: Dynamo's own records take over from here
        try:
            yield
        finally:
            for t, before in marks:  # the caller's tensors as they were
                if before is None:
                    for name in ("_dynamo_weak_dynamic_indices", "_has_dynamo_dim_marking"):
                        if hasattr(t, name):
                            delattr(t, name)
                else:
                    t._dynamo_weak_dynamic_indices = before

    def _admitting(self, module, args, kwargs):
        for entry in self.entries:
            if entry.guard_check(module, *args, **kwargs):
                return entry
        return None

    def _view(self, module):
        """The module as an instance of its own class (sharing its __dict__), as the entry is
        traced, saved and called: the compiled module's class is made per compile, and pickles
        as a new compile (_compile.py), which the saved guards must not hold."""
        view = self.view
        if view is None or view.__dict__ is not module.__dict__:
            view = self.view = object.__new__(self.cls)
            view.__dict__ = module.__dict__
        return view

    def _first(self, module, args, kwargs):
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return None  # DDP's optimizer splits graphs at bucket boundaries on the ordinary route
        if torch._inductor.config.force_disable_caches:
            return None  # aot_compile refuses to run
        start = time.perf_counter()
        if "<locals>" in self.cls.__qualname__:
            # Saved guards name the module's class, which pickle finds by name: aot_compile
            # traced a class made inside a function (a test's, a notebook cell's) for about
            # 0.3 s before its TypeError, on every first call.
            self._note("", "not used: a class defined inside a function cannot be saved", start)
            return None
        key = key_of(self.cls, self.settings, module, args, kwargs)
        payload = _C.cache_load(KIND, key)
        if payload is not None and payload.startswith(_NEGATIVE):
            self._note(key, "not used: " + payload[len(_NEGATIVE):].decode(errors="replace"), start)
            return None
        if payload is not None:
            entry, why = self._load(payload, module, args, kwargs)
            if entry is not None:
                self._note(key, "loaded", start)
                return entry
            log(f"warm start: entry {key[:12]} of {self.cls.__qualname__} not used ({why}); tracing anew")
        return self._trace(key, module, args, kwargs, start)

    def _load(self, payload, module, args, kwargs):
        from torch._dynamo.aot_compile import AOTCompiledFunction
        forward = self.cls.forward
        scratch = _report.Report()
        try:
            stored = pickle.loads(payload)
            if stored.get("format") != FORMAT:
                return None, "another format"
            scope = dict(forward.__globals__)
            scope.update({ref: importlib.import_module(name) for ref, name in stored["modules"].items()})
            _loading.report = scratch
            try:
                entry = AOTCompiledFunction.deserialize(stored["artifact"], f_globals=scope,
                                                        external_closure_data=_closure_data(forward))
            finally:
                _loading.report = None
        except Exception as e:  # a stale or damaged entry is a miss
            return None, f"{type(e).__name__}: {e}"
        changed = _changed_sources(stored["sources"])
        if changed:
            return None, "changed source: " + ", ".join(changed[:3])
        if not entry.guard_check(module, *args, **kwargs):
            return None, "its guards refuse this call"
        self._adopt(scratch)
        return entry, None

    def _trace(self, key, module, args, kwargs, start):
        from .dynamo import make_backend, short_reason
        s = self.settings
        scratch = _report.Report()  # the graphs join the module's report only if the entry serves
        backend = make_backend(s["mode"], s["options"], scratch, savable=True)
        forward = self.cls.forward
        files = set()
        try:
            compiled = torch.compile(forward, backend=backend, fullgraph=True, dynamic=s["dynamic"],
                                     options={"guard_filter_fn": _keep_guard(forward.__code__.co_freevars)})
            with _lean_aot_compile(files):
                entry = compiled.aot_compile(((module, *args), kwargs))
        except Exception as e:
            reason = short_reason(e)
            _C.cache_store(KIND, key, _NEGATIVE + reason.encode())
            self._note(key, "not used: " + reason, start)
            return None
        try:
            _C.cache_store(KIND, key, _serialize(entry, forward, files))
            outcome = "traced and stored"
        except Exception as e:  # it still serves this process
            outcome = f"traced; not stored ({type(e).__name__}: {e})"
        self._adopt(scratch)
        self._note(key, outcome, start)
        return entry

    def _adopt(self, scratch):
        """The graphs of an entry that serves join the module's report."""
        for record in scratch.graphs:
            self.report.add_graph(record)

    def _note(self, key, outcome, start):
        seconds = time.perf_counter() - start
        self.report.warm.append({"key": key[:12], "outcome": outcome, "seconds": seconds})
        log(f"warm start of {self.cls.__qualname__} (entry {key[:12]}): {outcome} in {seconds * 1e3:.0f} ms")
