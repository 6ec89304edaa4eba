"""max-autotune against ember's default and Inductor's max-autotune, side by side in one process.

    .venv/bin/python benchmarks/autotune.py [--models bert,resnet18] [--budget 30] [--repeats 20]
                                            [--threads N] [--no-inductor] [--out FILE]

Per model of the model set (model_zoo.py, size "bench", inference):
  - eager, ember default, ember max-autotune and torch.compile(mode="max-autotune"): the median
    time of a call (repeats interleaved), and each one's speedup over ember default;
  - max-autotune's tuning time (its first call minus default's, from an empty tuning database
    and kernel cache), and its warm first call: a second process with the database filled,
    which must time nothing (the report's count of candidates timed is printed);
  - Inductor max-autotune's compile time (its first call, from an empty Inductor cache).
Then the kernel set: GEMMs (1024^3 against the measured FMA peak), softmax and layer norm rows,
a column sum, under ember default and max-autotune.
Writes a Markdown table (benchmarks/results/autotune.md by default).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
import model_zoo  # noqa: E402
from models import close_to_eager  # noqa: E402
from torch_compute import fma_peak_gflops  # noqa: E402

import ember  # noqa: E402
from ember._compile import report_of  # noqa: E402


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def interleaved(fns, args, repeats):
    """Median seconds per call of each of fns, their calls interleaved, each repeat starting one
    further along: on 2 cores, PyTorch's OpenMP threads spin for a while after its ops and slow
    whatever runs next, so each variant must follow each other as often (a fixed order made ember
    default, always right after eager, look 2x slower on small kernels)."""
    times = {name: [] for name in fns}
    order = list(fns.items())
    for r in range(repeats):
        for name, fn in order[r % len(order):] + order[:r % len(order)]:
            t, _ = timed(fn, *args)
            times[name].append(t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def tuning_figures(compiled):
    """(seconds spent tuning, candidates timed, steps, steps changed) over the graphs so far."""
    seconds = timed_count = steps = changed = 0
    for g in report_of(compiled).graphs:
        info = g.ember
        seconds += info.get("autotune_s", 0)
        timed_count += info.get("autotune_timed", 0)
        for t in info.get("tuning", []):
            steps += 1
            changed += t["winner"] != "default"
    return seconds, timed_count, steps, changed


def warm_first_call(name, cache_dir):
    """A second process with the tuning database filled: its first call's time and what it timed."""
    env = dict(os.environ, EMBER_CACHE_DIR=cache_dir)
    # The same thread count: it is part of each step's tuning key.
    command = [sys.executable, __file__, "--warm-child", name, "--threads", str(torch.get_num_threads())]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def warm_child(name):
    model, args = model_zoo.build(name, "bench")
    model.eval()
    with torch.no_grad():
        model(*args)  # PyTorch's own first-call costs are not ember's
        compiled = ember.compile(model, mode="max-autotune")
        first, _ = timed(compiled, *args)
    _, timed_count, steps, _ = tuning_figures(compiled)
    print(json.dumps({"first_s": first, "timed": timed_count, "steps": steps}))


def bench_model(name, repeats, inductor, cache_dir):
    model, args = model_zoo.build(name, "bench")
    model.eval()
    main = model_zoo.main_output
    row = {"model": name}
    with torch.no_grad():
        reference64 = main(model_zoo.build(name, "bench")[0].eval().double()(
            *[a.double() if a.is_floating_point() else a for a in args]))
        eager_out = main(model(*args))
        fns = {"eager": model}
        default = ember.compile(model, mode="default")
        row["default first s"], out = timed(default, *args)
        tuned = ember.compile(model, mode="max-autotune")
        row["autotune first s"], tuned_out = timed(tuned, *args)
        row["accurate"] = close_to_eager(main(tuned_out), eager_out, reference64)
        seconds, timed_count, steps, changed = tuning_figures(tuned)
        row["tuning s"], row["timed"], row["steps"], row["changed"] = seconds, timed_count, steps, changed
        fns["ember default"] = default
        fns["ember max-autotune"] = tuned
        if inductor:
            torch._dynamo.reset()
            ind = torch.compile(model, mode="max-autotune")
            row["inductor first s"], _ = timed(ind, *args)
            fns["inductor max-autotune"] = ind
        for fn in fns.values():  # warm every variant before timing
            fn(*args)
        row.update(interleaved(fns, args, repeats))
    warm = warm_first_call(name, cache_dir)
    row["warm first s"], row["warm timed"] = warm["first_s"], warm["timed"]
    return row


KERNELS = {
    "gemm 1024^3": (lambda a, b: a @ b, lambda: (torch.randn(1024, 1024), torch.randn(1024, 1024))),
    "gemm 128x768x768": (lambda a, b: a @ b, lambda: (torch.randn(128, 768), torch.randn(768, 768))),
    "linear+gelu 256x1024x4096": (lambda x, w: torch.nn.functional.gelu(x @ w),
                                  lambda: (torch.randn(256, 1024), torch.randn(1024, 4096))),
    "softmax 4096x1024": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(4096, 1024),)),
    "layer_norm 2048x768": (lambda x: torch.nn.functional.layer_norm(x, (768,)), lambda: (torch.randn(2048, 768),)),
    "row sum 8192x256": (lambda x: x.sum(-1), lambda: (torch.randn(8192, 256),)),
    "column sum 4096x1000": (lambda x: (x * 2).sum(0), lambda: (torch.randn(4096, 1000),)),
    "row max 8192x256": (lambda x: x.amax(-1), lambda: (torch.randn(8192, 256),)),
    # A value read by a row kernel and by a column kernel: stored for the second, or recomputed
    # there ([Note: recompute or store]).
    "x * x, row and column sums 2048x1024": (lambda x: ((x * x).sum(-1), (x * x).sum(0)),
                                              lambda: (torch.randn(2048, 1024),)),
    "x + b, softmax and column sum 2048x1024": (lambda x, b: (torch.softmax(x + b, -1), (x + b).sum(0)),
                                                 lambda: (torch.randn(2048, 1024), torch.randn(1024))),
    # A value read by its own row kernel and two others: stored once, or recomputed in each.
    "exp(x), row sum, column sum and a product 1024x1024": (
        lambda x, y: (x.exp().sum(-1), x.exp().sum(0), y * x.exp()),
        lambda: (torch.randn(1024, 1024), torch.randn(2, 1024, 1024))),
}


