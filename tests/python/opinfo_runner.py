"""PyTorch's operator database (OpInfo's op_db) through ember, one sample at a time.

Each sample becomes a function of its tensors, compiled with torch.compile and ember's backend,
static (dynamic=False) or dynamic (dynamic=True), and compared with eager (opinfo_compare.py):
its results, and for ops with autograd in a float dtype, the gradients of its inputs as well
(the training path: AOTAutograd's forward and backward graphs). A sample that ember does not
match is run again with PyTorch's own `aot_eager` backend, the control: when that fails or
mismatches too, the sample is PyTorch's problem (counted, not ember's failure). A sample ember
matches is not run on the control, so its figure counts ember's matches whatever aot_eager does.

Used by tests/python/test_opinfo.py (the short form, in `make test`) and opinfo_full.py (the
whole database, `make opinfo`).
"""
import itertools
import time
import warnings
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

import ember.dynamo
from ember._report import Report
from opinfo_compare import Check, compare_values, identical, same_metadata

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "int64": torch.int64}
MODES = {"static": False, "dynamic": True}
SEED = 1234  # before each run of a sample, so that random ops draw the same values
# Ops whose values are whatever the memory held: compared by shape and dtype. (Two eager runs
# may agree on such values, from memory just freed, so the runner's own detection of ops whose
# values change from run to run does not find them all.)
UNDEFINED_VALUES = ("empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
                    "resize_", "resize_as_")


@dataclass
class Outcome:
    """What happened to one sample. status: "matched", "failed" (ember's fault: a wrong result,
    an error, or a failed lowering), "control fails" (aot_eager fails or mismatches too), "eager
    fails" (the sample raises in eager)."""
    op: str
    dtype: str
    mode: str
    sample: int
    status: str
    detail: str = ""
    errors: tuple = None        # (eager's, ember's) largest error against float64, where that decided
    values_checked: bool = True  # False for ops whose values eager itself does not repeat
    lowering_failures: list = field(default_factory=list)  # ember's warnings: failed lowerings
    fallbacks: list = field(default_factory=list)  # graphs that ran on PyTorch, with the reason
    graphs: int = 0              # graphs ember compiled
    seconds: float = 0.0

    @property
    def key(self):
        return (self.op, self.dtype, self.mode, self.sample)


def op_name(opinfo):
    """The name the runner knows an OpInfo by: its name, and its variant after a dot."""
    return f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name


def load_op_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def supports(opinfo, dtype_name):
    return DTYPES[dtype_name] in opinfo.supported_dtypes("cpu")


def spread(count, limit):
    """`limit` indices spread evenly over range(count), the first and the last among them."""
    if count <= limit:
        return list(range(count))
    if limit == 1:
        return [0]
    return sorted({round(i * (count - 1) / (limit - 1)) for i in range(limit)})


def samples_of(opinfo, dtype_name, limit):
    """[(index, sample)] for up to `limit` samples of the op in this dtype, spread over all of
    them, with requires_grad where the op has autograd in a float dtype. Seeded: the same
    samples in every run."""
    dtype = DTYPES[dtype_name]
    grad = bool(opinfo.supports_autograd and dtype.is_floating_point)
    torch.manual_seed(0)
    generated = opinfo.sample_inputs("cpu", dtype, requires_grad=grad)
    if limit == 1:
        return [(0, s) for s in itertools.islice(generated, 1)]
    everything = list(generated)
    return [(i, everything[i]) for i in spread(len(everything), limit)]


