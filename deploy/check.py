#!/usr/bin/python3
"""Checks deploy/ against itself and against the worker's operational contract.

Run: `make check-deploy` (or /usr/bin/python3 deploy/check.py). Needs Python 3, PyYAML (Debian:
python3-yaml) and a built worker: $APNS_WORKER_BIN, else .build/debug/apns-worker, else
.build/release/apns-worker (`swift build --product apns-worker`; `make check-deploy` builds it).
Exits 1 and names every problem found.

What it checks:
  1. Every .yaml/.yml/.json file under deploy/ parses (all documents of multi-document YAML).
  2. Every metric name in the alert rules and in the Grafana dashboard is one the worker exports
     (METRICS below, the metrics table of docs/deployment.md), or a listed external one
     (kube-state-metrics); METRICS names the same metrics as the worker's own list (WorkerMetrics.help
     in Sources/Worker/Operations/WorkerMetrics.swift).
  3. The ConfigMap's config.yaml, as the worker itself loads it: `apns-worker check --offline` (every
     key, type, range, librdkafka property and topic rule of `run`; no key files, secrets or broker)
     with the Deployment's literal APNS_WORKER_* values; each `valueFrom` one (its value unknown) is
     tried with a placeholder, so that a name the worker does not know is caught too.
  4. The pieces agree: ports, probe paths, config path, key file under a mounted Secret, grace
     period above delivery.shutdownTimeout, KEDA group/topic/bootstrap servers as in the config,
     maxReplicaCount and replicas within the partition count, selectors matching the pod labels,
     the pod security settings, every alert's annotations and runbook link: an absolute URL, one
     base shared by every alert, ending in docs/deployment.md#<a heading of docs/deployment.md>.
  5. If `promtool` (Debian: prometheus) is installed: `promtool check rules` on the alerts and on
     the dashboard's queries, and the alert unit tests in deploy/tests/; skipped with a notice
     otherwise.

`--spec FILE` also compares METRICS with the metrics table of a markdown file (`--spec
docs/deployment.md`: the table METRICS copies).
`--self-test` runs the checker's own negative tests (also run by every normal run).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
K8S = os.path.join(HERE, "kubernetes")

# ---------------------------------------------------------------------------------------------
# The contract (docs/deployment.md, the metrics table under "Dashboard"): name -> (type, labels)
# ---------------------------------------------------------------------------------------------
METRICS = {
    "apns_worker_build_info": ("gauge", {"version"}),
    "apns_worker_events_consumed_total": ("counter", {"topic"}),
    "apns_worker_events_completed_total": ("counter", {"outcome"}),
    "apns_worker_credential_outcomes_total": ("counter", {"credential", "outcome"}),
    "apns_worker_dead_letters_total": ("counter", {"reason"}),
    "apns_worker_apns_requests_total": ("counter", {"status", "reason", "credential", "lane"}),
    "apns_worker_apns_request_duration_seconds": ("histogram", {"credential", "lane"}),
    "apns_worker_event_duration_seconds": ("histogram", {"credential", "lane"}),
    "apns_worker_retries_total": ("counter", {"cause"}),
    "apns_worker_trace_context_ignored_total": ("counter", {"reason"}),
    "apns_worker_published_degraded_total": ("counter", {"topic", "reason"}),
    "apns_worker_in_flight_events": ("gauge", set()),
    "apns_worker_parked_events": ("gauge", set()),
    "apns_worker_consumer_paused": ("gauge", set()),
    "apns_worker_consumer_lag": ("gauge", {"topic", "partition"}),
    "apns_worker_partition_stalled": ("gauge", {"topic", "partition"}),
    "apns_worker_partition_stall_seeks_total": ("counter", {"topic"}),
    "apns_worker_commits_total": ("counter", {"result"}),
    "apns_worker_events_already_done_total": ("counter", set()),
    "apns_worker_done_records_refused_total": ("counter", {"reason"}),
    "apns_worker_commit_metadata_omitted_total": ("counter", set()),
    "apns_worker_revocation_commits_given_up_total": ("counter", set()),
    "apns_worker_progress_store": ("gauge", {"store"}),
    "apns_worker_results_waiting_seconds": ("gauge", set()),
    "apns_worker_credentials_broken": ("gauge", {"credential"}),
    "apns_worker_credential_expiry_timestamp_seconds": ("gauge", {"credential"}),
    "apns_worker_apns_connections": ("gauge", {"credential", "environment", "state"}),
    "apns_worker_apns_streams_in_use": ("gauge", {"credential", "environment"}),
    "apns_worker_apns_stream_capacity": ("gauge", {"credential", "environment"}),
    "apns_worker_apns_requests_waiting": ("gauge", {"credential", "environment"}),
    "apns_worker_apns_provider_tokens_signed_total": ("counter", {"key_id"}),
    "apns_worker_apns_provider_token_switches_total": ("counter", {"key_id"}),
    "apns_worker_apns_connections_retired_total": ("counter", {"credential", "environment", "reason"}),
    "apns_worker_credential_reloads_total": ("counter", {"credential", "result"}),
    "apns_worker_wall_clock_jumps_total": ("counter", set()),
    "apns_worker_credential_reload_failing": ("gauge", {"credential"}),
}

# The conventional process metrics, which the worker appends to /metrics at each scrape from
# /proc/self (Sources/Worker/Operations/ProcessMetrics.swift), outside WorkerMetrics.help.
PROCESS_METRICS = {
    "process_cpu_seconds_total": ("counter", set()),
    "process_resident_memory_bytes": ("gauge", set()),
    "process_virtual_memory_bytes": ("gauge", set()),
    "process_open_fds": ("gauge", set()),
    "process_max_fds": ("gauge", set()),
    "process_threads": ("gauge", set()),
    "process_start_time_seconds": ("gauge", set()),
}

# Series that are not the worker's but that the alerts may use.
EXTERNAL_METRICS = {
    "kube_deployment_status_replicas_unavailable",  # kube-state-metrics
    "kube_statefulset_replicas",  # kube-state-metrics (the static membership variant)
    "kube_statefulset_status_replicas_ready",  # kube-state-metrics
    "kube_pod_container_status_restarts_total",  # kube-state-metrics
}


# Where the worker lists every metric it exports: the keys of WorkerMetrics.help.
WORKER_METRICS_SOURCE = os.path.join("Sources", "Worker", "Operations", "WorkerMetrics.swift")


def worker_metric_names(swift):
    """The keys of `static let help: [String: String] = [ ... ]` in Swift source, else None."""
    block = re.search(r"static\s+let\s+help\s*:\s*\[String\s*:\s*String\]\s*=\s*\[(.*?)^\s*\]\s*$",
                      swift, re.S | re.M)
    if not block:
        return None
    # String literals in order, each consumed whole; a key is one followed by `:`.
    return {m.group(1) for m in re.finditer(r'"((?:[^"\\]|\\.)*)"(\s*:)?', block.group(1)) if m.group(2)}


def check_worker_metrics(problems, root=None):
    """METRICS and the worker's own list name the same metrics."""
    path = os.path.join(root or ROOT, WORKER_METRICS_SOURCE)
    try:
        with open(path, encoding="utf-8") as handle:
            names = worker_metric_names(handle.read())
    except OSError as error:
        problems.append(f"{WORKER_METRICS_SOURCE}: {error.strerror} (the worker's list of metrics)")
        return
    if not names:
        problems.append(f"{WORKER_METRICS_SOURCE}: no `static let help: [String: String]` with metric names")
        return
    for name in sorted(names - set(METRICS)):
        problems.append(f"{WORKER_METRICS_SOURCE}: the worker exports {name}, which METRICS in deploy/check.py lacks")
    for name in sorted(set(METRICS) - names):
        problems.append(f"deploy/check.py: METRICS has {name}, which {WORKER_METRICS_SOURCE} (help) does not export")


