"""Runs the `normkit lab` binary and checks its command-line contract:
--json is valid JSON with the required fields, --list names every check,
an unknown id exits 2, and the exit status is 0 exactly when every check passed.

usage: check_lab_cli.py PATH/TO/normkit
"""
import json
import math
import subprocess
import sys


def run(binary, *args):
    return subprocess.run([binary, "lab", *args], capture_output=True, text=True, timeout=600)


def main():
    binary = sys.argv[1]
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    listed = run(binary, "--list")
    expect(listed.returncode == 0, f"--list exit status {listed.returncode}")
    ids = [line.split("\t")[0] for line in listed.stdout.splitlines() if line]
    expect(len(ids) >= 11, f"--list names {len(ids)} checks")

    full = run(binary, "--json")
    def no_duplicate_keys(pairs):
        keys = [k for k, _ in pairs]
        expect(len(keys) == len(set(keys)), f"duplicate JSON keys: {sorted(k for k in set(keys) if keys.count(k) > 1)}")
        return dict(pairs)

    doc = json.loads(full.stdout, object_pairs_hook=no_duplicate_keys)  # raises if not valid JSON
    expect(isinstance(doc, dict), "top level is an object")
    checks = doc.get("checks")
    expect(isinstance(checks, list), "`checks` is an array")
    expect([c.get("id") for c in checks] == ids, "--json runs the --list ids in order")
    for c in checks:
        cid = c.get("id")
        expect(isinstance(cid, str) and cid, f"{cid}: `id` is a non-empty string")
        expect(isinstance(c.get("passed"), bool), f"{cid}: `passed` is a bool")
        values = c.get("values")
        expect(isinstance(values, dict) and values, f"{cid}: `values` is a non-empty object")
        for name, v in (values or {}).items():
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            expect(ok, f"{cid}: value {name} = {v!r} is a finite number")
    all_passed = all(c.get("passed") for c in checks)
    expect((full.returncode == 0) == all_passed,
           f"exit status {full.returncode} with all_passed={all_passed}")
    expect(all_passed, "every check passes: " + ", ".join(c["id"] for c in checks if not c.get("passed")))

    subset = run(binary, "--json", "residual_update_angle")
    expect([c["id"] for c in json.loads(subset.stdout)["checks"]] == ["residual_update_angle"],
           "an id argument runs just that check")

    unknown = run(binary, "worked_examples", "no_such_check")
    expect(unknown.returncode == 2, f"unknown id exit status {unknown.returncode}, expected 2")
    expect("no_such_check" in unknown.stderr, "the error names the unknown id")

    helped = run(binary, "--help")
    expect(helped.returncode == 0 and "--json" in helped.stdout and "--report" in helped.stdout,
           "--help documents the options")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failure(s); {len(checks)} checks in the JSON")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
