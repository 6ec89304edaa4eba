"""The model set of the Python tests, the model benchmarks and the demo: real models from
transformers built offline from configs with random weights, a plain MLP and a model with
deliberate graph breaks. `size="test"` is tiny (seconds for every mode in CI); `size="bench"`
is large enough to time (still small next to the published checkpoints)."""
import torch

try:
    import transformers
    transformers.logging.set_verbosity_error()
except ImportError:  # the MLP and the graph-break model need only torch
    transformers = None

SIZES = ("test", "bench")


def bert(size):
    h, layers, seq, batch = (32, 2, 16, 2) if size == "test" else (256, 4, 128, 4)
    c = transformers.BertConfig(vocab_size=1000, hidden_size=h, num_hidden_layers=layers, num_attention_heads=4,
                                intermediate_size=4 * h, max_position_embeddings=512, hidden_dropout_prob=0.0,
                                attention_probs_dropout_prob=0.0)
    return transformers.BertModel(c), (torch.randint(0, 1000, (batch, seq)),)


def gpt2(size):
    h, layers, seq, batch = (32, 2, 16, 2) if size == "test" else (256, 4, 128, 4)
    c = transformers.GPT2Config(vocab_size=1000, n_embd=h, n_layer=layers, n_head=4, n_positions=512,
                                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(c), (torch.randint(0, 1000, (batch, seq)),)


def resnet18(size):
    if size == "test":
        # 64 x 64 images: the last stage's batch norms see 2 x 2 positions per image. At 32 x 32
        # they saw one, two values per channel in training, where float32 rounding is amplified
        # without bound and the model rule's comparison with eager's error became a draw (ember's
        # error 1.0-5.7x eager's over 8 gradients of one block, 1x on average).
        c = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 32, 64], depths=[2, 2, 2, 2],
                                      layer_type="basic")
        return transformers.ResNetModel(c), (torch.randn(2, 3, 64, 64),)
    c = transformers.ResNetConfig(embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2],
                                  layer_type="basic")
    return transformers.ResNetModel(c), (torch.randn(2, 3, 64, 64),)


def resnet50(size):
    if size == "test":
        c = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[32, 64, 64, 128], depths=[1, 1, 1, 1],
                                      layer_type="bottleneck")
        return transformers.ResNetModel(c), (torch.randn(2, 3, 32, 32),)
    c = transformers.ResNetConfig(embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[3, 4, 6, 3],
                                  layer_type="bottleneck")
    return transformers.ResNetModel(c), (torch.randn(1, 3, 64, 64),)


def mobilenet_v2(size):
    image, mult, batch = (32, 0.35, 2) if size == "test" else (96, 1.0, 2)
    c = transformers.MobileNetV2Config(image_size=image, depth_multiplier=mult)
    return transformers.MobileNetV2Model(c), (torch.randn(batch, 3, image, image),)


def vit(size):
    h, layers, image = (32, 2, 32) if size == "test" else (256, 4, 64)
    c = transformers.ViTConfig(image_size=image, patch_size=8, hidden_size=h, num_hidden_layers=layers,
                               num_attention_heads=4, intermediate_size=4 * h, hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0)
    return transformers.ViTModel(c), (torch.randn(2, 3, image, image),)


def efficientnet(size):
    image, width, depth, batch = (32, 0.25, 0.3, 2) if size == "test" else (96, 1.0, 1.0, 2)
    c = transformers.EfficientNetConfig(image_size=image, width_coefficient=width, depth_coefficient=depth,
                                        drop_connect_rate=0.0, hidden_dim=1280 if size == "bench" else 320)
    return transformers.EfficientNetModel(c), (torch.randn(batch, 3, image, image),)


def convnext(size):
    if size == "test":
        c = transformers.ConvNextConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 2, 1])
        return transformers.ConvNextModel(c), (torch.randn(2, 3, 32, 32),)
    c = transformers.ConvNextConfig(hidden_sizes=[96, 192, 384, 768], depths=[3, 3, 9, 3])
    return transformers.ConvNextModel(c), (torch.randn(2, 3, 64, 64),)


def swin(size):
    if size == "test":
        c = transformers.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
                                    window_size=4, drop_path_rate=0.0)
        return transformers.SwinModel(c), (torch.randn(2, 3, 32, 32),)
    c = transformers.SwinConfig(image_size=64, patch_size=2, embed_dim=96, depths=[2, 2, 6, 2],
                                num_heads=[3, 6, 12, 24], window_size=4, drop_path_rate=0.0)
    return transformers.SwinModel(c), (torch.randn(2, 3, 64, 64),)


