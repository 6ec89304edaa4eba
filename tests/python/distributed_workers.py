"""What each rank runs in tests/python/test_distributed.py: 2 processes on the CPU with gloo.
Not a test file: the processes import it by name (torch.multiprocessing's spawn)."""
import datetime
import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

STEPS = 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(case, world=2, timeout=240, **kwargs):
    """Runs CASES[case](rank, world, **kwargs) on `world` processes; returns each rank's result.
    A rank that fails fails the launch with its error (the others are stopped); a launch that
    outlives `timeout` is stopped and raises TimeoutError: never a hang."""
    folder = tempfile.mkdtemp(prefix="ember-dist-")
    context = mp.start_processes(_entry, args=(world, free_port(), case, kwargs, folder), nprocs=world, join=False,
                                 start_method="spawn")
    deadline = time.monotonic() + timeout
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for p in context.processes:
                p.kill()
            raise TimeoutError(f"{case}: still running after {timeout} s")
    return [torch.load(os.path.join(folder, f"rank{r}.pt"), weights_only=False) for r in range(world)]


def _entry(rank, world, port, case, kwargs, folder):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    # A rank that waits on a dead peer gives up after this (the launch stops it before).
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        result = CASES[case](rank, world, **kwargs)
        torch.save(result, os.path.join(folder, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


# --- models and training -------------------------------------------------------------------

class MLP(torch.nn.Module):
    """Three 1 MiB weights: DDP's buckets of 1 MiB (the least its optimizer takes) split it. A
    class of the user's, as models are: Dynamo compiles no frame of torch.nn's own containers
    when DDP or FSDP calls them (docs/distributed.md)."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 512), torch.nn.Linear(512, 512),
                                           torch.nn.Linear(512, 512), torch.nn.Linear(512, 4)])
        self.norm = torch.nn.LayerNorm(512)

    def forward(self, x):
        x = torch.nn.functional.gelu(self.layers[0](x))
        x = self.norm(self.layers[1](x))
        x = torch.nn.functional.gelu(self.layers[2](x))
        return self.layers[3](x)


def mlp():
    torch.manual_seed(0)
    return MLP()


def gpt2():
    import transformers
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config)


def batches(kind, rank):
    """This rank's batches: different data on each rank, the same for every variant."""
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(STEPS):
        if kind == "gpt2":
            ids = torch.randint(0, 128, (2, 16), generator=g)
            yield (ids,), ids
        else:
            yield (torch.randn(8, 16, generator=g),), torch.randn(8, 4, generator=g)


def loss_of(kind, out, target):
    if kind == "gpt2":
        logits = out.logits[:, :-1]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1))
    return torch.nn.functional.mse_loss(out, target)


def train(kind, rank, model, wrapped, params=None):
    """STEPS optimizer steps of `wrapped` (which computes with `model`'s parameters); the losses,
    and the parameters and their last gradients in full."""
    params = list(params if params is not None else model.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    losses = []
    for inputs, target in batches(kind, rank):
        loss = loss_of(kind, wrapped(*inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses,
            "params": [full(p.detach()).clone() for p in params],
            "grads": [full(p.grad).clone() for p in params]}


def full(t):
    """A parameter or gradient whole: FSDP's are shards (DTensors), gathered from every rank."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def report_text(compiled):
    from ember._compile import report_of
    return report_of(compiled).text()


# --- cases --------------------------------------------------------------------------------

def ddp(rank, world, kind, variants):
    """Each variant trains a fresh copy of the same model under DDP. Small buckets, so that DDP's
    optimizer splits the graphs Dynamo captures."""
    import ember
    from torch.nn.parallel import DistributedDataParallel as DDP
    make = gpt2 if kind == "gpt2" else mlp
    bucket = {"bucket_cap_mb": 1}
    results = {}
    for variant in variants:
        torch._dynamo.reset()
        model = make()
        report = None
        if variant == "eager":
            wrapped = DDP(model, **bucket)
        elif variant.startswith("ddp(ember"):  # ddp(ember:MODE)
            inner = ember.compile(model, mode=variant[len("ddp(ember:"):-1])
            wrapped, report = DDP(inner, **bucket), inner
        elif variant == "ember(ddp)":
            wrapped = report = ember.compile(DDP(model, **bucket))
        elif variant == "torch.compile(ddp)":
            wrapped = torch.compile(DDP(model, **bucket), backend="ember")
        else:
            raise ValueError(variant)
        results[variant] = train(kind, rank, model, wrapped)
        if report is not None:
            results[variant]["report"] = report_text(report)
    return results


def fsdp(rank, world, modes):
    """fully_shard (FSDP2): eager; blocks compiled by ember before sharding, in each mode; and
    the root compiled after sharding (which Dynamo leaves uncompiled: the report says so)."""
    import ember
    from torch.distributed.fsdp import fully_shard
    results = {}
    for variant in ["eager", "root"] + [f"blocks:{m}" for m in modes]:
        torch._dynamo.reset()
        model = mlp()
        compiled = []
        if variant.startswith("blocks:"):
            for i, layer in enumerate(model.layers):
                model.layers[i] = ember.compile(layer, mode=variant.split(":")[1])
                compiled.append(model.layers[i])
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
        wrapped = model
        if variant == "root":
            wrapped = ember.compile(model)
            compiled.append(wrapped)
        results[variant] = train("mlp", rank, model, wrapped)
        results[variant]["reports"] = [report_text(c) for c in compiled]
    return results


def collectives(rank, world):
    """Functional collectives inside compiled functions, against the same functions in eager."""
    import ember
    import torch.distributed._functional_collectives as funcol
    group = dist.group.WORLD

    def reduce(x):
        y = funcol.all_reduce(torch.sin(x) * 2, "sum", group)
        return y + 1

    def gather(x):
        return funcol.all_gather_tensor(x.exp(), 0, group) * 3

    def scatter(x):
        return funcol.reduce_scatter_tensor(x * x, "sum", 0, group).cos()

    out = {}
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(rank)) + rank
    for name, fn in (("all_reduce", reduce), ("all_gather", gather), ("reduce_scatter", scatter)):
        compiled = ember.compile(fn)
        got = compiled(x)
        out[name] = {"got": got, "want": fn(x), "report": report_text(compiled)}
    return out


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 8)
        self.linear = torch.nn.Linear(8, 1)

    def forward(self, ids):
        return self.linear(self.embedding(ids)).sum()


def raises(rank, world):
    """A DDP job whose compiled graph raises on rank 1 at its second step: a token id past the
    embedding's end, found by ember's kernel while it runs."""
    import ember
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(ember.compile(Embed()))
    ids = torch.tensor([1, 2, 3, 4])
    model(ids).backward()
    model(ids if rank == 0 else torch.tensor([1, 2, 30, 4])).backward()
    return {}


CASES = {"ddp": ddp, "fsdp": fsdp, "collectives": collectives, "raises": raises}
