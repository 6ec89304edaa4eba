"""Training benchmark: one training step (forward, loss.backward(), gradients cleared) of each
model of the model set (model_zoo.py, size "bench") in PyTorch eager and through ember.compile
(default mode), optionally torch.compile (Inductor: its training compile takes minutes per model
here), in one process on the same inputs, steps interleaved. The gradients of the first compiled
step are checked against eager's in the same run (docs/testing.md's model rule, float64 reference).

    .venv/bin/python benchmarks/training.py [--models resnet18,gpt2] [--steps 7] [--inductor]
"""
import argparse
import copy
import datetime
import os
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import model_zoo  # noqa: E402

import ember  # noqa: E402
from models import close_to_eager  # noqa: E402

DEFAULT_MODELS = ("mlp", "gpt2", "bert", "resnet18", "resnet50", "mobilenet_v2", "vit")


def step(model, args):
    """One training step; returns its gradients (cleared from the model)."""
    loss = model_zoo.main_output(model(*args)).float().pow(2).mean()
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    return grads


def gradients_match(grads, expected, reference64):
    """docs/testing.md's model rule per gradient. A parameter the loss does not reach has no gradient
    in eager and zeros through AOTAutograd (torch.compile's too: BERT's pooler)."""
    def match(g, e, r):
        if g is None or e is None:
            return all(t is None or not t.any() for t in (g, e))
        return close_to_eager(g, e, r, tol=1e-3)  # docs/testing.md: training's tolerance
    return all(match(g, e, r) for g, e, r in zip(grads, expected, reference64))


def bench_model(name, steps, inductor):
    model, args = model_zoo.build(name, "bench")
    model.train()
    double_args = [a.double() if a.is_floating_point() else a for a in args]
    reference64 = step(copy.deepcopy(model).double(), double_args)
    variants = {"eager": copy.deepcopy(model), "ember": ember.compile(copy.deepcopy(model))}
    if inductor:
        variants["torch.compile"] = torch.compile(copy.deepcopy(model))
    # Each variant's checked step starts from one seed (model_zoo's configs set dropout to 0;
    # were it not, the float64 reference would need the same seed too).
    torch.manual_seed(1)
    expected = step(variants["eager"], args)
    rows = {}
    for label, m in variants.items():
        torch.manual_seed(1)
        start = time.perf_counter()
        grads = step(m, args)
        rows[label] = {"first_s": time.perf_counter() - start, "times": [],
                       "accurate": gradients_match(grads, expected, reference64)}
        step(m, args)  # warm up
    runs = list(variants.items())
    for r in range(steps):
        for label, m in runs[r % len(runs):] + runs[:r % len(runs)]:
            start = time.perf_counter()
            step(m, args)
            rows[label]["times"].append(time.perf_counter() - start)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--inductor", action="store_true", help="also torch.compile (slow to compile)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "training.md"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch._dynamo.config.cache_size_limit = 64
    labels = ["eager", "ember"] + (["torch.compile"] if args.inductor else [])
    head = ["model"] + [f"{label} ms" for label in labels] + ["ember vs eager"]
    if args.inductor:
        head.append("ember vs torch.compile")
    head += ["ember first step s", "gradients match eager"]
    lines = [f"# Training steps: eager and ember{' and torch.compile' if args.inductor else ''}\n",
             f"{datetime.date.today()}, {platform.machine()}, {args.threads} threads, torch {torch.__version__}, "
             f"median of {args.steps} interleaved steps (min-max) after one warm-up step.\n",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in args.models.split(","):
        rows = bench_model(name, args.steps, args.inductor)
        ms = {label: statistics.median(rows[label]["times"]) * 1e3 for label in labels}
        cells = [name] + [f"{ms[label]:.1f} ({min(rows[label]['times']) * 1e3:.1f}-{max(rows[label]['times']) * 1e3:.1f})"
                          for label in labels]
        cells.append(f"{ms['eager'] / ms['ember']:.2f}x")
        if args.inductor:
            cells.append(f"{ms['torch.compile'] / ms['ember']:.2f}x")
        cells += [f"{rows['ember']['first_s']:.1f}", "yes" if rows["ember"]["accurate"] else "**no**"]
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
