"""Starts `steno serve` on a free port for a benchmark script: (process, port)."""

import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def serve(steno, arguments=()):
    """`steno serve` on port 0 with warnings only and no web root, and `arguments`; returns the
    process and the port it says it listens on."""
    process = subprocess.Popen([steno, "serve", "--port", "0", "--log-level", "warning", "--web-root", "/nonexistent",
                                *arguments],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    for line in process.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return process, int(m.group(1))
    raise RuntimeError("steno serve did not start")
