// swift-tools-version:6.1
// apns-worker: Kafka in, APNs out. See docs/ and ../shared/DESIGN.md for the architecture.
import PackageDescription

// Swift 6 language mode: complete strict concurrency checking in every target.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "apns-worker",
    platforms: [.macOS(.v15)],
    products: [],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
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

        // MARK: Kafka (librdkafka wrapper)
        .target(
            name: "Kafka",
            dependencies: [
                "CRdKafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KafkaTests",
            dependencies: ["Kafka", "CSanitizerThreads"],
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
                "Kafka", "APNs",
                .product(name: "Logging", package: "swift-log"),
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
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "WorkerTests",
            dependencies: [
                "Worker", "Kafka", "APNs",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: APNs provider client
        .target(
            name: "APNs",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsTests",
            dependencies: ["APNs"],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
