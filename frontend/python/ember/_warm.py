"""The warm start: a compiled module's or function's first call in a new process reuses what an
earlier process traced and stored, instead of tracing it again.

[Note: the warm start]
Dynamo's bytecode tracing and AOTAutograd are most of a first call (GPT-2: 1.0 s and 0.4 s of
1.7 s), and each new process paid them again although ember's own compile of the graphs comes
from its kernel cache in milliseconds. PyTorch can save a whole traced function:
`torch.compile(fn, fullgraph=True).aot_compile(inputs)` gives an AOTCompiledFunction (Dynamo's
transformed bytecode, its guards, and the backend's result) that serializes when AOTAutograd's
compilers return OutputCode objects. ember's is WarmGraph: the ATen graph travels, pickled, and
the loading process compiles it again with ember (its kernels from the disk cache).

So the first call of a compiled module (or function) looks in the disk cache (kind "warm") under
a key made of what is known before tracing: the class and its forward's code (a function's name and code), the
settings, the versions, the grad mode and the inputs' structure, dtypes and sizes. A hit is loaded and serves when its guards admit this call
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

Guards that cannot be saved (object identities: ID_MATCH and its kin) are kept by name
([Note: identities by name], _warm_guards.py). The traced function's closure is given again as
its live cells, and it runs over its module's live globals ([Note: live globals]): what the
program rebinds after the first call is read anew and guarded. EMBER_WARM_START=0 turns the
warm start off.
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

from . import _C, _express, _report
from . import _warm_guards as _guards
from ._symbols import Unsupported

KIND = "warm"
FORMAT = 6
_NEGATIVE = b"ember-warm-negative\n"


def enabled():
    return os.environ.get("EMBER_WARM_START", "1") != "0"


def log(message):
    if _C.log_enabled("compile"):
        _C.log("compile", message)


# --- one graph, savable ----------------------------------------------------------------------

_loading = threading.local()  # the report of the module whose entry is being loaded, and its graphs


def _note_graph(graph):
    """A WarmGraph made or loaded for the entry being traced or loaded on this thread."""
    graphs = getattr(_loading, "graphs", None)
    if graphs is not None:
        graphs.append(graph)


def _bind_express(entry, traced, graphs):
    """The entry's graph called express where its plan allows ([Note: the express call]): an
    entry is one graph (aot_compile traces the whole function), under a name unique to it."""
    if len(graphs) != 1 or graphs[0].express is None or graphs[0].run is None:
        return
    live, own = traced.__globals__, entry._artifacts.backend_id
    if own in live and not isinstance(live[own], _express.Express):
        live[own] = _express.Express(live[own], graphs[0].run, graphs[0].express)


def _has_data_dependent_sizes(gm):
    """Whether a value of the graph has a size or scalar known only from the data (unbacked)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    return any(free_unbacked_symbols(node.meta.get("val")) for node in gm.graph.nodes)


class WarmGraph(OutputCode):
    """One graph of AOTAutograd's result as ember compiled it, in a form AOTAutograd can save:
    the ATen graph is pickled (GraphPickler) and compiled again where it is loaded."""

    def __init__(self, gm, kind, mode, options, visible_outputs, piece, report, express=None):
        super().__init__()
        if _has_data_dependent_sizes(gm):
            # aot_compile captures what the ordinary route breaks the graph at (a boolean mask's
            # index, nonzero): the whole graph then ran on PyTorch, where the ordinary route
            # compiles the pieces around the break. The trace fails, and the module goes that way.
            raise Unsupported("a size that depends on the data (the ordinary route breaks the graph there)")
        self._boxed_call = True
        context = torch._guards.TracingContext.try_get()
        if kind == "forward" and context is not None and context.fw_metadata is not None:
            # aot_compile lowers the backward at once, with buffers donated to it, and such a
            # backward refuses create_graph=True (a gradient penalty's first derivative): the
            # ordinary route lowers it lazily and drops the donation then. ember's backward
            # takes no donated buffer.
            context.fw_metadata.bw_donated_idxs = []
        self.kind, self.mode, self.options = kind, mode, options
        self.visible_outputs, self.piece = visible_outputs, piece
        self.gm, self.blob = gm, None
        self.express = express  # _express.plan_of's, kept with the entry
        self.run = self._compile(report)
        _note_graph(self)

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
        _note_graph(self)

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
    if isinstance(value, torch.Tensor) and value.is_nested:
        return f"T({value.dtype},nested,{value.dim()},{value.requires_grad},{value.device},{type(value).__name__})"
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


