"""The Python half of `make demo`: real PyTorch models (a GPT-2 style transformer and a ResNet-18,
random weights, built from configs) compiled by ember in each mode, checked against eager, with
speedups and ember's report."""
import copy
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
import model_zoo  # noqa: E402

import ember  # noqa: E402
from ember._compile import report_of  # noqa: E402


def median_ms(fn, args, repeats=10):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    warnings.simplefilter("ignore")
    failures = 0
    for name in ("gpt2", "resnet18"):
        model, args = model_zoo.build(name, "bench")
        model.eval()
        with torch.no_grad():
            expected = model_zoo.main_output(model(*args))
            eager_ms = median_ms(model, args)
            print(f"\n== {name}: eager {eager_ms:.2f} ms")
            for mode in ember.MODES:
                torch._dynamo.reset()
                compiled = ember.compile(model, mode=mode)
                start = time.perf_counter()
                actual = model_zoo.main_output(compiled(*args))
                first_s = time.perf_counter() - start
                ok = torch.allclose(actual, expected, rtol=1e-4, atol=1e-4)
                failures += not ok
                ms = median_ms(compiled, args)
                print(f"ember {mode:16s} {ms:8.2f} ms  {eager_ms / ms:5.2f}x eager  first call {first_s:.2f} s  "
                      f"{'matches eager' if ok else 'DIFFERS FROM EAGER'}")
            print(report_of(compiled).text())
    print("\ndemo: all models match eager" if not failures else f"\ndemo: {failures} results differ from eager")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
