#!/usr/bin/python3
"""Performance as users meet it: runs the worker's benchmarks in release builds and writes
docs/performance.md with its plots (docs/performance/*.png).

    make bench                                  # everything (about 30 minutes on 2 cores)
    Benchmarks/performance.py --only latency    # one part; the others keep their last figures
    Benchmarks/performance.py --report          # redraw docs/performance.md from the saved figures
    BENCH_ROUNDS=1 Benchmarks/performance.py    # one run per figure instead of three (a quick look)

Parts: throughput (the maximum, both brokers), latency (open loop against offered load), rates (open
loop at fixed low rates, 100 and 1,000 events/s, with the worker's own share from its /metrics), lanes (urgent
events while a bulk backlog drains, without and with consumer.lanes.urgent), rtt (APNs round trips
against connections and maxInFlight), floors (the worker's CPU per event next to kcat,
h2load and the validator), memory (peak RSS against backlog and record size), profile (perf: where
the worker's CPU goes). Raw figures go to docs/performance/results.json: every figure in the report
is the median of the runs there, with their min and max. Benchmarks report; they never fail on a
time. Python 3 standard library and matplotlib (Debian's python3-matplotlib) only.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
FIGURES = os.path.join(DOCS, "performance")
RESULTS = os.path.join(FIGURES, "results.json")
PARTS = ["throughput", "latency", "rates", "lanes", "rtt", "floors", "memory", "profile"]
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
# Brokers that hold an empty fetch for the whole fetch.wait.max.ms (both here do; Apache Kafka answers
# as soon as data arrives): the consumer setting that bounds the wait, measured next to the default.
SHORT_FETCH_WAIT = 'fetch.wait.max.ms: "10"'
LATENCY_FRACTIONS = [0.10, 0.25, 0.50, 0.75, 0.90]
# The rates part: fixed offered rates (events/s) a 2-core machine serves without saturating, each held
# this long (1,000 s of events at 100/s, 30,000 at 1,000/s, enough for a p99.9 of each).
FIXED_RATES = os.environ.get("BENCH_RATES", "100,1000")
FIXED_RATE_SECONDS = os.environ.get("BENCH_RATES_STEP_SECONDS", "30")
# Its goal: p99 from input record to readable result at 1,000 events/s on Tansu with a 10 ms fetch wait.
FIXED_RATE_GOAL_MS = 25
# The worker's defaults (Sources/Worker/Configuration), for the report's words only.
DEFAULT_MAX_IN_FLIGHT = 10_000
DEFAULT_CONNECTIONS = 8


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# What the Makefile gives every swift build (the run path of the librdkafka it uses).
SWIFTPM_FLAGS = shlex.split(os.environ.get("SWIFTPM_FLAGS", ""))


def bin_path():
    out = subprocess.run(["swift", "build", *SWIFTPM_FLAGS, "-c", "release", "--show-bin-path"], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def build(products):
    for product in products:
        log(f"== building {product} (release)")
        subprocess.run(["swift", "build", *SWIFTPM_FLAGS, "-c", "release", "--product", product], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)


def worker_bench(env, timeout=3600):
    """Runs WorkerBenchmark with WORKER_BENCH_* settings; returns its `json` lines."""
    # The worker's own default maxInFlight unless a part says otherwise: figures as a user meets them.
    env = dict({"WORKER_BENCH_MAX_IN_FLIGHT": 0}, **env)
    full = dict(os.environ)
    full.update({k: str(v) for k, v in env.items()})
    log("   " + " ".join(f"{k}={v}" for k, v in env.items()))
    proc = subprocess.run([os.path.join(bin_path(), "WorkerBenchmark")], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=timeout)
    lines = [json.loads(line[5:]) for line in proc.stdout.splitlines() if line.startswith("json ")]
    for line in proc.stdout.splitlines():
        if not line.startswith("json "):
            log("   " + line)
    if proc.returncode != 0:
        log(proc.stderr[-2000:])
        raise RuntimeError(f"WorkerBenchmark exited {proc.returncode}")
    return lines


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


# ---------------------------------------------------------------------------------------------------
# Parts


def part_throughput(results):
    """The maximum: a backlog drained by the worker and by the same pipeline with an instant APNs."""
    runs = []
    for broker, events in (("mock", 200_000), ("tansu", 100_000)):
        log(f"== throughput on {broker}")
        runs += worker_bench({"WORKER_BENCH_BROKER": broker, "WORKER_BENCH_EVENTS": events,
                              "WORKER_BENCH_ROUNDS": ROUNDS})
    results["throughput"] = runs


def max_rate(results, broker):
    runs = [r["rate"] for r in results.get("throughput", []) if r["broker"] == broker and r["mode"] == "worker"]
    if not runs:
        raise RuntimeError("run the throughput part first: the latency part offers fractions of its maximum")
    return statistics.median(runs)


def part_latency(results):
    steps = []
    for broker, consumer in (("tansu", ""), ("tansu", SHORT_FETCH_WAIT), ("mock", SHORT_FETCH_WAIT)):
        maximum = max_rate(results, broker)
        rates = ",".join(str(round(maximum * f)) for f in LATENCY_FRACTIONS)
        log(f"== latency on {broker} ({consumer or 'default consumer settings'}), rates {rates}")
        env = {"WORKER_BENCH_SCENARIO": "latency", "WORKER_BENCH_BROKER": broker, "WORKER_BENCH_RATES": rates,
               "WORKER_BENCH_STEP_SECONDS": os.environ.get("BENCH_STEP_SECONDS", "8"),
               "WORKER_BENCH_ROUNDS": ROUNDS}
        if consumer:
            env["WORKER_BENCH_CONSUMER_PROPERTIES"] = consumer
        for step in worker_bench(env):
            step["maximum"] = maximum
            steps.append(step)
    results["latency"] = steps


def part_rates(results):
    """Open loop at fixed rates on both brokers, fetch.wait.max.ms 10 and default, in turn within each
    round (a slow spell of the machine then falls on every configuration, not on one)."""
    steps = []
    configurations = [("tansu", SHORT_FETCH_WAIT), ("tansu", ""), ("mock", SHORT_FETCH_WAIT), ("mock", "")]
    for round_ in range(ROUNDS):
        for broker, consumer in configurations:
            log(f"== fixed rates {FIXED_RATES} on {broker} ({consumer or 'default consumer settings'}), "
                f"round {round_ + 1} of {ROUNDS}")
            env = {"WORKER_BENCH_SCENARIO": "latency", "WORKER_BENCH_BROKER": broker,
                   "WORKER_BENCH_RATES": FIXED_RATES, "WORKER_BENCH_STEP_SECONDS": FIXED_RATE_SECONDS,
                   "WORKER_BENCH_ROUNDS": 1}
            if consumer:
                env["WORKER_BENCH_CONSUMER_PROPERTIES"] = consumer
            for step in worker_bench(env):
                step["round"] = round_
                steps.append(step)
    results["rates"] = steps


# The lanes part's runs: broker:backlog, comma-separated (tansu:1000000, the goal's setting: about 2 minutes a run,
# most of it producing the backlog). The mock keeps 5 MiB of record batches per partition, about 50,000
# of these events: a larger backlog gets more bulk partitions there than the scenario's 8.
LANES_RUNS = os.environ.get("BENCH_LANES_RUNS", "mock:200000,mock:1000000,tansu:200000,tansu:1000000")
# The simulator's event-loop threads in the lanes part: one per APNs connection the worker opens (8
# for the bulk lane, 1 for the urgent lane), as on distinct APNs servers. At its default (a thread per
# core, 2 here) each of its loops serves several bulk connections and the urgent one, and the urgent
# answer queued there behind thousands of bulk frames: a queue of the stand-in, not of the worker,
# which APNs does not have (docs/performance.md, "Lanes").
LANES_SIMULATOR_THREADS = int(os.environ.get("BENCH_LANES_SIMULATOR_THREADS", "9"))


def lanes_mock_partitions(backlog):
    return 8 if backlog <= 200_000 else 8 * -(-backlog // 250_000)


def part_lanes(results):
    """Urgent events at 20/s, open loop, while a bulk backlog drains: without lanes (both topics in
    consumer.topics), with lanes (the urgent topic in consumer.lanes.urgent.topics) and, as the bulk
    drain's reference, without urgent traffic; alternated within each run of the scenario."""
    runs = []
    for spec in LANES_RUNS.split(","):
        broker, backlog = spec.split(":")
        backlog = int(backlog)
        log(f"== lanes on {broker}, a backlog of {backlog:,}")
        env = {"WORKER_BENCH_SCENARIO": "lanes", "WORKER_BENCH_BROKER": broker, "WORKER_BENCH_BACKLOG": backlog,
               "WORKER_BENCH_ROUNDS": ROUNDS, "WORKER_BENCH_TIMEOUT": 900,
               "WORKER_BENCH_SIMULATOR_THREADS": LANES_SIMULATOR_THREADS}
        if broker == "mock":
            env["WORKER_BENCH_BULK_PARTITIONS"] = lanes_mock_partitions(backlog)
        for run in worker_bench(env):
            run["simulatorThreads"] = LANES_SIMULATOR_THREADS
            runs.append(run)
    # Only the broker:backlog pairs run now are replaced: BENCH_LANES_RUNS=tansu:1000000 redoes one.
    done = {(r["broker"], r["backlog"]) for r in runs}
    kept = [r for r in results.get("lanes", []) if (r["broker"], r["backlog"]) not in done]
    results["lanes"] = kept + runs


