"""The steady call ([Note: the steady call] in _translate.py): a graph of fixed sizes whose
outputs are each a buffer of their own makes them before the plan runs, from the second call on.
What the caller gets must stay what eager gives: fresh tensors each call, PyTorch's own memory
(resizable), eager's layout; graphs that cannot take it keep the full path and stay right."""
import os

import pytest
import torch

import ember
from ember import _translate
from ember._compile import report_of


def graphs(compiled):
    return [g for g in report_of(compiled).graphs if g.fallback is None]


def calls(fn, make, n=4, **compile_kwargs):
    compiled = ember.compile(fn, **compile_kwargs)
    for i in range(n):
        args = make(i)
        got, want = compiled(*args), fn(*args)
        torch.testing.assert_close(got, want)
    return compiled


def test_fixed_sizes_and_own_buffers_take_the_steady_call():
    fn = lambda x, y: (torch.softmax(x * 2, -1), x @ y + 1)  # noqa: E731
    compiled = calls(fn, lambda i: (torch.randn(5, 7), torch.randn(7, 3)))
    (g,) = graphs(compiled)
    assert g.steady_call is True


def test_steady_outputs_are_fresh_pytorch_tensors_each_call():
    compiled = ember.compile(lambda x: x * 3 - 1)
    x = torch.randn(64)
    first, second, third = compiled(x), compiled(x), compiled(x)
    assert graphs(compiled)[0].steady_call is True
    assert len({first.data_ptr(), second.data_ptr(), third.data_ptr()}) == 3
    second.add_(100)  # one caller's output is its own
    torch.testing.assert_close(third, x * 3 - 1)
    torch.testing.assert_close(first, x * 3 - 1)
    third.resize_(1000)  # PyTorch's own storage, as eager's result
    third.untyped_storage().resize_(0)
    torch.testing.assert_close(compiled(x), x * 3 - 1)


def test_steady_call_keeps_eager_layout_and_raises_on_bad_input():
    fn = lambda x: (x.t() * 2).contiguous() + x.t()  # noqa: E731
    compiled = calls(fn, lambda i: (torch.randn(4, 6),))
    with pytest.raises(RuntimeError):
        compiled(torch.randn(4, 6, 2))  # Dynamo recompiles, then the graph's own error as eager raises it
    compiled(torch.randn(4, 6))


def test_an_input_returned_is_the_callers_tensor_itself():
    compiled = ember.compile(lambda x: (x, x + 1))
    x = torch.randn(3)
    for _ in range(3):
        same, plus = compiled(x)
        assert same is x
        torch.testing.assert_close(plus, x + 1)
    assert graphs(compiled)[0].steady_call is True


def test_one_value_returned_twice_is_one_tensor_as_in_eager():
    compiled = ember.compile(lambda x: (lambda y: (y, y))(x.exp()))
    x = torch.randn(3)
    for _ in range(3):
        a, b = compiled(x)
        assert a is b
        torch.testing.assert_close(a, x.exp())


def test_training_trains_as_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    reference.load_state_dict(model.state_dict())
    compiled = ember.compile(model)
    x = torch.randn(4, 8)
    for _ in range(3):
        for m in (compiled, reference):
            m.zero_grad()
            m(x).square().sum().backward()
        for a, b in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(a.grad, b.grad)
    assert all(g.steady_call is not None for g in graphs(compiled)), report_of(compiled).text()  # settled


@pytest.mark.parametrize("name, fn, kwargs", [
    ("a view of an input", lambda x: (x[1:], x * 2), {}),
    ("a constant", lambda x: (x + 1, torch.ones(3)), {}),
    ("dynamic sizes", lambda x: x.exp() + 1, {"dynamic": True}),
])
def test_graphs_that_cannot_take_it_keep_the_full_path(name, fn, kwargs):
    def make(i):
        return (torch.randn(6 + (i if kwargs.get("dynamic") else 0), 3),)
    compiled = calls(fn, make, **kwargs)
    outs = [compiled(torch.ones(6, 3)) for _ in range(2)]
    first, second = (o if isinstance(o, tuple) else (o,) for o in outs)
    for a, b in zip(first, second):  # later calls do not overwrite what an earlier one returned
        torch.testing.assert_close(a, b)
    assert all(g.steady_call is not True for g in graphs(compiled)), name