def llama(size):
    h, layers, seq, batch = (32, 2, 16, 2) if size == "test" else (256, 4, 128, 4)
    c = transformers.LlamaConfig(vocab_size=1000, hidden_size=h, intermediate_size=(8 * h) // 3, num_hidden_layers=layers,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    return transformers.LlamaForCausalLM(c), (torch.randint(0, 1000, (batch, seq)),)


def wav2vec2(size):
    h, layers, samples = (32, 2, 800) if size == "test" else (256, 4, 16000)
    conv = (16, 16) if size == "test" else (128, 128, 128)
    c = transformers.Wav2Vec2Config(vocab_size=32, hidden_size=h, num_hidden_layers=layers, num_attention_heads=4,
                                    intermediate_size=4 * h, conv_dim=conv, conv_stride=(5,) + (2,) * (len(conv) - 1),
                                    conv_kernel=(10,) + (3,) * (len(conv) - 1), num_conv_pos_embeddings=16,
                                    num_conv_pos_embedding_groups=4, hidden_dropout=0.0, attention_dropout=0.0,
                                    activation_dropout=0.0, feat_proj_dropout=0.0, mask_time_prob=0.0)
    return transformers.Wav2Vec2Model(c), (torch.randn(2, samples),)


class MLP(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                       torch.nn.Linear(2 * width, 2 * width), torch.nn.LayerNorm(2 * width),
                                       torch.nn.ReLU(), torch.nn.Linear(2 * width, 10))

    def forward(self, x):
        return self.net(x)


def mlp(size):
    width, batch = (32, 8) if size == "test" else (512, 256)
    return MLP(width), (torch.randn(batch, width),)


class WithBreaks(torch.nn.Module):
    """.item() in a branch, a print and a data-dependent shape: each breaks the graph."""

    def __init__(self, width):
        super().__init__()
        self.a, self.b = torch.nn.Linear(width, width), torch.nn.Linear(width, width)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        if h.sum().item() > 0:
            h = h * 2
        print("", end="")
        positive = h[h > 0]
        return self.b(h) + positive.sum()


def with_breaks(size):
    return WithBreaks(16 if size == "test" else 256), (torch.randn(4 if size == "test" else 64, 16 if size == "test"
                                                                 else 256),)


def _tokens(batch, length):
    return torch.randint(1, 100, (batch, length))


def tiny_transformer(name):
    """(model in eval mode, keyword inputs) of a tiny config of a transformers architecture, for
    per-call overhead (issue 26): widths of 32, two layers, 12 tokens, so that a call is well
    under a millisecond and the time around the kernels shows."""
    t = transformers
    decoder_only = {
        "phi": lambda: t.PhiForCausalLM(t.PhiConfig(vocab_size=100, hidden_size=32, intermediate_size=64,
                                                    num_hidden_layers=2, num_attention_heads=4)),
        "bloom": lambda: t.BloomForCausalLM(t.BloomConfig(vocab_size=100, hidden_size=32, n_layer=2, n_head=4)),
        "gpt_neo": lambda: t.GPTNeoForCausalLM(t.GPTNeoConfig(
            vocab_size=100, hidden_size=32, num_layers=2, attention_types=[[["global", "local"], 1]], num_heads=4,
            window_size=4)),
    }
    encoder_decoder = {
        "t5": lambda: t.T5ForConditionalGeneration(t.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64,
                                                              num_layers=2, num_heads=4, decoder_start_token_id=0)),
        "bart": lambda: t.BartForConditionalGeneration(t.BartConfig(
            vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)),
    }
    torch.manual_seed(0)
    if name in decoder_only:
        return decoder_only[name]().eval(), {"input_ids": _tokens(2, 12), "use_cache": False}
    inputs = {"input_ids": _tokens(2, 12), "decoder_input_ids": _tokens(2, 7), "use_cache": False}
    return encoder_decoder[name]().eval(), inputs


TINY_TRANSFORMERS = ("phi", "bloom", "gpt_neo", "t5", "bart")


MODELS = {"bert": bert, "gpt2": gpt2, "resnet18": resnet18, "resnet50": resnet50, "mobilenet_v2": mobilenet_v2,
          "vit": vit, "mlp": mlp, "with_breaks": with_breaks}
# Architectures beyond the set (docs/testing.md names EfficientNet): windowed attention
# through as_strided, 7x7 depthwise convolutions with channels-last layer norms, squeeze and
# excitation, grouped-query attention with rotary embeddings, 1-d convolutions.
MORE_MODELS = {"efficientnet": efficientnet, "convnext": convnext, "swin": swin, "llama": llama,
               "wav2vec2": wav2vec2}
ALL_MODELS = {**MODELS, **MORE_MODELS}
NEEDS_TRANSFORMERS = {"bert", "gpt2", "resnet18", "resnet50", "mobilenet_v2", "vit"} | set(MORE_MODELS)


def build(name, size="test", seed=0):
    """(model, example inputs), the same weights for the same seed."""
    if name in NEEDS_TRANSFORMERS and transformers is None:
        raise RuntimeError(f"{name} needs transformers (make setup installs it)")
    torch.manual_seed(seed)
    model, args = ALL_MODELS[name](size)
    _trained_like_norms(model)
    return model, args


def _trained_like_norms(model):
    """Batch norms with the statistics and scales of a trained model. transformers draws their
    scales from N(0, 0.02) for some models (MobileNetV2, EfficientNet), so each one shrinks its
    input 50-fold: those models' outputs came out near 1e-25 in eval mode, and any comparison of
    them passed on its absolute tolerance alone. Scales near 1 and running statistics away from
    (0, 1) keep every output of the order of 1 and make eval mode differ from train mode."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.affine and m.track_running_stats:
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)


def main_output(out):
    """The tensor a model's result is compared and trained on."""
    if isinstance(out, torch.Tensor):
        return out
    for name in ("last_hidden_state", "logits"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    raise TypeError(f"no main output in {type(out).__name__}")