def bench_kernels(repeats, inductor, only=""):
    rows = []
    with torch.no_grad():
        for name, (fn, make) in KERNELS.items():
            if only not in name:
                continue
            args = make()
            default = ember.compile(fn, mode="default")
            tuned = ember.compile(fn, mode="max-autotune")
            default(*args)
            tuned(*args)
            fns = {"eager": fn, "ember default": default, "ember max-autotune": tuned}
            if inductor:
                fns["inductor max-autotune"] = torch.compile(fn, mode="max-autotune")
                fns["inductor max-autotune"](*args)
            times = interleaved(fns, args, repeats)
            _, timed_count, steps, changed = tuning_figures(tuned)
            rows.append({"kernel": name, **times, "changed": changed, "steps": steps})
    return rows


def markdown(model_rows, kernel_rows, args, peak):
    ms = lambda s: f"{s * 1e3:.2f}"  # noqa: E731
    lines = [f"# max-autotune: {datetime.date.today()}", "",
             f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
             f"budget {args.budget} s per graph, {args.repeats} repeats interleaved (medians).", "",
             "## Models (inference, size \"bench\")", "",
             "| model | eager ms | ember default ms | ember max-autotune ms | vs default | Inductor max-autotune ms "
             "| vs Inductor | tuning s | steps changed | warm first call s (timed) | Inductor compile s | accurate |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    gains = []
    for r in model_rows:
        gain = r["ember default"] / r["ember max-autotune"]
        gains.append(gain)
        ind = r.get("inductor max-autotune")
        ind_ms = ms(ind) if ind else "-"
        vs_ind = "%.2fx" % (ind / r["ember max-autotune"]) if ind else "-"
        lines.append(
            f"| {r['model']} | {ms(r['eager'])} | {ms(r['ember default'])} | {ms(r['ember max-autotune'])} | {gain:.2f}x | "
            f"{ind_ms} | {vs_ind} | {r['tuning s']:.1f} | {r['changed']} of {r['steps']} | "
            f"{r['warm first s']:.2f} ({r['warm timed']}) | {r.get('inductor first s', 0):.1f} | "
            f"{'yes' if r['accurate'] else 'NO'} |")
    if gains:
        geo = statistics.geometric_mean(gains)
        lines += ["", f"Geomean max-autotune over default: {geo:.3f}x."]
    lines += ["", "## Kernels", "", "| kernel | eager ms | ember default ms | ember max-autotune ms | vs default | "
              "Inductor max-autotune ms | vs Inductor | steps changed |", "|---|---|---|---|---|---|---|---|"]
    for r in kernel_rows:
        ind = r.get("inductor max-autotune")
        ind_ms, vs_ind = (ms(ind), "%.2fx" % (ind / r["ember max-autotune"])) if ind else ("-", "-")
        lines.append(f"| {r['kernel']} | {ms(r['eager'])} | {ms(r['ember default'])} | {ms(r['ember max-autotune'])} | "
                     f"{r['ember default'] / r['ember max-autotune']:.2f}x | {ind_ms} | {vs_ind} | "
                     f"{r['changed']} of {r['steps']} |")
    if peak:
        for r in kernel_rows:
            if r["kernel"] == "gemm 1024^3":
                gflops = 2 * 1024 ** 3 / r["ember max-autotune"] / 1e9
                lines += ["", f"GEMM 1024^3 under max-autotune: {gflops:.0f} GFLOP/s, {100 * gflops / peak:.0f}% of the "
                          f"measured FMA peak ({peak:.0f} GFLOP/s on {torch.get_num_threads()} threads)."]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="mlp,bert,gpt2,resnet18,mobilenet_v2,vit")
    p.add_argument("--budget", type=float, default=30)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--no-inductor", action="store_true")
    p.add_argument("--kernels", default="", help="only the kernels whose name contains this")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "autotune.md"))
    p.add_argument("--warm-child")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.warm_child:
        return warm_child(args.warm_child)
    os.environ["EMBER_AUTOTUNE_BUDGET_S"] = str(args.budget)
    # Empty caches for both compilers: ember's tuning database and kernels, Inductor's kernels and
    # autotuning results (a warm Inductor cache made its max-autotune compile look 4x faster).
    cache_dir = tempfile.mkdtemp(prefix="ember-autotune-bench-")
    os.environ["EMBER_CACHE_DIR"] = cache_dir
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-autotune-bench-")
    model_rows = []
    for name in [m for m in args.models.split(",") if m]:
        print(f"{name}...", file=sys.stderr, flush=True)
        model_rows.append(bench_model(name, args.repeats, not args.no_inductor, cache_dir))
        print(model_rows[-1], file=sys.stderr, flush=True)
    kernel_rows = bench_kernels(args.repeats, not args.no_inductor, args.kernels)
    text = markdown(model_rows, kernel_rows, args, fma_peak_gflops(torch.get_num_threads())[0])
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
