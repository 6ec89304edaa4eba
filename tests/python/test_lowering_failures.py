"""A lowering that fails is a bug, and is seen: a warning naming the ATen op and the exception,
a count in the report, an error under `strict`. A lowering that declines (Unsupported) is not
a failure: its node runs as a torch call, silently. The bugs the OpInfo runner found once
failures stopped hiding are in test_lowering_fixes.py."""
import warnings

import pytest
import torch

import ember
from ember import _lower
from ember._compile import report_of
from ember._symbols import Unsupported
from conftest import assert_same


def _sin_plus_one(x):
    return torch.sin(x) + 1


def _raising(error):
    def lowering(cx, *args, **kwargs):
        raise error
    return lowering


def test_a_lowering_that_raises_a_bug_warns_and_the_node_runs_as_a_torch_call(monkeypatch):
    monkeypatch.setitem(_lower.LOWERINGS, "aten.sin.default", _raising(ZeroDivisionError("injected bug")))
    compiled = ember.compile(_sin_plus_one)
    x = torch.randn(5)
    with pytest.warns(RuntimeWarning, match=r"lowering of aten\.sin\.default failed \(ZeroDivisionError: injected bug\)"):
        out = compiled(x)
    assert_same(out, _sin_plus_one(x))
    report = report_of(compiled)
    assert report.failed_lowering_count() == 1
    assert report.graphs[0].torch_calls == {"aten.sin.default": 1}
    assert "1 failed lowerings" in report.text() and "aten.sin.default x1" in report.text()
    assert report.as_dict()["failed_lowerings"] == 1


def test_explain_counts_failed_lowerings(monkeypatch):
    monkeypatch.setitem(_lower.LOWERINGS, "aten.sin.default", _raising(ZeroDivisionError("injected bug")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        report = ember.explain(_sin_plus_one, torch.randn(5))
    assert report.failed_lowering_count() == 1
    assert "ZeroDivisionError: injected bug" in report.text()


def test_strict_raises_for_a_failed_lowering(monkeypatch):
    monkeypatch.setitem(_lower.LOWERINGS, "aten.sin.default", _raising(ZeroDivisionError("injected bug")))
    compiled = ember.compile(_sin_plus_one, options={"strict": True})
    with pytest.raises(Exception, match=r"\[aten\.sin\.default\] the lowering failed: ZeroDivisionError"):
        compiled(torch.randn(5))


def test_a_lowering_that_declines_is_silent(monkeypatch):
    monkeypatch.setitem(_lower.LOWERINGS, "aten.sin.default", _raising(Unsupported("not this case")))
    compiled = ember.compile(_sin_plus_one, options={"strict": True})
    x = torch.randn(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = compiled(x)
    assert_same(out, _sin_plus_one(x))
    report = report_of(compiled)
    assert report.failed_lowering_count() == 0
    assert report.graphs[0].torch_calls == {"aten.sin.default": 1}


def test_a_lowering_of_the_wrong_dtype_is_a_failure(monkeypatch):
    def as_float64(cx, x):
        return cx.op("cast", [cx.op("sin", [x])], {"dtype": "f64"})

    monkeypatch.setitem(_lower.LOWERINGS, "aten.sin.default", as_float64)
    compiled = ember.compile(_sin_plus_one)
    x = torch.randn(5)
    with pytest.warns(RuntimeWarning, match=r"aten\.sin\.default failed \(result 0 is f64\[5\], PyTorch's meta says f32\[5\]\)"):
        out = compiled(x)
    assert_same(out, _sin_plus_one(x))
    assert report_of(compiled).failed_lowering_count() == 1


@pytest.mark.parametrize("fn, x, error", [
    (lambda b: b.abs(), torch.tensor([True, False]), NotImplementedError),
    (lambda a: True - a, torch.tensor([3, 250], dtype=torch.uint8), RuntimeError),
    (lambda b: -b, torch.tensor([True, False]), RuntimeError),
], ids=["abs", "rsub", "neg"])
def test_an_op_pytorch_refuses_on_bool_raises_its_error(fn, x, error):
    # ember's IR refuses a bool operand of abs, neg and sub as PyTorch does; abs and True - x
    # computed a value where eager raises (found by an adversarial helper).
    with pytest.raises(error):
        fn(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error):
            ember.compile(fn)(x)
