"""tests/cuda: what only a GPU can show. Every test here is skipped, with the reason, where
ember.cuda.is_available() is False (tests/cuda/device_check.sh runs them on a GPU machine)."""
import pathlib

import pytest

import ember

HERE = pathlib.Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    # The hook sees the whole session's items (make pytest runs tests/python too): only ours.
    if ember.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device: " + ember.cuda.unavailable_reason())
    for item in items:
        if HERE in pathlib.Path(item.path).parents:
            item.add_marker(skip)