def exported_series():
    """Every series name the worker's metrics produce (histograms: _bucket, _sum, _count)."""
    names = set(PROCESS_METRICS)
    for name, (kind, _) in METRICS.items():
        if kind == "histogram":
            names |= {name + "_bucket", name + "_sum", name + "_count"}
        else:
            names.add(name)
    return names


# ---------------------------------------------------------------------------------------------
# PromQL: the metric names an expression selects
# ---------------------------------------------------------------------------------------------
PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset", "atan2", "inf", "nan",
}
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_IDENT = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)")


def promql_metric_names(expr):
    """Names of the series an expression selects: identifiers that are neither functions,
    aggregations, keywords, label names in matchers or grouping clauses, nor durations."""
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^{}]*\}", "{}", text)  # label matchers
    text = re.sub(r"\[[^\[\]]*\]", "[]", text)  # ranges and subqueries
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENT.finditer(text):
        word = match.group(1)
        rest = text[match.end():]
        if re.match(r"\s*\(", rest):  # a function or an aggregation
            continue
        if word.lower() in PROMQL_KEYWORDS:
            continue
        names.add(word)
    return names


def check_metric_names(where, expr, problems, recorded=frozenset()):
    known = exported_series()
    for name in sorted(promql_metric_names(expr)):
        if name in known or name in EXTERNAL_METRICS or name in recorded:
            continue
        if name.startswith("apns_worker"):
            problems.append(f"{where}: metric `{name}` is not one the worker exports")
        else:
            problems.append(f"{where}: metric `{name}` is neither the worker's nor a listed external one")


# ---------------------------------------------------------------------------------------------
# The worker's config: checked by the worker itself (`apns-worker check --offline`)
# ---------------------------------------------------------------------------------------------
ENV_PREFIX = "APNS_WORKER_"
# The worker's words for a variable name it does not know (its own, and librdkafka's for
# APNS_WORKER_KAFKA_*): the only errors a placeholder value cannot cause. If the worker rewords
# them, the self-test fails rather than misspellings passing.
UNKNOWN_NAME = ("matches no configuration key", "No such configuration property")
# What a `valueFrom` variable is given (its real value is in a Secret or the pod's fields), with a
# config the worker accepts: whether the worker knows a name does not depend on the file, and the
# file's own problems (the worker lists them all) would mix with the name's.
PLACEHOLDER = "1"
MINIMAL_CONFIG = {
    "kafka": {"bootstrap.servers": "kafka:9092"},
    "consumer": {"topics": ["notifications"]},
    "topics": {"results": "results", "deadLetters": "dead-letters"},
    "apns": {"credentials": [{"name": "app", "topics": ["com.example.app"], "token": {
        "teamId": "T", "keyId": "K", "keyFile": "/k.p8"}}]},
}
# The worker's defaults for the few values the manifests must agree with (docs/configuration.md).
DEFAULTS = {("consumer", "group"): "apns-worker", ("http", "port"): 8080, ("delivery", "shutdownTimeout"): "30s"}


class NoWorkerBinary(Exception):
    pass


class WorkerCheckFailed(Exception):
    """The worker neither accepted nor refused the config (it crashed, hung or exited otherwise)."""


def worker_binary():
    """$APNS_WORKER_BIN, else the debug build, else the release build."""
    named = os.environ.get("APNS_WORKER_BIN")
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise NoWorkerBinary(f"APNS_WORKER_BIN={named} is not an executable file")
        return named
    for configuration in ("debug", "release"):
        path = os.path.join(ROOT, ".build", configuration, "apns-worker")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise NoWorkerBinary(
        "no apns-worker binary to check the config with (neither .build/debug/apns-worker nor "
        ".build/release/apns-worker): run `swift build --product apns-worker` (`make check-deploy` does), "
        "or set APNS_WORKER_BIN to one")


