#!/usr/bin/python3
"""Checks deploy/ against itself and against the worker's operational contract.

Run: `make check-deploy` (or /usr/bin/python3 deploy/check.py). Needs only Python 3 and PyYAML
(Debian: python3-yaml). Exits 1 and names every problem found.

What it checks:
  1. Every .yaml/.yml/.json file under deploy/ parses (all documents of multi-document YAML), and the
     worker config inside the ConfigMap parses too.
  2. Every metric name in the alert rules and in the Grafana dashboard is one the worker exports
     (METRICS below, the table of the contract), or a listed external one (kube-state-metrics).
  3. The ConfigMap's config.yaml uses known keys only, has the required ones, and typed values
     (durations, integers, enums); the Deployment's APNS_WORKER_* variables name real keys.
  4. The pieces agree: ports, probe paths, config path, key file under a mounted Secret, grace
     period above delivery.shutdownTimeout, KEDA group/topic/bootstrap servers as in the config,
     maxReplicaCount and replicas within the partition count, selectors matching the pod labels,
     the pod security settings, every alert's annotations and runbook link: an absolute URL, one
     base shared by every alert, ending in docs/deployment.md#<a heading of docs/deployment.md>.
  5. If `promtool` (Debian: prometheus) is installed: `promtool check rules` on the alerts and on
     the dashboard's queries, and the alert unit tests in deploy/tests/; skipped with a notice
     otherwise.

`--spec FILE` also compares METRICS with the metrics table of a markdown spec (the contract).
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
    "apns_worker_apns_requests_total": ("counter", {"status", "reason"}),
    "apns_worker_apns_request_duration_seconds": ("histogram", set()),
    "apns_worker_event_duration_seconds": ("histogram", set()),
    "apns_worker_retries_total": ("counter", {"cause"}),
    "apns_worker_published_degraded_total": ("counter", {"topic", "reason"}),
    "apns_worker_in_flight_events": ("gauge", set()),
    "apns_worker_consumer_paused": ("gauge", set()),
    "apns_worker_consumer_lag": ("gauge", {"topic", "partition"}),
    "apns_worker_commits_total": ("counter", {"result"}),
    "apns_worker_credentials_broken": ("gauge", {"credential"}),
    "apns_worker_apns_connections": ("gauge", {"credential", "environment", "state"}),
    "apns_worker_apns_streams_in_use": ("gauge", {"credential", "environment"}),
    "apns_worker_apns_stream_capacity": ("gauge", {"credential", "environment"}),
    "apns_worker_apns_requests_waiting": ("gauge", {"credential", "environment"}),
}

# Series that are not the worker's but that the alerts may use.
EXTERNAL_METRICS = {
    "kube_deployment_status_replicas_unavailable",  # kube-state-metrics
    "kube_pod_container_status_restarts_total",  # kube-state-metrics
}


def exported_series():
    """Every series name the worker's metrics produce (histograms: _bucket, _sum, _count)."""
    names = set()
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
# The worker's config structure (docs/configuration.md, "Keys")
# ---------------------------------------------------------------------------------------------
DURATION = "duration"
INT = "int"
STR = "str"
STR_OR_NULL = "str?"
STR_LIST = "[str]"
FREE = "free"  # librdkafka properties: any key, scalar values


def enum(*values):
    return ("enum", values)


ENDPOINT = {"host": STR, "port": INT}
CONFIG_SCHEMA = {
    "kafka": FREE,
    "consumer": {
        "group": STR, "topics": STR_LIST, "bufferCapacity": INT, "bufferBytes": INT, "properties": FREE,
    },
    "producer": {"deliveryTimeout": DURATION, "properties": FREE},
    "topics": {"results": STR, "deadLetters": STR},
    "apns": {
        "connectionsPerCredential": INT,
        "requestTimeout": DURATION,
        "eventLoopThreads": INT,
        "caFile": STR_OR_NULL,
        "endpoints": {"production": ENDPOINT, "development": ENDPOINT},
        "credentials": "credentials",
    },
    "delivery": {
        "maxInFlight": INT,
        "maxInFlightBytes": INT,
        "commitInterval": DURATION,
        "retry": {
            "maxAttempts": INT,
            "initialBackoff": DURATION,
            "maxBackoff": DURATION,
            "maxRetryDuration": DURATION,
        },
        "revocationTimeout": DURATION,
        "shutdownTimeout": DURATION,
        "maxEventAge": DURATION,
        "maxRecordBytes": INT,
        "publishBlockedLimit": DURATION,
    },
    "http": {"host": STR, "port": INT},
    "logging": {
        "level": enum("trace", "debug", "info", "notice", "warning", "error", "critical"),
        "format": enum("json", "text"),
    },
}
CREDENTIAL_SCHEMA = {
    "name": STR, "topics": STR_LIST, "environment": enum("production", "development"), "token": {}, "certificate": {},
}
TOKEN_SCHEMA = {"teamId": STR, "keyId": STR, "keyFile": STR, "keyEnv": STR}
CERTIFICATE_SCHEMA = {
    "certificateFile": STR, "privateKeyFile": STR, "p12File": STR, "passwordEnv": STR,
}
REQUIRED = [
    ("kafka", "bootstrap.servers"),
    ("consumer", "topics"),
    ("topics", "results"),
    ("topics", "deadLetters"),
    ("apns", "credentials"),
]
DEFAULTS = {("consumer", "group"): "apns-worker", ("http", "port"): 8080}

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


