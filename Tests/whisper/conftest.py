"""pytest's header names the processor and CTranslate2's choices on it (scripts/machine_report.py):
the same model writes slightly different text on other processors, so a failure says where."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import machine_report  # noqa: E402


def pytest_report_header(config):
    return [f"machine: {machine_report.processor()}", f"machine: {machine_report.ctranslate2_choice()}"]
