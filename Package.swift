// swift-tools-version:6.1
// apns-worker: Kafka in, APNs out. See README.md and docs/ for the architecture.
import PackageDescription

// Swift 6 language mode: complete strict concurrency checking in every target.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "apns-worker",
    platforms: [.macOS(.v15)],
    products: [
        // The worker.
        .executable(name: "apns-worker", targets: ["apns-worker"]),
        // The APNs provider client (HTTP/2 over nghttp2 and OpenSSL, token and certificate
        // credentials, connection pool, broadcasts and channel management, outcome table), usable
        // without the worker. Kafka, JSONSchema and Worker stay internal targets: their API is
        // shaped by the worker and may change in any release (docs/compatibility.md).
        .library(name: "APNs", targets: ["APNs"]),
        // The APNs simulator, for other projects' tests.
        .library(name: "APNsSimulator", targets: ["APNsSimulator"]),
        .executable(name: "apns-simulator", targets: ["apns-simulator"]),
    ],
    traits: [
        // `apns-worker demo` and `apns-worker dev`: the embedded stack (a mock Kafka cluster and the
        // APNs simulator, with its own TLS, HTTP/2 and crypto packages) linked into apns-worker. On by
        // default, so `swift build`, `make demo` and the tests have it; the container image builds
        // without it (`--disable-default-traits`): the production binary carries neither the
        // simulator nor its packages.
        .trait(
            name: "Demo",
            description: "apns-worker demo and dev: a mock Kafka cluster and the APNs simulator in-process"),
        .default(enabledTraits: ["Demo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The APNs simulator's stack: HTTP/2 + TLS + ECDSA independent of the client's
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // Tracing: the API the pipeline makes its spans with, and the OpenTelemetry SDK that exports
        // them over OTLP/HTTP (only that exporter: its gRPC one would add grpc-swift to the build).
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // MARK: C system libraries (module maps only; Debian packages named as providers)
        .systemLibrary(
            name: "CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]
        ),
        .systemLibrary(
            name: "CNghttp2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),

        // MARK: Threading (a lock ThreadSanitizer sees through; freeing objects on the thread that
        // allocated them), shared by the Kafka and APNs libraries, neither of which may depend on the other
        .target(
            name: "Threading",
            swiftSettings: swiftSettings
        ),

        // MARK: Kafka (librdkafka wrapper)
        .target(
            name: "Kafka",
            dependencies: [
                "CRdKafka",
                "Threading",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KafkaTests",
            dependencies: [
                "Kafka", "Threading", "CSanitizerThreads", "TestPeers", .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Test peers: a TCP proxy that breaks the network on purpose (and terminates TLS and SASL in
        // front of a broker that has neither), the Tansu broker behind it (and the S3 server it can
        // keep its data in), kcat on the tests' librdkafka, test-time certificates. Tests and the
        // reliability matrix only.
        .target(
            name: "TestPeers",
            dependencies: [
                "Threading",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            path: "Tests/TestPeers",
            swiftSettings: swiftSettings
        ),
        // Lets ThreadSanitizer see librdkafka's C11 threads (see its source). Tests only.
        .target(name: "CSanitizerThreads", path: "Tests/CSanitizerThreads"),

        .executableTarget(
            name: "KafkaBenchmark",
            dependencies: ["Kafka", .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/KafkaBenchmark",
            swiftSettings: swiftSettings
        ),

        // MARK: Worker (the pipeline)
        .target(
            name: "Worker",
            dependencies: [
                "Kafka", "APNs", "JSONSchema", "Threading",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                // Configuration file parsing (see docs/configuration.md for why not swift-configuration)
                .product(name: "Yams", package: "Yams"),
                // Operations endpoint: /metrics, /health/live, /health/ready
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // Spans per event (`tracing:`): the API only; the exporter is WorkerTelemetry's.
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            // The event schemas, compiled into the binary from schemas/ (the files here are symbolic
            // links to them): one copy of each contract.
            resources: [
                .embedInCode("Schemas/notification-event.schema.json"),
                .embedInCode("Schemas/result-event.schema.json"),
            ],
            swiftSettings: swiftSettings
        ),
        // Span export over OTLP/HTTP (swift-otel) for the programs that run a worker. Apart from Worker
        // so that what builds Worker alone (the fuzz targets' sanitized build) does not build the
        // OpenTelemetry SDK, AsyncHTTPClient and SwiftProtobuf.
        .target(
            name: "WorkerTelemetry",
            dependencies: [
                "Worker", "Threading",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ],
            swiftSettings: swiftSettings
        ),
        // The deterministic simulation of the pipeline's machine (Tests/SimulationTests): pure, no
        // peers, no threads; seeds from the environment (`make simulate`).
        .testTarget(
            name: "SimulationTests",
            dependencies: ["Worker", "Kafka", "APNs", "TestPeers"],
            // Deliberate defects the simulation must catch (scripts/mutations.sh), not sources.
            exclude: ["Mutations"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "WorkerTests",
            dependencies: [
                "Worker", "Kafka", "APNs", "JSONSchema", "TestPeers",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: APNs provider client
        .target(
            name: "APNs",
            dependencies: [
                "CNghttp2",
                "COpenSSL",
                "Threading",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "APNsClientBenchmark",
            dependencies: ["APNs", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            path: "Benchmarks/APNsClientBenchmark",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsTests",
            dependencies: [
                "APNs",
                "APNsSimulator",
                "Threading",
                "TestPeers",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // An HPACK decoder other than nghttp2's, to read what the client puts on the wire.
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: JSON Schema (generic draft-07 validator; knows nothing of APNs)
        .target(
            name: "JSONSchema",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "JSONSchemaTests",
            dependencies: ["JSONSchema"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "JSONSchemaBenchmark",
            dependencies: ["JSONSchema", "Worker"],
            path: "Benchmarks/JSONSchemaBenchmark",
            exclude: ["inputs", "jsonschema_bench.py"],
            swiftSettings: swiftSettings
        ),

        // End to end: mock Kafka + the simulator in a child process, the real worker in this one.
        .executableTarget(
            name: "WorkerBenchmark",
            dependencies: [
                "Worker", "WorkerTelemetry", "Kafka", "APNs", "APNsSimulator", "TestPeers",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Benchmarks/WorkerBenchmark",
            swiftSettings: swiftSettings
        ),

        // MARK: The embedded default (demo, dev): mock Kafka + the APNs simulator + the real pipeline
        .target(
            name: "WorkerDemo",
            dependencies: [
                "Worker", "WorkerTelemetry", "APNs", "Kafka", "APNsSimulator",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // The reliability matrix (`make reliability`): scenarios of things going wrong, each run on
        // a fresh stack, counted as downstream sees it. A short subset runs in WorkerIntegrationTests.
        .target(
            name: "ReliabilityMatrix",
            dependencies: [
                "Worker", "WorkerDemo", "Kafka", "APNsSimulator", "TestPeers",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/Reliability/Matrix",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "reliability",
            dependencies: [
                "ReliabilityMatrix", "TestPeers", "Kafka",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Reliability/Runner",
            swiftSettings: swiftSettings
        ),

        .testTarget(
            name: "WorkerIntegrationTests",
            dependencies: [
                "Worker", "WorkerTelemetry", "WorkerDemo", "Kafka", "APNs", "APNsSimulator", "TestPeers",
                "ReliabilityMatrix", "JSONSchema",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: The executable: CLI subcommands only, no logic
        .executableTarget(
            name: "apns-worker",
            dependencies: [
                "Worker", "WorkerTelemetry",
                .target(name: "WorkerDemo", condition: .when(traits: ["Demo"])),
                "APNs",
                "Kafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "apns-workerTests",
            dependencies: [
                "apns-worker", "Kafka", "TestPeers", "APNsSimulator",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: APNs simulator. Shares no code with APNs/Kafka/Worker or the C modules.
        .target(
            name: "APNsSimulator",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "apns-simulator",
            dependencies: [
                "APNsSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: [
                "TestPeers",
                "APNsSimulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Fuzz targets
        // libFuzzer targets: `make fuzz` builds them with -sanitize=fuzzer,address -DFUZZING and runs each;
        // in a normal build each executable replays the inputs it is given (docs/reliability.md).
        // The worker's own input surfaces (JSON, events, configuration, APNs answers) apart from the
        // simulator's: a sanitized build of these alone leaves out the simulator's stack (two BoringSSL
        // copies, swift-certificates, NIOHTTP2), about half of the fuzz build, which CI skips.
        .target(
            name: "FuzzTargets",
            dependencies: ["JSONSchema", "Worker", "Kafka", "APNs"],
            path: "Tests/Fuzz/FuzzTargets",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "FuzzSimulatorTarget",
            dependencies: [
                "FuzzTargets", "JSONSchema", "APNsSimulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/Fuzz/FuzzSimulatorTarget",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "FuzzJSON", dependencies: ["FuzzTargets"], path: "Tests/Fuzz/FuzzJSON", swiftSettings: swiftSettings),
        .executableTarget(
            name: "FuzzEventDecoder", dependencies: ["FuzzTargets"], path: "Tests/Fuzz/FuzzEventDecoder",
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "FuzzConfiguration", dependencies: ["FuzzTargets"], path: "Tests/Fuzz/FuzzConfiguration",
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "FuzzSimulator", dependencies: ["FuzzTargets", "FuzzSimulatorTarget"],
            path: "Tests/Fuzz/FuzzSimulator", swiftSettings: swiftSettings),
        .executableTarget(
            name: "FuzzAPNsResponse", dependencies: ["FuzzTargets"], path: "Tests/Fuzz/FuzzAPNsResponse",
            swiftSettings: swiftSettings),
        .testTarget(
            name: "FuzzCorpusTests",
            dependencies: ["FuzzTargets", "FuzzSimulatorTarget"],
            path: "Tests/Fuzz/FuzzCorpusTests",
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
