"""ember inside PyTorch's distributed engine (docs/distributed.md): DDP in its three spellings and
FSDP2 train as eager DDP and FSDP do, graph pieces and collectives are compiled and reported,
and a rank that fails stops the job with its error. Two processes on the CPU with gloo; each test
is one launch (distributed_workers.py) that runs every variant in turn."""
import pytest
import torch
import torch.distributed as dist

import distributed_workers as workers
import ember
from ember._compile import report_of

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="this PyTorch has no torch.distributed with gloo")

# docs/testing.md's rule for training whole models (allclose at 1e-3), for the losses, the
# parameters after the steps and the last gradients.
TOL = dict(rtol=1e-3, atol=1e-3)


def assert_trained_alike(got, want):
    torch.testing.assert_close(torch.tensor(got["losses"]), torch.tensor(want["losses"]), **TOL)
    for name in ("params", "grads"):
        for a, b in zip(got[name], want[name], strict=True):
            torch.testing.assert_close(a, b, **TOL)


def assert_all_pieces_compiled(report):
    first = report.splitlines()[0]
    assert " 0 graphs compiled" not in first, report
    assert "runs on PyTorch" not in report, report


DDP_VARIANTS = ["eager", "ddp(ember:default)", "ddp(ember:reduce-overhead)", "ember(ddp)", "torch.compile(ddp)"]


def test_ddp_mlp_every_spelling_and_mode_trains_as_eager():
    ranks = workers.launch("ddp", kind="mlp", variants=DDP_VARIANTS)
    for results in ranks:
        for variant in DDP_VARIANTS[1:]:
            assert_trained_alike(results[variant], results["eager"])
    # Parameters stay equal across ranks (the all-reduce ran).
    for a, b in zip(ranks[0]["ember(ddp)"]["params"], ranks[1]["ember(ddp)"]["params"]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    report = ranks[0]["ember(ddp)"]["report"]
    assert_all_pieces_compiled(report)
    assert "DDP's optimizer split the model's graphs into" in report, report
    pieces = int(report.split("into ")[1].split()[0])
    assert pieces >= 2, report
    assert report.count("a piece of a graph that DDP's optimizer split") >= 2 * pieces, report  # and their backwards
    assert_all_pieces_compiled(ranks[0]["ddp(ember:reduce-overhead)"]["report"])


def test_ddp_transformers_gpt2_trains_as_eager():
    variants = ["eager", "ember(ddp)", "ddp(ember:reduce-overhead)", "torch.compile(ddp)"]
    for results in workers.launch("ddp", kind="gpt2", variants=variants):
        for variant in variants[1:]:
            assert_trained_alike(results[variant], results["eager"])
        assert_all_pieces_compiled(results["ember(ddp)"]["report"])
        assert_all_pieces_compiled(results["ddp(ember:reduce-overhead)"]["report"])


def test_fsdp2_compiled_blocks_train_as_eager_fsdp():
    modes = ["default", "reduce-overhead"]
    for rank, results in enumerate(workers.launch("fsdp", modes=modes)):
        for variant in ["root"] + [f"blocks:{m}" for m in modes]:
            assert_trained_alike(results[variant], results["eager"])
        for m in modes:
            for report in results[f"blocks:{m}"]["reports"]:
                assert report.startswith("ember: 2 graphs compiled"), report  # forward and backward
        # The root compiled after fully_shard: the pieces between its sharded blocks' calls.
        (root,) = results["root"]["reports"]
        assert_all_pieces_compiled(root)


def test_torch_nn_containers_under_ddp_or_fully_shard_are_named_in_the_report():
    # Dynamo compiles no frame of torch.nn's own containers under DDP or FSDP (as torch.compile):
    # the report says so and how to compile them; a module class of the user's has no note.
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{workers.free_port()}")
    try:
        def sequential():
            return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU())
        (ddp,) = report_of(ember.compile(DDP(sequential()))).notes
        assert "DDP wraps torch.nn's own Sequential" in ddp and "DDP(ember.compile(model))" in ddp
        sharded = sequential()
        fully_shard(sharded)
        (fsdp,) = report_of(ember.compile(sharded)).notes
        assert "fully_shard (FSDP2) shards torch.nn's own Sequential" in fsdp and "before fully_shard" in fsdp
        assert report_of(ember.compile(DDP(workers.mlp()))).notes == []
        mine = workers.mlp()
        fully_shard(mine)
        assert report_of(ember.compile(mine)).notes == []
    finally:
        dist.destroy_process_group()


def test_functional_collectives_run_in_the_plan_in_graph_order():
    for results in workers.launch("collectives"):
        for name, r in results.items():
            torch.testing.assert_close(r["got"], r["want"], rtol=1.3e-5, atol=1.5e-5)  # per-op tolerance
            report = r["report"]
            assert "1 graphs compiled, 0 graph breaks" in report, report
            assert "collectives (PyTorch's, run as torch calls in graph order)" in report, report
            assert "wait_tensor" in report, report


def test_a_rank_that_raises_fails_the_job_with_its_error():
    with pytest.raises(Exception) as failure:
        workers.launch("raises", timeout=120)
    assert not isinstance(failure.value, TimeoutError), "the job hung"
    text = str(failure.value)
    assert "Process 1" in text or "process 1" in text, text
    assert "IndexOutOfRange" in text and "30" in text, text