class SampleProgram:
    """A sample as a function of its tensors (the other arguments are constants of it), and
    the way to run it: fresh copies of the tensors for each run, gradients where asked."""

    def __init__(self, opinfo, sample, training):
        leaves, self.spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        self.leaves = leaves
        self.positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        self.tensors = [leaves[i].detach() for i in self.positions]
        self.op = opinfo.op
        self.grad_inputs = [k for k, i in enumerate(self.positions)
                            if training and leaves[i].requires_grad and leaves[i].is_floating_point()]
        self.process_for_grad = sample.output_process_fn_grad
        self.cotangents = None  # per output that takes a gradient: fixed random values

    def function(self):
        leaves, spec, positions, op = list(self.leaves), self.spec, self.positions, self.op

        def sample_program(*tensors):
            values = list(leaves)
            for i, t in zip(positions, tensors):
                values[i] = t
            inp, args, kwargs = tree_unflatten(values, spec)
            return op(inp, *args, **kwargs)
        return sample_program

    def run(self, fn, upcast=False):
        """(results, gradients or None) of fn on fresh copies of the tensors; upcast: float
        tensors in float64 (the reference)."""
        args = [_fresh(t, upcast, k in self.grad_inputs) for k, t in enumerate(self.tensors)]
        torch.manual_seed(SEED)
        out = fn(*args)
        if not self.grad_inputs:
            return out, None
        return out, self._gradients(out, [args[k] for k in self.grad_inputs], upcast)

    def _gradients(self, out, inputs, upcast):
        leaves = [t for t in tree_flatten(self.process_for_grad(out))[0]
                  if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
        if not leaves:
            return None
        if self.cotangents is None:  # made from eager's results, the first run
            generator = torch.Generator().manual_seed(SEED)
            self.cotangents = [torch.randn(t.shape, generator=generator).to(t.dtype) for t in leaves]
        if len(leaves) != len(self.cotangents):
            raise AssertionError(f"{len(leaves)} results take a gradient where eager's {len(self.cotangents)} do")
        cotangents = [c.double() if upcast else c for c in self.cotangents]
        return list(torch.autograd.grad(leaves, inputs, cotangents, allow_unused=True))


def _fresh(t, upcast, requires_grad):
    """A copy of t, float64 if upcast. Otherwise a copy of its whole storage seen as t sees it:
    its strides and storage offset, and the memory around it (as_strided's partial views read
    beyond the sample's own elements)."""
    if upcast and t.is_floating_point():
        copy = t.double()
    elif t.layout == torch.strided:
        copy = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage().clone(), t.storage_offset(), t.shape, t.stride())
    else:
        copy = t.clone()
    return copy.requires_grad_(requires_grad)


def _compile(fn, backend, dynamic):
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, dynamic=dynamic)


def _first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


class _EmberRun:
    """One compiled run on ember, with its report and the warnings ember gave."""

    def __init__(self, program, dynamic):
        self.report = Report()
        backend = ember.dynamo.make_backend(report=self.report)  # what backend="ember" makes
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                self.result, self.error = program.run(_compile(program.function(), backend, dynamic)), None
            except Exception as e:  # noqa: BLE001 (the sample's verdict)
                self.result, self.error = None, e
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        self.lowering_failures = sorted({m for m in messages if "the lowering of" in m})
        self.fallbacks = [f"{g.kind}: {g.fallback}" for g in self.report.graphs if g.fallback]
        self.fallbacks += [m for m in messages if "runs on PyTorch from now on" in m]
        self.graphs = self.report.graph_count


class _Reference:
    """The float64 run of a sample, made once and only when a comparison needs it."""

    def __init__(self, program, floating):
        self.program, self.floating, self.value, self.done = program, floating, None, False

    def get(self):
        if not self.done:
            self.done = True
            if self.floating:
                try:
                    self.value = self.program.run(self.program.function(), upcast=True)
                except Exception:  # noqa: BLE001 (no reference: the comparison with eager decides)
                    self.value = None
        return self.value


def _judge(got, eager, reference, values_checked):
    """The check of (results, gradients) against eager's: against the reference when the
    results are not close to eager's."""
    if not values_checked:
        return _both(same_metadata, got, eager, None)
    check = _both(compare_values, got, eager, None)
    if check.ok or reference.get() is None:
        return check
    return _both(compare_values, got, eager, reference.get())