# [Note: outputs the caller makes]: a static plan keeps its intermediates, not its outputs, on
# the steady call and on the full path (row sums leave as views of their buffer, not exactly one).
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
@pytest.mark.parametrize("fn, steady", [
    (lambda x: (torch.softmax(x.exp() * 2, -1), x * x + 1), True),
    (lambda x: (torch.softmax(x.exp() * 2, -1), (x * x).sum(-1), x[1:]), False),
])
def test_static_plans_never_overwrite_an_output_the_caller_holds(mode, fn, steady):
    compiled = ember.compile(fn, mode=mode)
    inputs = [torch.randn(6, 5) for _ in range(4)]
    held = [compiled(x) for x in inputs]
    for x, out in zip(inputs, held):
        torch.testing.assert_close(out, fn(x))
    assert graphs(compiled)[0].steady_call is steady
    assert len({out[0].data_ptr() for out in held}) == len(held)


# [Note: bounded static plans]: the report says what a static plan holds between calls, and
# static_plan_mb bounds it while every call stays right and every held output keeps its values.
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_static_plan_memory_is_reported_and_bounded(mode):
    def fn(x, w):
        return (x.exp() * 2) @ w  # the product's left side, [16, n], is a buffer of the plan

    def held_after(options):
        torch._dynamo.reset()
        compiled = ember.compile(fn, mode=mode, dynamic=True, options=dict(options, autotune_budget_s=0.0))
        outputs = []
        for n in range(4000, 4008):
            x, w = torch.randn(16, n), torch.randn(n, 4)
            outputs.append((compiled(x, w), fn(x, w)))
        for got, want in outputs:  # each held output kept its values through the later calls
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
        return graphs(compiled)[0].ember

    unbounded = held_after({})
    assert unbounded["held_limit_bytes"] is None
    assert unbounded["held_bytes"] >= 8 * 16 * 4000 * 4
    bounded = held_after({"static_plan_mb": 0.6})
    assert bounded["held_limit_bytes"] == int(0.6 * 1024 * 1024)
    assert 0 < bounded["held_bytes"] <= bounded["held_limit_bytes"]
    assert "(at most 614.4 KiB)" in bounded["mode_summary"]


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "64", True])
def test_static_plan_mb_rejects_what_is_not_a_size(value):
    with pytest.raises(ValueError, match="static_plan_mb"):
        ember.compile(lambda x: x + 1, mode="reduce-overhead", options={"static_plan_mb": value})


# [Note: bindings die unlocked]: a thread reading the report (the GIL held, then the plan's lock
# for held_bytes) while another call drops a kept size (PyTorch's output memory released, which
# takes the GIL) once waited for each other forever. In a child process, so that a hang is a
# failure rather than a stuck test run.
_READ_WHILE_CALLING = r"""
import threading, torch, ember
from ember import _translate
from ember._compile import report_of
torch.set_num_threads(1)
c = ember.compile(lambda x: torch.softmax(x.exp() * 2, -1) + 1, mode="reduce-overhead", dynamic=True,
                  options={"static_plan_mb": 0.01})
c(torch.randn(4, 7)); c(torch.randn(4, 9))
done = False
def caller():
    global done
    for i in range(3000):
        c(torch.randn(4, 2 + i % 50))
    done = True
t = threading.Thread(target=caller)
t.start()
while not done:
    report_of(c).graphs[0].ember["held_bytes"]
t.join()
print("ok")
"""


def test_reading_the_report_while_another_thread_calls_does_not_hang(tmp_path):
    import subprocess
    import sys
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _READ_WHILE_CALLING], env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_reduce_overhead_keeps_no_output_the_caller_has_dropped():
    """The buffers of outputs are the caller's ([Note: outputs the caller makes]): a kept size
    holds none of them, or dropped outputs of 8 sizes would stay alive inside the plan."""
    torch._dynamo.reset()
    compiled = ember.compile(lambda x: x.exp() * 2 + 1, mode="reduce-overhead", dynamic=True)
    for n in range(1000, 1008):
        x = torch.randn(64, n)
        torch.testing.assert_close(compiled(x), x.exp() * 2 + 1)
    assert graphs(compiled)[0].ember["held_bytes"] == 0  # one kernel, its one buffer the output


def test_max_autotune_bounds_each_bucket_plan_and_reports_their_sum():
    torch._dynamo.reset()
    fn = lambda x, w: (x.exp() * 2) @ w  # noqa: E731
    compiled = ember.compile(fn, mode="max-autotune", dynamic=True,
                             options={"static_plan_mb": 0.3, "autotune_budget_s": 0.0})
    for n in (3000, 5000, 9000, 17000):  # four buckets of sizes: four plans
        x, w = torch.randn(8, n), torch.randn(n, 4)
        torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-4, atol=1e-3)
        record = graphs(compiled)[0].ember
        assert record["held_bytes"] <= record["held_limit_bytes"], record["mode_summary"]
    assert record["held_limit_bytes"] == 4 * int(0.3 * 1024 * 1024)
    assert " in 4 plans (at most 1.2 MiB)" in record["mode_summary"]


