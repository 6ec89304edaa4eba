"""The compute-bound microbenchmarks of BENCHMARKS.md: PyTorch eager, torch.compile (Inductor,
default mode) and ember (through its PyTorch bridge), in one process, on the same tensors.

GEMM square and skinny, linear + bias + GELU, a ResNet basic block, attention, the demo's MLP and
a transformer block (inference), and the per-call overhead of a tiny graph (in default and in
reduce-overhead). Same protocol as
torch_kernels.py: warm-up calls, then repeats with the three interleaved (the order rotated),
medians; cold compile per graph from empty caches; accuracy checked before timing. GFLOP/s
count the model's multiply-adds as 2 FLOPs. The FMA ceiling is measured at the start of the run
with the same threads (build/benchmarks/ember_bench_fma_peak: chains of vector FMAs in
registers); without that program, the nominal one (lanes x 2 pipes x the reported clock), as
the header line says.

Usage: .venv/bin/python benchmarks/torch_compute.py [--threads N] [--only PART,...] (benchmarks whose names contain a part)
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--only", default="")
    parser.add_argument("--warm-start-of", default="", help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    if not args.warm_start_of:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-bench-")
        os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-bench-")
    os.environ.setdefault("EMBER_NUM_THREADS", str(args.threads))
    import torch

    import ember
    from ember._compile import report_of
    from torch_kernels import interleaved

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    benches = make_benches(torch)
    if args.warm_start_of:  # a new process: ember's compile of the graphs on the first call
        fn, inputs, _ = benches[args.warm_start_of]()
        with torch.no_grad():
            compiled = ember.compile(fn, mode=MODES.get(args.warm_start_of, "default"))
            compiled(*inputs)
        print(f"{sum(g.compile_ms for g in report_of(compiled).graphs):.1f}")
        return
    names = [n for n in benches if not args.only or any(part in n for part in args.only.split(","))]
    peak, how = fma_peak_gflops(args.threads)
    print(f"torch {torch.__version__}, float32, {torch.get_num_threads()} thread(s); FMA ceiling "
          f"{peak:.0f} GFLOP/s ({how})\n")
    print("| benchmark | eager ms | torch.compile ms | ember ms | ember vs eager | ember vs torch.compile "
          "| ember GFLOP/s | share of FMA ceiling | cold compile s (Inductor / ember) | ember compile ms, new process: cold / from disk |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        fn, inputs, flops = benches[name]()
        with torch.no_grad():
            mode = MODES.get(name, "default")
            compiled, embered = torch.compile(fn, mode=mode), ember.compile(fn, mode=mode)
            want = fn(*inputs)
            colds = []
            eager_ms = timed(lambda: fn(*inputs))
            for c in (compiled, embered):
                t0 = time.perf_counter()
                got = c(*inputs)
                colds.append(time.perf_counter() - t0 - eager_ms / 1e3)
                if not close(torch, got, want):
                    print(f"| {name} | wrong result: no speed |")
                    break
            else:
                eager_ms, compiled_ms, ember_ms = interleaved(
                    [lambda: fn(*inputs), lambda: compiled(*inputs), lambda: embered(*inputs)],
                    repeats=15 if flops else 200)
                warm = warm_start(name, args.threads)
                if flops:
                    gflops = flops / (ember_ms / 1e3) / 1e9
                    rate = f"{gflops:.1f} | {100 * gflops / peak:.0f}%"
                    times = f"{eager_ms:.2f} | {compiled_ms:.2f} | {ember_ms:.2f}"
                else:  # the overhead row: microseconds
                    rate = "- | -"
                    times = f"{eager_ms * 1e3:.1f} us | {compiled_ms * 1e3:.1f} us | {ember_ms * 1e3:.1f} us"
                print(f"| {name} | {times} | {eager_ms / ember_ms:.2f}x | {compiled_ms / ember_ms:.2f}x | {rate} "
                      f"| {colds[0]:.1f} / {colds[1]:.2f} | {warm} |", flush=True)
        torch._dynamo.reset()


def make_benches(torch):
    """name -> () -> (fn, inputs, FLOPs of one call)."""
    import torch.nn.functional as F

    sys.path.insert(0, HERE)
    import model_zoo

    def gemm(m, k, n):
        return lambda: (lambda a, b: a @ b, [torch.randn(m, k), torch.randn(k, n)], 2 * m * n * k)

    def linear_gelu():
        x, w, b = torch.randn(512, 1024), torch.randn(4096, 1024) / 32, torch.randn(4096)
        return (lambda x, w, b: F.gelu(F.linear(x, w, b)), [x, w, b], 2 * 512 * 1024 * 4096)

    def resnet_block():
        block = ResNetBasicBlock(torch, 64).eval()
        x = torch.randn(4, 64, 56, 56)
        return block, [x], 2 * 2 * (4 * 64 * 56 * 56) * 64 * 9

    def attention():
        q, k, v = (torch.randn(4, 8, 512, 64) for _ in range(3))
        return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v],
                2 * 2 * 4 * 8 * 512 * 512 * 64)

    def mlp():
        model, inputs = model_zoo.build("mlp", "bench")
        flops = sum(2 * inputs[0].shape[0] * p.numel() for p in model.parameters() if p.dim() == 2)
        return model.eval(), inputs, flops

    def transformer_block(batch, tokens, width, heads):
        def make():
            block = TransformerBlock(torch, width, heads).eval()
            x = torch.randn(batch, tokens, width)
            rows = batch * tokens
            attention = 2 * 2 * batch * tokens * tokens * width
            return block, [x], 2 * rows * 12 * width * width + attention
        return make

    def overhead():
        return (lambda x: x + 1, [torch.randn(8)], 0)

    def tiny_transformer(name):
        def make():
            model, kwargs = model_zoo.tiny_transformer(name)
            names = [k for k, v in kwargs.items() if torch.is_tensor(v)]
            flags = {k: v for k, v in kwargs.items() if not torch.is_tensor(v)}
            return (lambda *tensors: model(**dict(zip(names, tensors)), **flags).logits,
                    [kwargs[k] for k in names], 0)
        return make

    return {
        "GEMM 1024x1024x1024": gemm(1024, 1024, 1024),
        "GEMM skinny 16x4096x4096": gemm(16, 4096, 4096),
        "GEMM skinny 4096x4096x16": gemm(4096, 4096, 16),
        "linear + bias + GELU [512,1024]x[1024,4096]": linear_gelu,
        "ResNet basic block [4,64,56,56]": resnet_block,
        "attention (causal) [4,8,512,64]": attention,
        "MLP (demo)": mlp,
        "transformer block [4,256,512]": transformer_block(4, 256, 512, 8),
        # Issue 26's small graphs: a few dozen tokens, where the time around the kernels counts.
        "small transformer block [1,32,64]": transformer_block(1, 32, 64, 2),
        "small transformer block [1,48,128]": transformer_block(1, 48, 128, 4),
        "small transformer block [2,32,256]": transformer_block(2, 32, 256, 4),
        "per-call overhead: x + 1 on 8 elements": overhead,
        REDUCE_OVERHEAD_ROW: overhead,
        # Tiny configs of transformers' architectures (width 32, 2 layers, 12 tokens), per call.
        **{f"per-call overhead: tiny {name}": tiny_transformer(name) for name in model_zoo.TINY_TRANSFORMERS},
    }


# Rows compiled in another mode than default, by ember and torch.compile alike (on CPU,
# torch.compile's reduce-overhead has no CUDA graph to record and runs as default).
REDUCE_OVERHEAD_ROW = "per-call overhead: x + 1 on 8 elements, reduce-overhead"
MODES = {REDUCE_OVERHEAD_ROW: "reduce-overhead"}


def ResNetBasicBlock(torch, channels):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(y)) + x)

    return Block()


def TransformerBlock(torch, width, heads):
    """A pre-norm GPT block: attention and a GELU MLP, each with a residual."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    return Block()


