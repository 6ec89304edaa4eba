"""How the OpInfo runner judges a compiled result against eager (docs/testing.md's tolerances).

A float result passes when it is close to eager's at the dtype's tolerance, or close to a float64
reference computed by eager from the same inputs upcast, or no worse than eager's own error
against that reference. The last two matter for 16-bit floats: ember computes an op in float32
and rounds once where eager's kernels round each step (addmm, softmax, rsqrt, losses), and the
two differ by more than bfloat16's tolerance while ember is the more accurate. Integers and
booleans are exact; NaN must be where eager has NaN, infinities where eager (or the reference)
has them.
"""
import math
from dataclasses import dataclass

import torch
from torch.utils._pytree import tree_flatten

# Against eager in the same dtype. float32: docs/testing.md's per-op tolerance (stated there for a
# float64 reference), about ten times PyTorch's own default (rtol 1.3e-6, atol 1e-5) against
# float32 eager; float64 and bfloat16: PyTorch's assert_close defaults.
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-5, 1.5e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float16: (1e-3, 1e-5),
}
# "No worse than eager": ember's largest error against the reference may exceed eager's by this
# share (plus the dtype's atol); rounding once instead of at each step moves the worst element a
# little either way.
SLACK = 0.1


@dataclass
class Check:
    """The verdict on one compiled result. `errors` is (eager's, ember's) largest absolute error
    against the float64 reference, when the reference decided."""
    ok: bool
    detail: str = ""
    errors: tuple = None


def _max_abs_error(x, reference):
    finite = torch.isfinite(reference) & torch.isfinite(x)
    if not finite.any():
        return 0.0
    return (x.double() - reference.double())[finite].abs().max().item()


def _as_real(t):
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def _nonfinite_match(actual, expected, reference):
    """NaN and infinities where eager has them; or, failing that, where the reference has them
    (an intermediate that overflows in eager's 16-bit steps and not in ember's float32)."""
    def pattern(t):
        return torch.isnan(t), torch.where(torch.isinf(t), torch.sign(t), torch.zeros_like(t))
    a_nan, a_inf = pattern(actual)
    e_nan, e_inf = pattern(expected)
    if torch.equal(a_nan, e_nan) and torch.equal(a_inf, e_inf):
        return True
    if reference is None:
        return False
    r_nan, r_inf = pattern(reference.to(actual.dtype))
    return torch.equal(a_nan, r_nan) and torch.equal(a_inf, r_inf)


def compare_tensor(actual, expected, reference=None):
    """Check of one compiled tensor against eager's (and the float64 reference's, if any)."""
    if not isinstance(actual, torch.Tensor):
        return Check(False, f"a {type(actual).__name__} where eager returns a tensor")
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return Check(False, f"{actual.dtype}{list(actual.shape)} where eager gives {expected.dtype}{list(expected.shape)}")
    if actual.is_sparse or actual.layout != torch.strided:
        return Check(torch.equal(actual.to_dense(), expected.to_dense()), "sparse values differ")
    if not (actual.is_floating_point() or actual.is_complex()):
        if torch.equal(actual, expected):
            return Check(True)
        wrong = (actual != expected).sum().item()
        return Check(False, f"{wrong} of {actual.numel()} elements differ (exact dtype)")
    actual, expected = _as_real(actual.detach()), _as_real(expected.detach())
    reference = None if reference is None else _as_real(reference.detach())
    if reference is not None and reference.shape != actual.shape:
        reference = None  # the float64 run took another path (an op with a dtype of its own)
    if not _nonfinite_match(actual, expected, reference):
        return Check(False, "NaN or infinity where eager has none (or the reverse)")
    rtol, atol = TOLERANCES.get(expected.dtype, TOLERANCES[torch.float32])
    if torch.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True):
        return Check(True)
    difference = _max_abs_error(actual, expected)
    if reference is None:
        return Check(False, f"max abs difference {difference:.3g} from eager (no float64 reference)")
    eager_error, ember_error = _max_abs_error(expected, reference), _max_abs_error(actual, reference)
    errors = (eager_error, ember_error)
    finite = torch.isfinite(reference) & torch.isfinite(actual)
    close_to_reference = torch.allclose(actual[finite].double(), reference[finite].double(), rtol=rtol, atol=atol)
    if close_to_reference or ember_error <= eager_error * (1 + SLACK) + atol:
        return Check(True, errors=errors)
    return Check(False, f"max abs difference {difference:.3g} from eager; against float64, eager's error "
                        f"{eager_error:.3g}, ember's {ember_error:.3g}", errors)


def compare_values(actual, expected, reference=None):
    """Check of a compiled result (any pytree of tensors and numbers) against eager's. Among the
    tensors' checks that the reference decided, the one where ember's error is largest is kept
    (the evidence for 16-bit floats)."""
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        return Check(False, f"{len(a_leaves)} results where eager gives {len(e_leaves)}")
    r_leaves = tree_flatten(reference)[0] if reference is not None else []
    if len(r_leaves) != len(e_leaves):
        r_leaves = [None] * len(e_leaves)
    worst = Check(True)
    for k, (a, e, r) in enumerate(zip(a_leaves, e_leaves, r_leaves)):
        if isinstance(e, torch.Tensor):
            check = compare_tensor(a, e, r if isinstance(r, torch.Tensor) else None)
        else:
            check = _compare_number(a, e)
        if not check.ok:
            return Check(False, f"result {k}: {check.detail}" if len(e_leaves) > 1 else check.detail, check.errors)
        if check.errors and (worst.errors is None or check.errors[1] > worst.errors[1]):
            worst = check
    return worst


def _compare_number(actual, expected):
    if isinstance(actual, torch.Tensor):
        return Check(False, f"a tensor where eager returns a {type(expected).__name__}")
    if isinstance(expected, float) and isinstance(actual, float):
        same = actual == expected or (math.isnan(actual) and math.isnan(expected)) or \
            math.isclose(actual, expected, rel_tol=1.3e-6, abs_tol=1e-5)
        return Check(same, "" if same else f"{actual} where eager gives {expected}")
    same = type(actual) is type(expected) and actual == expected
    return Check(same, "" if same else f"{actual!r} where eager gives {expected!r}")


def identical(a, b):
    """Bitwise the same results (NaN equal to NaN): how the runner tells an op whose values
    change from run to run (empty, random ops without a seed) from the others."""
    a_leaves, b_leaves = tree_flatten(a)[0], tree_flatten(b)[0]
    if len(a_leaves) != len(b_leaves):
        return False
    for x, y in zip(a_leaves, b_leaves):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if not isinstance(x, torch.Tensor):
            if not (x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))):
                return False
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.layout != torch.strided:
            x, y = x.to_dense(), y.to_dense()
        x, y = _as_real(x.detach()), _as_real(y.detach())
        if x.is_floating_point():
            nan = torch.isnan(x)
            if not torch.equal(nan, torch.isnan(y)):
                return False
            x, y = x[~nan], y[~nan]
        if not torch.equal(x, y):
            return False
    return True


def same_metadata(actual, expected):
    """Check of shapes and dtypes alone: for ops whose values eager itself does not repeat."""
    a_leaves, e_leaves = tree_flatten(actual)[0], tree_flatten(expected)[0]
    if len(a_leaves) != len(e_leaves):
        return Check(False, f"{len(a_leaves)} results where eager gives {len(e_leaves)}")
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
                got = f"{a.dtype}{list(a.shape)}" if isinstance(a, torch.Tensor) else type(a).__name__
                return Check(False, f"{got} where eager gives {e.dtype}{list(e.shape)}")
    return Check(True)
