"""The first call of a compiled model in a new process (issue 26's warm start): cold, with an
empty cache, and warm, in a second process that finds what the first one stored; ember against
torch.compile (Inductor, with its FX graph and AOTAutograd caches), each in its own cache folder.
Each figure is the first call alone (compile included), timed in a child process that has
already imported torch and built the model. ember's own part is what its report counts (its
translation and compile of each graph); the rest is Dynamo's tracing and AOTAutograd.

    .venv/bin/python benchmarks/first_call.py [--models gpt2,resnet18,fn:gpt2] [--warm 3] [--out FILE]

A name `fn:MODEL` compiles a plain function that calls the model (a global), not the module.
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

HERE = os.path.dirname(os.path.abspath(__file__))


MODEL = None  # the model that `call_model` calls (a `fn:` name)


def call_model(*args):
    return MODEL(*args)


def child(backend, name):
    """In the child process: build the model, compile it, time its first call; print JSON."""
    global MODEL
    import warnings
    warnings.simplefilter("ignore")
    import torch
    sys.path.insert(0, HERE)
    import model_zoo
    as_function = name.startswith("fn:")
    model, args = model_zoo.build(name.removeprefix("fn:"), "bench")
    model.eval()
    if as_function:
        MODEL, model = model, call_model
    if backend == "ember":
        import ember
        from ember._compile import report_of
        compiled = ember.compile(model)
    else:
        compiled = torch.compile(model)
    with torch.no_grad():
        start = time.perf_counter()
        compiled(*args)
        first_s = time.perf_counter() - start
    own_s = None
    if backend == "ember":
        own_s = sum(g.compile_ms for g in report_of(compiled).graphs) / 1e3
    print(json.dumps({"first_s": first_s, "own_s": own_s}))


def run_child(backend, name, cache):
    env = dict(os.environ, EMBER_CACHE_DIR=os.path.join(cache, "ember"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", backend, name], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(backend, name, warm_runs):
    """(cold, [warm...]) first-call figures of `backend` on model `name`, in a fresh cache."""
    with tempfile.TemporaryDirectory(prefix="ember-first-call-") as cache:
        cold = run_child(backend, name, cache)
        return cold, [run_child(backend, name, cache) for _ in range(warm_runs)]


def row(label, name, cold, warm):
    warm_s = statistics.median(w["first_s"] for w in warm)
    own = [w["own_s"] for w in warm if w["own_s"] is not None]
    own_text = f"{statistics.median(own) * 1e3:.0f} ms" if own else "-"
    return (f"| {name} | {label} | {cold['first_s']:.2f} | {warm_s:.2f} | {warm_s / cold['first_s']:.0%} | {own_text} |",
            warm_s)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("BACKEND", "MODEL"))
    parser.add_argument("--models", default="gpt2,resnet18,fn:gpt2")
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--backends", default="ember,inductor")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    import torch
    lines = [f"{datetime.date.today()}, {platform.machine()}, {os.cpu_count()} threads, torch {torch.__version__}; "
             f"first call of each model (bench size) in a new process, cold (empty caches) and warm (median of "
             f"{args.warm} later processes)", "",
             "| model | compiler | cold s | warm s | warm / cold | ember's own part, warm |", "|---|---|---|---|---|---|"]
    for name in args.models.split(","):
        for backend in args.backends.split(","):
            cold, warm = measure(backend, name, args.warm)
            text, _ = row("ember default" if backend == "ember" else "torch.compile", name, cold, warm)
            lines.append(text)
            print(text, flush=True)
    table = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write("# First call in a new process: cold and warm caches\n\n" + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
