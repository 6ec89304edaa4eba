"""Real models that no one here wrote (transformers, built offline from small configs with random
weights), a plain MLP and a model with deliberate graph breaks: each compiled by ember in every
mode, for inference and for one training step, against eager by TESTING.md's model rule."""
import copy

import pytest
import torch

import ember
from conftest import MODES, assert_compiled, assert_model_close, report_of

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


def bert():
    c = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                attention_probs_dropout_prob=0.0)
    return transformers.BertModel(c), (torch.randint(0, 100, (2, 16)),)


def gpt2():
    c = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0,
                                embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(c), (torch.randint(0, 100, (2, 16)),)


def resnet18():
    c = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 32, 64], depths=[2, 2, 2, 2],
                                  layer_type="basic")
    return transformers.ResNetModel(c), (torch.randn(2, 3, 32, 32),)


def resnet50():
    c = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[32, 64, 64, 128], depths=[1, 1, 1, 1],
                                  layer_type="bottleneck")
    return transformers.ResNetModel(c), (torch.randn(2, 3, 32, 32),)


def mobilenet_v2():
    c = transformers.MobileNetV2Config(image_size=32, depth_multiplier=0.35)
    return transformers.MobileNetV2Model(c), (torch.randn(2, 3, 32, 32),)


def vit():
    c = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return transformers.ViTModel(c), (torch.randn(2, 3, 32, 32),)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64),
                                       torch.nn.LayerNorm(64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class WithBreaks(torch.nn.Module):
    """.item() in a branch, a print and a data-dependent shape: each breaks the graph."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        if h.sum().item() > 0:
            h = h * 2
        print("", end="")
        positive = h[h > 0]
        return self.b(h) + positive.sum()


def mlp():
    return MLP(), (torch.randn(8, 32),)


def with_breaks():
    return WithBreaks(), (torch.randn(4, 16),)


MODELS = {"bert": bert, "gpt2": gpt2, "resnet18": resnet18, "resnet50": resnet50, "mobilenet_v2": mobilenet_v2,
          "vit": vit, "mlp": mlp, "with_breaks": with_breaks}


def main_output(out):
    if isinstance(out, torch.Tensor):
        return out
    for name in ("last_hidden_state", "logits"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    raise AssertionError(f"no main output in {type(out).__name__}")


def build(name):
    torch.manual_seed(0)
    model, args = MODELS[name]()
    return model, args


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(MODELS))
def test_inference_matches_eager(name, mode):
    model, args = build(name)
    model.eval()
    compiled = ember.compile(model, mode=mode)
    with torch.no_grad():
        expected = main_output(model(*args))
        for _ in range(2):  # the second call replays (reduce-overhead: its static buffers)
            actual = main_output(compiled(*args))
            reference64 = main_output(copy.deepcopy(model).double()(*[a.double() if a.is_floating_point() else a
                                                                     for a in args]))
            assert_model_close(actual, expected, reference64, tol=1e-4)
    report = assert_compiled(compiled)
    if name == "with_breaks":
        assert report.graph_count >= 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(MODELS))
def test_training_step_matches_eager(name, mode):
    model, args = build(name)
    model.train()
    reference = copy.deepcopy(model)
    reference64 = copy.deepcopy(model).double()
    compiled = ember.compile(model, mode=mode)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    main_output(compiled(*args)).float().pow(2).mean().backward()
    main_output(reference(*args)).float().pow(2).mean().backward()
    args64 = [a.double() if a.is_floating_point() else a for a in args]
    main_output(reference64(*args64)).pow(2).mean().backward()

    def grad(p):
        return p.grad if p.grad is not None else torch.zeros_like(p)

    for (pname, p), q, r in zip(model.named_parameters(), reference.parameters(), reference64.parameters()):
        assert_model_close(grad(p), grad(q), grad(r), tol=1e-3), pname
    # Buffers eager updates in place (batch norm's running statistics) are updated here too.
    for (bname, b), c, d in zip(model.named_buffers(), reference.buffers(), reference64.buffers()):
        assert_model_close(b, c, d if d.dtype == b.dtype else d.to(b.dtype), tol=1e-3), bname
    optimizer.step()  # the step runs on the same parameters the compiled module shares
    assert_compiled(compiled)
    report = report_of(compiled)
    assert any(g.kind == "backward" for g in report.graphs), report.text()
