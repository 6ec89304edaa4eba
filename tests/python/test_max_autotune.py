"""max-autotune from PyTorch: the options reach the tuner, the first call tunes, the report says
what was tuned (read when asked, after the first call), and bad options are clear errors."""
import re
import numpy as np
import pytest
import torch

import ember
from conftest import report_of


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32),
                               torch.nn.LayerNorm(32)).eval()


def test_the_first_call_tunes_and_the_report_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))  # an empty tuning database: it must time
    model = _mlp()
    compiled = ember.compile(model, mode="max-autotune",
                             options={"autotune_budget_s": 0.5, "autotune_search": "random"})
    x = torch.randn(16, 64)
    with torch.no_grad():
        before = report_of(compiled)
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    graph = report_of(compiled).as_dict()["graphs"][0]["ember"]
    assert graph["mode"] == "max-autotune" and graph["static_plan"]
    assert graph["autotuned"] and graph["tuning"], graph
    assert graph["autotune_timed"] > 0  # nothing was in the database
    assert re.search(r"mode max-autotune: static plan holding [0-9.]+ (MiB|KiB|B) between calls; tuned", report_of(compiled).text())
    assert before is report_of(compiled)


def test_a_second_process_reads_the_tuning_database(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    x = torch.randn(8, 64)
    for attempt in range(2):
        torch._dynamo.reset()
        compiled = ember.compile(_mlp(), mode="max-autotune", options={"autotune_budget_s": 0.3})
        with torch.no_grad():
            compiled(x)
        graph = report_of(compiled).as_dict()["graphs"][0]["ember"]
        assert graph["autotuned"]
    assert graph["autotune_timed"] == 0, "the second compile timed again instead of reading the database"
    assert all(t["from_database"] for t in graph["tuning"])


def test_dynamic_sizes_tune_per_power_of_two_bucket(tmp_path, monkeypatch):
    """[Note: tuning per size bucket]: a graph with a symbolic batch is tuned again when a call
    reaches a new power-of-two bucket of it, and not for another call in a bucket it has."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()
    model = _mlp()
    compiled = ember.compile(model, mode="max-autotune", dynamic=True, options={"autotune_budget_s": 0.0})
    with torch.no_grad():
        for batch in (8, 6, 100, 120, 3):
            x = torch.randn(batch, 64)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    graphs = [g["ember"] for g in report_of(compiled).as_dict()["graphs"] if g.get("ember")]
    assert len(graphs) == 1, graphs
    sizes = {t["sizes"] for t in graphs[0]["tuning"]}
    assert sizes == {"s0 in 5..8", "s0 in 65..128", "s0 in 3..4"}, sizes
    assert "over 3 buckets of sizes" in report_of(compiled).text()


def test_default_and_reduce_overhead_do_not_tune():
    x = torch.randn(4, 64)
    for mode, static in (("default", False), ("reduce-overhead", True)):
        torch._dynamo.reset()
        compiled = ember.compile(_mlp(), mode=mode)
        with torch.no_grad():
            compiled(x)
        graph = report_of(compiled).as_dict()["graphs"][0]["ember"]
        assert graph["mode"] == mode and graph["static_plan"] == static and not graph["autotuned"]


@pytest.mark.parametrize("options, match", [
    ({"autotune_budget_s": -1.0}, "autotune_budget_s"),
    ({"autotune_budget_s": float("nan")}, "autotune_budget_s"),
    ({"autotune_budget_s": True}, "takes int or float"),
    ({"autotune_budget_s": "5"}, "takes int or float"),
    ({"autotune_search": "annealing"}, "autotune_search"),
    ({"autotune_search": 3}, "takes str"),
    ({"strict": 1}, "takes bool"),
    ({"autotune": True}, "unknown option"),
])
def test_bad_options_are_value_errors_at_compile(options, match):
    with pytest.raises(ValueError, match=match):
        ember.compile(_mlp(), mode="max-autotune", options=options)
    # torch.compile takes a mode or options, not both; Dynamo wraps the backend's ValueError.
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="ValueError.*" + match):
        torch.compile(_mlp(), backend="ember", options=options)(torch.randn(2, 64))


def test_options_reach_ember_tensors_too():
    f = ember.compile(lambda a: ember.tensor.relu(a * 2.0) + 1.0, mode="max-autotune",
                      options={"autotune_budget_s": 0.2})
    a = ember.tensor.from_numpy(np.array([[-1.0, 2.0], [3.0, -4.0]], dtype=np.float32))
    assert np.from_dlpack(f(a)).tolist() == [[1.0, 5.0], [7.0, 1.0]]
    assert "max-autotune" in report_of(f).text()


def test_modes_are_the_cores():
    assert ember.MODES == ("default", "reduce-overhead", "max-autotune")


def test_under_pytorch_a_gemm_may_go_to_pytorchs_mkl(tmp_path, monkeypatch, capfd):
    """With PyTorch loaded, max-autotune times MKL's sgemm (libtorch_cpu.so) beside oneDNN and
    OpenBLAS for each float32 GEMM (runtime/kernels/mkl.h); whichever wins, the result is right."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_LOG", "autotune")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(96, 80), torch.nn.ReLU(), torch.nn.Linear(80, 48)).eval()
    compiled = ember.compile(model, mode="max-autotune",
                             options={"autotune_budget_s": 2.0, "autotune_search": "exhaustive"})
    x = torch.randn(64, 96)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    log = capfd.readouterr().err
    assert "gemm=mkl" in log, log[-2000:]
    assert "rejected" not in log  # MKL's product agreed with the default's