def check_value(path, kind, value, problems):
    if isinstance(kind, dict):
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a mapping")
            return
        for key, sub in value.items():
            if key not in kind:
                problems.append(f"{path}.{key}: unknown key")
            else:
                check_value(f"{path}.{key}", kind[key], sub, problems)
    elif kind == FREE:
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a mapping of librdkafka properties")
            return
        for key, sub in value.items():
            if isinstance(sub, (dict, list)):
                problems.append(f"{path}.{key}: librdkafka property values are scalars")
    elif kind == DURATION:
        try:
            parse_duration(value)
        except ValueError:
            problems.append(f"{path}: expected a duration (\"200ms\", \"1.5s\", \"10m\" or seconds), got {value!r}")
    elif kind == INT:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{path}: expected an integer, got {value!r}")
    elif kind == STR:
        if not isinstance(value, str) or not value:
            problems.append(f"{path}: expected a non-empty string, got {value!r}")
    elif kind == STR_OR_NULL:
        if value is not None and not isinstance(value, str):
            problems.append(f"{path}: expected a string or null, got {value!r}")
    elif kind == STR_LIST:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            problems.append(f"{path}: expected a non-empty list of strings, got {value!r}")
    elif isinstance(kind, tuple) and kind[0] == "enum":
        if value not in kind[1]:
            problems.append(f"{path}: expected one of {', '.join(kind[1])}, got {value!r}")
    elif kind == "credentials":
        if not isinstance(value, list) or not value:
            problems.append(f"{path}: expected a non-empty list of credentials")
            return
        for index, credential in enumerate(value):
            check_credential(f"{path}[{index}]", credential, problems)
    else:
        raise AssertionError(kind)


def check_credential(path, credential, problems):
    if not isinstance(credential, dict):
        problems.append(f"{path}: expected a mapping")
        return
    for key in credential:
        if key not in CREDENTIAL_SCHEMA:
            problems.append(f"{path}.{key}: unknown key")
    for key in ("name", "topics"):
        if key not in credential:
            problems.append(f"{path}.{key}: missing (required)")
        else:
            check_value(f"{path}.{key}", CREDENTIAL_SCHEMA[key], credential[key], problems)
    if credential.get("environment") is not None:
        check_value(f"{path}.environment", CREDENTIAL_SCHEMA["environment"], credential["environment"], problems)
    kinds = [k for k in ("token", "certificate") if k in credential]
    if len(kinds) != 1:
        problems.append(f"{path}: exactly one of token, certificate")
        return
    if "token" in credential:
        token = credential["token"]
        check_value(f"{path}.token", TOKEN_SCHEMA, token, problems)
        if isinstance(token, dict):
            for key in ("teamId", "keyId"):
                if key not in token:
                    problems.append(f"{path}.token.{key}: missing (required)")
            if ("keyFile" in token) == ("keyEnv" in token):
                problems.append(f"{path}.token: exactly one of keyFile, keyEnv")
    else:
        certificate = credential["certificate"]
        check_value(f"{path}.certificate", CERTIFICATE_SCHEMA, certificate, problems)
        if isinstance(certificate, dict):
            pem = "certificateFile" in certificate and "privateKeyFile" in certificate
            p12 = "p12File" in certificate
            if pem == p12:
                problems.append(f"{path}.certificate: certificateFile + privateKeyFile, or p12File")


