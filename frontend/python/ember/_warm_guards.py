"""What keeps a warm entry ([Note: the warm start], _warm.py) true to the program it serves:
the globals it runs over, the identities its guards could not save, and its guard check.

[Note: live globals]
An AOTCompiledFunction runs its bytecode over a copy of its globals, taken when it is made: a
global that the program rebinds later (a tensor, a scale) kept its old value in every call, and
a loaded entry's guards read the copy too, so they never noticed (a silent wrong replay). ember
runs an entry over the module's own globals instead, as Dynamo's ordinary route does, adding the
names the entry needs (its compiled graph, the modules it refers to) and checking its guards
against those live globals (`bind_live`).
"""
import ast
import builtins
import contextlib
import enum
import functools
import hashlib
import inspect
import marshal
import re
import threading
import types

import torch

from ._symbols import Unsupported


def code_digest(code):
    """A function's code, as text that is the same in every process (no addresses, and sets
    of names in a fixed order)."""
    h = hashlib.sha256()

    def add(c):
        h.update(c.co_code + repr((c.co_names, c.co_varnames, c.co_freevars, c.co_firstlineno)).encode())
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                add(k)
            else:
                h.update(repr(sorted(map(repr, k)) if isinstance(k, frozenset) else k).encode())

    add(code)
    return h.hexdigest()


# A guard's source starts with a global (G['name']), a local (L['name']) or a bare local name.
_ROOT = re.compile(r"^(?:(G)\['([^'\\]+)'\]|L\['([^'\\]+)'\]|([A-Za-z_]\w*))")


def _root(source):
    """(global?, name, whether the source is that name alone) of a guard's source, or None."""
    match = _ROOT.match(source)
    if match is None:
        return None
    return match.group(1) is not None, match.group(2) or match.group(3) or match.group(4), match.end() == len(source)


def guard_filter(dropped, freevars, valued):
    """Dynamo's guard filter: every guard but those that cannot be saved (an object's identity
    and its kin), which are added to `dropped` as (source, object, True) for [Note: identities
    by name]. So are the guards on the traced function's closure (`freevars`), which are kept as
    well, as (source, object, False): a loaded entry builds them over its first call's closure
    (bind_live), where they admit it, so their objects are compared by name when it loads; from
    then on Dynamo's check of them holds, and only the guards it does not keep are checked by
    identity at each call. (A closure's module has a guard for each of its parameters and
    settings: a tiny T5 over a closure spent 420 us a call checking them all by identity.)
    Each kept guard on a constant's value adds (source, value as text) to `valued` ([Note:
    values by name])."""
    from torch._dynamo.guards import CheckFunctionManager
    unsavable = CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES

    def on_closure(source):
        root = _root(source)
        return root is not None and not root[0] and root[1] in freevars

    def keep(entries):
        flags = [not (e.guard_type in unsavable or any(t in unsavable for t in e.derived_guard_types or ()))
                 for e in entries]
        dropped.extend((e.name, e.value if e.has_value else NO_VALUE, not k) for e, k in zip(entries, flags)
                       if not k or on_closure(e.name))
        valued.extend(v for e, k in zip(entries, flags) if k and e.has_value for v in _value_of(e))
        return flags

    return keep


# [Note: values by name]
# A saved guard keeps how to read its value, not the value: a loaded entry's guards are built
# again over the globals that tracing saved, and what those reach through a module or a class
# (pickled by name) is the new process's own. `sys.argv[1] == "add"`, traced in one process,
# admitted "sub" in the next and replayed the add branch; so did `os.environ["OPV"]`. So each
# guard on a constant (a value compared by equality, a length, a dict's keys) keeps the value as
# text, and an entry loads only where every such source reads the same now (`changed_value`).
_EQUAL_TO = ("EQUALS_MATCH", "CONSTANT_MATCH", "BOOL_MATCH", "NONE_MATCH")
_CONSTANTS = (type(None), bool, int, float, str, bytes)


def constant_text(value):
    """A constant (or a tuple or list of them) as text that is the same in every process, or
    None for anything else."""
    if type(value) in _CONSTANTS:
        return repr(value)
    if type(value) in (tuple, list):
        items = [constant_text(v) for v in value]
        return None if None in items else f"{type(value).__name__}({', '.join(items)})"
    return None