def _both(compare, got, eager, reference):
    ref_out, ref_grads = reference if reference is not None else (None, None)
    out = compare(got[0], eager[0], ref_out) if compare is compare_values else compare(got[0], eager[0])
    if not out.ok or (got[1] is None and eager[1] is None):
        return out
    if (got[1] is None) != (eager[1] is None):
        return Check(False, "gradients: ember's run gives none where eager's gives them, or the reverse")
    grads = compare(got[1], eager[1], ref_grads) if compare is compare_values else compare(got[1], eager[1])
    if not grads.ok:
        return Check(False, f"gradients: {grads.detail}", grads.errors)
    return grads if grads.errors and (out.errors is None or grads.errors[1] > out.errors[1]) else out


def run_sample(opinfo, index, sample, dtype_name, mode):
    """The Outcome of one sample of `opinfo` in this dtype and mode: inference, then, where
    the sample has inputs that take a gradient, training (results and gradients)."""
    start = time.perf_counter()
    outcome = Outcome(op_name(opinfo), dtype_name, mode, index, "matched")
    paths = [("inference", SampleProgram(opinfo, sample, training=False))]
    training = SampleProgram(opinfo, sample, training=True)
    if training.grad_inputs:
        paths.append(("training", training))
    for path, program in paths:
        _run_path(program, dtype_name, mode, outcome, path if len(paths) > 1 else "")
        if outcome.status != "matched":
            break
    if outcome.status == "matched" and outcome.lowering_failures:
        # Right results (the torch call that replaced it), but a bug in a lowering all the same.
        outcome.status, outcome.detail = "failed", outcome.lowering_failures[0]
    outcome.seconds = time.perf_counter() - start
    return outcome


def _run_path(program, dtype_name, mode, outcome, path):
    """Runs one path of a sample (inference or training) into `outcome`."""
    prefix = f"{path}: " if path else ""
    try:
        eager = program.run(program.function())
        values_checked = outcome.op not in UNDEFINED_VALUES and identical(eager, program.run(program.function()))
    except Exception as e:  # noqa: BLE001 (a sample eager rejects says nothing about ember)
        if path != "training":  # a gradient eager lacks ("i1_backward" in bfloat16) leaves inference's verdict
            outcome.status, outcome.detail = "eager fails", prefix + _first_line(e)
        return
    outcome.values_checked = outcome.values_checked and values_checked
    ember_run = _EmberRun(program, MODES[mode])
    outcome.lowering_failures += [m for m in ember_run.lowering_failures if m not in outcome.lowering_failures]
    outcome.fallbacks += [prefix + f for f in ember_run.fallbacks]
    outcome.graphs += ember_run.graphs
    reference = _Reference(program, DTYPES[dtype_name].is_floating_point)
    if ember_run.error is not None:
        check = Check(False, f"raised {_first_line(ember_run.error)}")
    else:
        check = _judge(ember_run.result, eager, reference, values_checked)
    if check.errors and (outcome.errors is None or check.errors[1] > outcome.errors[1]):
        outcome.errors = check.errors
    if not check.ok:
        outcome.detail = prefix + check.detail
        outcome.status = "control fails" if _control_fails(program, eager, reference, mode, values_checked) else "failed"


def _control_fails(program, eager, reference, mode, values_checked):
    """Whether PyTorch's own aot_eager backend fails or mismatches on the sample too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            got = program.run(_compile(program.function(), "aot_eager", MODES[mode]))
        except Exception:  # noqa: BLE001 (the control's failure is the verdict)
            return True
    return not _judge(got, eager, reference, values_checked).ok


def run_op(opinfo, dtype_name, mode, limit):
    """The Outcomes of up to `limit` samples of the op in this dtype and mode; [] where the
    op does not support the dtype."""
    if not supports(opinfo, dtype_name):
        return []
    try:
        chosen = samples_of(opinfo, dtype_name, limit)
    except Exception as e:  # noqa: BLE001 (the database's own generator failed)
        return [Outcome(op_name(opinfo), dtype_name, mode, 0, "eager fails", f"sample inputs: {_first_line(e)}")]
    outcomes = [run_sample(opinfo, i, s, dtype_name, mode) for i, s in chosen]
    torch._dynamo.reset()
    return outcomes