def check_config(where, config, problems):
    if not isinstance(config, dict):
        problems.append(f"{where}: the config is not a mapping")
        return
    check_value(where, CONFIG_SCHEMA, config, problems)
    for section, key in REQUIRED:
        if key not in (config.get(section) or {}):
            problems.append(f"{where}.{section}.{key}: missing (required)")
    topics = config.get("topics") or {}
    inputs = (config.get("consumer") or {}).get("topics") or []
    for key in ("results", "deadLetters"):
        if topics.get(key) is not None and topics.get(key) in inputs:
            problems.append(f"{where}.topics.{key}: {topics[key]!r} is also an input topic (the worker refuses it)")
    if topics.get("results") is not None and topics.get("results") == topics.get("deadLetters"):
        problems.append(f"{where}.topics.deadLetters: must differ from topics.results (the worker refuses it)")


def config_value(config, *path):
    value = config
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return DEFAULTS.get(path)
        value = value[key]
    return value


def camel_to_upper_snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def env_override_names():
    """APNS_WORKER_<SECTION>_<KEY> for every overridable leaf (not kafka, not credentials)."""
    names = set()

    def walk(prefix, schema):
        for key, kind in schema.items():
            if key in ("credentials", "properties"):
                continue
            name = prefix + "_" + camel_to_upper_snake(key)
            if isinstance(kind, dict):
                walk(name, kind)
            else:
                names.add(name)

    for section, schema in CONFIG_SCHEMA.items():
        if isinstance(schema, dict):
            walk("APNS_WORKER_" + section.upper(), schema)
    return names