def _value_of(entry):
    """[(what to read, its value as text)] that a kept guard compares with, where that is a
    constant: the value, its length, whether it is None, a dict's keys."""
    kind, source, value = entry.guard_type, entry.name, entry.value
    if kind in _EQUAL_TO:
        read = source
    elif kind in ("SEQUENCE_LENGTH", "LENGTH_CHECK") and hasattr(value, "__len__"):
        read, value = f"len({source})", len(value)
    elif kind == "NOT_NONE_MATCH":
        read, value = f"({source}) is not None", value is not None
    elif kind == "DICT_KEYS_MATCH" and hasattr(value, "keys"):
        read, value = f"list(({source}).keys())", list(value.keys())
    else:
        return []
    text = constant_text(value)
    return [] if text is None else [(read, text)]


def readable_values(valued, f_locals, live):
    """The (read, text) of `valued` that read as they did while tracing, once each, each read
    written as Python over L and G (_as_lambda_reads: the same in every process, whose locals
    are the same function's); a source of Dynamo's own making that does not read here is left
    to Dynamo's guard."""
    kept = {}
    for source, text in valued:
        read = _as_lambda_reads(source, f_locals)
        try:
            if constant_text(_evaluate_read(read, f_locals, live)) == text:
                kept[read] = text
        except Exception:
            pass
    return sorted(kept.items())


def value_reads(values):
    """The reads of `values` as one function's code, marshalled: compiled where the entry is
    stored, for the key holds Python's version (compiling ResNet-18's 280 reads took 30 ms of a
    warm first call)."""
    lines = ["def ___reads(L):", "    out = []"]
    for read, _ in values:
        lines += ["    try:", f"        out.append({read})", "    except Exception as e:", "        out.append(e)"]
    return marshal.dumps(compile("\n".join(lines + ["    return out"]), "<ember warm values>", "exec"))


def changed_value(values, reads, f_locals, live):
    """The first of `values` (read, text) that reads otherwise now, as text; or None. `reads`:
    value_reads(values)."""
    scope = _scope(live)
    exec(marshal.loads(reads), scope)
    for (read, text), now in zip(values, scope["___reads"](f_locals)):
        now = f"missing ({type(now).__name__})" if isinstance(now, Exception) else constant_text(now)
        if now != text:
            return f"{read} is {now}, not {text}"
    return None


# --- identities by name ----------------------------------------------------------------------
# [Note: identities by name]
# The guards that cannot be saved check an object's identity: the function a global or a closure
# names (`op = torch.sub`), a class, a module, an enum member. Left out, a loaded entry served a
# program whose `op` was another function: a test's lambda over `op`, parametrized over add and
# sub, computed x + 5005 for x - 5005 from the entry that the add case stored. So each such guard
# is kept by name: its source (`G['op']`, `self.__class__`) and a description of the object that
# is the same in every process (`stable_name`: a function's module, name and code, a class's or
# module's name, an enum member's). A loaded entry is used only where every source describes the
# same object now. Within a process, every such source is checked by identity at each call, as
# Dynamo's guards would (identity_check_of): rebinding `op`, or `cfg.act`, after the first call
# takes the ordinary route.

NO_VALUE = object()
_MISSING = object()


def stable_name(value):
    """The object as text that names the same object in another process."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if isinstance(value, types.FunctionType):
        return f"function {value.__module__}.{value.__qualname__} {code_digest(value.__code__)}"
    if isinstance(value, types.CodeType):
        return f"code {code_digest(value)}"
    if isinstance(value, enum.Enum):
        return f"enum {type(value).__module__}.{type(value).__qualname__}.{value.name}"
    if isinstance(value, (type, types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)):
        owner = getattr(value, "__self__", None)
        bound = "" if owner is None or isinstance(owner, types.ModuleType) else f" of {stable_name(owner)}"
        name = getattr(value, "__qualname__", None) or getattr(value, "__name__", "?")
        return f"{getattr(value, '__module__', None)}.{name}{bound}"
    if isinstance(value, types.MethodType):
        return f"method {stable_name(value.__func__)} of {stable_name(value.__self__)}"
    if isinstance(value, torch.Tensor):
        return f"tensor {value.dtype} {tuple(value.shape)} {value.stride()} {value.device} {value.requires_grad}"
    if isinstance(value, functools.partial):
        arguments = [stable_name(a) for a in value.args] + [f"{k}={stable_name(v)}" for k, v in value.keywords.items()]
        return f"partial {stable_name(value.func)} ({', '.join(arguments)})"
    return f"instance of {type(value).__module__}.{type(value).__qualname__}"


def _evaluate(source, f_locals, live):
    """The object a guard's source names, for a call's locals and the live globals."""
    return _evaluate_read(_as_lambda_reads(source, f_locals), f_locals, live)


def _evaluate_read(read, f_locals, live):
    """The object that `read` (a source as _as_lambda_reads writes it) names."""
    return eval(read, _scope(live, L=f_locals))


def _scope(live, **names):
    """What a guard's source reads, as _as_lambda_reads writes it: the live globals as G, the
    builtins' dict, and `names`."""
    return {"G": live, "___builtins": builtins.__dict__, "__builtins__": builtins, **names}