def close(torch, got, want):
    return torch.allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, want.abs().max().item()))


def timed(fn):
    """One call's milliseconds (after one warm-up call)."""
    fn()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def warm_start(name, threads):
    """ember's compile of the graphs (translation, passes, kernels; Dynamo's and AOTAutograd's
    share excluded) in a new process with an empty kernel cache, then in another one that finds
    the kernels in the disk cache the first one wrote."""
    env = dict(os.environ, EMBER_CACHE_DIR=tempfile.mkdtemp(prefix="ember-warm-"))
    ms = []
    for _ in range(2):
        out = subprocess.run([sys.executable, __file__, "--threads", str(threads), "--warm-start-of", name],
                             capture_output=True, text=True, env=env)
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            return "failed"
        ms.append(float(lines[-1]))
    return f"{ms[0]:.0f} / {ms[1]:.0f} ({100 * ms[1] / max(ms[0], 1e-9):.0f}%)"


def flops_per_cycle():
    flags = open("/proc/cpuinfo").read()
    return 64.0 if "avx512f" in flags else 32.0 if "fma" in flags else 16.0  # 2 FMA pipes x lanes x 2


def nominal_ghz():
    for line in open("/proc/cpuinfo"):
        if line.startswith("cpu MHz"):
            return float(line.split(":")[1]) / 1e3
    return 1.0


def fma_peak_gflops(threads):
    """(GFLOP/s, how it was found): measured on this machine where the program is built."""
    program = os.path.join(HERE, "..", "build", "benchmarks", "ember_bench_fma_peak")
    if os.path.exists(program):
        out = subprocess.run([program, str(threads)], capture_output=True, text=True)
        if out.returncode == 0:
            return float(out.stdout.split()[-1]), f"measured, {threads} thread(s)"
    nominal = threads * flops_per_cycle() * nominal_ghz()
    return nominal, f"nominal: {threads} core(s) x {flops_per_cycle():.0f} FLOP/cycle x {nominal_ghz():.2f} GHz"


if __name__ == "__main__":
    main()