def check_env_name(where, name, problems):
    if not name.startswith("APNS_WORKER_"):
        return
    if name.startswith("APNS_WORKER_KAFKA_"):
        if name == "APNS_WORKER_KAFKA_" or not re.match(r"^[A-Z0-9_]+$", name):
            problems.append(f"{where}: {name} names no librdkafka property")
        return
    if name not in env_override_names():
        problems.append(f"{where}: {name} matches no config key (the worker refuses to start)")


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
def check_kubernetes(documents, problems):
    objects = resources(documents)

    def get(kind, name):
        item = objects.get((kind, name))
        if item is None:
            problems.append(f"deploy/kubernetes: no {kind} {name}")
        return item

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

    configmap = get("ConfigMap", "apns-worker-config")
    deployment = get("Deployment", "apns-worker")
    scaled = get("ScaledObject", "apns-worker")
    if not (configmap and deployment):
        return

    # --- the worker config ---
    config_text = configmap[1].get("data", {}).get("config.yaml")
    if config_text is None:
        problems.append("ConfigMap apns-worker-config: no config.yaml")
        return
    try:
        config = yaml.safe_load(config_text)
    except yaml.YAMLError as error:
        problems.append(f"ConfigMap apns-worker-config config.yaml: does not parse: {error}")
        return
    check_config("config.yaml", config, problems)
    if not isinstance(config, dict):
        return

    # --- the Deployment ---
    spec = deployment[1]["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"].get("labels", {})
    if not selector_matches(spec["selector"].get("matchLabels"), pod_labels):
        problems.append("Deployment: selector does not match the pod template's labels")
    containers = [c for c in pod["containers"] if c["name"] == "apns-worker"]
    if not containers:
        problems.append("Deployment: no container apns-worker")
        return
    container = containers[0]

    http_port = config_value(config, "http", "port")
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    if ports.get("http") != http_port:
        problems.append(f"Deployment: container port http {ports.get('http')} != config http.port {http_port}")
    annotations = spec["template"]["metadata"].get("annotations", {})
    if annotations.get("prometheus.io/port") != str(http_port):
        problems.append("Deployment: prometheus.io/port annotation != config http.port")
    if annotations.get("prometheus.io/path") != "/metrics":
        problems.append("Deployment: prometheus.io/path annotation is not /metrics")

    for probe, path in (("livenessProbe", "/health/live"), ("readinessProbe", "/health/ready"),
                        ("startupProbe", "/health/live")):
        got = (container.get(probe) or {}).get("httpGet", {})
        if got.get("path") != path or got.get("port") not in ("http", http_port):
            problems.append(f"Deployment: {probe} should GET {path} on the http port")

    # config file path: args (or the image's CMD) -> a mounted ConfigMap
    args = container.get("args") or ["run", "--config", "/etc/apns-worker/config.yaml"]
    config_path = args[args.index("--config") + 1] if "--config" in args else None
    mounts = {m["name"]: m for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}

    def mounted_from(file_path):
        for name, mount in mounts.items():
            root = mount["mountPath"].rstrip("/") + "/"
            if file_path.startswith(root):
                return volumes.get(name), file_path[len(root):], mount
        return None, None, None

    volume, relative, _ = mounted_from(config_path or "")
    if not volume or volume.get("configMap", {}).get("name") != "apns-worker-config":
        problems.append(f"Deployment: --config {config_path} is not in a mount of ConfigMap apns-worker-config")
    elif relative not in [i["path"] for i in volume["configMap"].get("items", [{"path": "config.yaml"}])]:
        problems.append(f"Deployment: {config_path} is not a file of the config volume")
    dockerfile = os.path.join(HERE, "Dockerfile")
    if os.path.exists(dockerfile):
        with open(dockerfile, encoding="utf-8") as handle:
            text = handle.read()
        cmd = re.search(r"^CMD\s+(\[.*\])\s*$", text, re.M)
        if not cmd or json.loads(cmd.group(1)) != args:
            problems.append("Dockerfile CMD and the Deployment's args differ")
        if f"EXPOSE {http_port}" not in text:
            problems.append(f"Dockerfile: no EXPOSE {http_port}")
        if not re.search(r'^ENTRYPOINT \["apns-worker"\]\s*$', text, re.M):
            problems.append('Dockerfile: ENTRYPOINT is not ["apns-worker"]')
        user = re.findall(r"^USER\s+(\S+)", text, re.M)
        if not user or user[-1].split(":")[0] in ("root", "0"):
            problems.append("Dockerfile: the last USER must be a non-root user")
        elif str(pod.get("securityContext", {}).get("runAsUser")) != user[-1].split(":")[0]:
            problems.append("Deployment: runAsUser differs from the Dockerfile's USER")

    # every token key file lies in a read-only mount of a Secret
    for index, credential in enumerate(config.get("apns", {}).get("credentials") or []):
        for section, keys in (("token", ("keyFile",)),
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
                items = volume["secret"].get("items")
                if items is not None and relative not in [i["path"] for i in items]:
                    problems.append(f"{where}: not one of the Secret volume's items")

    # environment overrides name real keys; secrets come from Secrets
    for variable in container.get("env", []):
        check_env_name(f"Deployment env {variable['name']}", variable["name"], problems)
        if re.search(r"PASSWORD|SECRET", variable["name"]) and "value" in variable:
            problems.append(f"Deployment env {variable['name']}: a secret as a literal value")
    kafka = config.get("kafka") or {}
    for key in kafka:
        if re.search(r"password|secret", key):
            problems.append(f"config.yaml kafka.{key}: secrets come from a Secret, not the ConfigMap")

    # graceful shutdown
    shutdown = parse_duration(config_value(config, "delivery", "shutdownTimeout") or "30s")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if grace < shutdown + 10:
        problems.append(
            f"Deployment: terminationGracePeriodSeconds {grace} should exceed delivery.shutdownTimeout "
            f"({shutdown:g}s) by at least 10 s (flush, commit, leave the group)")

    # security
    pod_security = pod.get("securityContext", {})
    security = container.get("securityContext", {})
    if not (pod_security.get("runAsNonRoot") or security.get("runAsNonRoot")):
        problems.append("Deployment: runAsNonRoot is not set")
    if not security.get("readOnlyRootFilesystem"):
        problems.append("Deployment: readOnlyRootFilesystem is not set")
    if security.get("allowPrivilegeEscalation") is not False:
        problems.append("Deployment: allowPrivilegeEscalation is not false")
    if (security.get("capabilities") or {}).get("drop") != ["ALL"]:
        problems.append("Deployment: capabilities do not drop ALL")
    seccomp = (security.get("seccompProfile") or pod_security.get("seccompProfile") or {}).get("type")
    if seccomp != "RuntimeDefault":
        problems.append("Deployment: seccompProfile is not RuntimeDefault")
    limits = (container.get("resources") or {}).get("limits", {})
    requests = (container.get("resources") or {}).get("requests", {})
    if not (limits.get("memory") and requests.get("memory") and requests.get("cpu")):
        problems.append("Deployment: memory request/limit and cpu request are required")
    zones = [t for t in pod.get("topologySpreadConstraints", [])
             if t.get("topologyKey") == "topology.kubernetes.io/zone"]
    if not zones or not all(selector_matches(t["labelSelector"].get("matchLabels"), pod_labels) for t in zones):
        problems.append("Deployment: no zone topology spread over the pod's own labels")

    # Service, PDB
    for kind in ("Service", "PodDisruptionBudget"):
        item = get(kind, "apns-worker")
        if item:
            selector = item[1]["spec"]["selector"]
            selector = selector.get("matchLabels", selector) if kind == "PodDisruptionBudget" else selector
            if not selector or not selector_matches(selector, pod_labels):
                problems.append(f"{kind} apns-worker: selector does not match the pods")
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
        problems.append(f"Deployment: replicas {spec.get('replicas')} > {partitions} partitions")
    if not low <= spec.get("replicas", 1) <= high:
        problems.append("Deployment: replicas outside the ScaledObject's min..max")
    target = scaled_spec.get("scaleTargetRef", {})
    if (target.get("kind", "Deployment"), target.get("name")) != ("Deployment", "apns-worker"):
        problems.append("ScaledObject: scaleTargetRef is not Deployment apns-worker")
    triggers = [t for t in scaled_spec.get("triggers", []) if t.get("type") == "kafka"]
    if not triggers:
        problems.append("ScaledObject: no kafka trigger")
        return
    meta = triggers[0]["metadata"]
    if meta.get("consumerGroup") != config_value(config, "consumer", "group"):
        problems.append("ScaledObject: consumerGroup differs from consumer.group")
    if meta.get("topic") not in (config.get("consumer") or {}).get("topics", []):
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
def self_test():
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

    base = {
        "kafka": {"bootstrap.servers": "k:9092"},
        "consumer": {"topics": ["n"]},
        "topics": {"results": "r", "deadLetters": "d"},
        "apns": {"credentials": [{"name": "a", "topics": ["x"], "token": {
            "teamId": "T", "keyId": "K", "keyFile": "/k.p8"}}]},
    }
    problems = []
    check_config("c", base, problems)
    expect(problems == [], f"minimal config accepted: {problems}")
    fuller = json.loads(json.dumps(base))
    fuller["apns"]["eventLoopThreads"] = 2
    fuller["apns"]["credentials"][0]["environment"] = "development"
    problems = []
    check_config("c", fuller, problems)
    expect(problems == [], f"eventLoopThreads and a credential's environment accepted: {problems}")
    for mutate, what in (
        (lambda c: c["delivery"].update(retry={"maxAtempts": 3}), "c.delivery.retry.maxAtempts: unknown key"),
        (lambda c: c["delivery"].update(shutdownTimeout="30 seconds"), "c.delivery.shutdownTimeout: expected a duration"),
        (lambda c: c["topics"].pop("results"), "c.topics.results: missing"),
        (lambda c: c["apns"]["credentials"][0]["token"].update(keyEnv="K"), "exactly one of keyFile, keyEnv"),
        (lambda c: c["logging"].update(format="yaml"), "c.logging.format: expected one of"),
        (lambda c: c["delivery"].update(maxInFlight="2000"), "c.delivery.maxInFlight: expected an integer"),
        (lambda c: c["apns"]["credentials"][0].update(environment="sandbox"),
         "c.apns.credentials[0].environment: expected one of"),
        (lambda c: c["topics"].update(results="n"), "c.topics.results: 'n' is also an input topic"),
        (lambda c: c["topics"].update(deadLetters="r"), "c.topics.deadLetters: must differ from topics.results"),
    ):
        config = json.loads(json.dumps(base))
        config.setdefault("delivery", {})
        config.setdefault("logging", {})
        mutate(config)
        problems = []
        check_config("c", config, problems)
        expect(any(what in p for p in problems), f"config problem not caught: {what} (got {problems})")

    problems = []
    for name in ("APNS_WORKER_DELIVERY_MAX_IN_FLIGHT", "APNS_WORKER_HTTP_PORT",
                 "APNS_WORKER_DELIVERY_RETRY_MAX_ATTEMPTS", "APNS_WORKER_KAFKA_SASL_PASSWORD",
                 "APNS_WORKER_APNS_EVENT_LOOP_THREADS"):
        check_env_name("e", name, problems)
    expect(problems == [], f"spec's env examples accepted: {problems}")
    check_env_name("e", "APNS_WORKER_DELIVERY_MAX_INFLIGHT", problems)
    expect(len(problems) == 1, "unknown env override caught")
    expect(parse_duration("1.5s") == 1.5 and parse_duration("200ms") == 0.2 and parse_duration(3) == 3.0,
           "durations")

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

    failures = self_test()
    if failures:
        for failure in failures:
            print(f"check.py self-test FAILED: {failure}")
        return 1
    if arguments.self_test:
        print("check.py self-test: passed")
        return 0

    problems, notices = [], []
    documents = load_files(problems)
    check_kubernetes(documents, problems)
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