def test_a_convolution_times_each_algorithm(tmp_path, monkeypatch, capfd):
    """A float32 convolution's algorithms (oneDNN's direct and brgemm kernels, ember's im2col and
    GEMM) are all timed, each checked against the default's values; whichever wins is right."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_LOG", "autotune")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 16, 3, stride=2, groups=4)).eval()
    compiled = ember.compile(model, mode="max-autotune",
                             options={"autotune_budget_s": 2.0, "autotune_search": "exhaustive"})
    x = torch.randn(2, 8, 20, 20)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    log = capfd.readouterr().err
    assert "conv=brgemm" in log and "conv=im2col" in log, log[-2000:]


def test_the_budget_is_the_graphs_over_all_its_buckets(tmp_path, monkeypatch):
    """autotune_budget_s is per compiled graph: a new bucket of sizes tunes with what the earlier
    ones left, not with a budget of its own (8 buckets once took 8 budgets)."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()
    model = _mlp()
    compiled = ember.compile(model, mode="max-autotune", dynamic=True, options={"autotune_budget_s": 0.3})
    with torch.no_grad():
        for batch in (5, 9, 17, 33, 65, 129, 257):
            x = torch.randn(batch, 64)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    graph = report_of(compiled).as_dict()["graphs"][0]["ember"]
    assert graph["autotune_s"] < 0.3 * 2, graph["mode_summary"]  # one tuning may overrun its share a little


