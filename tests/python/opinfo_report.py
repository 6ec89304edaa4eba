"""The OpInfo runner's outcomes as benchmarks/results/opinfo.md, and the verdict on them against
the expected-failure table of test_opinfo.py."""
import collections
import datetime
import re

import torch

from test_opinfo import expected_reason

STATUSES = ("matched", "failed", "control fails", "eager fails")


class Verdict:
    """Samples that fail without an entry in the table, and entries whose samples pass."""

    def __init__(self, outcomes):
        self.unexpected = [o for o in outcomes if o["status"] == "failed" and not _reason(o)]
        self.expected = [o for o in outcomes if o["status"] == "failed" and _reason(o)]
        self.passing_entries = [o for o in outcomes if o["status"] == "matched" and _reason(o)]

    @property
    def ok(self):
        return not self.unexpected and not self.passing_entries

    def summary(self):
        return (f"opinfo: {len(self.unexpected)} unexpected failures, {len(self.expected)} expected failures, "
                f"{len(self.passing_entries)} expected failures that pass")


def _reason(o):
    return expected_reason(o["op"], o["dtype"], o["mode"], o["sample"])


def write(outcomes, settings, path):
    verdict = Verdict(outcomes)
    lines = _header(settings) + _summary(outcomes) + _verdict(verdict) + _failures(outcomes) + _classes(outcomes)
    lines += _sixteen_bit(outcomes) + _lowerings(outcomes) + _fallbacks(outcomes) + _skipped(outcomes)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return verdict


def _header(settings):
    return [
        "# ember on PyTorch's OpInfo database",
        "",
        f"`make opinfo` (tests/python/opinfo_full.py), {datetime.date.today()}, PyTorch {torch.__version__}: "
        f"ops {settings['ops']}, dtypes {', '.join(settings['dtypes'])}, modes {', '.join(settings['modes'])}, "
        f"up to {settings['samples']} samples per op, dtype and mode (spread over all of the op's samples), "
        f"{settings['minutes']:.0f} minutes on this machine" + (f" ({settings['note']})" if settings.get("note") else "") + ".",
        "",
        "Each sample of `torch.testing._internal.common_methods_invocations.op_db` becomes a function of its "
        "tensors, compiled with `torch.compile(fn, backend=ember, dynamic=False|True)` and compared with eager: "
        "its results (inference), and where the op has autograd in a float dtype, its results and the gradients "
        "of its inputs (training). Tolerances are docs/testing.md's (tests/python/opinfo_compare.py): close to eager, "
        "or to a float64 reference run by eager on the same inputs upcast, or no worse than eager's own error "
        "against that reference. A sample ember does not match runs again on PyTorch's `aot_eager` backend, the "
        "control; where that fails or mismatches too, the sample is PyTorch's problem (\"control fails\"). "
        "A failed lowering (ember's warning that a lowering raised or built the wrong type) fails its sample "
        "even where the torch call that replaced it was right. \"Values unchecked\": ops whose values eager itself "
        "does not repeat (`empty`, ...), compared by shape and dtype. \"On PyTorch\": samples with a graph that "
        "ember declined (complex dtypes, ...); their results are PyTorch's.",
        "",
    ]


def _summary(outcomes):
    lines = ["## Summary", "",
             "| dtype | mode | ops | samples | matched | failed (expected) | control fails | eager fails "
             "| values unchecked | on PyTorch |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    groups = collections.defaultdict(list)
    for o in outcomes:
        groups[(o["dtype"], o["mode"])].append(o)
    for (dtype, mode), group in sorted(groups.items()):
        count = collections.Counter(o["status"] for o in group)
        expected = sum(1 for o in group if o["status"] == "failed" and _reason(o))
        unchecked = sum(1 for o in group if not o["values_checked"])
        on_pytorch = sum(1 for o in group if o["fallbacks"])
        lines.append(f"| {dtype} | {mode} | {len({o['op'] for o in group})} | {len(group)} | {count['matched']} "
                     f"| {count['failed']} ({expected}) | {count['control fails']} | {count['eager fails']} "
                     f"| {unchecked} | {on_pytorch} |")
    return lines + [""]


def _verdict(verdict):
    lines = ["## Verdict", "", verdict.summary().removeprefix("opinfo: ") + ".", ""]
    for o in verdict.passing_entries:
        lines.append(f"- passes, listed as failing: {o['op']} {o['dtype']} {o['mode']} sample {o['sample']}")
    return lines + ([""] if verdict.passing_entries else [])


def _failures(outcomes):
    lines = ["## Failures by op", "",
             "Per op, dtype and mode: the failing samples (their index among the op's samples) and what went "
             "wrong; the reason from the expected-failure table where it lists them.", ""]
    failed = [o for o in outcomes if o["status"] == "failed"]
    if not failed:
        return lines + ["None.", ""]
    by_case = collections.defaultdict(list)
    for o in failed:
        by_case[(o["op"], o["dtype"], o["mode"])].append(o)
    for (op, dtype, mode), group in sorted(by_case.items()):
        samples = ", ".join(str(o["sample"]) for o in group)
        reason = _reason(group[0])
        tag = f" **expected**: {reason}" if reason else " **unexpected**"
        lines.append(f"- `{op}` {dtype} {mode} (sample {samples}):{tag}")
        for detail in sorted({_clip(o['detail']) for o in group}):
            lines.append(f"  - {detail}")
    return lines + [""]


def _classes(outcomes):
    """The failures grouped by the table's reasons: the classes that still fail."""
    lines = ["## Classes that still fail", ""]
    by_reason = collections.defaultdict(set)
    for o in outcomes:
        if o["status"] == "failed":
            by_reason[_reason(o) or "not in the table (unexpected)"].add(f"{o['op']} ({o['dtype']}, {o['mode']})")
    if not by_reason:
        return lines + ["None.", ""]
    for reason, cases in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"- {reason} ({len(cases)}): {', '.join(sorted(cases))}")
    return lines + [""]