def worker_check(binary, config_text, variables):
    """`apns-worker check --offline` on config_text with exactly `variables` as APNS_WORKER_* (none
    of this process's own, APNS_WORKER_BIN included: the worker refuses a name that matches no key).
    Returns the messages of its `error:` lines (none: valid); raises WorkerCheckFailed otherwise."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env.update(variables)
    command = [binary, "check", "--offline", "--config", "config.yaml"]
    with tempfile.TemporaryDirectory() as scratch:
        with open(os.path.join(scratch, "config.yaml"), "w", encoding="utf-8") as handle:
            handle.write(config_text)
        try:
            result = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise WorkerCheckFailed(f"`{' '.join(command)}`: {error}") from error
    errors = [line[len("error: "):] for line in result.stderr.splitlines() if line.startswith("error: ")]
    if (result.returncode, bool(errors)) not in ((0, False), (2, True)):
        raise WorkerCheckFailed(
            f"`{' '.join(command)}` exited {result.returncode} (0: valid, 2: not):\n{result.stdout}{result.stderr}")
    return errors


def check_worker_config(binary, config_text, container_env, problems, source="config.yaml", line_offset=0,
                        kind="Deployment"):
    """The ConfigMap's config as the pod loads it: the Deployment's literal APNS_WORKER_* values
    applied. A `valueFrom` variable's value is unknown, so each is tried alone with a placeholder on
    MINIMAL_CONFIG, and only a name the worker does not know is reported (the placeholder may be a
    bad value for a name it knows)."""
    variables = [v for v in container_env if isinstance(v, dict) and str(v.get("name", "")).startswith(ENV_PREFIX)]
    literal = {v["name"]: "" if v["value"] is None else str(v["value"]) for v in variables if "value" in v}

    def located(message):  # config.yaml:33: -> config.yaml:33 (deploy/kubernetes/configmap.yaml:50):
        if not line_offset:
            return message
        return re.sub(r"^config\.yaml:(\d+):",
                      lambda m: f"config.yaml:{m[1]} ({source}:{int(m[1]) + line_offset}):", message)

    try:
        for message in worker_check(binary, config_text, literal):
            problems.append(f"apns-worker check (the ConfigMap's config.yaml, the {kind}'s env): "
                            + located(message))
        minimal = yaml.safe_dump(MINIMAL_CONFIG, sort_keys=False)
        for name in sorted(v["name"] for v in variables if "value" not in v):
            for message in worker_check(binary, minimal, {name: PLACEHOLDER}):
                if any(words in message for words in UNKNOWN_NAME):
                    problems.append(f"{kind} env {name} (valueFrom; its name checked with a placeholder value): "
                                    + re.sub(r"^config\.yaml: ", "", message))
    except WorkerCheckFailed as error:
        problems.append(f"apns-worker check: {error}")


def block_scalar_line(path, key):
    """The line number of `key: |` in path (the lines of its block follow), else 0."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    found = [i + 1 for i, line in enumerate(lines) if re.match(rf"^\s+{re.escape(key)}:\s*\|[-+]?\s*$", line)]
    return found[0] if len(found) == 1 else 0


_DURATION = re.compile(r"^\d+(\.\d+)?(ms|s|m|h)$")


