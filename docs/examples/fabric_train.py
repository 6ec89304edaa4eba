"""Training with Lightning Fabric on 2 CPU processes (DDP), the model compiled by ember.

A small GPT-2 built from a config (random weights) learns random tokens. ember compiles the
model either way a user may write it, and Fabric keeps that compilation when it wraps the model
in DDP: `fabric.setup(ember.compile(model), ...)`, or `torch.compile(model, backend="ember")`,
which Fabric unwraps and compiles again, with the same backend, mode and options, around its
DDP wrapper. The checkpoint has the same keys as the uncompiled model's.

    python docs/examples/fabric_train.py                        # ember.compile, default mode
    python docs/examples/fabric_train.py --compile torch.compile --mode reduce-overhead
    python docs/examples/fabric_train.py --steps 3 --check      # also trains it uncompiled, compares

Fabric starts the second process itself (strategy "ddp": it runs this script again).
"""
import argparse
import os
import tempfile

import torch
import transformers
from lightning_fabric import Fabric

import ember


def build_model():
    torch.manual_seed(0)  # the same weights in every process and every run
    config = transformers.GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                                     eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def compiled(model, how, mode):
    if how == "ember":
        return ember.compile(model, mode=mode)
    if how == "torch.compile":
        return torch.compile(model, backend="ember", mode=mode)
    return model


def train(fabric, how, mode, steps, checkpoint):
    """`steps` steps on this rank's batches; the mean loss over the ranks at each step."""
    model = compiled(build_model(), how, mode)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = fabric.setup(model, optimizer)
    tokens = torch.Generator().manual_seed(1000 + fabric.global_rank)  # each rank its own data
    losses = []
    for _ in range(steps):
        ids = torch.randint(0, 256, (4, 32), generator=tokens)
        loss = model(ids, labels=ids).loss
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(fabric.all_reduce(loss.detach(), reduce_op="mean").item())
    fabric.save(checkpoint, {"model": model, "optimizer": optimizer, "step": steps})
    return model, optimizer, losses


def check_checkpoint(fabric, checkpoint, model, how, mode):
    """The checkpoint's keys are an uncompiled model's, and it loads back into a compiled one."""
    saved = torch.load(checkpoint, weights_only=False)
    plain = set(build_model().state_dict())
    assert set(saved["model"]) == plain, sorted(set(saved["model"]) ^ plain)[:5]
    again = compiled(build_model(), how, mode)
    optimizer = torch.optim.AdamW(again.parameters(), lr=1e-3)
    again, optimizer = fabric.setup(again, optimizer)
    state = {"model": again, "optimizer": optimizer}
    rest = fabric.load(checkpoint, state)
    assert rest["step"] == saved["step"]
    for (name, a), b in zip(again.state_dict().items(), model.state_dict().values()):
        assert torch.equal(a, b), name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", choices=["ember", "torch.compile", "none"], default="ember")
    parser.add_argument("--mode", choices=list(ember.MODES), default="default")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--check", action="store_true", help="also train uncompiled and compare (the test's form)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    fabric = Fabric(accelerator="cpu", devices=args.devices, strategy="ddp")
    fabric.launch()
    folder = tempfile.mkdtemp(prefix="fabric-") if fabric.global_rank == 0 else None
    folder = fabric.broadcast(folder)
    checkpoint = os.path.join(folder, "checkpoint.pt")
    model, _, losses = train(fabric, args.compile, args.mode, args.steps, checkpoint)
    fabric.print(f"{args.compile} ({args.mode}): loss {losses[0]:.4f} -> {losses[-1]:.4f} over {args.steps} steps")
    if not args.check:
        return
    check_checkpoint(fabric, checkpoint, model, args.compile, args.mode)
    eager, _, eager_losses = train(fabric, "none", args.mode, args.steps, os.path.join(folder, "eager.pt"))
    # docs/testing.md's rule for training whole models: allclose at 1e-3.
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses), rtol=1e-3, atol=1e-3)
    for (name, a), b in zip(model.state_dict().items(), eager.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3, msg=lambda m, name=name: f"{name}: {m}")
    if args.compile != "none":  # ember compiled the model's graphs, none fell back to PyTorch
        report = ember._compile.report_of(model.module) if args.compile == "ember" else ember._report.GLOBAL
        assert report.graph_count > 0 and not any(g.fallback for g in report.graphs), report.text()
        assert {g.ember["mode"] for g in report.graphs} == {args.mode}, report.text()  # the mode survived setup
    fabric.print(f"check: the same losses and parameters as uncompiled Fabric, checkpoint keys as the model's")


if __name__ == "__main__":
    main()
