"""Float32 scaled dot-product attention: PyTorch eager (its CPU flash attention), torch.compile
(Inductor, default mode) and ember, in one process, on the shapes of the model set's attentions
and longer ones.

Each shape is q, k, v of [batch, heads, tokens, head width], causal or not, with no mask. The
three run interleaved after warm-up calls; each figure is the median of the repeats. GFLOP/s
counts the two products of a call (4 L S E per head, half of it where causal).

Usage: .venv/bin/python benchmarks/attention.py [--threads N] [--repeats R] [--out results/attention.md]
"""
import argparse
import os
import platform
import statistics
import time

# (name, batch, heads, tokens, head width, causal, padding mask): a padding mask is a bool
# [batch, 1, 1, tokens] that hides the last tenth of the second sequence's keys, as a tokenizer's
# attention mask becomes in transformers' models.
SHAPES = [
    ("BERT (bench size)", 4, 4, 128, 64, False, False),
    ("BERT, padding mask", 4, 4, 128, 64, False, True),
    ("ViT, 197 tokens", 8, 12, 197, 64, False, False),
    ("GPT-2 prefill", 1, 12, 512, 64, True, False),
    ("wav2vec2 (bench size)", 2, 4, 799, 64, False, False),
    ("wav2vec2, padding mask", 2, 4, 799, 64, False, True),
    ("head width 128", 1, 8, 1024, 128, True, False),
    ("2048 tokens", 1, 8, 2048, 64, True, False),
]


def timed(fn, args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", default="", help="write the table to this markdown file")
    args = parser.parse_args()
    os.environ.setdefault("EMBER_NUM_THREADS", str(args.threads))
    import torch
    import torch.nn.functional as F

    import ember

    torch.set_num_threads(args.threads)
    rows = []
    for name, batch, heads, tokens, width, causal, padded in SHAPES:
        # Each shape's function shares its code with the others': Dynamo would stop compiling it
        # after its limit of entries per code object, and run it eagerly.
        torch._dynamo.reset()
        torch.manual_seed(0)
        q, k, v = (torch.randn(batch, heads, tokens, width) for _ in range(3))
        mask = torch.ones(batch, 1, 1, tokens, dtype=torch.bool)
        mask[-1, ..., tokens - tokens // 10:] = False

        def attend(q, k, v, causal=causal, mask=mask if padded else None):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)

        fns = {"eager": attend, "torch.compile": torch.compile(attend), "ember": ember.compile(attend)}
        with torch.no_grad():
            want = attend(q, k, v)
            for fn in fns.values():
                for _ in range(3):
                    got = fn(q, k, v)
            error = (fns["ember"](q, k, v) - want).abs().max().item()
            times = {label: [] for label in fns}
            for _ in range(args.repeats):
                for label, fn in fns.items():
                    times[label].append(timed(fn, (q, k, v)))
        ms = {label: statistics.median(t) * 1e3 for label, t in times.items()}
        flops = 4 * batch * heads * tokens * tokens * width * (0.5 if causal else 1.0)
        rows.append((name, f"[{batch}, {heads}, {tokens}, {width}]", "yes" if causal else "no", ms, flops, error))
        print(f"{name}: eager {ms['eager']:.2f} ms, torch.compile {ms['torch.compile']:.2f} ms, "
              f"ember {ms['ember']:.2f} ms", flush=True)
    table = render(rows, args.threads, args.repeats, torch.__version__)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)


def render(rows, threads, repeats, torch_version):
    lines = [f"{platform.machine()}, {threads} threads, torch {torch_version}, median of {repeats} interleaved "
             "repeats (`benchmarks/attention.py`)", "",
             "| shape | [B, H, L, E] | causal | eager ms | torch.compile ms | ember ms | ember GFLOP/s "
             "| ember vs eager | ember vs torch.compile | max error vs eager |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, shape, causal, ms, flops, error in rows:
        lines.append(f"| {name} | {shape} | {causal} | {ms['eager']:.2f} | {ms['torch.compile']:.2f} | "
                     f"{ms['ember']:.2f} | {flops / ms['ember'] / 1e6:.0f} | {ms['eager'] / ms['ember']:.2f}x | "
                     f"{ms['torch.compile'] / ms['ember']:.2f}x | {error:.1e} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