def test_steady_inputs_read_what_the_tensor_holds():
    """The steady call exports a plain tensor argument as it is; a negative view (its values
    through a flag DLPack drops) and a strided view must still read what eager reads."""
    compiled = ember.compile(lambda x, y: x * 2 + y)
    base = torch.randn(6, 4)
    for _ in range(3):
        torch.testing.assert_close(compiled(base[:, :3], base[:, 1:]), base[:, :3] * 2 + base[:, 1:])
    assert graphs(compiled)[0].steady_call is True
    neg = torch.randn(6, 3)._neg_view()
    y = torch.randn(6, 3)
    for _ in range(3):
        torch.testing.assert_close(compiled(neg, y), neg * 2 + y)


def test_a_steady_call_runs_few_frames_of_ember():
    """Each frame of Python in a compiled call costs a microsecond or more (issue 26). In front of
    the graph: the warm start's entry (WarmStart.__call__ and its guard check, in place of Dynamo's
    frame hook, which cost more) and WarmGraph.__call__. Then, through the torch bridge, the
    graph's CompiledFx.__call__ alone; without it, _run_steady, _inputs and its two list
    comprehensions as well."""
    import sys

    compiled = ember.compile(lambda x: x + 1)
    x = torch.randn(8)
    for _ in range(3):
        compiled(x)
    graph = graphs(compiled)[0]
    assert graph.steady_call is True

    def frames_of_a_call():
        frames = []

        def profile(frame, event, arg):
            if event == "call" and "/ember/" in frame.f_code.co_filename:
                frames.append(frame.f_code.co_name)

        sys.setprofile(profile)
        try:
            out = compiled(x)
        finally:
            sys.setprofile(None)
        torch.testing.assert_close(out, x + 1)
        # Dynamo's profiler record around the graph, unwrapped ([Note: the pregraph record]).
        record = ["record_pregraph_bytecode_enter", "record_pregraph_bytecode_exit"]
        assert frames[:2] == ["__call__", "guard_check"] and frames.count("__call__") == 3, frames
        assert [f for f in frames if f.startswith("record_")] == record, frames
        return sorted(f for f in frames[2:] if f != "__call__" and f not in record)

    live = graph._callable()
    if _translate._TORCH_BRIDGE is not None:
        assert live.fast is not None
        assert frames_of_a_call() == []
    live.fast = None  # the way without the bridge
    assert frames_of_a_call() == sorted(["_run_steady", "_inputs", "<listcomp>", "<listcomp>"])


def test_steady_inputs_that_alias_expand_or_have_no_memory():
    """_inputs exports a plain tensor as it is: one tensor passed twice and changed in place
    between calls, a broadcast view (stride 0), and a zero tensor (no memory) still read what
    eager reads."""
    fn = lambda a, b: a * 3 - b  # noqa: E731
    compiled = ember.compile(fn)
    x = torch.randn(4, 4)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, x), fn(x, x))
        x.add_(1)
    assert graphs(compiled)[0].steady_call is True
    row = torch.randn(4)
    for b in (row.expand(4, 4), torch._efficientzerotensor(4, 4)):
        for _ in range(3):
            torch.testing.assert_close(compiled(x, b), fn(x, b))


@pytest.mark.skipif(_translate._TORCH_BRIDGE is None, reason="ember._torch_bridge was not built (no PyTorch at configure time)")
def test_the_c_steady_call_declines_what_it_cannot_read():
    """[Note: the torch bridge]: the C++ steady call reads plain CPU tensors in place, and hands
    back None, having run nothing, for anything else (a subclass, a lazy negation, a list that is
    not one); the long way then computes what eager does."""
    class Marked(torch.Tensor):
        pass

    compiled = ember.compile(lambda x, y: x * 2 + y)
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    for _ in range(3):
        compiled(x, y)
    live = graphs(compiled)[0]._callable()
    assert live.fast is not None
    got = live.fast([x, y])
    torch.testing.assert_close(got[0], x * 2 + y)
    assert live.fast([x.as_subclass(Marked), y]) is None
    assert live.fast([x._neg_view(), y]) is None
    assert live.fast((x, y)) is None
    assert live.fast([x]) is None  # fewer arguments than the graph reads
    with pytest.raises(ValueError, match=r"\[run\] input 0 has shape"):
        live.fast([torch.randn(5, 3), y])
    with pytest.raises(TypeError, match=r"\[run\] input 1 is f64"):
        live.fast([x, y.double()])
    # Through the compiled call: what eager computes, whichever way it went.
    neg = torch.randn(4, 3)._neg_view()
    torch.testing.assert_close(compiled(neg, y), neg * 2 + y)
    torch.testing.assert_close(compiled(x[:, :3], y), x * 2 + y)
    wide = torch.randn(4, 6)[:, ::2]  # strided: read in place
    torch.testing.assert_close(compiled(wide, y), wide * 2 + y)


