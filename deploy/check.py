#!/usr/bin/python3
"""Checks deploy/ against itself and against the worker's operational contract.

Run: `make check-deploy` (or /usr/bin/python3 deploy/check.py). Needs Python 3, PyYAML (Debian:
python3-yaml), kubectl (Debian: kubernetes-client) and a built worker: $APNS_WORKER_BIN, else
.build/debug/apns-worker, else .build/release/apns-worker (`swift build --product apns-worker`;
`make check-deploy` builds it). Exits 1 and names every problem found.

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
  5. Both renderings (`kubectl kustomize`): deploy/kubernetes (the Deployment) and
     deploy/overlays/static-membership (a StatefulSet; held to 3 and 4 too, its serviceName a
     headless Service, no Deployment left beside it, its pods' group.instance.id their names). In
     each, static membership: no two pods of a workload share a group.instance.id (a fixed one, in
     the ConfigMap's `kafka:` or `consumer.properties:` or in APNS_WORKER_KAFKA_GROUP_INSTANCE_ID, for
     a Deployment, ReplicaSet or DaemonSet, or a StatefulSet of more pods than one or scaled by KEDA
     or an HPA), none takes a new one with each new pod (a Deployment's pod names), and a literal one
     is one Kafka accepts. Only a StatefulSet's pod name (fieldRef metadata.name, directly or through
     a $(VAR)) is one per pod that a restarted pod keeps.
  6. If `promtool` (Debian: prometheus) is installed: `promtool check rules` on the alerts and on
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
    "apns_worker_apns_provider_token_signing_failures_total": ("counter", {"key_id"}),
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
    if not os.path.isfile(path):
        return 0  # an object no file under deploy/ defines as it is (a kustomize generator's)
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


# ---------------------------------------------------------------------------------------------
# Static membership: one group.instance.id per pod, and one Kafka accepts
# ---------------------------------------------------------------------------------------------
# What is rendered (`kubectl kustomize`) and checked: the default, a Deployment, and the static
# membership variant, a StatefulSet whose pods take group.instance.id from their names. Each with
# the folders whose files it is made of (where a problem's file is looked for), its own first.
RENDERINGS = (
    (os.path.join("deploy", "kubernetes"), "Deployment", (os.path.join("deploy", "kubernetes"),)),
    (os.path.join("deploy", "overlays", "static-membership"), "StatefulSet",
     (os.path.join("deploy", "overlays", "static-membership"), os.path.join("deploy", "kubernetes"))),
)
INSTANCE_ID = "group.instance.id"
INSTANCE_ID_VARIABLE = "APNS_WORKER_KAFKA_GROUP_INSTANCE_ID"
# Kafka's rule for a group.instance.id (the broker refuses a JoinGroup otherwise): its topic names'.
INSTANCE_ID_MAX = 249
INSTANCE_ID_CHARACTERS = re.compile(r"[A-Za-z0-9._-]")
# The urgent lane's member (consumer.lanes.urgent) adds this to the id (docs/configuration.md).
URGENT_SUFFIX = "-urgent"
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")
DEFAULT_ARGS = ["run", "--config", "/etc/apns-worker/config.yaml"]  # the image's CMD


def render(folder, problems):
    """`kubectl kustomize folder`: its objects, else None (the problem said)."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        problems.append(f"{folder}: kubectl not found, needed to render it (Debian: kubernetes-client)")
        return None
    try:
        result = subprocess.run([kubectl, "kustomize", os.path.join(ROOT, folder)],
                                capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        problems.append(f"kubectl kustomize {folder}: {error}")
        return None
    if result.returncode != 0:
        problems.append(f"kubectl kustomize {folder}: {result.stderr.strip()}")
        return None
    return [d for d in yaml.safe_load_all(result.stdout) if isinstance(d, dict)]


def rendered_objects(rendering, documents, folders):
    """{(kind, name): (file, object)} of a rendering, each with the file under `folders` that
    defines it (the first folder first), else the first folder."""
    files = [p for folder in folders for p in sorted(documents)
             if os.path.dirname(p) == folder or os.path.dirname(p).startswith(folder + os.sep)]
    objects = {}
    for doc in rendering:
        key = (doc.get("kind"), (doc.get("metadata") or {}).get("name"))
        origin = next((p for p in files for d in documents[p]
                       if isinstance(d, dict) and (d.get("kind"), (d.get("metadata") or {}).get("name")) == key),
                      folders[0])
        objects[key] = (origin, doc)
    return objects


def locator(folders):
    """A function that names the first file under `folders` whose text holds a string (else the
    default it is given): where an env value was written, even in a kustomize patch."""
    texts = []
    for folder in folders:
        for directory, subfolders, names in os.walk(os.path.join(ROOT, folder)):
            subfolders.sort()
            for name in sorted(names):
                if name.endswith((".yaml", ".yml")):
                    with open(os.path.join(directory, name), encoding="utf-8") as handle:
                        texts.append((os.path.relpath(os.path.join(directory, name), ROOT), handle.read()))

    def locate(needles, default):
        return next((path for path, text in texts if all(n in text for n in needles)), default)
    return locate


def expand_value(text, defined):
    """An env value as Kubernetes hands it to the container: $(NAME) of a variable defined above
    is replaced by its value, $$ is $, anything else (an unknown $(NAME) too) stays as written.
    Returns parts: ("text", s), ("field", fieldPath) or ("ref", what)."""
    parts, literal, i = [], "", 0
    while i < len(text):
        if text.startswith("$$", i):
            literal, i = literal + "$", i + 2
            continue
        if text.startswith("$(", i) and text.find(")", i) != -1:
            end = text.find(")", i)
            name = text[i + 2:end]
            if name in defined:
                if literal:
                    parts.append(("text", literal))
                parts.extend(defined[name])
                literal, i = "", end + 1
                continue
            literal, i = literal + text[i:end + 1], end + 1
            continue
        literal, i = literal + text[i], i + 1
    if literal or not parts:
        parts.append(("text", literal))
    merged = []  # adjacent texts as one (a variable's text beside the value's own)
    for part in parts:
        if merged and part[0] == "text" == merged[-1][0]:
            merged[-1] = ("text", merged[-1][1] + part[1])
        else:
            merged.append(part)
    return merged


def container_variables(container, objects):
    """Each env variable of a container, expanded in order (envFrom's ConfigMap keys first)."""
    defined = {}
    for source in container.get("envFrom") or []:
        name = ((source or {}).get("configMapRef") or {}).get("name")
        item = objects.get(("ConfigMap", name))
        for key, value in ((item[1].get("data") or {}) if item else {}).items():
            defined[(source.get("prefix") or "") + key] = [("text", str(value))]
    for variable in container.get("env") or []:
        if not isinstance(variable, dict) or "name" not in variable:
            continue
        source = variable.get("valueFrom")
        if source is not None:
            field = (source or {}).get("fieldRef")
            if field:
                defined[variable["name"]] = [("field", field.get("fieldPath"))]
            else:
                kind = next(iter(source or {}), "valueFrom")
                reference = (source or {}).get(kind) or {}
                where = "/".join(str(reference[k]) for k in ("name", "key") if k in reference)
                defined[variable["name"]] = [("ref", f"{kind} {where}".strip())]
        else:
            value = variable.get("value")
            defined[variable["name"]] = expand_value("" if value is None else str(value), defined)
    return defined


def is_instance_id_variable(name):
    """APNS_WORKER_KAFKA_<X> sets the librdkafka property <x> lowercased, `_` -> `.`."""
    prefix = ENV_PREFIX + "KAFKA_"
    return name.startswith(prefix) and name[len(prefix):].lower().replace("_", ".") == INSTANCE_ID


def pod_config(pod, container, objects):
    """The worker config a container loads (its --config file, from a mounted ConfigMap): (config,
    ConfigMap name, the ConfigMap's file), else ({}, None, None)."""
    args = container.get("args") or DEFAULT_ARGS
    path = args[args.index("--config") + 1] if "--config" in args[:-1] else None
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        root = mount.get("mountPath", "").rstrip("/") + "/"
        if not path or not (path.startswith(root) or (mount.get("subPath") and path == mount.get("mountPath"))):
            continue
        relative = mount.get("subPath") if path == mount.get("mountPath") else path[len(root):]
        volume = (volumes.get(mount.get("name")) or {}).get("configMap")
        if not volume:
            return {}, None, None
        items = {i.get("path"): i.get("key") for i in volume.get("items") or []}
        key = items.get(relative, relative) if volume.get("items") else relative
        item = objects.get(("ConfigMap", volume.get("name")))
        try:
            config = yaml.safe_load(((item[1].get("data") or {}).get(key)) or "") if item else None
        except yaml.YAMLError:
            config = None  # the worker's own check says where
        return (config if isinstance(config, dict) else {}), volume.get("name"), item[0] if item else None
    return {}, None, None


def instance_id_of(container, config, objects):
    """The group.instance.id the worker in this container runs with: (parts, where it is set),
    else None. consumer.properties wins over kafka, and APNS_WORKER_KAFKA_GROUP_INSTANCE_ID
    replaces kafka's (docs/configuration.md)."""
    properties = (config.get("consumer") or {}).get("properties") if isinstance(config.get("consumer"), dict) else None
    if isinstance(properties, dict) and INSTANCE_ID in properties:
        value = properties[INSTANCE_ID]
        return [("text", "" if value is None else str(value))], "consumer.properties"
    variables = container_variables(container, objects)
    names = [n for n in variables if is_instance_id_variable(n)]
    if names:
        return variables[names[-1]], f"env {names[-1]}"
    kafka = config.get("kafka")
    if isinstance(kafka, dict) and INSTANCE_ID in kafka:
        value = kafka[INSTANCE_ID]
        return [("text", "" if value is None else str(value))], "kafka"
    return None


def instance_id_refused(value, urgent):
    """Why Kafka refuses this literal group.instance.id (with the urgent lane's suffix, if
    `urgent`), else None."""
    if value == "":
        return "it is empty (leave it unset for dynamic membership)"
    if value in (".", ".."):
        return f"{value!r} is not allowed"
    wrong = sorted({c for c in value if not INSTANCE_ID_CHARACTERS.fullmatch(c)})
    if wrong:
        return "characters " + " ".join(repr(c) for c in wrong) + " are not allowed"
    if len(value) > INSTANCE_ID_MAX:
        return f"{len(value)} characters, more than {INSTANCE_ID_MAX}"
    if urgent and len(value + URGENT_SUFFIX) > INSTANCE_ID_MAX:
        return (f"the urgent lane's member is {len(value + URGENT_SUFFIX)} characters with {URGENT_SUFFIX!r}, "
                f"more than {INSTANCE_ID_MAX}")
    return None


def pods_at_once(objects, kind, name, spec):
    """Which pods of a workload may run at the same time under one fixed id (a phrase for the
    message), else None: only a StatefulSet that stays at one pod has at most one at a time."""
    if kind in ("Deployment", "ReplicaSet"):
        return (f"every pod of the {kind}, whose pods are replaced under new names and overlap "
                "(a rollout's surge, an evicted pod draining beside its replacement)")
    if kind == "DaemonSet":
        return "every pod of the DaemonSet, one per node"
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, int) and replicas > 1:
        return f"the {replicas} pods of the {kind}"
    for (other, scaler_name), (_, scaler) in sorted(objects.items()):
        scaler_spec = scaler.get("spec") or {}
        target = scaler_spec.get("scaleTargetRef") or {}
        if other == "ScaledObject":
            target_kind, high = target.get("kind", "Deployment"), scaler_spec.get("maxReplicaCount", 100)
        elif other == "HorizontalPodAutoscaler":
            target_kind, high = target.get("kind"), scaler_spec.get("maxReplicas", 1)
        else:
            continue
        if (target_kind, target.get("name")) == (kind, name) and isinstance(high, int) and high > 1:
            return f"the pods of the {kind}, which {other} {scaler_name} scales up to {high}"
    return None


