"""PyTorch's operator database (OpInfo) through ember: the short form, run by `make test`.

A fixed, deterministic slice of op_db (a stride through it per dtype and mode), the first sample
of each op, compared with eager by opinfo_runner.py (inference, and training with gradients where
the op has autograd). The whole database runs under `make opinfo` (opinfo_full.py) and writes
benchmarks/results/opinfo.md. Both read the expected-failure table below: a sample that fails
without an entry fails the run, and so does an entry whose sample passes.
"""
import sys

import pytest

import opinfo_runner as runner

# PyTorch's test modules (where op_db lives) import expecttest, which scripts/setup.sh installs:
# a missing one fails here rather than skipping the database unseen.
import expecttest  # noqa: E402,F401

# (op, dtype, mode, samples, reason): samples of the op (indices among its samples in that dtype;
# "*": every sample) that fail in that dtype ("*": any) and mode ("*": both), and why.
EXPECTED_FAILURES = [
]


def expected_reason(op, dtype, mode, sample):
    """The table's reason for this sample's failure, or None when it is not expected to fail."""
    for e_op, e_dtype, e_mode, e_samples, reason in EXPECTED_FAILURES:
        if e_op == op and e_dtype in ("*", dtype) and e_mode in ("*", mode) and \
                (e_samples == "*" or sample in e_samples):
            return reason
    return None


# The short form: (dtype, mode, start, stride) through op_db, the first sample of each op: about
# 320 cases, 80 seconds on two cores with a warm kernel cache.
SHORT_FORM = [
    ("float32", "static", 0, 4),
    ("float32", "dynamic", 1, 16),
    ("bfloat16", "static", 2, 16),
    ("bfloat16", "dynamic", 5, 32),
    ("int64", "static", 3, 16),
    ("float64", "static", 7, 32),
]


def _short_form_cases():
    db = runner.load_op_db()
    cases = []
    for dtype, mode, start, stride in SHORT_FORM:
        for opinfo in db[start::stride]:
            if runner.supports(opinfo, dtype):
                cases.append(pytest.param(opinfo, dtype, mode, id=f"{runner.op_name(opinfo)}-{dtype}-{mode}"))
    return cases


@pytest.mark.parametrize("opinfo,dtype,mode", _short_form_cases())
def test_opinfo_short_form(opinfo, dtype, mode):
    outcomes = runner.run_op(opinfo, dtype, mode, limit=1)
    for o in outcomes:
        reason = expected_reason(o.op, o.dtype, o.mode, o.sample)
        if o.status == "failed":
            assert reason, f"sample {o.sample}: {o.detail}"
        elif o.status == "matched":
            assert not reason, f"sample {o.sample} passes but is listed as failing ({reason}): remove its entry"
    if outcomes and all(o.status in ("control fails", "eager fails") for o in outcomes):
        pytest.skip(f"no sample to judge ember by: {outcomes[0].status}: {outcomes[0].detail}")


def test_the_runner_calls_a_wrong_lowering_a_failure(monkeypatch):
    # The short form must be able to fail: a lowering that computes cos for sin is caught, in
    # inference and training alike, and the control (aot_eager) does not excuse it.
    from ember._lower import LOWERINGS
    monkeypatch.setitem(LOWERINGS, "aten.sin.default", lambda cx, x: cx.op("cos", [x]))
    sin = next(o for o in runner.load_op_db() if runner.op_name(o) == "sin")
    (outcome,) = runner.run_op(sin, "float32", "static", limit=1)
    assert outcome.status == "failed"
    assert outcome.detail.startswith("inference: max abs difference")


def test_a_view_takes_the_sizes_as_the_meta_spells_them():
    # tensorinv's second sample under dynamic=True views by s2*s3 where PyTorch's meta, knowing
    # that equals s0*s1, says s0*s1: the lowering's result was refused, a failed lowering.
    tensorinv = next(o for o in runner.load_op_db() if runner.op_name(o) == "linalg.tensorinv")
    outcomes = runner.run_op(tensorinv, "float32", "dynamic", limit=2)
    assert [o.sample for o in outcomes] == [0, 1]
    assert [(o.status, o.lowering_failures) for o in outcomes] == [("matched", [])] * 2


def test_the_table_fails_a_run_on_an_unlisted_failure_and_on_a_listed_pass(monkeypatch):
    import opinfo_report
    monkeypatch.setattr(sys.modules[__name__], "EXPECTED_FAILURES",
                        [("sin", "bfloat16", "*", (2,), "a reason"), ("cos", "*", "dynamic", "*", "another")])

    def outcome(op, dtype, mode, sample, status):
        return {"op": op, "dtype": dtype, "mode": mode, "sample": sample, "status": status}

    assert expected_reason("sin", "bfloat16", "static", 2) == "a reason"
    assert expected_reason("sin", "bfloat16", "static", 0) is None
    assert expected_reason("cos", "int64", "dynamic", 7) == "another"
    assert opinfo_report.Verdict([outcome("sin", "bfloat16", "dynamic", 2, "failed")]).ok
    assert not opinfo_report.Verdict([outcome("sin", "bfloat16", "dynamic", 0, "failed")]).ok
    listed_pass = opinfo_report.Verdict([outcome("cos", "float32", "dynamic", 1, "matched")])
    assert not listed_pass.ok and len(listed_pass.passing_entries) == 1