def part_rtt(results):
    runs = []
    events = int(os.environ.get("BENCH_RTT_EVENTS", "200000"))
    base = {"WORKER_BENCH_MODES": "worker", "WORKER_BENCH_EVENTS": events, "WORKER_BENCH_ROUNDS": ROUNDS,
            "WORKER_BENCH_MAX_IN_FLIGHT": 0}
    for latency in ("0", "50", "100", "100..200"):
        for connections in (1, 2, 4, 8):
            log(f"== APNs round trip {latency} ms, {connections} connections, default maxInFlight")
            runs += worker_bench(dict(base, WORKER_BENCH_APNS_LATENCY_MS=latency,
                                      WORKER_BENCH_CONNECTIONS=connections))
    for in_flight in (1000, 2000, 5000, 10000):
        log(f"== APNs round trip 100..200 ms, 8 connections, maxInFlight {in_flight}")
        runs += worker_bench(dict(base, WORKER_BENCH_APNS_LATENCY_MS="100..200", WORKER_BENCH_CONNECTIONS=8,
                                  WORKER_BENCH_MAX_IN_FLIGHT=in_flight))
    results["rtt"] = runs


def cpu_of(command, **kwargs):
    """Runs a command; returns (user + system CPU seconds of it and its children, stdout)."""
    before = os.times()
    proc = subprocess.run(command, capture_output=True, text=True, **kwargs)
    after = os.times()
    if proc.returncode != 0:
        raise RuntimeError(f"{command[0]} exited {proc.returncode}: {proc.stderr[-500:]}")
    return (after.children_user - before.children_user) + (after.children_system - before.children_system), proc.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def part_floors(results):
    """What each part of the worker's job costs the best tool for it, per event, on this machine."""
    records = int(os.environ.get("BENCH_FLOOR_RECORDS", "200000"))
    floors = {"kcatProduce": [], "kcatConsume": [], "h2load": [], "validator": [], "records": records}
    work = tempfile.mkdtemp(prefix="apns-worker-floors-")
    try:
        # The events the worker benchmark uses, one per line.
        sample = os.path.join(work, "events.jsonl")
        with open(sample, "w") as f:
            for i in range(records):
                token = f"{(i * 2654435761) % (1 << 64):016x}" * 4
                f.write(json.dumps({"id": f"bench-{i}", "deviceToken": token, "environment": "production",
                                    "topic": "com.example.bench", "pushType": "alert", "priority": 10,
                                    "collapseId": f"bench-{i % 10}",
                                    "payload": {"aps": {"alert": {"title": "Hello",
                                                                  "body": f"Benchmark notification {i}"},
                                                        "badge": i % 9}},
                                    "metadata": {"tenant": "bench", "index": i}}, separators=(",", ":")) + "\n")
        bench = os.path.join(bin_path(), "WorkerBenchmark")
        for _ in range(ROUNDS):
            # A fresh mock cluster (the worker benchmark's peers process) for each round.
            peers = subprocess.Popen([bench, "--peers", "floors"], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
            bootstrap = None
            for line in peers.stdout:
                if line.startswith("bootstrap="):
                    bootstrap = line.strip().split("=", 1)[1]
                if line.strip() == "ready":
                    break
            # The worker's producer settings: idempotent, acks=all, lz4, 5 ms linger.
            cpu, _ = cpu_of(["kcat", "-P", "-b", bootstrap, "-t", "bench-notifications", "-l",
                             "-X", "enable.idempotence=true", "-X", "compression.codec=lz4", "-X", "linger.ms=5",
                             sample])
            floors["kcatProduce"].append(cpu * 1e6 / records)
            cpu, out = cpu_of(["kcat", "-C", "-b", bootstrap, "-t", "bench-notifications", "-o", "beginning", "-e",
                               "-q", "-f", "%o\n"])
            consumed = len(out.splitlines())
            floors["kcatConsume"].append(cpu * 1e6 / max(consumed, 1))
            peers.stdin.close()
            peers.wait(timeout=30)
        # h2load against nghttpd: TLS, 4 connections x 100 streams, the worker's request size.
        tls = os.path.join(work, "tls")
        os.makedirs(tls)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", f"{tls}/key.pem", "-out", f"{tls}/cert.pem", "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
        token = "00aa11bb22cc33dd44ee55ff66778899aabbccddeeff00112233445566778899"
        os.makedirs(f"{work}/doc/3/device")
        open(f"{work}/doc/3/device/{token}", "w").close()
        with open(f"{work}/body.json", "w") as f:
            f.write('{"aps":{"alert":{"title":"Hello","body":"Benchmark notification 1"},"badge":1}}')
        port = free_port()
        server = subprocess.Popen(["nghttpd", "-m", "100", "-d", f"{work}/doc", str(port), f"{tls}/key.pem",
                                   f"{tls}/cert.pem"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            for _ in range(ROUNDS):
                cpu, out = cpu_of(["h2load", "-n", str(records), "-c", "4", "-m", "100", "-d", f"{work}/body.json",
                                   "-H", "apns-topic: com.example.bench", "-H", "apns-push-type: alert",
                                   "-H", "authorization: bearer " + "x" * 180,
                                   f"https://127.0.0.1:{port}/3/device/{token}"])
                floors["h2load"].append(cpu * 1e6 / records)
        finally:
            server.terminate()
            server.wait()
        # The validator on one core (JSONSchemaBenchmark): parse + schema is the floor (what validating an
        # event that arrives as bytes takes); the worker's full decode adds the APNs rules and the
        # notification's fields.
        build(["JSONSchemaBenchmark"])
        floors["fullDecode"] = []
        for _ in range(ROUNDS):
            out = subprocess.run([os.path.join(bin_path(), "JSONSchemaBenchmark"),
                                  "schemas/notification-event.schema.json",
                                  "Benchmarks/JSONSchemaBenchmark/inputs/alert-valid.json"],
                                 cwd=ROOT, capture_output=True, text=True, check=True).stdout
            rates = {line.split()[0]: float(line.split()[2]) for line in out.splitlines() if len(line.split()) >= 3}
            floors["validator"].append(1e6 / rates["parse+schema"])
            floors["fullDecode"].append(1e6 / rates["full-decode"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["floors"] = floors


def part_memory(results):
    runs = []
    for label, env in (
        ("200,000 events", {"WORKER_BENCH_EVENTS": 200_000}),
        ("1,000,000 events", {"WORKER_BENCH_EVENTS": 1_000_000, "WORKER_BENCH_INPUT_PARTITIONS": 80}),
        ("8,000 events of 64 KB", {"WORKER_BENCH_EVENTS": 8_000, "WORKER_BENCH_METADATA_BYTES": 65_000,
                                   "WORKER_BENCH_INPUT_PARTITIONS": 128}),
    ):
        log(f"== memory: {label}")
        for run in worker_bench(dict(env, WORKER_BENCH_MODES="worker", WORKER_BENCH_ROUNDS=ROUNDS)):
            run["label"] = label
            runs.append(run)
    results["memory"] = runs


def part_profile(results):
    """perf record of one worker draining 200,000 events; CPU samples by module."""
    if not shutil.which("perf"):
        log("== profile: perf is not installed (Debian: linux-perf); skipped")
        return
    directory = tempfile.mkdtemp(prefix="apns-worker-perf-")
    try:
        runs = worker_bench({"WORKER_BENCH_MODES": "worker", "WORKER_BENCH_EVENTS": 200_000,
                             "WORKER_BENCH_PERF": directory})
        data = os.path.join(directory, "worker-0.data")
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "--stdio",
                                 "--percent-limit", "0.05", "-g", "none"], capture_output=True, text=True).stdout
        by_thread = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "comm", "--stdio",
                                    "-g", "none"], capture_output=True, text=True).stdout
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    threads = {}
    for line in by_thread.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S.*?)\s*$", line)
        if m:
            group = thread_group(m.group(2))
            threads[group] = threads.get(group, 0) + float(m.group(1))
    cpu_per_event = runs[0]["cpuSeconds"] * 1e6 / runs[0]["results"] if runs and runs[0].get("results") else None
    groups = {}
    symbols = []
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)$", line)
        if not m:
            continue
        percent, dso, symbol = float(m.group(1)), m.group(2), m.group(3).strip()
        group = classify(dso, symbol)
        groups[group] = groups.get(group, 0) + percent
        symbols.append((percent, group, demangle_short(symbol)))
    results["profile"] = {"groups": groups, "top": symbols[:15], "threads": threads, "cpuPerEvent": cpu_per_event,
                          "mallocs": malloc_counts()}