def by_source(dropped):
    """guard_filter's (source, object, by identity) as {source: object} and the sources to check
    by identity at each call: a source may come more than once (the last object is kept), and
    is checked so where any of its guards is not Dynamo's."""
    objects, by_identity = {}, {}
    for source, value, unkept in dropped:
        objects[source] = value
        by_identity[source] = by_identity.get(source, False) or unkept
    return objects, {source for source, unkept in by_identity.items() if unkept}


def changed_identity(identities, f_locals, live):
    """The first (source, description) whose source names another object now, as text; or None."""
    for source, described in identities:
        try:
            now = stable_name(_evaluate(source, f_locals, live))
        except Exception as e:
            now = f"missing ({type(e).__name__})"
        if now != described:
            return f"{source} is {now}, not {described}"
    return None


def identity_check_of(sources, f_locals, live, traced_values=None):
    """A check, per call, that each source still names the object it names now, by identity, as
    Dynamo's own guards would (a function of the call's locals), or None where there is no
    source. It is one expression compiled once; a source that no longer reads at a call (an
    attribute gone) refuses that call, which then takes the ordinary route. `traced_values`:
    the objects Dynamo specialized on, by source, pinned rather than what the sources read now
    (another thread may have rebound one while the first call traced). Raises Unsupported where
    a source cannot be read here (a helper of Dynamo's): such an entry would refuse every call."""
    scope = _scope(live)
    pinned, tests = {}, []
    for source in dict.fromkeys(s for s in sources if s.strip()):  # a global state's guard names nothing
        read = _as_lambda_reads(source, f_locals)
        try:
            value = _evaluate_read(read, f_locals, live)
        except Exception as e:
            raise Unsupported(f"the guard source {source} cannot be read ({type(e).__name__})") from None
        traced = (traced_values or {}).get(source, NO_VALUE)
        pinned[source] = value = value if traced is NO_VALUE else traced
        parent = _TUPLE_ITEM.match(source)
        if parent and type(pinned.get(parent.group(1))) is tuple:
            continue  # an item of a tuple whose identity is checked: it cannot change
        scope[f"___pinned{len(tests)}"] = value
        tests.append(f"({read}) is ___pinned{len(tests)}")
    if not tests:
        return None
    same = eval("lambda L: " + " and ".join(tests), scope)

    def identities_hold(f_locals):
        try:
            return same(f_locals)
        except Exception:
            return False

    return identities_hold


_TUPLE_ITEM = re.compile(r"^(.*)\[\d+\]$")
_BUILTINS_DICT = re.compile(r"G\['__builtins_dict__\w*'\]")


def _as_lambda_reads(source, f_locals):
    """`source` as Python that reads the call's locals as L and the live globals as G (_scope):
    a local named by itself (`func`, a decorated function's closure variable; `self` inside
    `type(self.config)`) as L['func'], and Dynamo's name for the builtins' dict
    (`G['__builtins_dict___0']`, which it adds to the module only while it traces) as that
    dict. A name that is called (`type(...)`) is the builtin, as in Dynamo, even where a local
    has that name."""
    source = _BUILTINS_DICT.sub("___builtins", source)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        return source  # refused where it is compiled
    return ast.unparse(_LocalsAsL(f_locals).visit(tree))


class _LocalsAsL(ast.NodeTransformer):
    def __init__(self, f_locals):
        self.f_locals = f_locals

    def visit_Call(self, node):
        if (isinstance(node.func, ast.Name) and node.func.id == "dict" and len(node.args) == 1 and not node.keywords
                and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "__dict__"):
            # dict(type(x).__dict__)['forward']: a lookup in the class's own mapping, without
            # copying it each call (most of GPT-2's identity check)
            return self.visit(node.args[0])
        func = node.func.value if isinstance(node.func, ast.Attribute) else node.func
        if node.func is func or (isinstance(func, ast.Name) and func.id in builtins.__dict__):
            # type(...), dict.keys(...): the builtin, not a local of its name
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.f_locals and node.id not in ("L", "G"):
            return ast.copy_location(ast.Subscript(ast.Name("L", ast.Load()), ast.Constant(node.id), ast.Load()), node)
        return node