def identity_of(cls, fn):
    """What names the traced code in the key: a module's class, or a function's name, code and
    default arguments."""
    if cls is not None:  # and its forward's code: a forward patched onto the class is another
        return f"class {cls.__module__}.{cls.__qualname__} {_guards.code_digest(fn.__code__)}"
    return (f"function {fn.__module__}.{fn.__qualname__} {_guards.code_digest(fn.__code__)} "
            f"{_describe(fn.__defaults__)} {_describe(fn.__kwdefaults__)}")


def structure_of(modules, objects=()):
    """[Note: what an entry is keyed by, beyond its code]
    What Dynamo inlines without a guard that a new process could check: the methods of each
    submodule's class (patched onto the class before compile, `Block.helper = fast_helper`,
    they are inlined with no guard on them), those of the plain objects a module holds or a
    function names, and the modules' hooks, which Dynamo does not guard
    (`skip_nnmodule_hook_guards`: a hook registered after the first call is not seen, in
    torch.compile as in ember). A new process that registered a hook before compiling traced
    anew under torch.compile, but loaded the entry stored without it. All go into the key, as
    text that is the same in every process: each class's functions by code digest, each
    non-empty hook dict's hooks by stable name, and the global module hooks."""
    from torch.nn.modules import module as nn_module
    parts, classes = [], dict.fromkeys(type(o) for o in objects if _is_plain_object(o))
    for module in modules:
        for path, sub in module.named_modules(remove_duplicate=False):
            classes.setdefault(type(sub), None)
            for name in _HOOK_DICTS:
                hooks = sub.__dict__.get(name)
                if hooks:
                    parts.append(f"{path}.{name}: " + ", ".join(_guards.stable_name(h) for h in hooks.values()))
            for value in vars(sub).values():  # a helper object whose methods the module calls
                if _is_plain_object(value):
                    classes.setdefault(type(value), None)
    for name in _GLOBAL_HOOK_DICTS:
        hooks = getattr(nn_module, name, None)
        if hooks:
            parts.append(f"global {name}: " + ", ".join(_guards.stable_name(h) for h in hooks.values()))
    for cls in classes:
        for klass in cls.__mro__:
            if klass is torch.nn.Module or klass is object:
                continue  # (its methods run outside the graph, or as Dynamo's own handling)
            functions = sorted((name, _guards.code_digest(f.__code__)) for name, f in vars(klass).items()
                               if isinstance(f, types.FunctionType))
            parts.append(f"class {klass.__module__}.{klass.__qualname__}: {functions}")
    return "\n".join(parts)


_NOT_PLAIN = (torch.nn.Module, torch.Tensor, dict, list, tuple, set, frozenset, str, bytes, int, float, bool,
              complex, type(None), types.FunctionType, types.BuiltinFunctionType, types.MethodType, type,
              types.ModuleType)


def _is_plain_object(value):
    """An instance of a class of the program's (or a library's) whose methods a trace may inline."""
    return not isinstance(value, _NOT_PLAIN) and not callable(getattr(value, "__torch_function__", None))


def structure_of_function(fn):
    """structure_of for what a function names by its own globals and closure (a function that
    calls a global model, or a global helper object's method)."""
    cells = [c.cell_contents for c in fn.__closure__ or () if _has_contents(c)]
    named = [fn.__globals__.get(name) for name in fn.__code__.co_names] + cells
    return structure_of([m for m in named if isinstance(m, torch.nn.Module)], named)


def _has_contents(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
               "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
_GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                      "_global_backward_pre_hooks", "_global_forward_hooks_with_kwargs",
                      "_global_forward_hooks_always_called")


