"""ember.compile's surface: modes, options, decorators, state_dict, fallback, the backend entry
point."""
import io
import os
import re
import subprocess
import sys
import warnings

import pytest
import torch

import ember
from conftest import assert_compiled, report_of


def small_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_unknown_mode_and_option_raise_value_error_listing_valid_ones():
    with pytest.raises(ValueError, match="reduce-overhead"):
        ember.compile(small_mlp(), mode="fastest")
    with pytest.raises(ValueError, match="strict"):
        ember.compile(small_mlp(), options={"no_such_option": 1})
    with pytest.raises(ValueError, match="takes bool"):
        ember.compile(small_mlp(), options={"strict": "yes"})


def test_not_callable_is_type_error():
    with pytest.raises(TypeError):
        ember.compile(42)


def test_decorator_with_and_without_arguments():
    @ember.compile
    def f(x):
        return torch.sin(x) * 2

    @ember.compile(mode="reduce-overhead")
    def g(x):
        return torch.cos(x) + 1

    x = torch.randn(5)
    assert torch.allclose(f(x), torch.sin(x) * 2, atol=1e-6)
    assert torch.allclose(g(x), torch.cos(x) + 1, atol=1e-6)
    assert_compiled(f)
    assert_compiled(g)


def test_state_dict_keys_and_parameters_are_the_originals():
    model = small_mlp()
    compiled = ember.compile(model)
    assert list(compiled.state_dict().keys()) == list(model.state_dict().keys())
    assert all(a is b for a, b in zip(compiled.parameters(), model.parameters()))
    buffer = io.BytesIO()
    torch.save(compiled.state_dict(), buffer)
    buffer.seek(0)
    fresh = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    fresh.load_state_dict(torch.load(buffer))
    x = torch.randn(3, 8)
    assert torch.allclose(fresh(x), compiled(x), atol=1e-5)


def test_eval_and_train_act_on_the_compiled_module():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
    compiled = ember.compile(model)
    compiled.eval()
    x = torch.randn(4, 8)
    assert torch.allclose(compiled(x), model.eval()(x), atol=1e-5)


def test_failure_of_a_graph_falls_back_with_a_warning_and_strict_raises(monkeypatch):
    import ember._translate as translate

    def broken(*args, **kwargs):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(translate, "CompiledFx", broken)
    f = ember.compile(lambda x: x * 3 + 1)
    with pytest.warns(RuntimeWarning, match="injected failure"):
        out = f(torch.ones(3))
    assert torch.equal(out, torch.full((3,), 4.0))
    assert report_of(f).graphs[0].fallback
    torch._dynamo.reset()
    strict = ember.compile(lambda x: x * 3 + 1, options={"strict": True})
    with pytest.raises(Exception, match="injected failure"):
        strict(torch.ones(3))


def test_fullgraph_raises_on_a_graph_break():
    def f(x):
        if x.sum().item() > 0:
            return x + 1
        return x - 1

    with pytest.raises(Exception):
        ember.compile(f, fullgraph=True)(torch.ones(3))
    torch._dynamo.reset()
    assert torch.equal(ember.compile(f)(torch.ones(3)), torch.full((3,), 2.0))


