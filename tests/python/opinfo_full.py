"""The whole OpInfo database through ember (`make opinfo`): every op of op_db, in float32,
float64, bfloat16 and int64 where the op supports them, static and dynamic, up to --samples
samples per op, dtype and mode (spread over all of the op's samples). Writes the results to
benchmarks/results/opinfo.md and every outcome to a JSON-lines file; exits 1 when a sample fails
that the expected-failure table of test_opinfo.py does not list, or one it lists passes.

Ops run in worker processes, a few dozen at a time (memory stays bounded, and a crash or a hang
of one sample costs that sample, which is recorded, not the run).

    python tests/python/opinfo_full.py [--samples 3] [--ops REGEX] [--dtypes float32,bfloat16] [--report-only]
"""
import argparse
import json
import os
import re
import select
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

OPS_PER_WORKER = 40
QUIET_LIMIT_S = 600  # a worker silent this long is stuck in one sample: it is killed


def _worker(op_indices, dtypes, modes, samples):
    """Runs the ops and prints one JSON line per sample outcome, and a "begin" line before each
    (op, dtype, mode), so that the parent knows where a crash happened."""
    warnings.filterwarnings("ignore")  # ember's warnings are caught per sample by the runner
    import opinfo_runner as runner
    db = runner.load_op_db()
    for index in op_indices:
        opinfo = db[index]
        for dtype in dtypes:
            for mode in modes:
                print(json.dumps({"begin": [index, runner.op_name(opinfo), dtype, mode]}), flush=True)
                for outcome in runner.run_op(opinfo, dtype, mode, samples):
                    print(json.dumps({"outcome": outcome.__dict__}), flush=True)


def _run_worker(op_indices, args, on_outcome):
    """Runs a worker on these ops; returns the op indices it did not reach (after a crash or a
    hang, which is recorded as the failure of the sample in progress)."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--op-indices", ",".join(map(str, op_indices)),
               "--dtypes", ",".join(args.dtypes), "--modes", ",".join(args.modes), "--samples", str(args.samples)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    current = None
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], QUIET_LIMIT_S)
        line = proc.stdout.readline() if ready else None
        if line is None:  # silent for too long
            proc.kill()
            proc.wait()
            return _after_death(op_indices, current, f"no result in {QUIET_LIMIT_S} s: killed", on_outcome)
        if not line:
            code = proc.wait()
            if code == 0:
                return []
            return _after_death(op_indices, current, f"the worker process died (exit code {code})", on_outcome)
        message = json.loads(line)
        if "begin" in message:
            current = message["begin"]
        else:
            on_outcome(message["outcome"])


def _after_death(op_indices, current, reason, on_outcome):
    if current is None:  # before its first op began: loading op_db failed
        current = [op_indices[0], f"op_db[{op_indices[0]}]", "?", "?"]
    index, name, dtype, mode = current
    on_outcome({"op": name, "dtype": dtype, "mode": mode, "sample": -1, "status": "failed", "detail": reason,
                "errors": None, "values_checked": True, "lowering_failures": [], "fallbacks": [], "graphs": 0,
                "seconds": 0.0})
    return op_indices[op_indices.index(index) + 1:]


def _selected_ops(pattern):
    import opinfo_runner as runner
    db = runner.load_op_db()
    return [i for i, opinfo in enumerate(db) if re.search(pattern, runner.op_name(opinfo))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=int(os.environ.get("EMBER_OPINFO_SAMPLES", 3)))
    parser.add_argument("--ops", default="", help="a regular expression on op names (default: all)")
    parser.add_argument("--dtypes", default="float32,float64,bfloat16,int64")
    parser.add_argument("--modes", default="static,dynamic")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "opinfo.md"))
    parser.add_argument("--raw", default=os.path.join(ROOT, "build", "opinfo", "outcomes.jsonl"))
    parser.add_argument("--report-only", action="store_true",
                        help="write the report from the outcomes of an earlier run (--raw) without running anything")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--op-indices", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.dtypes, args.modes = args.dtypes.split(","), args.modes.split(",")
    if args.worker:
        _worker([int(i) for i in args.op_indices.split(",") if i], args.dtypes, args.modes, args.samples)
        return 0

    import opinfo_report
    if args.report_only:
        return _report_only(args, opinfo_report)
    start = time.time()
    pending = _selected_ops(args.ops)
    os.makedirs(os.path.dirname(args.raw), exist_ok=True)
    outcomes = []
    with open(args.raw, "w") as raw:
        def record(outcome):
            outcomes.append(outcome)
            raw.write(json.dumps(outcome) + "\n")
            raw.flush()
        while pending:
            chunk, pending = pending[:OPS_PER_WORKER], pending[OPS_PER_WORKER:]
            rest = _run_worker(chunk, args, record)
            pending = rest + pending
            print(f"opinfo: {len(outcomes)} samples so far, {len(pending)} ops to go, "
                  f"{(time.time() - start) / 60:.1f} min", flush=True)
    settings = {"samples": args.samples, "dtypes": args.dtypes, "modes": args.modes, "ops": args.ops or "all",
                "minutes": (time.time() - start) / 60}
    with open(args.raw + ".settings", "w") as f:
        json.dump(settings, f)
    return _write_report(outcomes, settings, args, opinfo_report)


def _report_only(args, opinfo_report):
    """The report of an earlier run, judged by today's expected-failure table."""
    with open(args.raw) as f:
        outcomes = [json.loads(line) for line in f if line.strip()]
    with open(args.raw + ".settings") as f:
        settings = json.load(f)
    return _write_report(outcomes, settings, args, opinfo_report)


def _write_report(outcomes, settings, args, opinfo_report):
    verdict = opinfo_report.write(outcomes, settings, args.out)
    print(verdict.summary())
    print(f"opinfo: results in {args.out}")
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
