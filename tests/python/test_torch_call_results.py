"""Torch calls whose real results have other sizes than PyTorch's meta gives them (the sizes the
compiled graph was built on). Eager has no such expectation, so the user's program must not fail:
a result nobody reads is not an output of the call at all; one that is read and comes back
another size makes the graph run on PyTorch from then on, with a warning (`strict` raises)."""
import warnings

import pytest
import torch

import ember
from ember._compile import report_of
from conftest import assert_same

BF16 = dict(rtol=1.6e-2, atol=1e-5)


def _embedding_bag_inputs(requires_grad=False):
    torch.manual_seed(0)
    weight = torch.randn(10, 3, dtype=torch.bfloat16, requires_grad=requires_grad)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 2, 5])
    return weight, indices, offsets


def _bag_sum(weight, indices, offsets):
    return torch.nn.functional.embedding_bag(indices, weight, offsets, mode="sum")


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_embedding_bag_in_bfloat16_with_an_unread_offset2bag(dynamic):
    # _embedding_bag_forward_only's CPU kernel leaves offset2bag empty for a bfloat16 sum, where
    # its meta sizes it by the indices: "returned torch.int64[0], the graph expects
    # torch.int64[8]", an error where eager works. Nothing reads it.
    args = _embedding_bag_inputs()
    compiled = ember.compile(_bag_sum, dynamic=dynamic, options={"strict": True})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = compiled(*args)
    assert_same(out, _bag_sum(*args), **BF16)
    assert report_of(compiled).graphs[0].torch_calls == {"aten._embedding_bag_forward_only.default": 1}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_embedding_bag_in_bfloat16_training_runs_on_pytorch_with_a_warning(dynamic):
    # In training offset2bag is saved for the backward: it is read, and its real size is not
    # the one the graph holds. The forward graph runs on PyTorch, and so does the backward graph,
    # which gets eager's empty offset2bag where it was built for one per index.
    weight, indices, offsets = _embedding_bag_inputs(requires_grad=True)
    expected = _bag_sum(weight, indices, offsets)
    (expected_grad,) = torch.autograd.grad(expected.sum(), weight)
    compiled = ember.compile(_bag_sum, dynamic=dynamic)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(weight, indices, offsets)
        (grad,) = torch.autograd.grad(out.sum(), weight)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 2, messages
    assert "runs on PyTorch from now on: [torch] aten._embedding_bag.default returned torch.int64[0]" in messages[0]
    assert "runs on PyTorch from now on: [run] input" in messages[1] and "has shape [0]" in messages[1]
    assert_same(out, expected, **BF16)
    assert_same(grad, expected_grad, **BF16)
    with warnings.catch_warnings():  # warned once: later calls go to PyTorch directly
        warnings.simplefilter("error", RuntimeWarning)
        again = compiled(weight, indices, offsets)
    assert_same(again, expected, **BF16)


def test_strict_raises_for_a_torch_call_result_of_another_size():
    weight, indices, offsets = _embedding_bag_inputs(requires_grad=True)
    compiled = ember.compile(_bag_sum, options={"strict": True})
    with pytest.raises(RuntimeError, match=r"returned torch\.int64\[0\], the graph expects torch\.int64\[8\]"):
        compiled(weight, indices, offsets)


# An op of one's own whose meta (fake) function sizes its second result otherwise than its
# kernel does: one per row where the kernel gives the first row only.
@torch.library.custom_op("ember_test::scaled_and_first_row", mutates_args=())
def _scaled_and_first_row(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x * 2, x[0].clone()


@_scaled_and_first_row.register_fake
def _(x):
    return torch.empty_like(x), x.new_empty(x.shape)


def test_an_unread_result_of_a_misdeclared_op_is_not_checked():
    def fn(x):
        scaled, _ = torch.ops.ember_test.scaled_and_first_row(x)
        return scaled + 1

    x = torch.randn(3, 4)
    compiled = ember.compile(fn, options={"strict": True})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = compiled(x)
    assert_same(out, x * 2 + 1)
    assert report_of(compiled).graphs[0].torch_calls == {"ember_test.scaled_and_first_row.default": 1}


def test_a_read_result_of_a_misdeclared_op_makes_the_graph_run_on_pytorch():
    def fn(x):
        scaled, first = torch.ops.ember_test.scaled_and_first_row(x)
        return scaled.sum() + first.sum()

    x = torch.randn(3, 4)
    compiled = ember.compile(fn)
    with pytest.warns(RuntimeWarning, match=r"scaled_and_first_row\.default returned torch\.float32\[4\], "
                                            r"the graph expects torch\.float32\[3, 4\]"):
        out = compiled(x)
    assert_same(out, x.sum() * 2 + x[0].sum())
