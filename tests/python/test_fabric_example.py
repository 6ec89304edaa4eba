"""docs/examples/fabric_train.py in its short form: Lightning Fabric, 2 CPU processes (DDP), a
GPT-2 compiled by ember through ember.compile and through torch.compile(backend="ember"); the
example itself checks losses and parameters against uncompiled Fabric, the checkpoint's keys,
loading it back, and that ember compiled every graph in the requested mode."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("lightning_fabric")

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "examples", "fabric_train.py")


@pytest.mark.parametrize("how, mode", [("ember", "default"), ("torch.compile", "reduce-overhead")])
def test_fabric_example_trains_as_uncompiled_fabric(how, mode):
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "RANK", "WORLD_SIZE")}
    run = subprocess.run([sys.executable, EXAMPLE, "--steps", "3", "--check", "--compile", how, "--mode", mode],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    assert "check: the same losses and parameters as uncompiled Fabric" in run.stdout, run.stdout