def check_instance_ids(objects, problems, locate=None):
    """No two pods share a group.instance.id, none takes a new one each time it is replaced, and
    a literal one is one Kafka accepts. Returns {(kind, name): {container: "stable" (a
    StatefulSet pod's name), "per-pod" (new for each new pod) or "shared"}} for the workloads that
    set one."""
    found = {}
    for (kind, name), (path, doc) in sorted(objects.items()):
        if kind not in WORKLOAD_KINDS:
            continue
        spec = doc.get("spec") or {}
        pod = (spec.get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            config, configmap, configmap_file = pod_config(pod, container, objects)
            setting = instance_id_of(container, config, objects)
            if setting is None:
                continue
            parts, where = setting
            if where.startswith("env "):
                file = locate((where[4:],), path) if locate else path
                source = f"{where} of container {container.get('name')}"
            else:
                file = configmap_file or path
                source = f"{where} in ConfigMap {configmap}'s config.yaml"
            head = f"{file}: {kind} {name}: {INSTANCE_ID}"
            texts = [p[1] for p in parts if p[0] == "text"]
            lanes = (config.get("consumer") or {}).get("lanes") if isinstance(config.get("consumer"), dict) else None
            urgent = isinstance(lanes, dict) and bool(lanes.get("urgent"))
            if len(parts) == 1 and parts[0][0] == "text":
                shown = parts[0][1] if len(parts[0][1]) <= 60 else parts[0][1][:57] + "..."
                why = instance_id_refused(parts[0][1], urgent)
                if why:
                    problems.append(
                        f"{head} {shown!r} ({source}) is one Kafka refuses: {why}. An instance id is 1 to "
                        f"{INSTANCE_ID_MAX} ASCII letters, digits, '.', '_' and '-', and neither '.' nor '..'")
            else:
                for text in texts:
                    why = instance_id_refused(text, False) if text else None
                    if why and not why.startswith("'"):
                        problems.append(f"{head}: its literal part {text!r} ({source}) is one Kafka refuses: {why}")
            per_pod = [p[1] for p in parts if p[0] == "field" and p[1] in ("metadata.name", "metadata.uid")]
            if "metadata.name" in per_pod and kind == "StatefulSet":
                found.setdefault((kind, name), {})[container.get("name")] = "stable"
                continue
            if per_pod:
                found.setdefault((kind, name), {})[container.get("name")] = "per-pod"
                reason = ("a pod's uid is new whenever the pod is made again" if per_pod[0] == "metadata.uid"
                          else f"a {kind}'s pods are replaced under new names")
                problems.append(
                    f"{head} from the pod's {per_pod[0]} ({source}) is a new instance id for every new pod, and "
                    f"{reason}: each replaced pod leaves a static member behind, whose partitions stay unread "
                    "until the session timeout, and joins as a new member (a rebalance all the same). Static "
                    "membership needs a StatefulSet's stable pod names (deploy/overlays/static-membership)")
                continue
            found.setdefault((kind, name), {})[container.get("name")] = "shared"
            pods = pods_at_once(objects, kind, name, spec)
            if pods:
                shown = "".join(p[1] if p[0] == "text" else f"<{p[1]}>" for p in parts)
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                problems.append(
                    f"{head} {shown!r} ({source}) is one instance id for {pods}: two pods with one instance "
                    "id are one static member to the broker, which fences one of them (under the "
                    "next-generation protocol, group.protocol=consumer, the newer fails fatally with "
                    "UNRELEASED_INSTANCE_ID). Take it from the pod's name (fieldRef metadata.name) in a "
                    "StatefulSet, as deploy/overlays/static-membership does, or leave it unset")
    return found


def check_static_membership(objects, ids, folder, problems):
    """The variant: one workload, a StatefulSet whose worker takes its instance id from its pod's
    name, governed by a headless Service that selects its pods."""
    where = f"{folder} (rendered)"
    if ("Deployment", "apns-worker") in objects:
        problems.append(f"{where}: Deployment apns-worker is still there beside the StatefulSet: two "
                        "workloads would run two sets of members of one group")
    item = objects.get(("StatefulSet", "apns-worker"))
    if not item:
        return  # check_workload said so
    spec = item[1].get("spec") or {}
    if (ids.get(("StatefulSet", "apns-worker")) or {}).get("apns-worker") != "stable":
        problems.append(f"{item[0]}: StatefulSet apns-worker: container apns-worker does not take "
                        f"{INSTANCE_ID} from its pod's name ({INSTANCE_ID_VARIABLE} from fieldRef metadata.name): "
                        "its pods are not static members")
    service_name = spec.get("serviceName")
    service = objects.get(("Service", service_name)) if service_name else None
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not service_name:
        problems.append(f"{item[0]}: StatefulSet apns-worker: no serviceName (older API schemas refuse it)")
    elif not service:
        problems.append(f"{item[0]}: StatefulSet apns-worker: serviceName {service_name} is no Service of {where}")
    else:
        if (service[1].get("spec") or {}).get("clusterIP") != "None":
            problems.append(f"{service[0]}: Service {service_name}: the StatefulSet's serviceName, not headless "
                            "(clusterIP: None)")
        if not selector_matches((service[1].get("spec") or {}).get("selector"), labels):
            problems.append(f"{service[0]}: Service {service_name}: selector does not match the StatefulSet's pods")


def check_renderings(documents, problems, binary):
    """Each of RENDERINGS as kubectl renders it: the instance id rule; for the StatefulSet variant,
    everything check_workload holds the Deployment to, and the variant's own pieces."""
    for folder, kind, folders in RENDERINGS:
        rendering = render(folder, problems)
        if rendering is None:
            continue
        objects = rendered_objects(rendering, documents, folders)
        ids = check_instance_ids(objects, problems, locator(folders))
        if kind == "Deployment":
            continue  # check_kubernetes holds the files to the rest
        found = []
        check_workload(objects, kind, found, binary, f"{folder} (rendered)")
        problems.extend(p if p.startswith(folder) else f"{folder} (rendered): {p}" for p in found)
        check_static_membership(objects, ids, folder, problems)


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

    # Static membership: pods that would share one group.instance.id, or take a new one each time
    # they are replaced, or one Kafka refuses, are refused; a StatefulSet's pod names are not.
    def workload(kind, env=(), replicas=3, kafka=None, consumer=None, scaler=None):
        config = json.loads(json.dumps(MINIMAL_CONFIG))
        config["kafka"].update(kafka or {})
        config["consumer"].update(consumer or {})
        template = {"metadata": {"labels": {"app": "w"}}, "spec": {
            "containers": [{"name": "apns-worker", "args": list(DEFAULT_ARGS), "env": list(env),
                            "volumeMounts": [{"name": "config", "mountPath": "/etc/apns-worker"}]}],
            "volumes": [{"name": "config", "configMap": {"name": "apns-worker-config"}}]}}
        objects = {
            ("ConfigMap", "apns-worker-config"): ("configmap.yaml", {
                "kind": "ConfigMap", "metadata": {"name": "apns-worker-config"},
                "data": {"config.yaml": yaml.safe_dump(config)}}),
            (kind, "apns-worker"): ("workload.yaml", {
                "kind": kind, "metadata": {"name": "apns-worker"},
                "spec": {"replicas": replicas, "template": template}}),
        }
        if scaler:
            objects[("ScaledObject", "apns-worker")] = ("keda.yaml", {
                "kind": "ScaledObject", "metadata": {"name": "apns-worker"},
                "spec": {"scaleTargetRef": {"kind": kind, "name": "apns-worker"}, "maxReplicaCount": scaler}})
        return objects

    def literal(value):
        return [{"name": INSTANCE_ID_VARIABLE, "value": value}]

    pod_name = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    by_name = [{"name": INSTANCE_ID_VARIABLE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    for objects, expected, what in (
        (workload("Deployment", literal("apns-worker-1")),
         ["workload.yaml: Deployment apns-worker: group.instance.id 'apns-worker-1' (env "
          f"{INSTANCE_ID_VARIABLE} of container apns-worker) is one instance id for every pod of the Deployment",
          "fences one of them", "UNRELEASED_INSTANCE_ID"],
         "a Deployment with a literal instance id"),
        (workload("Deployment", replicas=1, kafka={INSTANCE_ID: "w"}),
         ["configmap.yaml: Deployment apns-worker: group.instance.id 'w' (kafka in ConfigMap apns-worker-config's",
          "fences one of them"], "a Deployment of one pod with the ConfigMap's kafka.group.instance.id"),
        (workload("StatefulSet", by_name, consumer={"properties": {INSTANCE_ID: "w"}}),
         ["configmap.yaml: StatefulSet apns-worker: group.instance.id 'w' (consumer.properties",
          "for the 3 pods of the StatefulSet"], "consumer.properties, which wins over the pod's name"),
        (workload("StatefulSet", literal("w"), replicas=1, scaler=12),
         ["which ScaledObject apns-worker scales up to 12"], "a StatefulSet of one pod that KEDA scales"),
        (workload("StatefulSet", [{"name": INSTANCE_ID_VARIABLE, "value": "$(POD_NAME)"}] + pod_name),
         ["characters '$' '(' ')' are not allowed", "for the 3 pods"], "$(POD_NAME) before POD_NAME is defined"),
        (workload("StatefulSet", [{"name": INSTANCE_ID_VARIABLE,
                                   "valueFrom": {"secretKeyRef": {"name": "s", "key": "id"}}}]),
         ["'<secretKeyRef s/id>'", "for the 3 pods"], "an instance id from a Secret, the same in every pod"),
        (workload("Deployment", by_name),
         ["from the pod's metadata.name", "a Deployment's pods are replaced under new names"],
         "a Deployment taking it from its pods' (changing) names"),
        (workload("StatefulSet", literal("apns worker/0"), replicas=1), ["characters ' ' '/' are not allowed"],
         "an invalid literal"),
        (workload("StatefulSet", literal(".."), replicas=1), ["'..' is not allowed"], "'..'"),
        (workload("StatefulSet", literal(""), replicas=1), ["it is empty"], "an empty instance id"),
        (workload("StatefulSet", literal("a" * 250), replicas=1), ["250 characters, more than 249"], "250 characters"),
        (workload("StatefulSet", literal("a" * 245), replicas=1,
                  consumer={"lanes": {"urgent": {"topics": ["notifications"]}}}),
         ["the urgent lane's member is 252 characters with '-urgent'"], "245 characters and an urgent lane"),
        (workload("StatefulSet", pod_name + [{"name": INSTANCE_ID_VARIABLE, "value": "x-$(POD_NAME)_y!"}]),
         ["its literal part '_y!'", "characters '!' are not allowed"], "an invalid literal around the pod's name"),
        (workload("StatefulSet", by_name), [], "a StatefulSet taking it from metadata.name"),
        (workload("StatefulSet", pod_name + [{"name": INSTANCE_ID_VARIABLE, "value": "apns.$(POD_NAME)"}],
                  kafka={INSTANCE_ID: "overridden"}, scaler=12),
         [], "a StatefulSet taking it from metadata.name through $(POD_NAME), over the ConfigMap's kafka one"),
        (workload("StatefulSet", literal("apns-worker-a"), replicas=1), [], "a StatefulSet of one pod, a literal"),
        (workload("StatefulSet", literal("a" * 242), replicas=1,
                  consumer={"lanes": {"urgent": {"topics": ["notifications"]}}}), [], "242 characters and '-urgent'"),
        (workload("Deployment", literal("$$(POD_NAME)") + pod_name, replicas=1), ["'$(POD_NAME)'", "'$' '(' ')'"],
         "$$ escapes a reference"),
        (workload("Deployment"), [], "no instance id"),
    ):
        problems = []
        check_instance_ids(objects, problems)
        if not expected:
            expect(problems == [], f"instance id accepted: {what} (got {problems})")
        else:
            expect(problems and all(any(e in p for p in problems) for e in expected),
                   f"instance id refused: {what}: expected {expected}, got {problems}")
    problems = []
    found = check_instance_ids(workload("StatefulSet", by_name), problems)
    expect(found == {("StatefulSet", "apns-worker"): {"apns-worker": "stable"}}, f"stable instance ids: {found}")
    expect(expand_value("a-$(X)-$(Y)$$(X)", {"X": [("field", "metadata.name")]})
           == [("text", "a-"), ("field", "metadata.name"), ("text", "-$(Y)$(X)")], "$(VAR) expansion")

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
    check_renderings(documents, problems, binary)
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