def parse_duration(value):
    """Seconds, from "200ms", "1.5s", "10m", "1h" or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, (int, float)):
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(value)
    unit = match.group(2)
    number = float(value[: -len(unit)])
    return number * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def config_value(config, *path):
    value = config
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return DEFAULTS.get(path)
        value = value[key]
    return value


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------
def load_files(problems):
    """Parses every YAML/JSON file under deploy/; returns {relative path: [documents]}."""
    documents = {}
    for folder, subfolders, files in os.walk(HERE):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d != "__pycache__")
        for file in sorted(files):
            path = os.path.join(folder, file)
            relative = os.path.relpath(path, ROOT)
            try:
                if file.endswith((".yaml", ".yml")):
                    with open(path, encoding="utf-8") as handle:
                        documents[relative] = [d for d in yaml.safe_load_all(handle) if d is not None]
                elif file.endswith(".json"):
                    with open(path, encoding="utf-8") as handle:
                        documents[relative] = [json.load(handle)]
            except (yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError) as error:
                problems.append(f"{relative}: does not parse: {error}")
                documents[relative] = []
    return documents


def resources(documents):
    """Kubernetes objects by (kind, name)."""
    found = {}
    for path, docs in documents.items():
        if not path.startswith(os.path.join("deploy", "kubernetes")):
            continue
        for doc in docs:
            if isinstance(doc, dict) and "kind" in doc and "metadata" in doc:
                found[(doc["kind"], doc["metadata"].get("name"))] = (path, doc)
    return found


def selector_matches(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


# ---------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------
def check_kubernetes(documents, problems, binary):
    """deploy/kubernetes as its files say (the default variant, a Deployment)."""
    objects = resources(documents)
    kustomization = documents.get(os.path.join("deploy", "kubernetes", "kustomization.yaml"))
    listed = set(kustomization[0].get("resources", [])) if kustomization else set()
    on_disk = {
        os.path.basename(p) for p in documents
        if os.path.dirname(p) == os.path.join("deploy", "kubernetes") and not p.endswith("kustomization.yaml")
    }
    for missing in sorted(on_disk - listed):
        problems.append(f"deploy/kubernetes/kustomization.yaml: {missing} is not in resources")
    for absent in sorted(listed - on_disk):
        problems.append(f"deploy/kubernetes/kustomization.yaml: resource {absent} does not exist")
    check_workload(objects, "Deployment", problems, binary)


def check_workload(objects, kind, problems, binary, where="deploy/kubernetes"):
    """The worker's workload (kind apns-worker: the Deployment, or the StatefulSet of the static
    membership variant) against its config, the image, the Service, the PDB and KEDA. objects:
    {(kind, name): (file, object)}, of the files or of a rendering (where: which)."""

    def get(object_kind, name):
        item = objects.get((object_kind, name))
        if item is None:
            problems.append(f"{where}: no {object_kind} {name}")
        return item

    configmap = get("ConfigMap", "apns-worker-config")
    workload = get(kind, "apns-worker")
    scaled = get("ScaledObject", "apns-worker")
    if not (configmap and workload):
        return

    spec = workload[1]["spec"]
    pod = spec["template"]["spec"]
    containers = [c for c in pod["containers"] if c["name"] == "apns-worker"]
    if not containers:
        problems.append(f"{kind}: no container apns-worker")
        return
    container = containers[0]

    # --- the worker config, as the worker loads it in the pod ---
    config_text = configmap[1].get("data", {}).get("config.yaml")
    if config_text is None:
        problems.append("ConfigMap apns-worker-config: no config.yaml")
        return
    check_worker_config(binary, config_text, container.get("env") or [], problems,
                        configmap[0], block_scalar_line(os.path.join(ROOT, configmap[0]), "config.yaml"), kind)
    try:
        config = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return  # the worker said where
    if not isinstance(config, dict):
        return

    # --- the workload ---
    pod_labels = spec["template"]["metadata"].get("labels", {})
    if not selector_matches(spec["selector"].get("matchLabels"), pod_labels):
        problems.append(f"{kind}: selector does not match the pod template's labels")

    http_port = config_value(config, "http", "port")
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    if ports.get("http") != http_port:
        problems.append(f"{kind}: container port http {ports.get('http')} != config http.port {http_port}")
    annotations = spec["template"]["metadata"].get("annotations", {})
    if annotations.get("prometheus.io/port") != str(http_port):
        problems.append(f"{kind}: prometheus.io/port annotation != config http.port")
    if annotations.get("prometheus.io/path") != "/metrics":
        problems.append(f"{kind}: prometheus.io/path annotation is not /metrics")

    for probe, path in (("livenessProbe", "/health/live"), ("readinessProbe", "/health/ready"),
                        ("startupProbe", "/health/live")):
        got = (container.get(probe) or {}).get("httpGet", {})
        if got.get("path") != path or got.get("port") not in ("http", http_port):
            problems.append(f"{kind}: {probe} should GET {path} on the http port")

    # config file path: args (or the image's CMD) -> a mounted ConfigMap
    args = container.get("args") or ["run", "--config", "/etc/apns-worker/config.yaml"]
    config_path = args[args.index("--config") + 1] if "--config" in args else None
    mounts = {m["name"]: m for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}

    def mounted_from(file_path):
        for name, mount in mounts.items():
            root = mount["mountPath"].rstrip("/") + "/"
            if mount.get("subPath") and file_path == mount["mountPath"]:
                return volumes.get(name), mount["subPath"], mount
            if file_path.startswith(root):
                return volumes.get(name), file_path[len(root):], mount
        return None, None, None

    volume, relative, _ = mounted_from(config_path or "")
    if not volume or volume.get("configMap", {}).get("name") != "apns-worker-config":
        problems.append(f"{kind}: --config {config_path} is not in a mount of ConfigMap apns-worker-config")
    elif relative not in [i["path"] for i in volume["configMap"].get("items", [{"path": "config.yaml"}])]:
        problems.append(f"{kind}: {config_path} is not a file of the config volume")
    dockerfile = os.path.join(HERE, "Dockerfile")
    if os.path.exists(dockerfile):
        with open(dockerfile, encoding="utf-8") as handle:
            text = handle.read()
        cmd = re.search(r"^CMD\s+(\[.*\])\s*$", text, re.M)
        if not cmd or json.loads(cmd.group(1)) != args:
            problems.append(f"Dockerfile CMD and the {kind}'s args differ")
        if f"EXPOSE {http_port}" not in text:
            problems.append(f"Dockerfile: no EXPOSE {http_port}")
        if not re.search(r'^ENTRYPOINT \["apns-worker"\]\s*$', text, re.M):
            problems.append('Dockerfile: ENTRYPOINT is not ["apns-worker"]')
        user = re.findall(r"^USER\s+(\S+)", text, re.M)
        if not user or user[-1].split(":")[0] in ("root", "0"):
            problems.append("Dockerfile: the last USER must be a non-root user")
        elif str(pod.get("securityContext", {}).get("runAsUser")) != user[-1].split(":")[0]:
            problems.append(f"{kind}: runAsUser differs from the Dockerfile's USER")

    # every token key file lies in a read-only mount of a Secret
    credentials = config_value(config, "apns", "credentials")
    for index, credential in enumerate(credentials if isinstance(credentials, list) else []):
        if not isinstance(credential, dict):
            continue
        for section, keys in (("token", ("keyFile", "keyIdFile")),
                              ("certificate", ("certificateFile", "privateKeyFile", "p12File"))):
            for key in keys:
                file_path = (credential.get(section) or {}).get(key)
                if not file_path:
                    continue
                volume, relative, mount = mounted_from(file_path)
                where = f"config.yaml apns.credentials[{index}].{section}.{key} ({file_path})"
                if not volume or "secret" not in volume:
                    problems.append(f"{where}: not in a mounted Secret")
                    continue
                if not mount.get("readOnly"):
                    problems.append(f"{where}: the Secret's mount is not readOnly")
                if mount.get("subPath"):
                    problems.append(f"{where}: mounted with subPath, which Kubernetes never updates: "
                                    "a rotated key or certificate would need a restart (mount the directory)")
                items = volume["secret"].get("items")
                if items is not None and relative not in [i["path"] for i in items]:
                    problems.append(f"{where}: not one of the Secret volume's items")

    # secrets come from Secrets (the worker checked the APNS_WORKER_* names, above)
    for variable in container.get("env", []):
        if "value" in variable and not isinstance(variable["value"], str):
            problems.append(f"{kind} env {variable['name']}: value {variable['value']!r} is not a string "
                            "(Kubernetes refuses it: quote it)")
        if re.search(r"PASSWORD|SECRET", variable["name"]) and "value" in variable:
            problems.append(f"{kind} env {variable['name']}: a secret as a literal value")
    kafka = config_value(config, "kafka")
    kafka = kafka if isinstance(kafka, dict) else {}
    for key in kafka:
        if re.search(r"password|secret", key):
            problems.append(f"config.yaml kafka.{key}: secrets come from a Secret, not the ConfigMap")

    # graceful shutdown
    try:
        shutdown = parse_duration(config_value(config, "delivery", "shutdownTimeout"))
    except ValueError:
        shutdown = None  # the worker said why
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if shutdown is not None and grace < shutdown + 10:
        problems.append(
            f"{kind}: terminationGracePeriodSeconds {grace} should exceed delivery.shutdownTimeout "
            f"({shutdown:g}s) by at least 10 s (flush, commit, leave the group)")

    # security
    pod_security = pod.get("securityContext", {})
    security = container.get("securityContext", {})
    if not (pod_security.get("runAsNonRoot") or security.get("runAsNonRoot")):
        problems.append(f"{kind}: runAsNonRoot is not set")
    if not security.get("readOnlyRootFilesystem"):
        problems.append(f"{kind}: readOnlyRootFilesystem is not set")
    if security.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{kind}: allowPrivilegeEscalation is not false")
    if (security.get("capabilities") or {}).get("drop") != ["ALL"]:
        problems.append(f"{kind}: capabilities do not drop ALL")
    seccomp = (security.get("seccompProfile") or pod_security.get("seccompProfile") or {}).get("type")
    if seccomp != "RuntimeDefault":
        problems.append(f"{kind}: seccompProfile is not RuntimeDefault")
    limits = (container.get("resources") or {}).get("limits", {})
    requests = (container.get("resources") or {}).get("requests", {})
    if not (limits.get("memory") and requests.get("memory") and requests.get("cpu")):
        problems.append(f"{kind}: memory request/limit and cpu request are required")
    zones = [t for t in pod.get("topologySpreadConstraints", [])
             if t.get("topologyKey") == "topology.kubernetes.io/zone"]
    if not zones or not all(selector_matches(t["labelSelector"].get("matchLabels"), pod_labels) for t in zones):
        problems.append(f"{kind}: no zone topology spread over the pod's own labels")

    # Service, PDB
    for other in ("Service", "PodDisruptionBudget"):
        item = get(other, "apns-worker")
        if item:
            selector = item[1]["spec"]["selector"]
            selector = selector.get("matchLabels", selector) if other == "PodDisruptionBudget" else selector
            if not selector or not selector_matches(selector, pod_labels):
                problems.append(f"{other} apns-worker: selector does not match the pods")
    service = objects.get(("Service", "apns-worker"))
    if service and not any(p.get("targetPort") in ("http", http_port) for p in service[1]["spec"]["ports"]):
        problems.append("Service apns-worker: no port to the http port")

    # KEDA
    if not scaled:
        return
    scaled_spec = scaled[1]["spec"]
    partitions = int(scaled[1]["metadata"].get("annotations", {}).get("apns-worker/input-partitions", 0))
    if partitions <= 0:
        problems.append("ScaledObject: annotation apns-worker/input-partitions (the input topic's partitions) missing")
    low, high = scaled_spec.get("minReplicaCount", 0), scaled_spec.get("maxReplicaCount", 100)
    if low < 1:
        problems.append("ScaledObject: minReplicaCount must be >= 1")
    if partitions and high > partitions:
        problems.append(f"ScaledObject: maxReplicaCount {high} > {partitions} partitions (extra members sit idle)")
    if partitions and spec.get("replicas", 1) > partitions:
        problems.append(f"{kind}: replicas {spec.get('replicas')} > {partitions} partitions")
    if not low <= spec.get("replicas", 1) <= high:
        problems.append(f"{kind}: replicas outside the ScaledObject's min..max")
    target = scaled_spec.get("scaleTargetRef", {})
    if (target.get("kind", "Deployment"), target.get("name")) != (kind, "apns-worker"):
        problems.append(f"ScaledObject: scaleTargetRef is not {kind} apns-worker")
    triggers = [t for t in scaled_spec.get("triggers", []) if t.get("type") == "kafka"]
    if not triggers:
        problems.append("ScaledObject: no kafka trigger")
        return
    meta = triggers[0]["metadata"]
    if meta.get("consumerGroup") != config_value(config, "consumer", "group"):
        problems.append("ScaledObject: consumerGroup differs from consumer.group")
    topics = config_value(config, "consumer", "topics")
    if meta.get("topic") not in (topics if isinstance(topics, list) else [topics]):
        problems.append("ScaledObject: topic is not one of consumer.topics")
    if meta.get("bootstrapServers") != kafka.get("bootstrap.servers"):
        problems.append("ScaledObject: bootstrapServers differ from kafka.bootstrap.servers")
    if str(meta.get("allowIdleConsumers")).lower() != "false":
        problems.append("ScaledObject: allowIdleConsumers must be false")
    if not str(meta.get("lagThreshold", "")).isdigit():
        problems.append("ScaledObject: lagThreshold must be set (an integer, as a string)")
    auth_name = (triggers[0].get("authenticationRef") or {}).get("name")
    auth = get("TriggerAuthentication", auth_name)
    if auth:
        secrets = {ref["name"] for ref in auth[1]["spec"].get("secretTargetRef", [])}
        env_secrets = {
            v["valueFrom"]["secretKeyRef"]["name"] for v in container.get("env", [])
            if "secretKeyRef" in v.get("valueFrom", {})
        }
        if not secrets <= env_secrets:
            problems.append("TriggerAuthentication: uses a Secret the worker does not (credentials would drift)")


def markdown_anchors(text):
    """The anchors GitHub gives a markdown file's headings (`## Alerts and runbook` ->
    `alerts-and-runbook`), ignoring `#` lines inside fenced code blocks (shell comments)."""
    anchors, fence = set(), None
    for line in text.splitlines():
        marker = re.match(r"^\s{0,3}(`{3,}|~{3,})", line)
        if marker:
            if fence is None:
                fence = marker.group(1)[0] * len(marker.group(1))
            elif line.strip().startswith(fence):
                fence = None
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fence is None and heading:
            title = heading.group(1).strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


# The runbook's page, as every runbook_url must end (before its #anchor).
RUNBOOK_PAGE = "docs/deployment.md"
# The base the alert unit tests (deploy/tests/) expect; run_promtool swaps in the rules' own base, so
# pointing prometheusrule.yaml at your copy of the docs needs no change to the tests.
TESTS_RUNBOOK_BASE = "https://github.com/apns-worker/apns-worker/blob/main/docs/deployment.md"


def check_runbook_url(where, url, anchors, problems):
    """An alert's runbook_url: absolute (Alertmanager and pagers cannot resolve a relative one),
    naming docs/deployment.md, with an anchor that is one of its headings. Returns the base (the
    URL before `#`) when the URL is well formed, for the one-base-for-all check."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        problems.append(f"{where}: runbook_url {url!r} is not an absolute http(s) URL")
        return None
    base = url.partition("#")[0]
    if not parts.path.endswith("/" + RUNBOOK_PAGE):
        problems.append(f"{where}: runbook_url {url!r} does not point at {RUNBOOK_PAGE}")
    if not parts.fragment:
        problems.append(f"{where}: runbook_url {url!r} has no #anchor (the alert's runbook section)")
    elif anchors and parts.fragment not in anchors:
        problems.append(f"{where}: runbook_url #{parts.fragment} is no heading of {RUNBOOK_PAGE}")
    return base


