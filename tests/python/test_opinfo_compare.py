"""The OpInfo runner's judgement of one result (opinfo_compare.py): it must fail what is wrong,
and pass a 16-bit result that differs from eager's because it is more accurate."""
import torch

from opinfo_compare import compare_tensor, compare_values, identical


def _bf16(values):
    return torch.tensor(values, dtype=torch.bfloat16)


def test_float32_close_to_eager_passes_and_a_wrong_value_fails():
    eager = torch.linspace(-3, 3, 50)
    assert compare_tensor(eager * (1 + 1e-6), eager).ok
    wrong = eager.clone()
    wrong[7] += 1e-3
    check = compare_tensor(wrong, eager)
    assert not check.ok and "max abs difference 0.001" in check.detail


def test_float32_far_from_eager_passes_only_when_no_worse_against_float64():
    # eager lost digits to cancellation; ember kept them: close to the reference.
    reference = torch.tensor([1e-4, 2.0], dtype=torch.float64)
    eager = torch.tensor([1.2e-4, 2.0])
    assert compare_tensor(torch.tensor([1e-4, 2.0]), eager, reference).ok
    check = compare_tensor(torch.tensor([0.5e-4, 2.0]), eager, reference)
    assert not check.ok and check.errors[1] > check.errors[0]


def test_bfloat16_rounded_once_passes_where_eager_rounded_each_step():
    # A small result of a cancellation: eager's, rounded at each step, is 4 % off; ember's is
    # the nearest bfloat16 to the reference. They differ by more than bfloat16's tolerance.
    reference = torch.tensor([0.01, 0.75], dtype=torch.float64)
    eager = _bf16([0.0104, 0.75])
    ember = _bf16([0.01, 0.75])
    check = compare_tensor(ember, eager, reference)
    assert check.ok and check.errors[1] < check.errors[0]
    assert not compare_tensor(eager, ember, reference).ok  # the reverse is worse than "eager"


def test_integers_are_exact_and_dtype_and_shape_must_agree():
    assert not compare_tensor(torch.tensor([1, 2]), torch.tensor([1, 3])).ok
    assert not compare_tensor(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64)).ok
    assert not compare_tensor(torch.zeros(2, 1), torch.zeros(2)).ok


def test_nan_only_where_eager_has_nan():
    eager = torch.tensor([float("nan"), 1.0])
    assert compare_tensor(torch.tensor([float("nan"), 1.0]), eager).ok
    assert not compare_tensor(torch.tensor([0.0, 1.0]), eager).ok
    assert not compare_tensor(torch.tensor([float("nan"), float("nan")]), eager).ok


def test_results_of_several_values_and_numbers():
    assert compare_values((torch.ones(2), 3), (torch.ones(2), 3)).ok
    assert not compare_values((torch.ones(2), 3), (torch.ones(2), 4)).ok
    assert not compare_values([torch.ones(2)], [torch.ones(2), torch.ones(2)]).ok


def test_identical_tells_repeatable_values():
    a = torch.tensor([float("nan"), 1.0])
    assert identical((a, 2), (a.clone(), 2))
    assert not identical((a,), (torch.tensor([float("nan"), 1.5]),))