# The worker's threads by the names the system shows (`perf report --sort comm`), with what each does.
THREAD_GROUPS = [
    ("NIO-", "APNs event loops: HTTP/2 and TLS both ways, and each answer (classify, result event, produce)"),
    ("kafka-consumer", "consumer poll thread: records copied out of librdkafka, rebalances"),
    ("kafka-producer", "producer poll thread: delivery reports (the pipeline's state, offsets, metrics)"),
    ("rdk:", "librdkafka's threads: fetch, produce, compression"),
    ("qos", "Swift's cooperative pool: the reader (decode, validate, requests to the pool), commits"),
]


def thread_group(comm):
    for prefix, name in THREAD_GROUPS:
        if comm.startswith(prefix) or (prefix == "qos" and "qos" in comm):
            return name
    return "other"


def malloc_counts():
    """libc `malloc` calls per event for the worker and the instant-APNs pipeline, counted exactly by a
    uprobe: unlike CPU time, the count does not move with whatever else the machine runs, so a change that
    removes allocations shows in one run. Needs root (tracefs); None when the probe cannot be made."""
    perf = shutil.which("perf")
    libc = next((line.split("=>")[1].split()[0] for line in subprocess.run(
        ["ldd", os.path.join(bin_path(), "WorkerBenchmark")], capture_output=True, text=True).stdout.splitlines()
        if "libc.so.6" in line and "=>" in line), None)
    if not perf or not libc:
        return None
    subprocess.run([perf, "probe", "-q", "-d", "probe_libc:malloc"], capture_output=True)
    made = subprocess.run([perf, "probe", "-q", "-x", libc, "malloc"], capture_output=True, text=True)
    if made.returncode != 0:
        log("== profile: no uprobe on malloc (" + made.stderr.strip()[-200:] + "); allocations not counted")
        return None
    counts = {}
    events = 100_000
    directory = tempfile.mkdtemp(prefix="apns-worker-mallocs-")
    try:
        for mode in ("worker", "instant"):
            output = os.path.join(directory, mode)
            worker_bench({"WORKER_BENCH_MODES": mode, "WORKER_BENCH_EVENTS": events,
                          "WORKER_BENCH_WRAPPER": f"{perf} stat -x , -e probe_libc:malloc -o {output} --"})
            for line in open(output):
                fields = line.split(",")
                if len(fields) > 2 and fields[2].startswith("probe_libc:malloc") and fields[0].isdigit():
                    counts[mode] = int(fields[0]) / events
    finally:
        subprocess.run([perf, "probe", "-q", "-d", "probe_libc:malloc"], capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)
    return counts or None


