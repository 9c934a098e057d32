"""`python -m normkit` runs the command-line tool the wheel bundles."""

from __future__ import annotations

import subprocess
import sys

import normkit
from normkit.__main__ import cli_path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "normkit", *args], capture_output=True, text=True, timeout=120)


def test_the_cli_is_bundled_and_reports_the_library_version() -> None:
    assert cli_path().is_file(), "the wheel was built without NORMKIT_BUILD_TOOLS"
    r = run("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"normkit {normkit.__version__}"


def test_lab_runs_a_check_and_passes_its_exit_status_through() -> None:
    r = run("lab", "worked_examples")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 of 1 checks passed" in r.stdout
    bad = run("no-such-command")
    assert bad.returncode == 2 and "unknown command" in bad.stderr