def key_of(identity, settings, training, args, kwargs):
    options = sorted((k, repr(v)) for k, v in settings["options"].items())
    parts = [f"ember-warm-{FORMAT}", _ember_digest(), torch.__version__, sys.version,
             repr((settings["mode"], options, settings["fullgraph"], settings["dynamic"])), identity,
             repr((torch.is_grad_enabled(), torch.is_inference_mode_enabled(), training)),
             _describe(args), _describe(kwargs)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


# --- what is saved with an entry -------------------------------------------------------------

def _closure_data(fn):
    """The traced function's closure, given again when loading as its live cells (not pickled):
    the entry then reads, and its guards check, what the cells hold at each call."""
    return {f"closure{i}": cell for i, cell in enumerate(fn.__closure__ or ())}


def _global_modules(names, live):
    """The nn.Modules that the traced function reaches through its globals `names`, and their
    submodules, by name, as external data of the artifact: AOTAutograd's pickler refuses a
    module, and a new process gives its own (its weights are guarded as the entry was traced).
    None where a name no longer holds a module."""
    data = {}
    for name in names:
        module = live.get(name)
        if not isinstance(module, torch.nn.Module):
            return None
        for path, sub in module.named_modules():
            data[f"global {name}.{path}"] = sub
    return data


def _serialize(entry, forward, files, identities, values):
    """The entry's bytes: the artifact; the modules its bytecode names by an object id
    (`___module_collections_<id>_c0`) or its guards start from, which a new process must be
    given by name; the globals that hold nn.Modules (_global_modules); and a digest of each
    source file it traced."""
    env = entry._artifacts.runtime_env
    scope = entry.fn.__globals__
    refs = {*env.external_refs, *_guards.globals_named_by(source for source, _, _ in identities),
            *_guards.globals_named_by(read for read, _ in values[0])}
    modules = {ref: scope[ref].__name__ for ref in refs if isinstance(scope.get(ref), types.ModuleType)}
    module_globals = sorted(name for name, value in env.used_globals.items() if isinstance(value, torch.nn.Module))
    external = _closure_data(forward) | _global_modules(module_globals, forward.__globals__)
    artifact = entry.serialize(entry, external)
    return pickle.dumps({"format": FORMAT, "modules": modules, "module_globals": module_globals,
                         "sources": {f: _file_digest(f) for f in files},
                         "identities": identities, "values": values, "artifact": artifact.serialized_data})


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


# --- a compiled module's forward, or a compiled function -------------------------------------

# What torch._dynamo.mark_dynamic and its kin leave on a tensor.
_DYNAMIC_MARKS = ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices", "_dynamo_unbacked_indices",
                  "_dynamo_strict_unbacked_indices")