def classify(dso, symbol):
    if "rdkafka" in dso:
        return "librdkafka (consume, produce, commit)"
    if "libssl" in dso or "libcrypto" in dso:
        return "OpenSSL (TLS records, JWT signing)"
    if "nghttp2" in dso:
        return "nghttp2 (HTTP/2 framing, HPACK)"
    if dso.startswith("[kernel") or dso == "[unknown]":
        return "kernel (syscalls, TCP, scheduling)"
    if "libc" in dso or "ld-linux" in dso or "libm" in dso:
        return "libc (malloc, memcpy, locks)"
    if "libswift" in dso or "libFoundation" in dso or "libdispatch" in dso:
        return "Swift runtime and Foundation"
    for prefix, name in (("6Worker", "Worker (pipeline, results, offsets)"), ("10JSONSchema", "JSONSchema (validation)"),
                         ("4APNs", "APNs client (requests, pool)"), ("5Kafka", "Kafka wrapper"),
                         ("7NIOCore", "SwiftNIO"), ("8NIOPosix", "SwiftNIO"), ("7Metrics", "metrics"),
                         ("10Prometheus", "metrics"), ("7Logging", "logging")):
        if prefix in symbol:
            return name
    if "swift_" in symbol or symbol.startswith("$ss") or "Swift" in symbol:
        return "Swift runtime and Foundation"
    return "other (the worker binary)"


def demangle_short(symbol):
    return symbol[:110]


# ---------------------------------------------------------------------------------------------------
# The report


def machine():
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) // (1024 * 1024)
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return {"cores": os.cpu_count(), "cpu": model, "memoryGiB": memory,
            "commit": commit + ("+changes" if dirty else ""),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "kernel": os.uname().release}


def fmt(s, unit="", digits=0):
    if s is None:
        return "-"
    f = f"{{:,.{digits}f}}"
    if s["n"] == 1 or s["min"] == s["max"]:
        return f.format(s["median"]) + unit
    return f"{f.format(s['median'])}{unit} ({f.format(s['min'])} to {f.format(s['max'])})"


def machine_line(m):
    return (f"Machine: {m['cores']} cores ({m['cpu']}), {m['memoryGiB']} GiB, Linux {m['kernel']}; commit "
            f"`{m['commit']}`; {m['date']}. Release builds; every figure is the median of the runs, with min and "
            f"max in brackets.")


