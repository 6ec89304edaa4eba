"""The driver as ember loads it sees the device PyTorch sees."""
import pytest

import ember


def test_device_properties_match_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch here has no CUDA")
    mine, theirs = ember.cuda.get_device_properties(0), torch.cuda.get_device_properties(0)
    assert mine["name"] == theirs.name
    assert (mine["major"], mine["minor"]) == (theirs.major, theirs.minor)
    assert mine["arch"] == f"sm_{theirs.major}{theirs.minor}"
    assert mine["multi_processor_count"] == theirs.multi_processor_count
    assert mine["total_memory"] == theirs.total_memory
    assert ember.cuda.device_count() == torch.cuda.device_count()


def test_a_device_past_the_last_raises():
    with pytest.raises(ember.DeviceUnavailableError, match="no device"):
        ember.cuda.get_device_properties(ember.cuda.device_count())