def test_a_linear_layers_epilogue_is_part_of_its_gemm_step(tmp_path, monkeypatch):
    """[Note: GEMM epilogues]: under max-autotune a Linear's bias and GELU join its GEMM in one
    step, whose route (ember's own GEMM runs the epilogue inside) is tuned; the values are eager's
    whichever route wins, and the other modes keep two steps."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_LOG", "autotune")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(48, 200), torch.nn.GELU()).eval()
    x = torch.randn(3, 37, 48)
    for mode in ("max-autotune", "default"):
        torch._dynamo.reset()
        compiled = ember.compile(model, mode=mode, options={"autotune_budget_s": 2.0} if mode == "max-autotune" else None)
        with torch.no_grad():
            for _ in range(2):
                torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        graph = report_of(compiled).as_dict()["graphs"][0]["ember"]
        if mode == "max-autotune":
            names = [t["name"] for t in graph["tuning"]]
            assert any(name.startswith("gemm+") for name in names), names
            assert "matmul" not in graph["interpreter_ops"], graph["interpreter_ops"]
        else:
            assert "matmul" in graph["interpreter_ops"], graph["interpreter_ops"]


@pytest.mark.parametrize("case", ["residual_is_a", "a_is_b", "returned_twice", "one_row", "empty_depth"])
def test_gemm_epilogue_steps_at_the_edges(tmp_path, monkeypatch, capfd, case):
    """[Note: GEMM epilogues] against eager where the fused step's operands alias each other,
    its output is returned twice, A is one row, or the depth is 0 (a slice of A with unevenly
    spaced rows reaches ember as a batched matmul from PyTorch: test_gemm_epilogues.cpp). The
    tuner runs every route (ember's own GEMM with the epilogue inside among them) and rejects one
    that differs from the default; none may (EMBER_LOG=autotune says 'rejected')."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_LOG", "autotune")
    torch.manual_seed(0)
    w, bias = torch.randn(48, 32), torch.randn(48)
    fns = {
        "residual_is_a": (lambda x: x @ x.T + x, (torch.randn(33, 33),)),
        "a_is_b": (lambda x: torch.relu(x @ x), (torch.randn(40, 40),)),
        "returned_twice": (lambda x: (lambda y: (y, y))(torch.tanh(x @ w.T + 1)), (torch.randn(9, 32),)),
        "one_row": (lambda x: torch.nn.functional.gelu(torch.nn.functional.linear(x, w, bias)), (torch.randn(1, 32),)),
        "empty_depth": (lambda x, y: torch.relu(x @ y + 1), (torch.randn(4, 0), torch.randn(0, 9))),
    }
    fn, args = fns[case]
    torch._dynamo.reset()
    compiled = ember.compile(fn, mode="max-autotune", options={"autotune_budget_s": 0.5})
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args), fn(*args), rtol=1e-4, atol=1e-4)
    log = capfd.readouterr().err
    assert re.search(r"gemm\+\S+: gemm=generated: ", log), log[-2000:]  # the epilogue inside ran
    assert "rejected" not in log, log[-2000:]


@pytest.mark.parametrize("case", ["rows_and_columns", "broadcast_scale", "softmax_and_column_sum", "dynamic", "aliased"])
def test_a_value_stored_or_recomputed_is_measured_both_ways(tmp_path, monkeypatch, capfd, case):
    """[Note: recompute or store]: a value one kernel stores for one other (x * x read by a row
    sum and a column sum) is one step under max-autotune, which times it stored and recomputed
    ("recompute=1") and rejects a way that differs from the default (none may); the values are
    eager's whichever wins, in this call and the next."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_LOG", "autotune")
    torch.manual_seed(0)
    x = torch.rand(96, 130) + 0.5
    fns = {
        "rows_and_columns": (lambda t: ((t * t).sum(-1), (t * t).sum(0)), (x,)),
        "broadcast_scale": (lambda a, b, t: (t / t.sum(-1, keepdim=True)) * (a * b),
                            (torch.randn(1, 130), torch.randn(1, 130), x)),
        "softmax_and_column_sum": (lambda t, b: (torch.softmax(t + b, -1), (t + b).sum(0)), (x, torch.randn(130))),
        "dynamic": (lambda t: ((t * 2 + 1).amax(-1), (t * 2 + 1).amin(0)), (x,)),  # a chain of two
        "aliased": (lambda t, u: ((t * u).sum(-1), (t * u).sum(0)), (x, x)),  # one tensor twice
    }
    fn, args = fns[case]
    torch._dynamo.reset()
    compiled = ember.compile(fn, mode="max-autotune", dynamic=case == "dynamic",
                             options={"autotune_budget_s": 1.0, "autotune_search": "exhaustive"})
    with torch.no_grad():
        for call in range(2):
            torch.testing.assert_close(compiled(*args), fn(*args), rtol=1e-4, atol=1e-4)
        if case == "dynamic":
            for rows in (1, 7, 300):
                y = torch.rand(rows, 130) - 0.5
                torch.testing.assert_close(compiled(y), fn(y), rtol=1e-4, atol=1e-4)
    log = capfd.readouterr().err
    assert re.search(r"store-or-recompute\(\S+.*: recompute=1[ :]", log), log[-2000:]
    assert "rejected" not in log, log[-2000:]
