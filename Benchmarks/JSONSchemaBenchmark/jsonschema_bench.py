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


def rate(body):
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
        print(f"schema-only {name} {int(rate(lambda: validator.is_valid(value)))} valid={str(valid).lower()}", flush=True)
        print(f"schema-first-error {name} {int(rate(lambda: next(validator.iter_errors(value), None) is None))}", flush=True)
        print(f"parse+schema {name} {int(rate(lambda: validator.is_valid(json.loads(text))))}", flush=True)
    from importlib.metadata import version
    print(f"# python {sys.version.split()[0]}, jsonschema {version('jsonschema')}")


if __name__ == "__main__":
    main()
