"""Adversarial cases for scaled_dot_product_attention through the PyTorch bridge: scales, masks
that hide whole rows, NaN scores, causal and boolean masks, each against eager (the conventions
of test_adversarial_bridge.py)."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, report_of, run_both


def test_attention_with_scale_zero():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    expected, actual, compiled = run_both(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.0), q, k, v)
    assert_same(actual, expected, rtol=1e-4, atol=1e-4)


def test_attention_fully_masked_row():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 4)
    mask = torch.ones(5, 6, dtype=torch.bool)
    mask[0] = False  # e.g. a padded query position
    expected, actual, compiled = run_both(
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k, v, mask)
    assert_same(actual, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("queries", [1, 3, 40])
@pytest.mark.parametrize("bool_mask", [False, True])
def test_attention_nan_score_in_a_fully_masked_row(queries, bool_mask):
    # PyTorch's safe softmax gives 0 for a row that attends to nothing but NaN when one of its
    # scores is NaN: +inf against a positive key, plus the additive mask's -inf (or hidden by a
    # bool mask, which PyTorch adds as -inf too). Found by a review: ember gave 0.
    torch.manual_seed(0)
    q = torch.randn(1, 2, queries, 16).abs()
    k, v = torch.randn(1, 2, 64, 16).abs(), torch.randn(1, 2, 64, 16)
    q[0, 0, 0, 0] = float("inf")
    mask = torch.zeros(1, 1, queries, 64)
    mask[..., : min(2, queries), :] = float("-inf")
    if bool_mask:
        mask = mask == 0
    expected, actual, _ = run_both(
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k, v, mask)
    assert_same(actual, expected, rtol=1e-4, atol=1e-4)


def test_causal_and_masked_attention_lowered():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 4)
    mask = torch.randn(2, 1, 5, 6)
    fn = lambda q, k, v, m: (F.scaled_dot_product_attention(q, k, v, is_causal=True),  # noqa: E731
                             F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                             F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0))
    expected, actual, compiled = run_both(fn, q, k, v, mask)
    assert_same(actual, expected, rtol=1e-4, atol=1e-4)
    assert report_of(compiled).graphs[0].lowered.get("aten._scaled_dot_product_flash_attention_for_cpu.default")
