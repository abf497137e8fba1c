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
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
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

        // MARK: APNs provider client
        .target(
            name: "APNs",
            dependencies: [
                "CNghttp2",
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "APNsClientBenchmark",
            dependencies: ["APNs"],
            path: "Benchmarks/APNsClientBenchmark",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsTests",
            dependencies: [
                "APNs",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
