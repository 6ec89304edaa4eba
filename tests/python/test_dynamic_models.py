"""Models under dynamic=True: one compiled graph serves batch sizes and sequence lengths it was
not traced with (Dynamo's symbolic sizes as ember's symbolic dims), for inference and training,
with eager's results. Each size is compared by docs/testing.md's model rule."""
import copy

import pytest
import torch

import ember
from conftest import assert_model_close, report_of

import model_zoo

pytest.importorskip("transformers")

# Text models get (batch, length) pairs; the others only a batch size (wav2vec2 a length too).
SIZES = [(2, 16), (3, 12), (5, 20)]
# Not Swin: Dynamo alone takes minutes to trace it with symbolic sizes (ember's part: 0.5 s).
MODELS = ["bert", "gpt2", "llama", "resnet18", "wav2vec2", "mlp"]


def resized(args, batch, length):
    x = args[0]
    if x.dtype == torch.long:
        return (torch.randint(0, 1000, (batch, length)),)
    if x.dim() == 2 and x.shape[1] > 100:  # raw audio
        return (torch.randn(batch, x.shape[1] + 40 * length),)
    return (torch.randn(batch, *x.shape[1:]),)


def lowered_everything_but_known_torch_calls(compiled):
    """Sizes that are products of symbols (batch x length) once made views and GEMMs torch calls."""
    for g in report_of(compiled).graphs:
        assert g.fallback is None, report_of(compiled).text()
        for op in ("aten.view.default", "aten.mm.default", "aten.addmm.default", "aten.bmm.default",
                   "aten.slice.Tensor", "aten.as_strided.default"):
            assert op not in g.torch_calls, report_of(compiled).text()


@pytest.mark.parametrize("name", MODELS)
def test_dynamic_inference_serves_every_size(name):
    model, args = model_zoo.build(name, "test")
    model.eval()
    compiled = ember.compile(model, dynamic=True)
    reference64 = copy.deepcopy(model).double()
    with torch.no_grad():
        for batch, length in SIZES:
            inputs = resized(args, batch, length)
            expected = model_zoo.main_output(model(*inputs))
            actual = model_zoo.main_output(compiled(*inputs))
            ref = model_zoo.main_output(reference64(*[a.double() if a.is_floating_point() else a for a in inputs]))
            assert_model_close(actual, expected, ref, tol=1e-4)
    lowered_everything_but_known_torch_calls(compiled)
    assert report_of(compiled).graph_count <= 2, report_of(compiled).text()  # not one per size


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_dynamic_training_steps(name):
    model, args = model_zoo.build(name, "test")
    model.train()
    reference, reference64 = copy.deepcopy(model), copy.deepcopy(model).double()
    compiled = ember.compile(model, dynamic=True)
    for batch, length in SIZES:
        inputs = resized(args, batch, length)
        for m in (model, reference, reference64):
            m.zero_grad(set_to_none=False)
        model_zoo.main_output(compiled(*inputs)).float().pow(2).mean().backward()
        model_zoo.main_output(reference(*inputs)).float().pow(2).mean().backward()
        inputs64 = [a.double() if a.is_floating_point() else a for a in inputs]
        model_zoo.main_output(reference64(*inputs64)).pow(2).mean().backward()
        for (pname, p), q, r in zip(model.named_parameters(), reference.parameters(), reference64.parameters()):
            if q.grad is not None:
                assert_model_close(p.grad, q.grad, r.grad, tol=1e-3), pname
    lowered_everything_but_known_torch_calls(compiled)
    assert report_of(compiled).graph_count <= 4, report_of(compiled).text()
