"""ember's view of CUDA: whether a device can be used, and its properties.

    import ember
    ember.cuda.is_available()              # False on a machine without the NVIDIA driver or a GPU
    ember.cuda.get_device_properties(0)    # {"name": ..., "arch": "sm_90", ...}, or DeviceUnavailableError

The driver (libcuda.so.1) is loaded the first time one of these asks, never before: importing
ember, or compiling and running on the CPU, maps no CUDA library (docs/cuda.md).
"""
from . import _C

DeviceUnavailableError = _C.DeviceUnavailableError


def is_available() -> bool:
    """Whether a CUDA device can be used here (the driver loads and sees a device)."""
    return _C.cuda_unavailable_reason() == ""


def unavailable_reason() -> str:
    """What is missing when is_available() is False (the driver library, a device...); "" otherwise."""
    return _C.cuda_unavailable_reason()


def device_count() -> int:
    """The number of CUDA devices; raises DeviceUnavailableError without a usable driver."""
    return _C.cuda_device_count()


def get_device_properties(device: int = 0) -> dict:
    """name, major, minor, arch ("sm_90"), multi_processor_count, total_memory (bytes), driver_version."""
    if not isinstance(device, int) or isinstance(device, bool):
        raise TypeError(f"get_device_properties: device must be an int, got {type(device).__name__}")
    return _C.cuda_device(device)