def _top_level_tensors(args, kwargs):
    """The tensors among a call's arguments, by position or name."""
    found = [(i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    return found + [(name, a) for name, a in kwargs.items() if isinstance(a, torch.Tensor)]


class WarmStart:
    """The calls of a compiled function, or of a compiled module's forward (`cls` given; the
    module comes first among the arguments): its warm entry where the entry's guards admit the
    call, else the ordinary compiled callable (`ordinary`, torch.compile's)."""

    def __init__(self, traced, ordinary, settings, report, cls=None):
        self.traced, self.cls = traced, cls  # the function traced: the compiled one, or cls.forward
        self.ordinary, self.settings, self.report = ordinary, settings, report
        self.name = (cls or traced).__qualname__
        self.entry = None     # the AOTCompiledFunction that serves, once found
        self.admits = None    # its guard check (_guards.guard_check_of), set after the entry
        self.tried = False    # the warm route has had its one try; misses go the ordinary way
        self.ordinary_compiled = False
        self.negative = None  # (key, payload): the warm route failed where the ordinary one may serve
        self.lock = threading.Lock()
        self.view = None
        self.entry_shapes = None  # the entry's input sizes, by argument, until an ordinary call
        self.pinned_sizes = None  # ((argument, size), ...) that the entry's guards pin, or None

    def __call__(self, *args, **kwargs):
        if torch.compiler.is_compiling():  # inside another compiled region Dynamo inlines the ordinary one
            return self.ordinary(*args, **kwargs)
        if self.cls is not None:
            args = (self._view(args[0]), *args[1:])
        if self.admits is not None:  # the steady call
            for key, size in self.pinned_sizes or ():  # inline: a frame here is a steady call's cost
                t = kwargs.get(key) if isinstance(key, str) else args[key] if key < len(args) else None
                if isinstance(t, torch.Tensor) and t.shape != size:
                    break  # the entry's guards would refuse this call
            else:
                if self.admits(args, kwargs):
                    return self.entry.fn(*args, **kwargs)
        if not self.tried and self._try_first(args, kwargs):
            return self.entry.fn(*args, **kwargs)
        graphs = len(self.report.graphs)
        try:
            with self._changed_sizes_dynamic(args, kwargs):
                result = self.ordinary(*args, **kwargs)
        except BaseException:
            self.negative = None  # the program's own error, not the warm route's: nothing to remember
            raise
        if self.negative is not None:
            _C.cache_store(KIND, *self.negative)
            self.negative = None
        compiled_now = len(self.report.graphs) != graphs
        if compiled_now and self.entry is not None and not self.ordinary_compiled:
            self._note_recompile(args, kwargs)  # later ones are Dynamo's recompiles, in its own records
        self.ordinary_compiled |= compiled_now
        return result

    def _try_first(self, args, kwargs):
        """The warm route's one try (one first call at a time; the others then find its entry):
        whether its entry admits this call."""
        with self.lock:
            if not self.tried:
                found = self._first(args, kwargs)
                if found is not None:
                    self.entry, identities_hold = found
                    self.admits = _guards.guard_check_of(self.entry, identities_hold, self.traced)
                    self.entry_shapes = {key: tuple(t.shape) for key, t in _top_level_tensors(args, kwargs)}
                    self.pinned_sizes = self._pinned_sizes(args, kwargs)
                self.tried = True
        return self.admits is not None and self.admits(args, kwargs)

    def _pinned_sizes(self, args, kwargs):
        """The argument tensors' sizes where the entry is static in them (traced without
        dynamic=True and without dims marked dynamic): its guards then refuse any other size,
        which `__call__` sees for a few tuple compares. GPT-2's decode steps, which the
        prefill's entry refuses, each spent 120 us in its guards first (a step is 2.5-3 ms)."""
        tensors = _top_level_tensors(args, kwargs)
        marked = any(hasattr(t, name) for _, t in tensors for name in _DYNAMIC_MARKS)
        if self.settings["dynamic"] or marked or not torch._dynamo.config.assume_static_by_default:
            return None
        return tuple((key, t.shape) for key, t in tensors)

    def _note_recompile(self, args, kwargs):
        """A call that the entry's guards refused has compiled anew: a recompile, as Dynamo's
        would be after its first compile, reported with the guard that failed."""
        entry = self.entry
        info = entry._artifacts.guard_manager.check_verbose(entry.prepare_f_locals(*args, **kwargs))
        code = self.traced.__code__
        guard = "; ".join(info.verbose_code_parts) if not info.result else \
            "an object named by identity is another now ([Note: identities by name])"
        self.report.warm_recompiles.append({"guard": guard,
                                            "location": f"{code.co_filename}:{code.co_firstlineno}",
                                            "function": code.co_name})

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

    def _view(self, module):
        """The module as an instance of its own class (sharing its __dict__), as the entry is
        traced, saved and called: the compiled module's class is made per compile, and pickles
        as a new compile (_compile.py), which the saved guards must not hold."""
        view = self.view
        if view is None or view.__dict__ is not module.__dict__:
            view = self.view = object.__new__(self.cls)
            view.__dict__ = module.__dict__
        return view

    def _first(self, args, kwargs):
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return None  # DDP's optimizer splits graphs at bucket boundaries on the ordinary route
        if torch._inductor.config.force_disable_caches:
            return None  # aot_compile refuses to run
        start = time.perf_counter()
        if self.cls is not None and "<locals>" in self.cls.__qualname__:
            # Saved guards name the module's class, which pickle finds by name: aot_compile
            # traced a class made inside a function (a test's, a notebook cell's) for about
            # 0.3 s before its TypeError, on every first call.
            self._note("", "not used: a class defined inside a function cannot be saved", start)
            return None
        training = args[0].training if self.cls is not None else None
        try:
            structure = structure_of([args[0]]) if self.cls is not None else structure_of_function(self.traced)
            key = key_of(identity_of(self.cls, self.traced) + "\n" + structure, self.settings, training, args, kwargs)
        except Exception as e:  # an argument the key cannot describe: the ordinary route serves it
            self._note("", f"not used: {type(e).__name__}: {e}", start)
            return None
        payload = _C.cache_load(KIND, key)
        if payload is not None and payload.startswith(_NEGATIVE):
            self._note(key, "not used: " + payload[len(_NEGATIVE):].decode(errors="replace"), start)
            return None
        if payload is not None:
            found, why = self._load(payload, args, kwargs)
            if found is not None:
                self._note(key, "loaded", start)
                return found
            log(f"warm start: entry {key[:12]} of {self.name} not used ({why}); tracing anew")
        return self._trace(key, args, kwargs, start)

    def _load(self, payload, args, kwargs):
        from torch._dynamo.aot_compile import AOTCompiledFunction
        traced = self.traced
        scratch = _report.Report()
        try:
            stored = pickle.loads(payload)
            if stored.get("format") != FORMAT:
                return None, "another format"
            scope = dict(traced.__globals__)
            scope.update({ref: importlib.import_module(name) for ref, name in stored["modules"].items()})
            module_data = _global_modules(stored["module_globals"], traced.__globals__)
            if module_data is None:
                return None, "a global that held an nn.Module holds something else"
            _loading.report, _loading.graphs = scratch, []
            try:
                with _guards.guards_built_later():
                    entry = AOTCompiledFunction.deserialize(stored["artifact"], f_globals=scope,
                                                            external_closure_data=_closure_data(traced) | module_data)
            finally:
                graphs, _loading.report, _loading.graphs = _loading.graphs, None, None
            changed = _changed_sources(stored["sources"])
            if changed:
                return None, "changed source: " + ", ".join(changed[:3])
            identities = stored["identities"]
            _guards.bind_live(entry, traced, entry.prepare_f_locals(*args, **kwargs), also=stored["modules"])
            _bind_express(entry, traced, graphs)
            if not entry.guard_check(*args, **kwargs):
                return None, "its guards refuse this call"
            f_locals = entry.prepare_f_locals(*args, **kwargs)  # with the function's own defaults now
            changed = _guards.changed_identity([(source, named) for source, named, _ in identities], f_locals,
                                               traced.__globals__)
            if changed:
                return None, "another object: " + changed
            changed = _guards.changed_value(*stored["values"], f_locals, traced.__globals__)
            if changed:
                return None, "another value: " + changed
            identities_hold = _guards.identity_check_of([source for source, _, checked in identities if checked],
                                                        f_locals, traced.__globals__)
        except Exception as e:  # a stale or damaged entry is a miss; building guards that fail raises
            return None, f"{type(e).__name__}: {e}"
        self._adopt(scratch)
        return (entry, identities_hold), None

    def _trace(self, key, args, kwargs, start):
        from .dynamo import make_backend, short_reason
        s = self.settings
        scratch = _report.Report()  # the graphs join the report only if the entry serves
        backend = make_backend(s["mode"], s["options"], scratch, savable=True)
        files, dropped, valued = set(), [], []
        try:
            keep = _guards.guard_filter(dropped, self.traced.__code__.co_freevars, valued)
            compiled = torch.compile(self.traced, backend=backend, fullgraph=True, dynamic=s["dynamic"],
                                     options={"guard_filter_fn": keep})
            _loading.graphs = []
            try:
                with _lean_aot_compile(files):
                    entry = compiled.aot_compile((args, kwargs))
            finally:
                graphs, _loading.graphs = _loading.graphs, None
            dropped, by_identity = _guards.by_source(dropped)
            try:
                if any(value is _guards.NO_VALUE for value in dropped.values()):
                    raise Unsupported("a guard on an object's identity has no object to name it by")
                identities = [(source, _guards.stable_name(value), source in by_identity)
                              for source, value in dropped.items()]
                values = _guards.readable_values(valued, entry.prepare_f_locals(*args, **kwargs), entry.fn.__globals__)
                blob = _serialize(entry, self.traced, files, identities, (values, _guards.value_reads(values)))
            except Exception as e:  # it still serves this process
                blob, outcome = None, f"traced; not stored ({type(e).__name__}: {e})"
            _guards.bind_live(entry, self.traced)
            _bind_express(entry, self.traced, graphs)
            f_locals = entry.prepare_f_locals(*args, **kwargs)
            identities_hold = _guards.identity_check_of(list(by_identity), f_locals, self.traced.__globals__, dropped)
        except Exception as e:
            reason = short_reason(e)
            self.negative = (key, _NEGATIVE + reason.encode())  # stored once the ordinary route serves
            self._note(key, "not used: " + reason, start)
            return None
        if blob is not None:
            _C.cache_store(KIND, key, blob)
            outcome = "traced and stored"
        self._adopt(scratch)
        self._note(key, outcome, start)
        return entry, identities_hold

    def _adopt(self, scratch):
        """The graphs of an entry that serves join the module's report."""
        for record in scratch.graphs:
            self.report.add_graph(record)

    def _note(self, key, outcome, start):
        seconds = time.perf_counter() - start
        self.report.warm.append({"key": key[:12], "outcome": outcome, "seconds": seconds})
        log(f"warm start of {self.name} (entry {key[:12]}): {outcome} in {seconds * 1e3:.0f} ms")
