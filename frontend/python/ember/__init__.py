"""ember: a graph-capturing JIT compiler for tensor programs.

    import ember
    model = ember.compile(model)                      # an nn.Module or a function
    model = ember.compile(model, mode="reduce-overhead", dynamic=True)
    print(ember.explain(model_or_fn, *inputs))        # what was compiled, what broke and why

`torch.compile(model, backend="ember")` works as well, without importing ember first.
"""
from . import _C  # noqa: F401  (loads the core and registers the torch-call runner's types)
from . import _torch_calls  # noqa: F401
from . import cuda, tensor
from ._C import DeviceUnavailableError, IndexOutOfRange, OutOfMemoryError, Tensor
from ._compile import compile
from ._explain import explain
from ._report import Report
from .dynamo import MODES, OPTIONS, ember_backend

__all__ = ["compile", "explain", "Report", "Tensor", "tensor", "ember_backend", "MODES", "OPTIONS", "IndexOutOfRange",
           "OutOfMemoryError", "DeviceUnavailableError", "cuda"]
__version__ = "0.1.0"
