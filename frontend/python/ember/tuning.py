"""max-autotune's tuning database, from Python and the command line.

    python -m ember.tuning list     each entry: the step, its sizes, its machine, the choice
    python -m ember.tuning clear    removes every entry

The database lives under EMBER_CACHE_DIR (default ~/.cache/ember)/tuning, beside the kernel
cache; a second process takes the choices it finds there without timing anything.
"""
import sys

from . import _C


def entries():
    """Every whole entry as a dict: key, signature (the step, its sizes, threads, machine), choice."""
    return [dict(key=k, signature=s, choice=c) for k, s, c in _C.tuning_entries()]


def clear():
    """Removes every entry; returns how many there were."""
    return _C.tuning_clear()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["list"]:
        found = entries()
        print(f"{len(found)} entries")
        for e in found:
            lines = e["signature"].split("\n")
            what = lines[1] if lines[0] == "kernel" else lines[0]
            print(f"{e['key'][:12]}  {what}  -> {e['choice']}")
        return 0
    if argv == ["clear"]:
        print(f"removed {clear()} entries")
        return 0
    print("usage: python -m ember.tuning list | clear", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