def _sixteen_bit(outcomes):
    """Per bfloat16 sample that the float64 reference decided: eager's and ember's error."""
    rows = [o for o in outcomes if o["dtype"] == "bfloat16" and o["errors"]]
    lines = ["## bfloat16: ember's error against eager's", "",
             "The bfloat16 samples whose results (or gradients) ember does not match within bfloat16's tolerance "
             "(rtol 1.6e-2, atol 1e-5) of eager's: the largest absolute error of each against the float64 "
             "reference. ember passes when within that tolerance of the reference, or no worse than eager "
             "(at most 10 % more, plus atol). Mostly ember computes in float32 and rounds once, where eager "
             "rounds each step.", ""]
    if not rows:
        return lines + ["None.", ""]
    lines += ["| op | mode | sample | eager's error | ember's error | verdict |", "|---|---|---:|---:|---:|---|"]
    for o in sorted(rows, key=lambda o: (o["op"], o["mode"], o["sample"])):
        eager_error, ember_error = o["errors"]
        verdict = "passes" if o["status"] == "matched" else o["status"]
        lines.append(f"| `{o['op']}` | {o['mode']} | {o['sample']} | {eager_error:.3g} | {ember_error:.3g} | {verdict} |")
    better = sum(1 for o in rows if o["errors"][1] <= o["errors"][0])
    return lines + ["", f"ember's error is at most eager's in {better} of these {len(rows)} samples.", ""]


def _lowerings(outcomes):
    lines = ["## Failed lowerings", "",
             "Lowerings that raised something other than a decline (`Unsupported`), or built a result of "
             "another dtype or shape than PyTorch's meta: bugs, each run as a torch call with a warning.", ""]
    by_message = collections.defaultdict(set)
    for o in outcomes:
        for m in o["lowering_failures"]:
            by_message[_clip(m)].add(f"{o['op']} ({o['dtype']}, {o['mode']})")
    if not by_message:
        return lines + ["None.", ""]
    for message, cases in sorted(by_message.items()):
        lines.append(f"- {message}: {', '.join(sorted(cases)[:8])}{' ...' if len(cases) > 8 else ''}")
    return lines + [""]


def _fallbacks(outcomes):
    lines = ["## Graphs that ran on PyTorch", "", "| reason | samples | ops |", "|---|---:|---|"]
    by_reason = collections.defaultdict(list)
    for o in outcomes:
        for reason in {_general(f) for f in o["fallbacks"]}:
            by_reason[reason].append(o["op"])
    if not by_reason:
        return lines[:3] + ["None.", ""]
    for reason, ops in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        names = sorted(set(ops))
        lines.append(f"| {reason} | {len(ops)} | {', '.join(names[:6])}{' ...' if len(names) > 6 else ''} |")
    return lines + [""]


def _skipped(outcomes):
    lines = ["## Skipped: the control fails too, or eager rejects the sample", ""]
    for status in ("control fails", "eager fails"):
        group = [o for o in outcomes if o["status"] == status]
        lines += [f"{status}: {len(group)} samples.", ""]
        by_detail = collections.defaultdict(list)
        for o in group:
            by_detail[_general(o["detail"])].append(f"{o['op']} ({o['dtype']}, {o['mode']}, {o['sample']})")
        for detail, cases in sorted(by_detail.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"- {detail}: {', '.join(cases[:6])}{' ...' if len(cases) > 6 else ''}")
        if by_detail:
            lines.append("")
    return lines


def _clip(text, limit=300):
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit] + " ..."


def _general(text):
    """A message without its numbers and shapes, so that like failures group together."""
    text = re.sub(r"\[[0-9, s+*()]*\]", "[...]", _clip(text, 200))
    return re.sub(r"\b\d+(\.\d+)?(e-?\d+)?\b", "N", text)