def check_alerts(documents, problems):
    path = os.path.join("deploy", "kubernetes", "prometheusrule.yaml")
    rules_doc = (documents.get(path) or [None])[0]
    if not rules_doc:
        problems.append(f"{path}: missing")
        return None
    docs_path = os.path.join(ROOT, "docs", "deployment.md")
    anchors = set()
    if os.path.exists(docs_path):
        with open(docs_path, encoding="utf-8") as handle:
            anchors = markdown_anchors(handle.read())
    else:
        problems.append("docs/deployment.md: missing (the alerts' runbook)")
    recorded = {r["record"] for g in rules_doc["spec"]["groups"] for r in g["rules"] if "record" in r}
    alerts = 0
    bases = set()
    for group in rules_doc["spec"]["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule.get("record")
            check_metric_names(f"{path} {name}", str(rule.get("expr", "")), problems, recorded)
            if "alert" not in rule:
                continue
            alerts += 1
            annotations = rule.get("annotations", {})
            for key in ("summary", "description", "runbook_url"):
                if not annotations.get(key):
                    problems.append(f"{path} {name}: no {key} annotation")
            if rule.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
                problems.append(f"{path} {name}: severity label must be critical, warning or info")
            if annotations.get("runbook_url"):
                base = check_runbook_url(f"{path} {name}", annotations["runbook_url"], anchors, problems)
                if base:
                    bases.add(base)
    if alerts == 0:
        problems.append(f"{path}: no alerts")
    if len(bases) > 1:
        problems.append(f"{path}: runbook_url bases differ ({', '.join(sorted(bases))}); "
                        "one base for all, so that one replacement points them at your copy")
    return rules_doc


def check_dashboard(documents, problems):
    path = os.path.join("deploy", "grafana", "apns-worker-dashboard.json")
    dashboard = (documents.get(path) or [None])[0]
    if not dashboard:
        problems.append(f"{path}: missing")
        return
    used = set()

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    count = 0
    for panel in panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            expr = target.get("expr")
            if expr:
                count += 1
                check_metric_names(f"{path} panel '{panel.get('title')}'", expr, problems)
                used |= promql_metric_names(expr)
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and isinstance(query, str):
            inner = re.search(r"label_values\((.*),\s*\w+\)\s*$", query)
            if inner:
                check_metric_names(f"{path} variable {variable.get('name')}", inner.group(1), problems)
    if count == 0:
        problems.append(f"{path}: no queries")
    unused = {n for n, (kind, _) in METRICS.items()} - {
        re.sub(r"_(bucket|sum|count)$", "", n) for n in used
    }
    for name in sorted(unused):
        problems.append(f"{path}: metric {name} is on no panel")


def check_spec(spec_path, problems):
    """METRICS against the metrics table of the contract (markdown)."""
    with open(spec_path, encoding="utf-8") as handle:
        text = handle.read()
    table = {}
    for line in text.splitlines():
        match = re.match(r"^\|\s*`(apns_worker_\w+)`\s*\|\s*(\w+)\s*\|\s*([^|]*)\|", line)
        if match:
            labels = set(re.findall(r"`(\w+)`", match.group(3)))
            table[match.group(1)] = (match.group(2), labels)
    if not table:
        problems.append(f"{spec_path}: no metrics table found")
    for name in sorted(set(table) | set(METRICS)):
        if table.get(name) != METRICS.get(name):
            problems.append(f"METRICS differs from {spec_path} for {name}: {METRICS.get(name)} vs {table.get(name)}")


def dashboard_queries(documents):
    """The dashboard's PromQL with Grafana's variables replaced, for promtool to parse."""
    dashboard = (documents.get(os.path.join("deploy", "grafana", "apns-worker-dashboard.json")) or [None])[0]
    queries = []

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels((dashboard or {}).get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                expr = target["expr"].replace("$__rate_interval", "5m").replace("$__interval", "1m")
                expr = re.sub(r"\$\{?(\w+)\}?", ".*", expr)
                queries.append((panel.get("title"), expr))
    return queries


def rebase_runbook_urls(test_content, base):
    """The tests' expected runbook_urls with TESTS_RUNBOOK_BASE replaced by the rules' base."""
    for test in test_content.get("tests") or []:
        for case in test.get("alert_rule_test") or []:
            for alert in case.get("exp_alerts") or []:
                annotations = alert.get("exp_annotations") or {}
                url = annotations.get("runbook_url", "")
                if url.startswith(TESTS_RUNBOOK_BASE + "#"):
                    annotations["runbook_url"] = base + url[len(TESTS_RUNBOOK_BASE):]


def run_promtool(rules_doc, problems, notices, documents=None):
    promtool = shutil.which("promtool")
    if not promtool:
        notices.append("promtool not installed (Debian: prometheus): rule syntax and alert unit tests skipped")
        return
    tests = sorted(
        os.path.join(HERE, "tests", f) for f in os.listdir(os.path.join(HERE, "tests"))
        if f.endswith(".test.yaml")
    ) if os.path.isdir(os.path.join(HERE, "tests")) else []
    with tempfile.TemporaryDirectory() as scratch:
        rules_file = os.path.join(scratch, "apns-worker.rules.yaml")
        with open(rules_file, "w", encoding="utf-8") as handle:
            yaml.safe_dump(rules_doc["spec"], handle)
        result = subprocess.run([promtool, "check", "rules", rules_file], capture_output=True, text=True)
        if result.returncode != 0:
            problems.append("promtool check rules:\n" + result.stdout + result.stderr)
        # The dashboard's queries, parsed by Prometheus' own parser (as recording rules).
        queries = dashboard_queries(documents or {})
        if queries:
            dashboard_file = os.path.join(scratch, "dashboard.rules.yaml")
            with open(dashboard_file, "w", encoding="utf-8") as handle:
                yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
                    {"record": f"dashboard:query:{index}", "expr": expr}
                    for index, (_, expr) in enumerate(queries)]}]}, handle)
            result = subprocess.run([promtool, "check", "rules", dashboard_file], capture_output=True, text=True)
            if result.returncode != 0:
                listing = "\n".join(f"  {i}: {title}" for i, (title, _) in enumerate(queries))
                problems.append("promtool: a dashboard query does not parse:\n" + result.stdout + result.stderr
                                + "queries:\n" + listing)
            else:
                notices.append(f"promtool: {len(queries)} dashboard queries parse")
        rules_base = next((
            rule["annotations"]["runbook_url"].partition("#")[0]
            for group in rules_doc["spec"]["groups"] for rule in group["rules"]
            if "alert" in rule and (rule.get("annotations") or {}).get("runbook_url")), None)
        for test in tests:
            copy = os.path.join(scratch, os.path.basename(test))
            with open(test, encoding="utf-8") as handle:
                content = yaml.safe_load(handle)
            content["rule_files"] = [rules_file]
            if rules_base:
                rebase_runbook_urls(content, rules_base)
            with open(copy, "w", encoding="utf-8") as handle:
                yaml.safe_dump(content, handle)
            result = subprocess.run([promtool, "test", "rules", copy], capture_output=True, text=True)
            if result.returncode != 0:
                problems.append(f"promtool test rules {os.path.relpath(test, ROOT)}:\n" + result.stdout + result.stderr)
            else:
                notices.append(f"promtool test rules {os.path.relpath(test, ROOT)}: passed")


