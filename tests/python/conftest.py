"""Shared helpers of the Python tests: docs/testing.md's tolerances, and what ember really did."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))  # model_zoo

# Kernels compiled by the tests go to a cache of their own (make test points it into the build).
os.environ.setdefault("EMBER_CACHE_DIR", os.path.join(tempfile.gettempdir(), "ember-pytest-cache"))
# max-autotune tunes each graph at its first call within this budget (30 s by default): the tests
# check that what it chose is right, not that it searched long.
os.environ.setdefault("EMBER_AUTOTUNE_BUDGET_S", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import ember  # noqa: E402
from ember._compile import report_of  # noqa: E402

MODES = list(ember.MODES)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def assert_model_close(actual, expected, reference64=None, tol=1e-4):
    """docs/testing.md's model rule: allclose at `tol`, else RMSE against a float64 run of the same
    model within twice eager's RMSE plus tol / 10. NaN only where eager has NaN."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    if not actual.is_floating_point():
        assert torch.equal(actual, expected)
        return
    assert torch.equal(torch.isnan(actual), torch.isnan(expected)), "NaN where eager has none (or the reverse)"
    if torch.allclose(actual, expected, rtol=tol, atol=tol, equal_nan=True):
        return
    assert reference64 is not None, f"max abs difference {(actual - expected).abs().max().item():.3g}"
    def rmse(a):
        return (a.double() - reference64.double()).pow(2).mean().sqrt().item()
    assert rmse(actual) <= 2 * rmse(expected) + tol / 10, f"rmse {rmse(actual):.3g} vs eager {rmse(expected):.3g}"


def assert_compiled(compiled, min_lowered_share=0.0):
    """ember compiled at least one graph (no fallback to PyTorch) and lowered some of its ops."""
    report = report_of(compiled)
    assert report.graph_count > 0, report.text()
    assert not any(g.fallback for g in report.graphs), report.text()
    share = max(g.lowered_share for g in report.graphs)
    assert share > min_lowered_share, report.text()
    return report


F32 = dict(rtol=1.3e-5 * 4, atol=1.5e-5 * 4)  # a short chain of ops


def run_both(fn, *args, **compile_kwargs):
    """eager(fn) and ember.compile(fn) on clones of args: (expected, actual, compiled)."""
    expected = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    compiled = ember.compile(fn, **compile_kwargs)
    actual = compiled(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    return expected, actual, compiled


def assert_same(actual, expected, **tol):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, **tol)
        return
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.is_floating_point():
        assert torch.equal(actual.isnan(), expected.isnan()), f"NaN mismatch:\n{actual}\nvs eager\n{expected}"
        torch.testing.assert_close(actual, expected, equal_nan=True, **(tol or F32))
    else:
        assert torch.equal(actual, expected), f"{actual}\nvs eager\n{expected}"
