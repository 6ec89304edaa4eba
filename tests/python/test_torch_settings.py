"""Process-wide PyTorch settings that compiled code follows as eager does (docs/python.md):
the thread count (torch.set_num_threads, counted by the threads that really work), flushing
denormals (torch.set_flush_denormal) on every thread, grad mode and deterministic results."""
import os
import subprocess
import sys
import time

import pytest
import torch

import ember

needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to tell 1 thread from 2")


def cpu_ticks_by_thread():
    """Each thread of this process: user + system CPU time, in clock ticks."""
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        ticks[tid] = int(fields[11]) + int(fields[12])  # utime and stime (fields 14 and 15)
    return ticks


def working_threads(fn, seconds=1.0):
    """The threads that did a real share of the work while fn ran again and again: those whose
    CPU time grew by at least a quarter of the busiest one's."""
    fn()
    time.sleep(0.05)  # OpenMP threads that spun after earlier work fall asleep
    before = cpu_ticks_by_thread()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        fn()
    after = cpu_ticks_by_thread()
    grown = [after[t] - before.get(t, 0) for t in after]
    return sum(1 for g in grown if g >= max(grown) / 4 and g > 0)


def parallel_work():
    """A compiled function whose kernels split over threads, and its input."""
    fn = ember.compile(lambda x: torch.exp(x) * 2.0 + x.sum(-1, keepdim=True))
    x = torch.rand(1024, 4096)
    return lambda: fn(x)


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@needs_two_cpus
def test_torch_set_num_threads_holds_for_compiled_code(restore_threads):
    work = parallel_work()
    torch.set_num_threads(1)
    assert working_threads(work) == 1
    torch.set_num_threads(2)  # changed between calls of the same compiled function
    assert working_threads(work) == 2
    torch.set_num_threads(1)
    assert working_threads(work) == 1


@needs_two_cpus
def test_ember_num_threads_wins_over_torch():
    script = f"""
import sys, torch, ember
sys.path.insert(0, {os.path.dirname(__file__)!r})
from test_torch_settings import parallel_work, working_threads
torch.set_num_threads(1)
print(working_threads(parallel_work()))
"""
    env = dict(os.environ, EMBER_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "2"


@needs_two_cpus
def test_flush_denormal_holds_on_every_thread(restore_threads):
    torch.set_num_threads(2)
    fn = ember.compile(lambda x: x * 1e-30 + 0.0)
    x = torch.full((512, 4096), 1e-10)  # 1e-40: a float32 denormal, unless flushed
    try:
        assert torch.set_flush_denormal(True)
        flushed = fn(x)
    finally:
        torch.set_flush_denormal(False)
    assert torch.count_nonzero(flushed) == 0  # every row, whichever thread computed it
    assert torch.count_nonzero(fn(x)) == x.numel()


def test_grad_mode_is_followed():
    lin = torch.nn.Linear(8, 4)
    compiled = ember.compile(lin)
    x = torch.randn(3, 8)
    with torch.no_grad():
        y = compiled(x)
    assert not y.requires_grad
    y = compiled(x)
    assert y.requires_grad
    y.sum().backward()
    assert lin.weight.grad is not None


def test_results_do_not_depend_on_the_thread_count(restore_threads):
    fn = ember.compile(lambda x: torch.softmax(x, -1).sum(0) + x.mean(-1).sum())
    x = torch.randn(2048, 1000)
    torch.set_num_threads(1)
    one = fn(x)
    torch.set_num_threads(2)
    two = fn(x)
    assert torch.equal(one, two)
    assert torch.equal(fn(x), two)