# ---------------------------------------------------------------------------------------------
# Self-test: the checker catches what it claims to catch
# ---------------------------------------------------------------------------------------------
def self_test(binary):
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    expect(promql_metric_names(
        'histogram_quantile(0.99, sum by (le) (rate(apns_worker_apns_request_duration_seconds_bucket'
        '{namespace=~"$namespace", status="5.."}[$__rate_interval])))'
    ) == {"apns_worker_apns_request_duration_seconds_bucket"}, "histogram query")
    expect(promql_metric_names(
        "sum by (namespace) (rate(a_total[5m] offset 1h)) / on (namespace) group_left (x) b > 0.5 and c unless d"
    ) == {"a_total", "b", "c", "d"}, "operators and grouping")
    expect(promql_metric_names("absent(up) or vector(0) * 1e3") == {"up"}, "functions and numbers")

    problems = []
    check_metric_names("t", "rate(apns_worker_events_complete_total[5m])", problems)
    expect(len(problems) == 1 and "apns_worker_events_complete_total" in problems[0], "misspelt worker metric")
    problems = []
    check_metric_names("t", "rate(apns_worker_in_flight_events_bucket[5m])", problems)
    expect(len(problems) == 1, "_bucket of a gauge")
    problems = []
    check_metric_names("t", "rate(http_requests_total[5m])", problems)
    expect(len(problems) == 1, "unlisted external metric")
    problems = []
    check_metric_names("t", "sum(rate(apns_worker_event_duration_seconds_count[5m]))", problems)
    expect(problems == [], "histogram _count accepted")
    swift = ('public static let help: [String: String] = [\n'
             '    "apns_worker_a_total": "Records: \\"quoted\\", ok.",\n'
             '    "apns_worker_b":\n        "Two: lines.",\n'
             ']\n\npublic static let other: [String: String] = ["c": "d"]\n')
    expect(worker_metric_names(swift) == {"apns_worker_a_total", "apns_worker_b"},
           f"the keys of the worker's help dictionary: {worker_metric_names(swift)}")
    with tempfile.TemporaryDirectory() as scratch:
        source = os.path.join(scratch, WORKER_METRICS_SOURCE)
        os.makedirs(os.path.dirname(source))
        names = sorted(METRICS)
        with open(source, "w", encoding="utf-8") as handle:  # one metric missing, one unknown to METRICS
            handle.write("static let help: [String: String] = [\n"
                         + "".join(f'    "{n}": "x",\n' for n in names[1:] + ["apns_worker_new_total"]) + "]\n")
        problems = []
        check_worker_metrics(problems, scratch)
        expect(len(problems) == 2 and "apns_worker_new_total" in problems[0] and names[0] in problems[1],
               f"METRICS and the worker's metrics drifting apart: {problems}")

    # The config and the env, checked by the worker: a valid one passes (APNS_WORKER_BIN, which
    # names no key, is not passed on), and each mistake is caught and located.
    base = MINIMAL_CONFIG

    def config_problems(config, env=(), line_offset=0):
        found = []
        check_worker_config(binary, yaml.safe_dump(config, sort_keys=False), list(env), found,
                            "configmap.yaml", line_offset)
        return found

    problems = config_problems(base)
    expect(problems == [], f"minimal config accepted: {problems}")
    for mutate, what in (
        (lambda c: c.update(delivery={"retry": {"maxAtempts": 3}}), "delivery.retry.maxAtempts"),
        (lambda c: c.update(delivery={"shutdownTimeout": "30 seconds"}), "delivery.shutdownTimeout"),
        (lambda c: c["topics"].pop("results"), "topics.results"),
        (lambda c: c["apns"]["credentials"][0].update(environment="sandbox"), "apns.credentials[0].environment"),
        (lambda c: c["topics"].update(results="notifications"), "topics.results"),
        (lambda c: c["kafka"].update({"sasl.passwrd": "x"}), "sasl.passwrd"),
    ):
        config = json.loads(json.dumps(base))
        mutate(config)
        problems = config_problems(config)
        expect(len(problems) == 1 and what in problems[0], f"config problem not caught: {what} (got {problems})")
    config = json.loads(json.dumps(base))
    config["logging"] = {"format": "yaml"}
    line = yaml.safe_dump(config, sort_keys=False).splitlines().index("  format: yaml") + 1
    problems = config_problems(config, line_offset=100)
    expect(len(problems) == 1 and f"config.yaml:{line} (configmap.yaml:{100 + line}): logging.format" in problems[0],
           f"a config problem's line, also in the ConfigMap's file: {problems}")
    for env, what in (
        ([{"name": "APNS_WORKER_DELIVERY_MAX_IN_FLIGHT", "value": "10"},
          {"name": "APNS_WORKER_KAFKA_SASL_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "s", "key": "p"}}},
          {"name": "APNS_WORKER_KAFKA_SECURITY_PROTOCOL", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "p"}}},
          {"name": "APNS_WORKER_LOGGING_LEVEL", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "l"}}},
          {"name": "OTHER", "value": "x"}], None),
        ([{"name": "APNS_WORKER_DELIVERY_MAX_INFLIGHT", "value": "10"}], "APNS_WORKER_DELIVERY_MAX_INFLIGHT"),
        ([{"name": "APNS_WORKER_DELIVERY_MAX_IN_FLIGHT", "value": "many"}], "APNS_WORKER_DELIVERY_MAX_IN_FLIGHT"),
        ([{"name": "APNS_WORKER_DELIVERY_MAX_INFLIGHT", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
         "APNS_WORKER_DELIVERY_MAX_INFLIGHT"),
        ([{"name": "APNS_WORKER_KAFKA_SASL_PASSWRD", "valueFrom": {"secretKeyRef": {"name": "s", "key": "p"}}}],
         "sasl.passwrd"),
    ):
        problems = config_problems(base, env)
        # A mistake in the file hides no misspelt valueFrom name.
        if what is not None and "valueFrom" in env[0]:
            broken = json.loads(json.dumps(base))
            broken["delivery"] = {"maxInFlight": "many"}
            problems_too = config_problems(broken, env)
            expect(len(problems_too) == 2 and what in problems_too[1],
                   f"{what} caught beside a config problem (got {problems_too})")
        if what is None:
            expect(problems == [], f"known variables accepted, valueFrom ones whatever their value: {problems}")
        else:
            expect(len(problems) == 1 and what in problems[0], f"env problem not caught: {what} (got {problems})")
    expect(parse_duration("1.5s") == 1.5 and parse_duration("200ms") == 0.2 and parse_duration(3) == 3.0,
           "durations")

    # The key mounted with subPath (Kubernetes never updates such a file): refused, naming why.
    documents = load_files([])
    deployment = resources(documents)[("Deployment", "apns-worker")][1]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for mount in container["volumeMounts"]:
        if mount["name"] == "apns-key":
            mount["mountPath"] = "/var/run/secrets/apns/AuthKey.p8"
            mount["subPath"] = "AuthKey.p8"
    problems = []
    check_kubernetes(documents, problems, binary)
    expect(any("keyFile" in p and "subPath" in p for p in problems),
           f"a key mounted with subPath not caught (got {problems})")

    anchors = markdown_anchors(
        "# Deploying apns-worker\n## Alerts and runbook\n### ApnsWorkerStalled\n"
        "```sh\n# Kafka SASL credentials\n```\n## Where a new group starts, and `auto.offset.reset`\n")
    expect(anchors == {"deploying-apns-worker", "alerts-and-runbook", "apnsworkerstalled",
                       "where-a-new-group-starts-and-autooffsetreset"},
           f"markdown anchors, code comments skipped: {anchors}")
    base = "https://docs.example.com/apns-worker/docs/deployment.md"
    problems = []
    expect(check_runbook_url("r", base + "#apnsworkerstalled", anchors, problems) == base and problems == [],
           f"absolute runbook_url accepted: {problems}")
    for url, what in (
        ("docs/deployment.md#apnsworkerstalled", "not an absolute http(s) URL"),
        ("https://docs.example.com/apns-worker/docs/deployment.md#apnsworkerstaled", "is no heading"),
        ("https://docs.example.com/apns-worker/README.md#apnsworkerstalled", "does not point at"),
        ("https://docs.example.com/apns-worker/docs/deployment.md", "has no #anchor"),
    ):
        problems = []
        check_runbook_url("r", url, anchors, problems)
        expect(any(what in p for p in problems), f"runbook_url problem not caught: {what} (got {problems})")
    content = {"tests": [{"alert_rule_test": [{"exp_alerts": [{"exp_annotations": {
        "runbook_url": TESTS_RUNBOOK_BASE + "#apnsworkerstalled"}}]}]}]}
    rebase_runbook_urls(content, base)
    expect(content["tests"][0]["alert_rule_test"][0]["exp_alerts"][0]["exp_annotations"]["runbook_url"]
           == base + "#apnsworkerstalled", "the tests' runbook base follows the rules'")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spec", help="markdown contract whose metrics table METRICS must equal")
    parser.add_argument("--self-test", action="store_true", help="only the checker's own tests")
    arguments = parser.parse_args()

    try:
        binary = worker_binary()
    except NoWorkerBinary as error:
        print(f"error: {error}")
        return 1
    failures = self_test(binary)
    if failures:
        for failure in failures:
            print(f"check.py self-test FAILED: {failure}")
        return 1
    if arguments.self_test:
        print("check.py self-test: passed")
        return 0

    problems, notices = [], []
    documents = load_files(problems)
    check_worker_metrics(problems)
    check_kubernetes(documents, problems, binary)
    rules_doc = check_alerts(documents, problems)
    check_dashboard(documents, problems)
    if arguments.spec:
        check_spec(arguments.spec, problems)
    if rules_doc and not problems:
        run_promtool(rules_doc, problems, notices, documents)

    for notice in notices:
        print(f"note: {notice}")
    for problem in problems:
        print(f"error: {problem}")
    files = len(documents)
    if problems:
        print(f"deploy check: {len(problems)} problem(s) in {files} files")
        return 1
    print(f"deploy check: {files} files parse; metrics, config keys and cross-references agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