def test_torch_compile_finds_the_ember_backend_in_a_fresh_process():
    code = (
        "import sys, torch\n"
        "f = torch.compile(lambda x: torch.relu(x) * 2, backend='ember')\n"
        "x = torch.randn(6)\n"
        "assert torch.equal(f(x), torch.relu(x) * 2)\n"
        "assert 'ember' in sys.modules\n"  # loaded through the entry point, not by us
        "import ember._report as r\n"
        "assert r.GLOBAL.graph_count == 1, r.GLOBAL.text()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_torch_compile_mode_reaches_the_backend():
    f = torch.compile(lambda x: x + 1, backend="ember", mode="no-such-mode")
    with pytest.raises(Exception, match="unknown mode"):
        f(torch.ones(2))


def test_explain_reports_graph_breaks_with_file_and_line():
    def f(x):
        y = x * 2
        print("hello from f")
        return y + 1

    report = ember.explain(f, torch.ones(4))
    assert len(report.breaks) >= 1
    assert "test_api.py" in report.breaks[0]["location"]
    assert report.graph_count >= 1
    text = report.text()
    assert "graph break" in text and "hint:" in text
    assert '"graph_breaks"' in report.json()
    page = report.html()
    assert "print(&quot;hello from f&quot;)" in page and "class='hit'" in page


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_compiled_module_reports_its_graph_breaks_once(mode):
    """Not only explain: every compile's report names what broke the graph and where, and a
    recompile that breaks at the same place again adds no second entry."""
    class Breaks(torch.nn.Module):
        def forward(self, x):
            h = torch.tanh(x)
            if h.sum().item() > 0:  # a break: a tensor's value decides control flow
                h = h * 2
            return h + 1

    compiled = ember.compile(Breaks(), mode=mode)
    for n in (4, 5, 6):
        x = torch.ones(n)
        torch.testing.assert_close(compiled(x), Breaks()(x))
    report = report_of(compiled)
    items = [b for b in report.breaks if "item()" in b["source"]]
    assert len(items) == 1, report.breaks
    assert items[0]["location"].startswith(__file__.removesuffix("c")) and "hint" in items[0]
    assert f"{len(report.breaks)} graph breaks" in report.text() and len(report.breaks) >= 1


def test_bad_inputs_are_clear_errors():
    f = ember.compile(lambda x, y: x @ y)
    with pytest.raises(Exception, match="size|shape|mat"):
        f(torch.ones(2, 3), torch.ones(4, 5))


def test_recompiles_are_reported_with_their_failing_guard():
    f = ember.compile(lambda x: x * 2, dynamic=False)
    f(torch.ones(3))
    f(torch.ones(5))
    report = report_of(f)
    assert len(report.recompiles) == 1, report.text()
    assert "size" in report.recompiles[0]["guard"] or "shape" in report.recompiles[0]["guard"]
    assert "recompile of" in report.text()


def test_a_compiled_module_pickles_and_deep_copies_as_a_compiled_module():
    import copy
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    x = torch.randn(2, 4)
    for mode in ("default", "reduce-overhead"):
        compiled = ember.compile(model, mode=mode)
        buffer = io.BytesIO()
        torch.save(compiled, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=False)
        clone = copy.deepcopy(compiled)
        for m in (loaded, clone):
            torch.testing.assert_close(m(x), model(x))
            assert report_of(m).graphs  # compiled again, not a plain module
            assert list(m.state_dict()) == list(model.state_dict())
    outer = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    outer[0] = ember.compile(outer[0])
    buffer = io.BytesIO()
    torch.save(outer, buffer)
    buffer.seek(0)
    torch.testing.assert_close(torch.load(buffer, weights_only=False)(x), outer(x))


def test_a_sparse_gradient_runs_its_graph_on_pytorch_with_a_warning():
    torch.manual_seed(0)
    eager = torch.nn.Embedding(30, 8, sparse=True)
    mine = torch.nn.Embedding(30, 8, sparse=True)
    mine.load_state_dict(eager.state_dict())
    index = torch.randint(0, 30, (3, 4))
    eager(index).sum().backward()
    with pytest.warns(RuntimeWarning, match="sparse"):
        ember.compile(mine)(index).sum().backward()
    assert mine.weight.grad.is_sparse
    torch.testing.assert_close(mine.weight.grad.to_dense(), eager.weight.grad.to_dense())


def test_perf_map_names_each_generated_kernel(tmp_path):
    # EMBER_PERF_MAP=1: perf report finds the kernels' names in /tmp/perf-<pid>.map.
    code = ("import os, torch, ember\n"
            "f = ember.compile(lambda x: torch.softmax(x * 2, -1))\n"
            "f(torch.randn(4, 40))\n"
            "print(os.getpid())\n")
    env = dict(os.environ, EMBER_PERF_MAP="1", EMBER_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    path = f"/tmp/perf-{out.stdout.split()[-1]}.map"
    try:
        lines = open(path).read().splitlines()
    finally:
        os.remove(path)
    assert lines, "no kernel was named"
    for line in lines:
        start, size, name = line.split()
        assert int(start, 16) > 0 and int(size, 16) > 0 and name.startswith("ember_k_")


def test_profile_log_says_where_each_call_spent_its_time(monkeypatch, capfd):
    """EMBER_LOG=profile: each call's steps, their total, and the time by kind of step (the
    generated kernels together, the others by op), then the slowest steps."""
    model = small_mlp().eval()
    compiled = ember.compile(model)
    x = torch.randn(32, 8)
    with torch.no_grad():
        compiled(x)
        capfd.readouterr()
        monkeypatch.setenv("EMBER_LOG", "profile")
        compiled(x)
    log = capfd.readouterr().err
    assert "[ember:profile]" in log, log
    summary = log[log.index("steps in"):].splitlines()[0]
    total = int(re.match(r"steps in (\d+) us", summary).group(1))
    assert re.search(r"; binding \d+ us, giving back \d+ us", summary), summary  # the time around the steps
    kinds = {name: (int(us), int(n)) for name, us, n in re.findall(r"(?:\(|, )([a-z_ ]+) (\d+) us in (\d+)", summary)}
    assert "generated kernels" in kinds and ("linear" in kinds or "matmul" in kinds), summary
    assert abs(sum(us for us, _ in kinds.values()) - total) <= len(kinds), summary  # each kind rounds down
