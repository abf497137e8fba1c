#!/usr/bin/env python3
"""The reference side of the JSONSchema benchmark: Python's jsonschema on the same schema and events.

Usage: jsonschema_bench.py SCHEMA EVENT...  prints lines like the Swift benchmark:
  <measure> <event file name> <validations per second>
"""
import json
import os
import sys
import time

import jsonschema

SECONDS = float(os.environ.get("BENCH_SECONDS", "1"))
# Fixed iteration count (for instruction counting under valgrind) instead of a timed rate.
ITERATIONS = int(os.environ["BENCH_ITERATIONS"]) if os.environ.get("BENCH_ITERATIONS") else None
ONLY = os.environ.get("BENCH_ONLY")


def rate(body):
    if ITERATIONS is not None:
        for _ in range(ITERATIONS):
            body()
        return ITERATIONS
    def measure(duration):
        count = 0
        start = time.perf_counter()
        while True:
            for _ in range(100):
                body()
            count += 100
            elapsed = time.perf_counter() - start
            if elapsed >= duration:
                return count / elapsed
    measure(SECONDS / 4)
    rates = sorted(measure(SECONDS) for _ in range(3))
    return rates[1]


def main():
    schema = json.load(open(sys.argv[1], encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    for path in sys.argv[2:]:
        name = os.path.basename(path)
        text = open(path, "rb").read()
        value = json.loads(text)
        valid = validator.is_valid(value)
        measures = [
            ("schema-only", lambda: validator.is_valid(value), f" valid={str(valid).lower()}"),
            ("schema-first-error", lambda: next(validator.iter_errors(value), None) is None, ""),
            ("parse+schema", lambda: validator.is_valid(json.loads(text)), ""),
        ]
        for measure, body, suffix in measures:
            if ONLY and ONLY != measure:
                continue
            print(f"{measure} {name} {int(rate(body))}{suffix}", flush=True)
    from importlib.metadata import version
    print(f"# python {sys.version.split()[0]}, jsonschema {version('jsonschema')}")


if __name__ == "__main__":
    main()
