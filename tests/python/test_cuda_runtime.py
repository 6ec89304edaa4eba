"""CUDA without a GPU: the driver is loaded only when asked for, and asking without one raises
the documented error (docs/cuda.md). On a machine with a GPU, tests/cuda checks the device."""
import os
import subprocess
import sys
import textwrap

import pytest

import ember

CUDA_LIBRARIES = ("libcuda.so", "libnvrtc", "libcublas", "libcudart", "libcudnn")


def run_python(code, **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_RECORD")}
    environment.update(env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_cpu_only_process_maps_no_cuda_library():
    # Compiling and running models in every mode, training included, never opens a CUDA library.
    out = run_python("""
        import torch, ember
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
        x = torch.randn(4, 8, requires_grad=True)
        for mode in ember.MODES:
            compiled = ember.compile(model, mode=mode)
            compiled(x).sum().backward()
            torch.testing.assert_close(compiled(x), model(x))
        f = ember.compile(lambda a: torch.softmax(a * 2, -1), dynamic=True)
        f(torch.randn(3, 5)); f(torch.randn(7, 9))
        print("\\n".join(line.split()[-1] for line in open("/proc/self/maps") if ".so" in line))
    """)
    mapped = [lib for lib in out.split() if any(name in lib for name in CUDA_LIBRARIES)]
    assert mapped == [], mapped


def test_no_driver_raises_the_documented_error():
    out = run_python("""
        import ember
        assert not ember.cuda.is_available()
        print(ember.cuda.unavailable_reason())
        for ask in (ember.cuda.get_device_properties, ember.cuda.device_count):
            try:
                ask()
            except ember.DeviceUnavailableError as e:
                assert isinstance(e, RuntimeError)
                assert str(e).startswith("[cuda] "), e
            else:
                raise AssertionError("no error")
    """, EMBER_CUDA_DRIVER_LIBRARY="/nonexistent/libcuda.so.1")
    assert "/nonexistent/libcuda.so.1 could not be loaded" in out
    assert "NVIDIA driver" in out


def test_a_library_that_is_not_the_driver_is_named():
    out = run_python("""
        import ember
        print(ember.cuda.is_available(), ember.cuda.unavailable_reason())
    """, EMBER_CUDA_DRIVER_LIBRARY="libm.so.6")
    assert out.startswith("False libm.so.6 is not a usable CUDA driver: it lacks cuInit"), out


@pytest.mark.skipif(ember.cuda.is_available(), reason="a GPU is here: tests/cuda checks it")
def test_unavailable_here_and_bad_arguments():
    assert ember.cuda.unavailable_reason() != ""
    with pytest.raises(TypeError):
        ember.cuda.get_device_properties("0")
    with pytest.raises(ember.DeviceUnavailableError, match=r"^\[cuda\]"):
        ember.cuda.get_device_properties(0)
