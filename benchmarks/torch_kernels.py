"""PyTorch eager, torch.compile (Inductor, default mode) and ember (through its PyTorch bridge)
on ember_bench_kernels' shapes, in one process.

The elementwise and normalisation microbenchmarks, float32 [rows, 8192], with the same protocol:
warm-up calls, then repeats with the three interleaved, medians; GB/s of compulsory traffic and
its share of a copy measured in the same process; cold compile time per graph (empty caches).

Usage: .venv/bin/python benchmarks/torch_kernels.py [--threads N] [--rows R] [--only NAME]
"""
import argparse
import os
import statistics
import tempfile
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--only", default="", help="run the benchmarks whose name contains this")
    args = parser.parse_args()
    # Fresh caches, so the compile times are cold.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-bench-")
    os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-bench-")
    os.environ.setdefault("EMBER_NUM_THREADS", str(args.threads))
    import torch
    import torch.nn.functional as F

    import ember

    torch.set_num_threads(args.threads)
    rows, cols = args.rows, 8192
    # name: (inputs read, outputs written as a share of an input, function)
    benches = {
        "gelu": (1, 1, lambda x, y, b: F.gelu(x)),
        "bias + gelu": (1, 1, lambda x, y, b: F.gelu(x + b)),
        "add + relu": (2, 1, lambda x, y, b: torch.relu(x + y)),
        "10-op chain": (1, 1, chain),
        "softmax": (1, 1, lambda x, y, b: F.softmax(x, -1)),
        "layer_norm": (1, 1, lambda x, y, b: F.layer_norm(x, (x.shape[-1],), b, b)),
        "rms_norm": (1, 1, lambda x, y, b: F.rms_norm(x, (x.shape[-1],), b, 1e-6)),
        # A transformer's residual add and the layer norm after it; both results are kept.
        "residual add + layer_norm": (2, 2, lambda x, y, b: (x + y, F.layer_norm(x + y, (x.shape[-1],), b, b))),
        # Reductions over dims other than the last: a bias gradient, batch norm's statistics.
        "sum over the rows (bias gradient)": (1, 0, lambda x, y, b: x.sum(0)),
        "var_mean over (0, 2) of [32, R/32, 8192]": (
            1, 0, lambda x, y, b: torch.var_mean(x.view(32, -1, x.shape[-1]), (0, 2))),
        # A view between elementwise ops and what reads them (simplify moves it onto the input).
        "exp, view [R/8, 8 * 8192], row sum": (1, 0, lambda x, y, b: x.exp().view(x.shape[0] // 8, -1).sum(-1)),
        "softmax of flatten(x + 1) [R/8, 8 * 8192]": (
            1, 1, lambda x, y, b: F.softmax((x + 1).view(x.shape[0] // 8, 8, -1).flatten(1), -1)),
        # Indexed reductions (the interpreter's typed kernels): a classifier's prediction, and
        # values with indices down the columns.
        # Row folds of short rows, where the fold's end (its lanes folded into one) weighs.
        "max over each row": (1, 0, lambda x, y, b: x.amax(-1)),
        "max over rows of 256 [R * 32, 256]": (1, 0, lambda x, y, b: x.view(-1, 256).amax(-1)),
        "sum over rows of 256 [R * 32, 256]": (1, 0, lambda x, y, b: x.view(-1, 256).sum(-1)),
        "argmax over each row": (1, 0, lambda x, y, b: x.argmax(-1)),
        "max with indices over dim 0": (1, 0, lambda x, y, b: tuple(x.max(0))),
    }
    benches = {name: bench for name, bench in benches.items() if args.only in name}
    x = torch.rand(rows, cols)
    y = torch.rand(rows, cols)
    b = torch.rand(cols)
    copy = copy_bandwidth(x)
    print(f"torch {torch.__version__}, float32 [{rows}, {cols}], {torch.get_num_threads()} thread(s)")
    print(f"copy bandwidth, measured now: {copy:.1f} GB/s (read + write)\n")
    print("| benchmark | eager ms | torch.compile ms | ember ms | ember vs torch.compile | cold compile s "
          "(Inductor / ember) | ember GB/s | ember share of copy |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (reads, writes, fn) in benches.items():
        compiled, embered = torch.compile(fn), ember.compile(fn)
        want = fn(x, y, b)
        colds = []
        for c in (compiled, embered):
            t0 = time.perf_counter()
            got = c(x, y, b)
            colds.append(time.perf_counter() - t0)
            if not all(torch.allclose(w, g, rtol=1e-4, atol=1e-5) for w, g in zip(_tensors(want), _tensors(got))):
                print(f"| {name} | wrong result: no speed |")
                break
            del got
        else:
            del want
            eager_ms, compiled_ms, ember_ms = interleaved(
                [lambda: fn(x, y, b), lambda: compiled(x, y, b), lambda: embered(x, y, b)])
            gbs = (reads + writes) * rows * cols * 4 / (ember_ms / 1e3) / 1e9
            print(f"| {name} | {eager_ms:.1f} | {compiled_ms:.1f} | {ember_ms:.1f} | {compiled_ms / ember_ms:.2f}x "
                  f"| {colds[0]:.1f} / {colds[1]:.2f} | {gbs:.1f} | {100 * gbs / copy:.0f}% |")


def _tensors(out):
    return out if isinstance(out, tuple) else (out,)


def chain(x, y, b):
    t = x
    for _ in range(5):
        t = t * 0.5 + b
    return t


def copy_bandwidth(x):
    import torch

    out = torch.empty_like(x)
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        out.copy_(x)
        times.append(time.perf_counter() - t0)
    # The best of ten: a ceiling, and the median swung from 17 to 30 GB/s between runs here.
    return 2 * x.numel() * 4 / min(times) / 1e9


def interleaved(fns, warmup=3, repeats=15):
    for _ in range(warmup):
        for f in fns:
            f()
    times = [[] for _ in fns]
    for r in range(repeats):
        # Each one follows each other as often (PyTorch's OpenMP threads spin after its ops).
        order = list(range(len(fns)))
        for i in order[r % len(fns):] + order[:r % len(fns)]:
            t0 = time.perf_counter()
            fns[i]()
            times[i].append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in times]


if __name__ == "__main__":
    main()
