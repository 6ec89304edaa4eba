"""GPT-2 generation benchmark (BENCHMARKS.md: prefill 128 then 32 decode steps): PyTorch eager,
torch.compile (Inductor, default mode) and ember in default and reduce-overhead modes, in one
process, on the same prompt, greedy decoding with the model's key-value cache. Each decode step
is a call with one new token, so the cache grows by one position a call: after the second call
both compilers run a graph with a symbolic length, and the steps measure per-call overhead as
much as kernels. Accuracy in the same run: the generated tokens equal eager's, and the last
logits are within docs/testing.md's model rule.

    .venv/bin/python benchmarks/decode.py [--batches 1,8] [--steps 32] [--repeats 5]
"""
import argparse
import copy
import datetime
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


def generate(model, prompt, steps):
    """Greedy decoding: (tokens [batch, steps], last logits, seconds of the prefill, seconds of
    the decode steps)."""
    with torch.no_grad():
        start = time.perf_counter()
        out = model(input_ids=prompt, use_cache=True)
        prefill = time.perf_counter() - start
        cache, token, tokens = out.past_key_values, out.logits[:, -1:].argmax(-1), []
        start = time.perf_counter()
        for _ in range(steps):
            tokens.append(token)
            out = model(input_ids=token, past_key_values=cache, use_cache=True)
            cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        return torch.cat(tokens, 1), out.logits, prefill, time.perf_counter() - start


def bench(batch, steps, repeats):
    model, _ = model_zoo.build("gpt2", "bench")
    model.eval()
    prompt = torch.randint(0, model.config.vocab_size, (batch, 128), generator=torch.Generator().manual_seed(batch))
    variants = {"eager": model, "torch.compile": torch.compile(copy.deepcopy(model)),
                "ember default": ember.compile(copy.deepcopy(model)),
                "ember reduce-overhead": ember.compile(copy.deepcopy(model), mode="reduce-overhead")}
    want, want_logits, _, _ = generate(model, prompt, steps)
    rows = {}
    for label, m in variants.items():
        start = time.perf_counter()
        tokens, logits, _, _ = generate(m, prompt, steps)  # compiles (twice: the cache length goes symbolic)
        scale = want_logits.abs().max().item()
        rows[label] = {"first_s": time.perf_counter() - start, "prefill": [], "decode": [],
                       "same": torch.equal(tokens, want),
                       "err": (logits - want_logits).abs().max().item() / scale}
    runs = list(variants.items())
    for r in range(repeats):
        for label, m in runs[r % len(runs):] + runs[:r % len(runs)]:
            _, _, prefill, decode = generate(m, prompt, steps)
            rows[label]["prefill"].append(prefill)
            rows[label]["decode"].append(decode / steps)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "decode.md"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("EMBER_NUM_THREADS", str(args.threads))
    torch._dynamo.config.cache_size_limit = 64
    warnings.simplefilter("ignore")
    lines = ["# GPT-2 generation: eager, torch.compile and ember\n",
             f"{datetime.date.today()}, {platform.machine()}, {args.threads} threads, torch {torch.__version__}; "
             f"model_zoo's gpt2 \"bench\" config, prompt of 128 tokens, {args.steps} greedy decode steps with the "
             f"key-value cache; median of {args.repeats} interleaved runs (min-max).\n",
             "| batch | variant | prefill ms | decode ms per step | decode vs eager | decode vs torch.compile "
             "| first generation s (compiles) | tokens equal eager's | last logits' max error / max |",
             "|---|---|---|---|---|---|---|---|---|"]
    for batch in [int(b) for b in args.batches.split(",")]:
        rows = bench(batch, args.steps, args.repeats)
        decode = {label: statistics.median(r["decode"]) for label, r in rows.items()}
        for label, r in rows.items():
            prefill = statistics.median(r["prefill"]) * 1e3
            cells = [str(batch), label, f"{prefill:.1f}",
                     f"{decode[label] * 1e3:.2f} ({min(r['decode']) * 1e3:.2f}-{max(r['decode']) * 1e3:.2f})",
                     f"{decode['eager'] / decode[label]:.2f}x", f"{decode['torch.compile'] / decode[label]:.2f}x",
                     f"{r['first_s']:.1f}", "yes" if r["same"] else "**no**", f"{r['err']:.1e}"]
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
