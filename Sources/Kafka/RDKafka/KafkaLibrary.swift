internal import CRdKafka

/// The librdkafka this process runs with, and the one it was compiled against. They differ when the
/// dynamic loader found another `librdkafka.so.1` than the headers' (a binary built by `make` has
/// the run path of the one it built: docs/kafka.md, "Which librdkafka").
package enum KafkaLibrary {
    /// `rd_kafka_version_str()` of the loaded library, e.g. `2.14.2`.
    package static var version: String { String(cString: rd_kafka_version_str()) }

    /// `rd_kafka_version()` of the loaded library: `0xMMmmrrxx` (major, minor, revision, pre-release
    /// id, `0xff` for a final release).
    package static var versionNumber: Int { Int(rd_kafka_version()) }

    /// `RD_KAFKA_VERSION` of the headers the module was compiled against.
    package static let compiledVersionNumber = Int(RD_KAFKA_VERSION)

    /// The oldest librdkafka supported (Sources/CRdKafka/shim.h refuses older headers at build time).
    package static let minimumVersionNumber = 0x020e_02ff

    /// `major.minor.revision` of a `0xMMmmrrxx` number.
    package static func describe(_ number: Int) -> String {
        "\((number >> 24) & 0xff).\((number >> 16) & 0xff).\((number >> 8) & 0xff)"
    }

    /// Why the loaded librdkafka cannot be used (older than `minimumVersionNumber`: the dynamic
    /// loader found another `librdkafka.so.1` than the one the binary was built with), or `nil`.
    package static func refusal(loaded: Int = versionNumber, compiled: Int = compiledVersionNumber) -> String? {
        guard loaded < minimumVersionNumber else { return nil }
        return "librdkafka \(describe(loaded)) is loaded, and apns-worker needs \(describe(minimumVersionNumber)) or "
            + "later (it was built against \(describe(compiled))): the dynamic loader found another librdkafka.so.1 "
            + "(LD_LIBRARY_PATH, or an older librdkafka1 package where the binary runs); install librdkafka1 "
            + "\(describe(minimumVersionNumber)) or later, or run the binary with the library it was built with"
    }
}
