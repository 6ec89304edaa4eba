"""Training steps per second under DDP: eager, ember and torch.compile (Inductor), with 1 and 2
processes on the CPU (gloo, one thread each), and how much of the gradient all-reduce the
backward hides.

Each process trains model_zoo's GPT-2 ("bench" config: 4 layers, width 256, 4 x 128 tokens a
rank) with AdamW. For each variant, after warm-up steps (which compile): the median time of a
step; of a step under no_sync() (the same work without the all-reduce); and of all-reducing a
flat buffer as large as the gradients. The hidden share is 1 - (step - step without sync) /
all-reduce alone, clipped to [0, 1]: 1 when the all-reduce costs the step nothing.

This machine has 2 cores: 2 processes share them, so the figures are about overhead and
overlap, not about scaling (docs/distributed.md).

Usage: .venv/bin/python benchmarks/distributed.py [--steps N] [--variants eager,ember,inductor]
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wrap(variant, model):
    from torch.nn.parallel import DistributedDataParallel as DDP
    if variant == "eager":
        return DDP(model)
    if variant == "ember":
        import ember
        return ember.compile(DDP(model))
    if variant == "inductor":
        return torch.compile(DDP(model))
    raise ValueError(variant)


def median_ms(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure(variant, rank, steps):
    sys.path.insert(0, HERE)
    import model_zoo
    torch.manual_seed(0)
    model, (ids,) = model_zoo.gpt2("bench")
    ids = torch.randint(0, 1000, ids.shape, generator=torch.Generator().manual_seed(rank))
    ddp = wrap(variant, model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        loss = ddp(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    def step_without_sync():
        with ddp.no_sync():
            step()

    start = time.perf_counter()
    step()
    first_s = time.perf_counter() - start
    for _ in range(2):
        step()
        step_without_sync()
    flat = torch.zeros(sum(p.numel() for p in model.parameters()))
    return {"first_s": first_s, "step_ms": median_ms(step, steps), "no_sync_ms": median_ms(step_without_sync, steps),
            "allreduce_ms": median_ms(lambda: dist.all_reduce(flat), steps)}


def worker(rank, world, port, variants, steps, folder):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), EMBER_NUM_THREADS="1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=600))
    results = {}
    for variant in variants:
        torch._dynamo.reset()
        dist.barrier()
        results[variant] = measure(variant, rank, steps)
    torch.save(results, os.path.join(folder, f"rank{rank}.pt"))
    dist.destroy_process_group()


def run(world, variants, steps):
    folder = tempfile.mkdtemp(prefix="ember-dist-bench-")
    mp.start_processes(worker, args=(world, free_port(), variants, steps, folder), nprocs=world, join=True,
                       start_method="spawn")
    return [torch.load(os.path.join(folder, f"rank{r}.pt")) for r in range(world)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--variants", default="eager,ember,inductor")
    args = parser.parse_args()
    variants = args.variants.split(",")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-dist-")
    os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-dist-")
    print(f"torch {torch.__version__}, gloo, 1 thread a process, {os.cpu_count()} cores; model_zoo gpt2 'bench' "
          f"(4 x 128 tokens a rank), AdamW; medians of {args.steps} steps\n")
    print("| processes | variant | steps/s | step ms | step without all-reduce ms | all-reduce alone ms "
          "| all-reduce hidden | vs eager DDP | first step s (compiles) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for world in (1, 2):
        ranks = run(world, variants, args.steps)
        eager = max(r["eager"]["step_ms"] for r in ranks) if "eager" in variants else None
        for variant in variants:
            # The job goes at the pace of its slowest rank.
            step = max(r[variant]["step_ms"] for r in ranks)
            no_sync = max(r[variant]["no_sync_ms"] for r in ranks)
            comm = max(r[variant]["allreduce_ms"] for r in ranks)
            hidden = "-" if world == 1 else f"{min(1.0, max(0.0, 1 - (step - no_sync) / comm)):.0%}"
            ratio = f"{eager / step:.2f}x" if eager else "-"
            first = max(r[variant]["first_s"] for r in ranks)
            print(f"| {world} | {variant} | {1e3 / step:.2f} | {step:.1f} | {no_sync:.1f} | {comm:.1f} | {hidden} "
                  f"| {ratio} | {first:.1f} |", flush=True)


if __name__ == "__main__":
    main()