def report(results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(FIGURES, exist_ok=True)
    out = ["# Performance", "",
           "Generated by `make bench` (`Benchmarks/performance.py`) from the figures in",
           "[performance/results.json](performance/results.json); do not edit by hand, rerun it. How each part is",
           "measured: [Benchmarks/README.md](../Benchmarks/README.md). Goals are ratios within one run on one",
           "machine: absolute rates move 1.7x between machines of the same kind.", ""]
    for part in PARTS:
        if part in results.get("machines", {}):
            m = results["machines"][part]
            out.append(f"- **{part}**: {m['cores']} cores ({m['cpu']}), commit `{m['commit']}`, {m['date']}")
    out.append("")

    # Throughput
    if "throughput" in results:
        out += heading(results, "throughput", "Throughput: the maximum") + [
                "A backlog of valid alert events drained by the worker (at its defaults, against the simulator with no",
                "added latency) and, side by side in the same run, by the same pipeline with an APNs that answers at",
                "once (the Kafka side's ceiling). Events/s from the first result to the last; CPU is the worker",
                "process's own.", "",
                "| broker | worker, events/s | instant APNs, events/s | worker CPU per event | peak RSS |",
                "| --- | ---: | ---: | ---: | ---: |"]
        for broker in ("mock", "tansu"):
            rows = [r for r in results["throughput"] if r["broker"] == broker]
            w = [r for r in rows if r["mode"] == "worker"]
            i = [r for r in rows if r["mode"] == "instant"]
            if not w:
                continue
            out.append(f"| {broker_name(broker)} ({w[0]['events']:,} events) | {fmt(spread([r['rate'] for r in w]))} | "
                       f"{fmt(spread([r['rate'] for r in i]))} | "
                       f"{fmt(spread([r['cpuSeconds'] * 1e6 / max(r['results'], 1) for r in w]), ' µs')} | "
                       f"{fmt(spread([r['peakRSSKiB'] / 1024 for r in w]), ' MiB')} |")
        out.append("")

    # Latency
    if "latency" in results:
        out += heading(results, "latency", "Latency against offered load") + [
                "Open loop: events produced at a fixed rate whatever the worker does, each for "
                f"{int(results['latency'][0]['stepSeconds'])} s, rates ascending on one running worker; latency from "
                "each event's scheduled time (its record's CreateTime when the producer keeps up) to a downstream",
                "consumer of the results topic reading its result (that reader fetches with `fetch.wait.max.ms` 5).",
                "Offered load is a fraction of the broker's maximum above. \"in\" is the way to the worker (the",
                "input producer, the broker, the worker's fetch), \"APNs\" the result's own `latencyMs` (decode to",
                "result built), \"out\" the result's way to the reader (the worker's producer, the broker, the",
                "reader's fetch). \"cores busy\": the whole machine while the step ran: the broker, the simulator,",
                "the load generator and the reader share the two cores with the worker.", ""]
        variants = []
        for s in results["latency"]:
            key = (s["broker"], s["consumerProperties"])
            if key not in variants:
                variants.append(key)
        fig, axes = plt.subplots(1, len(variants), figsize=(5 * len(variants), 4), sharey=True, squeeze=False)
        for n, (broker, consumer) in enumerate(variants):
            title = f"{broker_name(broker)}, " + (f"consumer `{consumer}`" if consumer else "default consumer settings")
            out += [f"### {title}", "",
                    "| offered | events/s | p50 | p99 | p99.9 | max | in p50 / p99 | APNs p50 / p99 | out p50 / p99 | cores busy |",
                    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
            steps = [s for s in results["latency"] if s["broker"] == broker and s["consumerProperties"] == consumer]
            rates = sorted({s["offeredRate"] for s in steps})
            xs, series = [], {k: [] for k in ("p50Ms", "p99Ms", "p999Ms", "maxMs")}
            for rate in rates:
                at = [s for s in steps if s["offeredRate"] == rate]
                fraction = rate / at[0]["maximum"]
                xs.append(fraction * 100)
                for k in series:
                    series[k].append(spread([s[k] for s in at]))
                short = lambda key: fmt(spread([s[key] for s in at]), "", 0)
                out.append(f"| {fraction:.0%} | {rate:,.0f} | {fmt(spread([s['p50Ms'] for s in at]), ' ms', 1)} | "
                           f"{fmt(spread([s['p99Ms'] for s in at]), ' ms', 1)} | "
                           f"{fmt(spread([s['p999Ms'] for s in at]), ' ms')} | {fmt(spread([s['maxMs'] for s in at]), ' ms')} | "
                           f"{med(at, 'inP50Ms')} / {med(at, 'inP99Ms')} ms | {med(at, 'workP50Ms')} / {med(at, 'workP99Ms')} ms | "
                           f"{med(at, 'outP50Ms')} / {med(at, 'outP99Ms')} ms | {med(at, 'machineBusy', 100)}% |")
            half = [s for s in steps if abs(s["offeredRate"] / s["maximum"] - 0.5) < 0.01]
            if half:
                p99 = spread([s["p99Ms"] for s in half])
                out += [f"p99 at half the maximum: **{p99['median']:,.0f} ms** (goal: under 50 ms on Tansu).", ""]
            out.append("")
            ax = axes[0][n]
            for k, label in (("p50Ms", "p50"), ("p99Ms", "p99"), ("p999Ms", "p99.9"), ("maxMs", "max")):
                errorbars(ax, xs, series[k], label=label)
            ax.axhline(50, color="grey", linestyle=":", linewidth=1)
            ax.set_yscale("log")
            ax.set_xlabel("offered load, % of the maximum")
            ax.set_title(title.replace("`", ""), fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].set_ylabel("input record to readable result, ms")
        axes[0][0].legend()
        save(fig, "latency.png")
        out += ["![latency against offered load](performance/latency.png)", ""]

    # Fixed rates
    if "rates" in results:
        out += rates_section(results, plt)

    # Lanes
    if "lanes" in results:
        runs = results["lanes"]
        first = next((r for r in runs if r["urgentRate"] > 0), runs[0])
        out += heading(results, "lanes", "Lanes: urgent events behind a bulk backlog") + [
                f"A backlog of bulk events waits on `bulk` ({first['bulkPartitions']} partitions unless the table says",
                "otherwise) when the worker starts; while it drains, urgent events arrive on `urgent`",
                f"({first['urgentPartitions']} partitions) at {first['urgentRate']:.0f} per second, open loop: each one's",
                "latency runs from its scheduled time to a downstream consumer of the results topic reading its",
                "result, split as in the latency part into in, APNs (the result's `latencyMs`) and out. The",
                f"simulator answers after `{first['apnsLatencyMs']}` ms (uniformly)"
                + (f" on {first['simulatorThreads']} event-loop threads, one per APNs connection the worker opens"
                   " (8 bulk, 1 urgent), as distinct APNs servers would" if first.get("simulatorThreads") else "")
                + ", the worker runs at its defaults",
                f"with `consumer.properties: {{ {first['consumerProperties']} }}`. Every run has fresh peers; in each",
                "round the worker runs without lanes (both topics in `consumer.topics`), with lanes (`urgent` in",
                "`consumer.lanes.urgent.topics`) and without urgent traffic at all (the bulk drain's reference),",
                "in the reverse order every other round. Bulk drain: from the first bulk result read to the last.",
                "\"cores busy\": the whole machine during the drain; \"before\": in the second before the run,",
                "when none of the benchmark's processes ran (other work on the machine).", "",
                "| broker, backlog | worker | urgent p50 | urgent p99 | urgent max | in / APNs / out p50 | "
                "in / APNs / out p99 | bulk drain | bulk events/s | cores busy (before) |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        groups = []
        for r in runs:
            key = (r["broker"], r["backlog"], r["bulkPartitions"])
            if key not in groups:
                groups.append(key)
        labels = {"no-urgent": "no urgent traffic", "without-lanes": "without lanes", "with-lanes": "with lanes"}
        summary = []
        for broker, backlog, partitions in groups:
            at = [r for r in runs if (r["broker"], r["backlog"], r["bulkPartitions"]) == (broker, backlog, partitions)]
            name = f"{broker_name(broker)}, {backlog:,}" + (f" ({partitions} partitions)"
                                                           if partitions != first["bulkPartitions"] else "")
            for variant in ("without-lanes", "with-lanes", "no-urgent"):
                v = [r for r in at if r["variant"] == variant]
                if not v:
                    continue
                urgent = variant != "no-urgent"
                cell = lambda key, digits=0: fmt(spread([r.get(key) for r in v]), " ms", digits) if urgent else "-"
                parts = lambda p: " / ".join(med(v, k) for k in (f"in{p}Ms", f"work{p}Ms", f"out{p}Ms")) + " ms"
                out.append(f"| {name} | {labels[variant]} | {cell('urgentP50Ms', 1)} | {cell('urgentP99Ms', 1)} | "
                           f"{cell('urgentMaxMs')} | {parts('P50') if urgent else '-'} | "
                           f"{parts('P99') if urgent else '-'} | "
                           f"{fmt(spread([r['bulkDrainSeconds'] for r in v]), ' s', 2)} | "
                           f"{fmt(spread([r['bulkRate'] for r in v]))} | "
                           f"{med(v, 'machineBusy', 100)}% ({med(v, 'backgroundBusy', 100)}%) |")
            # Ratios within a round: each round ran every variant on the same machine in one sitting.
            def paired(variant_a, variant_b, key):
                ratios = []
                for rnd in sorted({r["round"] for r in at}):
                    a = [r[key] for r in at if r["round"] == rnd and r["variant"] == variant_a and r.get(key)]
                    b = [r[key] for r in at if r["round"] == rnd and r["variant"] == variant_b and r.get(key)]
                    if a and b:
                        ratios.append(a[0] / b[0])
                return spread(ratios)
            p50, p99 = paired("without-lanes", "with-lanes", "urgentP50Ms"), paired("without-lanes", "with-lanes",
                                                                                      "urgentP99Ms")
            bulk = paired("with-lanes", "no-urgent", "bulkRate")
            bulk_without = paired("without-lanes", "no-urgent", "bulkRate")
            line = f"- {name}:"
            if p50 and p99:
                line += (f" lanes cut the urgent p50 **{p50['median']:,.1f}x** and the p99 **{p99['median']:,.1f}x**"
                         f" (without / with, per round: p99 {p99['min']:,.1f}x to {p99['max']:,.1f}x);")
            if bulk:
                line += (f" with lanes the bulk backlog drains at **{bulk['median']:.0%}** of its rate without urgent"
                         f" traffic ({bulk['min']:.0%} to {bulk['max']:.0%}; goal: at least 90 %)")
            if bulk_without:
                line += f", without lanes at {bulk_without['median']:.0%}"
            summary.append(line + f"; other work took {med(at, 'backgroundBusy', 100)}% of the cores before a run"
                           f" (median; {min(r['backgroundBusy'] for r in at):.0%} to"
                           f" {max(r['backgroundBusy'] for r in at):.0%}).")
        out += [""] + summary + [""]
        columns = min(2, len(groups))
        rows = -(-len(groups) // columns)
        fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.4 * rows), sharey=True, squeeze=False)
        for ax in axes.flat[len(groups):]:
            ax.set_visible(False)
        for n, (broker, backlog, partitions) in enumerate(groups):
            ax = axes[n // columns][n % columns]
            for variant, color in (("without-lanes", "tab:red"), ("with-lanes", "tab:blue")):
                values = sorted(v for r in runs if (r["broker"], r["backlog"], r["bulkPartitions"])
                                == (broker, backlog, partitions) and r["variant"] == variant
                                for v in r.get("urgentLatenciesMs", []))
                if values:
                    ax.plot(values, [(i + 1) / len(values) for i in range(len(values))], color=color,
                            label=labels[variant], drawstyle="steps-post")
            ax.axvline(100, color="grey", linestyle=":", linewidth=1)
            ax.set_xscale("log")
            ax.set_xlabel("urgent event to readable result, ms")
            ax.set_title(f"{broker_name(broker)}, backlog {backlog:,}", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            if n % columns == 0:
                ax.set_ylabel("share of urgent events")
        axes[0][0].legend(fontsize=8)
        save(fig, "lanes.png")
        out += ["![urgent latency while a bulk backlog drains, without and with lanes](performance/lanes.png)", ""]

    # RTT
    if "rtt" in results:
        runs = results["rtt"]
        out += heading(results, "rtt", "APNs round trips: throughput against connections and maxInFlight") + [
                f"The worker drains a backlog of {runs[0]['events']:,} events on the mock cluster while the simulator",
                "delays every answer (`100..200`: uniformly between the two). Each connection carries at most the",
                "1,000 concurrent streams APNs (and the simulator) allow, so the ceiling is min(connections x",
                "1,000, maxInFlight) / round trip.", "",
                # Before the table: a line between its header and its rows would cut it in two.
                f"Defaults: `delivery.maxInFlight` {DEFAULT_MAX_IN_FLIGHT:,}, `apns.connectionsPerCredential` "
                f"{DEFAULT_CONNECTIONS}; the columns vary the connections at the default maxInFlight.", "",
                "| APNs round trip | 1 connection | 2 connections | 4 connections | 8 connections |",
                "| --- | ---: | ---: | ---: | ---: |"]
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        defaults = [r for r in runs if r["maxInFlight"] == 0]
        for latency in ("0", "50", "100", "100..200"):
            cells, ys = [], []
            for c in (1, 2, 4, 8):
                s = spread([r["rate"] for r in defaults if r["apnsLatencyMs"] == latency and r["connections"] == c])
                cells.append(fmt(s))
                ys.append(s)
            out.append(f"| {latency} ms | " + " | ".join(cells) + " |")
            present = [(c, y) for c, y in zip((1, 2, 4, 8), ys) if y]
            if present:
                errorbars(left, [c for c, _ in present], [y for _, y in present], label=f"{latency} ms")
        def default_rate(latency):
            return spread([r["rate"] for r in defaults if r["apnsLatencyMs"] == latency
                           and r["connections"] == DEFAULT_CONNECTIONS])
        zero = default_rate("0")
        if zero:
            for latency in ("100", "100..200"):
                s = default_rate(latency)
                if s:
                    out.append(f"- With the defaults, a {latency} ms round trip keeps **{s['median'] / zero['median']:.0%}** "
                               f"of the zero-latency throughput ({s['median']:,.0f} against {zero['median']:,.0f} events/s"
                               + ("; goal: at least 80 %)" if latency == "100" else ")"))
        out += ["", "With 8 connections and a 100..200 ms round trip, against maxInFlight:", "",
                "| maxInFlight | events/s | mean in flight | peak RSS |", "| ---: | ---: | ---: | ---: |"]
        xs, ys = [], []
        for in_flight in sorted({r["maxInFlight"] for r in runs if r["maxInFlight"] > 0}):
            at = [r for r in runs if r["maxInFlight"] == in_flight]
            s = spread([r["rate"] for r in at])
            xs.append(in_flight)
            ys.append(s)
            out.append(f"| {in_flight:,} | {fmt(s)} | {fmt(spread([r['meanInFlight'] for r in at]))} | "
                       f"{fmt(spread([r['peakRSSKiB'] / 1024 for r in at]), ' MiB')} |")
        out.append("")
        left.set_xscale("log", base=2)
        left.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
        left.set_xlabel("APNs connections (default maxInFlight)")
        left.set_ylabel("events/s")
        left.legend(title="round trip")
        left.grid(True, alpha=0.3)
        if ys:
            errorbars(right, xs, ys)
        right.set_xscale("log")
        right.set_xlabel("maxInFlight (8 connections, 100..200 ms)")
        right.grid(True, alpha=0.3)
        save(fig, "rtt.png")
        out += ["![throughput against APNs round trip, connections and maxInFlight](performance/rtt.png)", ""]

    # Floors
    if "floors" in results and "throughput" in results:
        f = results["floors"]
        mock = [r for r in results["throughput"] if r["broker"] == "mock"]
        worker = spread([r["cpuSeconds"] * 1e6 / max(r["results"], 1) for r in mock if r["mode"] == "worker"])
        instant = spread([r["cpuSeconds"] * 1e6 / max(r["results"], 1) for r in mock if r["mode"] == "instant"])
        parts = [("kcat: consume a record", spread(f["kcatConsume"])),
                 ("kcat: produce a record (idempotent, lz4, 5 ms linger)", spread(f["kcatProduce"])),
                 ("h2load: one HTTP/2 request over TLS (4 x 100 streams)", spread(f["h2load"])),
                 ("validator: parse + schema (one core)", spread(f["validator"]))]
        total = sum(p[1]["median"] for p in parts if p[1])
        out += heading(results, "floors", "Cost per event against its floors") + [
                "CPU time per event. The worker's is its process's user + system time over a 200,000-event drain on",
                "the mock cluster (throughput part). Its floors are what the best tool for each part of its job",
                "spends on that part alone, measured in the same session: kcat (Debian's, the same librdkafka)",
                "consuming the same events and producing them with the worker's producer settings, h2load sending",
                "the same request to nghttpd, and the worker's own decoder. An event costs the worker one of each.", "",
                "| | CPU per event |", "| --- | ---: |"]
        for name, s in parts:
            out.append(f"| {name} | {fmt(s, ' µs', 1)} |")
        out.append(f"| **sum of the floors** | **{total:.1f} µs** |")
        out.append(f"| (the worker's full decode: parse + schema + APNs rules) | {fmt(spread(f.get('fullDecode', [])), ' µs', 1)} |")
        out.append(f"| worker, against the simulator | {fmt(worker, ' µs', 1)} |")
        out.append(f"| the same pipeline, instant APNs (no HTTP/2, no TLS) | {fmt(instant, ' µs', 1)} |")
        if worker:
            out.append(f"| **worker / floors** | **{worker['median'] / total:.1f}x** (goal: within 2x) |")
        out.append("")
        fig, ax = plt.subplots(figsize=(8, 2.8))
        left = 0
        for name, s in parts:
            if s:
                ax.barh(["floors"], [s["median"]], left=left, label=name.split(" (")[0])
                left += s["median"]
        if worker:
            ax.barh(["worker"], [worker["median"]], color="grey",
                    xerr=[[worker["median"] - worker["min"]], [worker["max"] - worker["median"]]])
        if instant:
            ax.barh(["instant APNs"], [instant["median"]], color="lightgrey")
        ax.set_xlabel("CPU µs per event")
        ax.legend(fontsize=7, loc="lower right")
        save(fig, "floors.png")
        out += ["![worker CPU per event against its floors](performance/floors.png)", ""]

    # Profile
    if "profile" in results:
        p = results["profile"]
        out += heading(results, "profile", "Where the worker's time goes", "###") + [
                "`perf record` (499 Hz, all threads) of the worker draining 200,000 events against the simulator;",
                "share of the process's CPU samples by module.", "", "| module | share |", "| --- | ---: |"]
        for name, percent in sorted(p["groups"].items(), key=lambda kv: -kv[1]):
            out.append(f"| {name} | {percent:.1f}% |")
        if p.get("threads"):
            per_event = p.get("cpuPerEvent")
            out += ["", "By thread" + (f" (the run took {per_event:.1f} µs of the worker's CPU per event)" if per_event
                                       else "") + ":", "",
                    "| thread | share | µs per event |", "| --- | ---: | ---: |"]
            for name, percent in sorted(p["threads"].items(), key=lambda kv: -kv[1]):
                micros = f"{per_event * percent / 100:.1f}" if per_event else "-"
                out.append(f"| {name} | {percent:.1f}% | {micros} |")
        out += ["", "Top symbols:", "", "| share | module | symbol |", "| ---: | --- | --- |"]
        for percent, group, symbol in p["top"]:
            out.append(f"| {percent:.1f}% | {group.split(' (')[0]} | `{symbol}` |")
        out.append("")
        if p.get("mallocs"):
            m = p["mallocs"]
            out += ["Heap allocations per event (libc `malloc` calls over a 100,000-event drain, counted by a uprobe;",
                    "start-up included; C libraries' own, such as librdkafka's and nghttp2's, included): "
                    + ", ".join(f"{'the worker' if mode == 'worker' else 'the instant-APNs pipeline'} "
                                f"**{m[mode]:.1f}**" for mode in ("worker", "instant") if mode in m)
                    + ". Unlike CPU time, this count does not move with the machine's load.", ""]

    # Memory
    if "memory" in results:
        runs = results["memory"]
        out += heading(results, "memory", "Memory against backlog") + [
                "Peak resident memory of the worker process (VmRSS sampled every 100 ms) while it drains a backlog",
                "on the mock cluster against the simulator, at default memory bounds (`delivery.maxInFlightBytes`",
                "32 MiB, the consumer's 16 MiB hand-over buffer and 16 MiB librdkafka prefetch). Goals: under 200 MB",
                "at any backlog, under 300 MB with 64 KB events.", "",
                "| backlog | peak RSS | events/s |", "| --- | ---: | ---: |"]
        labels, ys = [], []
        for label in dict.fromkeys(r["label"] for r in runs):
            at = [r for r in runs if r["label"] == label]
            s = spread([r["peakRSSKiB"] / 1024 for r in at])
            labels.append(label)
            ys.append(s)
            out.append(f"| {label} | {fmt(s, ' MiB')} | {fmt(spread([r['rate'] for r in at]))} |")
        out.append("")
        fig, ax = plt.subplots(figsize=(7, 3))
        ax.bar(labels, [y["median"] for y in ys],
               yerr=[[y["median"] - y["min"] for y in ys], [y["max"] - y["median"] for y in ys]], capsize=4)
        ax.axhline(200 / 1.048576, color="grey", linestyle=":", linewidth=1)
        ax.axhline(300 / 1.048576, color="grey", linestyle="--", linewidth=1)
        ax.set_ylabel("peak RSS, MiB")
        save(fig, "memory.png")
        out += ["![peak RSS against backlog](performance/memory.png)", ""]

    # Sections measured by commands of their own (the rebalance timing, span export's cost), kept
    # as they were written, then the notes on every part.
    measured = os.path.join(os.path.dirname(os.path.abspath(__file__)), "performance-measured.md")
    if os.path.exists(measured):
        text = open(measured).read()
        if text.startswith("<!--"):
            text = text[text.index("-->") + 3:]
        out += [text.strip(), ""]
    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "performance-notes.md")
    if os.path.exists(notes):
        out += [open(notes).read().rstrip(), ""]
    with open(os.path.join(DOCS, "performance.md"), "w") as f:
        f.write("\n".join(out))
    log(f"wrote {os.path.relpath(os.path.join(DOCS, 'performance.md'), ROOT)}")


def rates_section(results, plt):
    """The rates part: a table per broker and fetch wait, the goal, one plot."""
    steps = results["rates"]
    out = heading(results, "rates", "Latency at fixed rates") + [
            "Open loop as in the latency part, at fixed rates a 2-core machine serves without saturating, each",
            f"for {int(steps[0]['stepSeconds'])} s, rates ascending on one running worker; fresh peers and worker for",
            "every broker and fetch wait, those taking turns within each round. End to end (p50 to max): from each",
            "event's scheduled time to a downstream consumer of the results topic reading its result, split into",
            "in, APNs and out as above. **Worker's share**: the worker's own histogram",
            "`apns_worker_event_duration_seconds` (from the pipeline taking the event up to its result acknowledged",
            "by Kafka), scraped from its `/metrics` before and after each step and the two scrapes subtracted: the",
            "step's events alone. Its p50 and p99 are estimated as Prometheus's `histogram_quantile` does, linearly",
            "within the bucket they fall in, so **their resolution is the bucket** (1, 2, 5, 10, 25, 50, 100 ms…);",
            "its mean (sum over count) is exact. \"fetch wait\": the worker's consumer's `fetch.wait.max.ms`,",
            "librdkafka's default (500 ms) or 10; the results reader fetches with 5 in both.", ""]
    variants = []
    for s in steps:
        key = (s["broker"], s["consumerProperties"])
        if key not in variants:
            variants.append(key)
    variants.sort(key=lambda v: (v[0] != "tansu", v[1] == ""))

    def wait_name(consumer):
        return "fetch wait 10 ms" if consumer == SHORT_FETCH_WAIT else (
            "fetch wait default" if not consumer else f"consumer `{consumer}`")

    def med1(rows, key):
        values = [r[key] for r in rows if r.get(key) is not None and r[key] >= 0]
        return f"{statistics.median(values):.1f}" if values else "-"

    series = {}
    for broker, consumer in variants:
        at_variant = [s for s in steps if s["broker"] == broker and s["consumerProperties"] == consumer]
        rounds = len({s["round"] for s in at_variant})
        out += [f"### {broker_name(broker)}, {wait_name(consumer)}", "",
                f"{rounds} round(s); figures in ms.", "",
                "| offered, events/s | sent, events/s | p50 | p99 | p99.9 | max | in p50 / p99 | APNs p50 / p99 | "
                "out p50 / p99 | worker's share p50 / p99 | worker's share, mean | cores busy |",
                "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for rate in sorted({s["offeredRate"] for s in at_variant}):
            at = [s for s in at_variant if s["offeredRate"] == rate]
            cell = lambda key, digits=1: fmt(spread([s[key] for s in at]), "", digits)
            share = [s for s in at if s.get("shareCount", -1) > 0]
            out.append(f"| {rate:,.0f} | {med(at, 'sentRate')} | {cell('p50Ms')} | {cell('p99Ms')} | "
                       f"{cell('p999Ms')} | {cell('maxMs')} | {med1(at, 'inP50Ms')} / {med1(at, 'inP99Ms')} | "
                       f"{med1(at, 'workP50Ms')} / {med1(at, 'workP99Ms')} | "
                       f"{med1(at, 'outP50Ms')} / {med1(at, 'outP99Ms')} | "
                       f"{med1(share, 'shareP50Ms')} / {med1(share, 'shareP99Ms')} | {med1(share, 'shareMeanMs')} | "
                       f"{med(at, 'machineBusy', 100)}% |")
            series[(broker, consumer, rate)] = at
        out.append("")
    goal = series.get(("tansu", SHORT_FETCH_WAIT, 1000.0))
    if goal:
        p99 = spread([s["p99Ms"] for s in goal])
        verdict = "met" if p99["max"] < FIXED_RATE_GOAL_MS else (
            "met by the median, not in every round" if p99["median"] < FIXED_RATE_GOAL_MS else "not met")
        out += [f"p99 at 1,000 events/s on Tansu with a 10 ms fetch wait: **{fmt(p99, ' ms', 1)}** (goal: under "
                f"{FIXED_RATE_GOAL_MS} ms): **{verdict}**.", ""]
    # One plot: per broker, each rate and fetch wait's end-to-end p50 / p99 next to the worker's share.
    brokers = [b for b in ("tansu", "mock") if any(v[0] == b for v in variants)]
    fig, axes = plt.subplots(1, len(brokers), figsize=(6 * len(brokers), 4), sharey=True, squeeze=False)
    bars = (("p50Ms", "end to end p50", "tab:blue", 0.45), ("p99Ms", "end to end p99", "tab:blue", 1.0),
            ("shareP50Ms", "worker's share p50", "tab:orange", 0.45), ("shareP99Ms", "worker's share p99",
                                                                        "tab:orange", 1.0))
    for n, broker in enumerate(brokers):
        ax = axes[0][n]
        keys = [k for k in series if k[0] == broker]
        keys.sort(key=lambda k: (k[2], k[1] == ""))
        for b, (key, label, color, alpha) in enumerate(bars):
            xs, ys, low, high = [], [], [], []
            for i, k in enumerate(keys):
                sp = spread([s[key] for s in series[k] if s.get(key) is not None and s[key] >= 0])
                if sp:
                    xs.append(i + (b - 1.5) * 0.2)
                    ys.append(sp["median"])
                    low.append(sp["median"] - sp["min"])
                    high.append(sp["max"] - sp["median"])
            ax.bar(xs, ys, width=0.2, yerr=[low, high], capsize=2, color=color, alpha=alpha, label=label)
        ax.set_xticks(range(len(keys)), [f"{k[2]:,.0f}/s\n{wait_name(k[1])}" for k in keys], fontsize=8)
        ax.axhline(FIXED_RATE_GOAL_MS, color="grey", linestyle=":", linewidth=1,
                   label=f"{FIXED_RATE_GOAL_MS} ms (the goal's p99, Tansu, 1,000/s, 10 ms)")
        ax.set_yscale("log")
        ax.set_title(broker_name(broker), fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0][0].set_ylabel("ms (log)")
    axes[0][0].legend(fontsize=7)
    save(fig, "rates.png")
    out += ["![latency at fixed rates: end to end and the worker's share](performance/rates.png)", ""]
    return out


def errorbars(ax, xs, spreads, **kwargs):
    """Medians joined by a line, each with its min-to-max bar."""
    ax.errorbar(xs, [s["median"] for s in spreads],
                yerr=[[s["median"] - s["min"] for s in spreads], [s["max"] - s["median"] for s in spreads]],
                marker="o", capsize=3, **kwargs)


def heading(results, part, title, level="##"):
    """A part's heading and the machine, commit and date its figures come from."""
    return [f"{level} {title}", "", machine_line(results["machines"][part]), ""]


def med(rows, key, scale=1):
    values = [r[key] * scale for r in rows if r.get(key) is not None]
    return f"{statistics.median(values):.0f}" if values else "-"


def broker_name(broker):
    return {"mock": "mock cluster", "tansu": "Tansu"}.get(broker, broker)


def save(fig, name):
    fig.tight_layout()
    fig.savefig(os.path.join(FIGURES, name), dpi=110)
    import matplotlib.pyplot as plt
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated parts: " + ", ".join(PARTS))
    parser.add_argument("--report", action="store_true", help="only redraw docs/performance.md")
    args = parser.parse_args()
    results = json.load(open(RESULTS)) if os.path.exists(RESULTS) else {}
    if not args.report:
        parts = args.only.split(",") if args.only else PARTS
        unknown = [p for p in parts if p not in PARTS]
        if unknown:
            parser.error(f"unknown part(s): {', '.join(unknown)}")
        build(["WorkerBenchmark"])
        for part in parts:
            started = time.time()
            globals()["part_" + part](results)
            results.setdefault("machines", {})[part] = machine()
            os.makedirs(FIGURES, exist_ok=True)
            with open(RESULTS, "w") as f:
                json.dump(results, f, indent=1, sort_keys=True)
            log(f"== {part}: {time.time() - started:.0f} s")
    report(results)


if __name__ == "__main__":
    main()
