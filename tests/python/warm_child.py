"""One process of the warm-start tests (test_warm_start.py): imports a model from a file, compiles
it with ember, calls it once (and a training step with --train) and prints what happened as
JSON: the warm start's outcome, whether Dynamo traced or AOTAutograd ran, the difference from
eager.

    python warm_child.py MODEL_FILE [--function [NAME]] [--train] [--torch-version V] [--batch N]
                         [--then-batches N,M,...] [--rebind] [--net-seed S]

--function compiles the file's function `fn` (or NAME) instead of its class `Model`; --rebind
gives the file's globals SCALE, W and NET new values after the first call (and then replaces a
submodule of NET), calling again after each; --net-seed draws NET's weights anew from seed S.
"""
import argparse
import importlib.util
import json
import sys
import warnings

import torch


def load_model_module(path):
    # A fixed module name: the saved guards name the model's class by module and name.
    spec = importlib.util.spec_from_file_location("warm_model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["warm_model"] = module
    spec.loader.exec_module(module)
    return module


def count_calls(owner, name, counts):
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        counts[name] = counts.get(name, 0) + 1
        return original(*args, **kwargs)

    setattr(owner, name, counted)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model_file")
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--torch-version")
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--then-batches", default="", help="inference calls at these batch sizes after the first")
    parser.add_argument("--function", nargs="?", const="fn")
    parser.add_argument("--rebind", action="store_true")
    parser.add_argument("--net-seed", type=int)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.torch_version:
        torch.__version__ = args.torch_version
    import ember
    from ember._compile import report_of
    from torch._dynamo.backends.common import AotAutograd
    counts = {}
    count_calls(AotAutograd, "__call__", counts)  # ember's backend runs AOTAutograd through it
    source = load_model_module(args.model_file)
    if args.net_seed is not None:
        torch.manual_seed(args.net_seed)
        with torch.no_grad():
            for p in source.NET.parameters():
                p.normal_()
    torch.manual_seed(0)
    x = torch.randn(args.batch, source.WIDTH)
    if args.function:
        model = getattr(source, args.function)
    else:
        model = source.Model()
        model.train(args.train)
    compiled = ember.compile(model)
    out = {}
    if args.train:
        loss = compiled(x).square().mean()
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model(x).square().mean().backward()
        out["diff"] = max((g - p.grad).abs().max().item() for g, p in zip(grads, model.parameters()))
    else:
        with torch.no_grad():
            out["diff"] = (compiled(x) - model(x)).abs().max().item()
    if args.rebind:  # a new value for each global the code reads
        source.SCALE, source.W = source.SCALE + 1.0, source.W * 2.0 + 1.0
        width, hidden = source.WIDTH, source.NET[0].out_features
        source.NET = torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 4))
        with torch.no_grad():
            out["rebound_diff"] = (compiled(x) - model(x)).abs().max().item()
            source.NET[1] = torch.nn.Sigmoid()
            out["rebound_diff"] = max(out["rebound_diff"], (compiled(x) - model(x)).abs().max().item())
    marked = []  # inputs that kept a dynamic-dim mark after the call
    for n in [int(b) for b in args.then_batches.split(",") if b]:
        with torch.no_grad():
            x = torch.randn(n, source.WIDTH)
            out["diff"] = max(out["diff"], (compiled(x) - model(x)).abs().max().item())
            marked += [n] if hasattr(x, "_dynamo_weak_dynamic_indices") else []
    out["marked_inputs"] = marked
    report = report_of(compiled)
    out["graphs"] = len(report.graphs)
    out["warm"] = [w["outcome"] for w in report.warm]
    out["aot_autograd_calls"] = counts.get("__call__", 0)
    out["dynamo_frames"] = sum(torch._dynamo.utils.counters["frames"].values())
    out["kernels_compiled"] = sum(g.ember["kernels_compiled"] for g in report.graphs if g.fallback is None)
    out["warm_graphs"] = sum(1 for g in report.graphs if g.warm)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