# Names that Dynamo adds to the globals of the code it transforms: its compiled graph, the
# modules that the code reaches by alias, builtins.
_DYNAMO_NAMES = ("___", "__import_", "__compiled_fn", "__builtins_dict__", "__resume_at")
# And the globals it names after an object's id (install_global_by_id: `{prefix}_{id}_c{n}`,
# a module reached through an attribute, `torch` as `_140713261391184_c0`).
_BY_ID = re.compile(r"_\d{11,}_c\d+$")  # an address: not a program's `run_20240101_c1`


def _made_by_dynamo(name):
    return name.startswith(_DYNAMO_NAMES) or _BY_ID.search(name) is not None


def _same_builtins(present, wanted):
    """Whether a builtins dict that Dynamo put in the module's globals has every entry of the
    one the entry was made with (a loaded entry's holds only the builtins that pickle)."""
    return (isinstance(present, dict) and isinstance(wanted, dict)
            and all(present.get(k, _MISSING) is v for k, v in wanted.items()))


_patch_lock = threading.Lock()


@contextlib.contextmanager
def guards_built_later():
    """AOTCompiledFunction.deserialize without building the entry's guards: it built them over a
    copy of the globals and without a call's locals, where a guard on the closure's contents (a
    decorator's, as on GPT-2's forward) has no value to read, and the load failed. bind_live
    builds them with both. Nor does it unpickle the guards' state here, which bind_live does
    (ResNet-18: 0.15 s of a 0.53 s warm first call, twice)."""
    from torch._dynamo import package
    with _patch_lock:
        saved = package.load_guard_manager, package.load_guards_state
        package.load_guard_manager = lambda *args, **kwargs: None
        package.load_guards_state = lambda guards_state: None
        try:
            yield
        finally:
            package.load_guard_manager, package.load_guards_state = saved


def globals_named_by(sources):
    """The globals that Dynamo made and that guards' sources start from (`G['_<id>_c0'].Tensor`)."""
    roots = filter(None, map(_root, sources))
    return {name for is_global, name, _ in roots if is_global and _made_by_dynamo(name)}


def bind_live(entry, traced, f_locals=None, also=()):
    """[Note: live globals]: the entry runs over `live` (the traced function's module globals),
    given the names Dynamo made for it (and those in `also`, which its saved guards start from).
    A loaded entry's guards are built here, over them and over what tracing saved of the locals,
    completed from `f_locals` (the first call's arguments and closure) where it could save
    nothing. A guard built over such a value admits the first call whatever it holds: the
    closure's guards are also kept by name (guard_filter). The entry binds a call's arguments
    with the default values of `traced` itself, the function traced, not a loaded copy of them
    (a default tensor updated in place)."""
    live = traced.__globals__
    fn, own, env = entry.fn, entry._artifacts.backend_id, entry._artifacts.runtime_env
    # What the bytecode and the guards name; the copy holds every other global as well, and
    # names that Dynamo's other compiles added to the module and have changed since.
    needed = {own, *env.external_refs, *env.import_sources, *env.used_globals, *also}
    for name in needed:
        if not _made_by_dynamo(name):
            continue  # the program's own globals (and builtins) are read live
        if name == own:  # unique to this trace (a uuid); tracing left the graph there
            live[name] = fn.__globals__[own]
            continue
        # The entry's own value: a loaded entry's copy of the globals took the live ones.
        value = env.used_globals.get(name, fn.__globals__.get(name, _MISSING))
        if value is _MISSING:
            continue
        present = live.setdefault(name, value)
        if present is not value and not _same_builtins(present, value):
            raise Unsupported(f"the global name {name} of the entry is taken by another object")
    live[_LEAN_UTILS] = _LEAN
    # Dynamo traces a function of torch's own (nn.InstanceNorm2d.forward) through a wrapper of
    # its own, `inner(*args, **kwargs)`, which has its own signature and no defaults.
    own_code = code_digest(entry._artifacts.original_code) == code_digest(traced.__code__)
    holder = traced if own_code else fn
    bound = types.FunctionType(_lean_code(fn.__code__), live, fn.__name__, holder.__defaults__, fn.__closure__)
    bound.__kwdefaults__ = holder.__kwdefaults__
    entry.fn = bound
    if own_code:
        entry._artifacts.signature = inspect.signature(traced, follow_wrapped=False)
    if f_locals is not None:
        from torch._dynamo import package
        with _patch_lock:  # torch's own, not guards_built_later's stand-ins on another thread
            load_guard_manager, load_guards_state = package.load_guard_manager, package.load_guards_state
        artifacts = entry._artifacts
        state = load_guards_state(artifacts.guards_state)
        scope = state.output_graph.local_scope  # what tracing saw: the guards compare against it
        for name, value in f_locals.items():  # what it could not save (a closure's function)
            if name not in scope or type(scope[name]).__name__ == "_Missing":
                scope[name] = value
        saved = _SavedThenLive(state.output_graph.global_scope or {}, live)
        state.output_graph.global_scope = saved
        artifacts.guard_manager = load_guard_manager(state, artifacts.original_code, live)
        saved.go_live()