@pytest.mark.skipif(_translate._TORCH_BRIDGE is None, reason="ember._torch_bridge was not built (no PyTorch at configure time)")
def test_the_c_steady_call_keeps_inputs_returned_and_constants():
    """Outputs that are inputs come back as the caller's objects; a graph's own tensors
    (constants) are read as inputs of the plan."""
    scale = torch.tensor([1.0, -2.0, 3.0])
    fn = lambda x, y: (x, y * scale + torch.arange(3), y)  # noqa: E731
    compiled = ember.compile(fn)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    for _ in range(3):
        got = compiled(x, y)
    assert graphs(compiled)[0]._callable().fast is not None
    assert got[0] is x and got[2] is y
    torch.testing.assert_close(got[1], y * scale + torch.arange(3))


@pytest.mark.skipif(_translate._TORCH_BRIDGE is None, reason="ember._torch_bridge was not built (no PyTorch at configure time)")
def test_the_torch_bridge_refuses_another_torch():
    """The bridge reads PyTorch's structures as laid out by the headers it was built with: under
    another torch version it does not load, and ember takes the DLPack way."""
    import subprocess
    import sys

    code = ("import torch; torch.__version__ = '0.0.1'\n"
            "try:\n    import ember._torch_bridge\nexcept ImportError as e:\n    print('refused:', e)\n"
            "import ember._translate as t; print('bridge:', t._TORCH_BRIDGE)\n"
            "import ember; f = ember.compile(lambda x: x + 1); x = torch.randn(3)\n"
            "for _ in range(3): torch.testing.assert_close(f(x), x + 1)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "refused: ember._torch_bridge was built for torch" in out.stdout
    assert "bridge: None" in out.stdout


def test_a_reduction_handed_back_reshaped_is_an_exact_output():
    """A row reduction's [n, 1] buffer handed back as [n] (a reshape of the whole buffer) is the
    output's own memory: the caller makes it, and the graph settles into the steady call."""
    fn = lambda x, w: torch.relu(x @ w).sum(-1)  # noqa: E731
    compiled = calls(fn, lambda i: (torch.randn(5, 16), torch.randn(16, 8)))
    assert graphs(compiled)[0].steady_call is True


def _count_long_calls(monkeypatch):
    long_calls = []
    run = _translate.CompiledFx._run
    monkeypatch.setattr(_translate.CompiledFx, "_run", lambda self, args: long_calls.append(1) or run(self, args))
    return long_calls


@pytest.mark.skipif(_translate._TORCH_BRIDGE is None, reason="ember._torch_bridge was not built (no PyTorch at configure time)")
def test_symbolic_sizes_take_the_c_steady_call(monkeypatch):
    """Over symbolic sizes the C++ call reads the symbols from the arguments (a tensor's size, an
    int) and makes each output as the plan asks at those sizes: after the first call, no call
    goes the long way, and every result is eager's, in eager's layout."""
    long_calls = _count_long_calls(monkeypatch)
    fn = lambda x, w, k: (torch.relu(x @ w).sum(-1), torch.cat([x, x], 0)[:k] * 2, x)  # noqa: E731
    compiled = ember.compile(fn, dynamic=True)
    w = torch.randn(16, 8)
    for n in [3, 5, 9, 4, 17]:
        x = torch.randn(n, 16)
        got, want = compiled(x, w, n + 1), fn(x, w, n + 1)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
            assert g.stride() == e.stride()
        assert got[2] is x
    (graph,) = graphs(compiled)
    assert graph._callable().fast is not None
    assert len(long_calls) == 1, "only the first call goes the long way"


@pytest.mark.skipif(_translate._TORCH_BRIDGE is None, reason="ember._torch_bridge was not built (no PyTorch at configure time)")
def test_the_c_steady_call_declines_sizes_it_cannot_make(monkeypatch):
    """An output past EMBER_TORCH_OUTPUT_MAX_MB comes from ember's allocator, the long way: the
    C++ call declines those sizes before any step runs (an in-place update of an input is made
    once), and takes the others."""
    monkeypatch.setattr(_translate, "_TORCH_OUTPUT_MAX", 4096)
    long_calls = _count_long_calls(monkeypatch)

    def fn(x, y):
        y.add_(1)
        return x * 2

    compiled = ember.compile(fn, dynamic=True)
    for n in [8, 16, 4096, 12, 2048, 4096]:  # a declined size again: remembered, the long way at once
        x, y = torch.randn(n), torch.zeros(3)
        torch.testing.assert_close(compiled(x, y), x * 2)
        torch.testing.assert_close(y, torch.ones(3))
    assert graphs(compiled)[0]._callable().fast is not None
    assert len(long_calls) == 4, "the first call, and the three of more than 4096 bytes"


def test_outputs_eager_lays_out_otherwise_stay_off_the_c_call():
    """Eager's transposed output is not contiguous at any size: the graph keeps the long way, which
    hands it back in eager's layout."""
    fn = lambda x: (x * 2).t()  # noqa: E731
    compiled = ember.compile(fn, dynamic=True)
    for n in [3, 5, 6]:
        x = torch.randn(n, 4)
        got = compiled(x)
        torch.testing.assert_close(got, fn(x))
        assert got.stride() == fn(x).stride()
    assert all(g._callable().fast is None for g in graphs(compiled))


@pytest.mark.skipif(_translate._TORCH_BRIDGE is None, reason="ember._torch_bridge was not built (no PyTorch at configure time)")
def test_sizes_used_as_values_are_made_by_the_c_call(monkeypatch):
    """A size used as a value (x * n, a position from the cache length) is an input of the plan
    made at each call: the C++ call evaluates it from the symbols."""
    long_calls = _count_long_calls(monkeypatch)
    fn = lambda x: ((x * x.shape[0] + x.shape[1]) / (x.shape[0] * x.shape[1] + 1), x.shape[0] * 2)  # noqa: E731
    compiled = ember.compile(fn, dynamic=True)
    for n in [3, 6, 4, 11]:
        x = torch.randn(n, 5)
        got, want = compiled(x), fn(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    (graph,) = graphs(compiled)
    live = graph._callable()
    assert any(kind == _translate._SIZE for kind, _ in live.input_sources), "the graph has an input made from sizes"
    assert live.fast is not None and len(long_calls) == 1


def test_the_steady_call_with_aliased_arguments_and_an_input_returned_twice():
    """One tensor passed as both arguments and changed in place, and an input handed back twice:
    each settled call does what eager does, to the arguments and to the outputs' identities."""
    compiled = ember.compile(lambda x, y: x.mul_(2).add(y))
    for _ in range(4):
        t, t_eager = torch.ones(5), torch.ones(5)
        torch.testing.assert_close(compiled(t, t), t_eager.mul_(2).add(t_eager))
        torch.testing.assert_close(t, t_eager)
    twice = ember.compile(lambda x: (x, x * 2, x))
    x = torch.randn(4)
    for _ in range(4):
        a, b, c = twice(x)
        assert a is x and c is x
        torch.testing.assert_close(b, x * 2)


def test_sixteen_threads_share_a_c_steady_call_over_symbolic_sizes():
    """Threads calling one compiled graph at different sizes at once: each gets its own result."""
    import threading

    fn = lambda x, w: (torch.tanh(x @ w) + 1).sum(-1)  # noqa: E731
    compiled = ember.compile(fn, dynamic=True)
    w = torch.randn(16, 16)
    for n in [3, 4, 5]:
        compiled(torch.randn(n, 16), w)
    wrong = []

    def work(i):
        g = torch.Generator().manual_seed(i)
        for k in range(50):
            x = torch.randn(2 + (i + k) % 9, 16, generator=g)
            if not torch.allclose(compiled(x, w), fn(x, w), atol=1e-4):
                wrong.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_a_warm_entry_keeps_dynamos_profiler_record():
    """The entry's pregraph record without Dynamo's disable wrappers ([Note: the pregraph record])
    is still a record in a profile, as in torch.compile, and nothing when no profiler runs."""
    compiled = ember.compile(lambda x: x * 2)
    x = torch.randn(4)
    for _ in range(2):
        compiled(x)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = compiled(x)
    torch.testing.assert_close(out, x * 2)
    names = [e.name for e in prof.events()]
    assert names.count("Pregraph bytecode") == 1, names
    torch.testing.assert_close(compiled(x), x * 2)
