"""Model benchmark: PyTorch eager, torch.compile (Inductor, default mode) and ember in each mode
on the model set (model_zoo.py, size "bench"), inference, in one process on the same inputs,
repeats interleaved. Per model: median time and spread, speedup over eager, cold compile (first
call minus an eager call, with empty kernel caches), recompile with ember's kernels in memory,
memory held after compile and warm-up, accuracy against eager by docs/testing.md's model rule, share of ATen ops
ember lowered. Writes a Markdown table and a PNG bar chart.

    .venv/bin/python benchmarks/models.py [--models bert,gpt2] [--repeats 10] [--threads N] [--amp]

--amp runs every variant under torch.autocast("cpu", dtype=torch.bfloat16), entered for each call
as PyTorch's own benchmark harness does (so eager's cast weights are not kept from call to call),
and checks accuracy with docs/testing.md's float16/bfloat16 factor (3x eager's error).
"""
import argparse
import copy
import datetime
import math
import os
import platform
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
import model_zoo  # noqa: E402

import ember  # noqa: E402
from ember._compile import report_of  # noqa: E402

EMBER_MODES = ("default", "reduce-overhead", "max-autotune")


def rss_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def close_to_eager(actual, expected, reference64, tol=1e-4, factor=2):
    if torch.allclose(actual, expected, rtol=tol, atol=tol, equal_nan=True):
        return True
    def rmse(a):
        return (a.double() - reference64.double()).pow(2).mean().sqrt().item()
    return rmse(actual) <= factor * rmse(expected) + tol / 10


def under_autocast(fn):
    """fn, each call in its own bfloat16 autocast region."""
    def call(*args):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return fn(*args)
    return call


def variants(model):
    yield "eager", model, None
    yield "torch.compile", torch.compile(model), None
    for mode in EMBER_MODES:
        compiled = ember.compile(model, mode=mode)
        yield f"ember {mode}", compiled, compiled


def bench_model(name, repeats, amp=False):
    model, args = model_zoo.build(name, "bench")
    model.eval()
    main = model_zoo.main_output
    rows = {}
    with torch.no_grad():
        reference64 = main(copy.deepcopy(model).double()(*[a.double() if a.is_floating_point() else a for a in args]))
        wrap = under_autocast if amp else (lambda f: f)
        eager_s, expected = timed(lambda: main(wrap(model)(*args)))
        runs = []
        torch._dynamo.reset()
        for label, fn, compiled in variants(model):  # no reset in between: it would drop the others' code
            fn = wrap(fn)
            held_before = rss_kb("VmRSS")
            first_s, out = timed(lambda: main(fn(*args)))
            row = {"cold_compile_s": max(first_s - eager_s, 0.0) if label != "eager" else 0.0,
                   "accurate": close_to_eager(main(fn(*args)), expected, reference64, factor=3 if amp else 2),
                   "times": []}
            if compiled is not None:
                graphs = report_of(compiled).graphs
                lowered = sum(sum(g.lowered.values()) for g in graphs)
                calls = sum(sum(g.torch_calls.values()) for g in graphs)
                row["lowered_share"] = lowered / max(lowered + calls, 1)
                row["graphs"] = sum(1 for g in graphs if g.fallback is None)
            rows[label] = row
            runs.append((label, fn))
            for _ in range(2):  # warm up (reduce-overhead keeps its buffers from here on)
                fn(*args)
            row["held_mb"] = max(rss_kb("VmRSS") - held_before, 0) / 1024
        for r in range(repeats):
            # Each variant follows each other as often: on 2 cores, PyTorch's OpenMP threads
            # spin for a while after its ops and slow whatever runs next.
            for label, fn in runs[r % len(runs):] + runs[:r % len(runs)]:
                rows[label]["times"].append(timed(lambda: fn(*args))[0])
        # A second compile of the same graphs: kernels come from the in-memory cache.
        torch._dynamo.reset()
        recompiled = wrap(ember.compile(model))
        first_s, _ = timed(lambda: recompiled(*args))
        rows["ember default"]["recompile_s"] = max(first_s - eager_s, 0.0)
    return rows


