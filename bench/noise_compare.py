#!/usr/bin/env python3
"""Sets the words of two runs of bench/noise.py side by side (its --words files): how many words
in a hundred differ between, say, the readings sent at real time and sent fast, or over Opus
and over PCM. The distance is the word edit distance, over the first run's words.

    .venv/bin/python bench/noise_compare.py A.json "now opus" B.json "now opus"
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
from worker_client import errors  # noqa: E402


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[3]))
    pa, pb = sys.argv[2] + " ", sys.argv[4] + " "
    total = differ = 0
    print(f"{'reading':22} {'words':>5} {'differ':>6}")
    for key in sorted(k for k in a if k.startswith(pa)):
        label = key[len(pa):]
        if pb + label not in b:
            continue
        n, d = len(a[key]), errors(a[key], b[pb + label])
        total += n
        differ += d
        print(f"{label:22} {n:5d} {d:6d}")
    print(f"{'all':22} {total:5d} {differ:6d}  ({differ / max(1, total) * 100:.1f} in 100)")


if __name__ == "__main__":
    main()