class _SavedThenLive(dict):
    """[Note: guards in Python read live globals]
    Dynamo builds a loaded entry's guards over the globals that tracing saved (each guard's
    expected value comes from them), and its guards in Python (the shape environment's, such as
    `G['s'] == 100000.0` for a float global that a recompile made a graph input and lowering
    then specialized) keep reading that saved copy at every check, where the copy always holds
    the value they expect: an entry stored at s = 1e5 served s = 1e-3 with 1e5's graph (a
    silent wrong replay). Its guards in C++ read the live globals. This mapping is the saved
    globals while the guards are built, and the live ones once `go_live` is called: the Python
    guards then read what Dynamo's own check of a traced frame reads, the module's globals. A
    name only Dynamo made (its builtins' dict) is read from the saved ones where the module
    lacks it."""

    def __init__(self, saved, live):
        super().__init__(saved)
        self._live = None
        self._pending = live

    def go_live(self):
        self._live = self._pending

    def __getitem__(self, name):
        live = self._live
        if live is None or (name not in live and _made_by_dynamo(name)):
            return super().__getitem__(name)
        return live[name]

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name):
        live = self._live
        return super().__contains__(name) if live is None else name in live or super().__contains__(name)


# [Note: the pregraph record]
# An entry's bytecode opens and closes a profiler record around its graph through two functions
# of torch._dynamo.utils, each behind Dynamo's disable wrapper (which keeps Dynamo from tracing
# them): the pair was 1.8 us of a 9 us tiny call. The warm route runs its entry outside Dynamo's
# tracing (WarmStart.__call__ takes the ordinary route under torch.compile), where the wrappers
# do nothing, so the entry's code reads the module under another name, bound to an object that
# has the two functions unwrapped, and the rest of the module as it is.
_UTILS, _LEAN_UTILS = "__import_torch_dot__dynamo_dot_utils", "__ember_dynamo_utils"


class _LeanDynamoUtils:
    @staticmethod
    def record_pregraph_bytecode_enter():
        if not torch.autograd.profiler._is_profiler_enabled:
            return None
        record = torch._C._profiler._RecordFunctionFast("Pregraph bytecode")
        record.__enter__()
        return record

    @staticmethod
    def record_pregraph_bytecode_exit(record):
        if record is not None:
            record.__exit__(None, None, None)

    def __getattr__(self, name):
        return getattr(torch._dynamo.utils, name)


_LEAN = _LeanDynamoUtils()


def _lean_code(code):
    """`code` reading torch._dynamo.utils as _LEAN ([Note: the pregraph record])."""
    if _UTILS not in code.co_names:
        return code
    return code.replace(co_names=tuple(_LEAN_UTILS if n == _UTILS else n for n in code.co_names))


def guard_check_of(entry, identities_hold, traced):
    """entry.guard_check(*args, **kwargs) and `identities_hold` (identity_check_of), without
    inspect's binding of the arguments where they are positional and fill every parameter: the
    binding was a fifth of a tiny compiled call. And whether `traced` has the code and default
    values it had (Dynamo's frame hook sees the new ones; the entry would run the old ones)."""
    code, defaults, kwdefaults = traced.__code__, traced.__defaults__, traced.__kwdefaults__
    kw_items = tuple(kwdefaults.items()) if kwdefaults else ()  # a dict: updated in place too
    artifacts = entry._artifacts
    params = artifacts.signature.parameters.values()
    names = tuple(p.name for p in params)
    simple = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    env = artifacts.runtime_env
    cells = tuple(zip(env.bytecode.co_freevars, env.closure or ()))
    check = artifacts.guard_manager.check

    def guard_check(args, kwargs):
        if traced.__code__ is not code or traced.__defaults__ is not defaults or traced.__kwdefaults__ is not kwdefaults:
            return False
        if kw_items and (len(kwdefaults) != len(kw_items) or any(kwdefaults.get(k, _MISSING) is not v for k, v in kw_items)):
            return False
        if kwargs or not simple or len(args) != len(names):
            f_locals = entry.prepare_f_locals(*args, **kwargs)
        elif cells:  # as prepare_f_locals: the closure, then the arguments
            f_locals = {name: cell.cell_contents for name, cell in cells}
            f_locals.update(zip(names, args))
        else:
            f_locals = dict(zip(names, args))
        return check(f_locals) and (identities_hold is None or identities_hold(f_locals))

    return guard_check