def summarise(results):
    lines = []
    labels = ["eager", "torch.compile"] + [f"ember {m}" for m in EMBER_MODES]
    lines.append("| model | " + " | ".join(f"{l} ms" for l in labels) + " | ember vs eager | ember vs torch.compile "
                 "| cold compile s (inductor / ember) | ember recompile s | MB held after compile and warm-up "
                 "(eager / inductor / ember) | ATen ops lowered | accurate |")
    lines.append("|" + "---|" * (len(labels) + 8))
    speedups, vs_inductor = [], []
    for name, rows in results.items():
        med = {l: statistics.median(rows[l]["times"]) * 1e3 for l in labels}
        spread = {l: (min(rows[l]["times"]) * 1e3, max(rows[l]["times"]) * 1e3) for l in labels}
        best_ember = min(med[f"ember {m}"] for m in EMBER_MODES)
        speedups.append(med["eager"] / best_ember)
        vs_inductor.append(med["torch.compile"] / best_ember)
        cells = [f"{med[l]:.2f} ({spread[l][0]:.2f}–{spread[l][1]:.2f})" for l in labels]
        accurate = all(rows[l]["accurate"] for l in labels)
        lines.append(f"| {name} | " + " | ".join(cells) +
                     f" | {speedups[-1]:.2f}x | {vs_inductor[-1]:.2f}x"
                     f" | {rows['torch.compile']['cold_compile_s']:.1f} / {rows['ember default']['cold_compile_s']:.2f}"
                     f" | {rows['ember default']['recompile_s']:.3f}"
                     f" | {rows['eager']['held_mb']:.0f} / {rows['torch.compile']['held_mb']:.0f} / "
                     f"{rows['ember default']['held_mb']:.0f}"
                     f" | {rows['ember default'].get('lowered_share', 0):.0%} | {'yes' if accurate else 'NO'} |")
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    lines.append("")
    lines.append(f"Geomean speedup of ember's best mode: {geo(speedups):.2f}x over eager, "
                 f"{geo(vs_inductor):.2f}x over torch.compile.")
    return "\n".join(lines), speedups, vs_inductor


def chart(results, speedups, vs_inductor, path, title="inference"):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart", file=sys.stderr)
        return
    names = list(results)
    x = range(len(names))
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar([i - 0.2 for i in x], speedups, 0.4, label="ember over eager")
    ax.bar([i + 0.2 for i in x], vs_inductor, 0.4, label="ember over torch.compile")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(x), names, rotation=20)
    ax.set_ylabel("speedup (higher is better)")
    ax.set_title(f"ember {title} speedups ({torch.get_num_threads()} threads)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(m for m in model_zoo.MODELS if m != "with_breaks"))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=None, help="path without extension (default results/models, "
                        "results/models-amp with --amp)")
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast")
    args = parser.parse_args()
    if args.out is None:
        args.out = os.path.join(os.path.dirname(__file__), "results", "models-amp" if args.amp else "models")
    torch.set_num_threads(args.threads)
    os.environ.setdefault("EMBER_NUM_THREADS", str(args.threads))
    # Cold compiles: empty kernel caches for both compilers (their caches on disk stay untouched).
    import tempfile
    caches = tempfile.mkdtemp(prefix="ember-bench-models-")
    os.environ["EMBER_CACHE_DIR"] = os.path.join(caches, "ember")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(caches, "inductor")
    warnings.simplefilter("ignore")
    results = {}
    for name in args.models.split(","):
        print(f"{name} ...", file=sys.stderr, flush=True)
        results[name] = bench_model(name, args.repeats, args.amp)
    table, speedups, vs_inductor = summarise(results)
    kind = "inference under bfloat16 autocast" if args.amp else "inference"
    header = (f"# Models: eager, torch.compile and ember ({kind})\n\n"
              f"{datetime.date.today()}, {platform.processor() or platform.machine()}, {args.threads} threads, "
              f"torch {torch.__version__}, median of {args.repeats} interleaved repeats (min–max).\n\n")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".md", "w") as f:
        f.write(header + table + "\n")
    chart(results, speedups, vs_inductor, args.out + ".png", kind)
    print(header + table)


if __name__ == "__main__":
    main()
