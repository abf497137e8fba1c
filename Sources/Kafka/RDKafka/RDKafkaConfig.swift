internal import CRdKafka

/// An `rd_kafka_conf_t` being filled in. Owned until `rd_kafka_new` takes it (`release()`); freed in
/// `deinit` otherwise. Never shared across threads.
final class RDKafkaConfig {
    private var pointer: OpaquePointer?

    /// Applies `properties` in order; the first one librdkafka refuses becomes an error naming it.
    init(properties: [(String, String)]) throws(KafkaError) {
        let conf = rd_kafka_conf_new()!
        self.pointer = conf
        for (key, value) in properties {
            var errstr = [CChar](repeating: 0, count: 512)
            let result = rd_kafka_conf_set(conf, key, value, &errstr, errstr.count)
            guard result == RD_KAFKA_CONF_OK else {
                let reason = String(errorBuffer: errstr)
                throw KafkaError.invalidConfiguration(key, Self.redact(reason, value: value, key: key))
            }
        }
    }

    deinit {
        if let pointer { rd_kafka_conf_destroy(pointer) }
    }

    /// The property's value as librdkafka prints it (its canonical spelling: `-1` for `acks=all`,
    /// `smallest` for `earliest`), whichever of its names or synonyms set it; `nil` for a name it
    /// does not know.
    func value(of name: String) -> String? {
        var size = 0
        guard rd_kafka_conf_get(pointer!, name, nil, &size) == RD_KAFKA_CONF_OK else { return nil }
        var buffer = [CChar](repeating: 0, count: size + 1)
        guard rd_kafka_conf_get(pointer!, name, &buffer, &size) == RD_KAFKA_CONF_OK else { return nil }
        return String(errorBuffer: buffer)
    }

    /// Scoped access for `rd_kafka_conf_set_*` calls before the handle is created.
    func withPointer<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T {
        try body(pointer!)
    }

    /// Hands the configuration to `rd_kafka_new`, which owns it from then on if it succeeds.
    func release() -> OpaquePointer {
        defer { pointer = nil }
        return pointer!
    }

    /// librdkafka quotes a bad value in its message; a secret (`sasl.password`, `ssl.key.password`, …)
    /// must not reach a log that way.
    static func redact(_ reason: String, value: String, key: String) -> String {
        let secretish = ["password", "secret", "token", "key"].contains { key.contains($0) }
        guard secretish, !value.isEmpty else { return reason }
        return reason.replacingOccurrences(of: value, with: "<redacted>")
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        var result = ""
        var rest = self[...]
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}

extension String {
    /// The text librdkafka wrote into an `errstr` buffer (NUL-terminated within it).
    init(errorBuffer buffer: [CChar]) {
        let length = buffer.firstIndex(of: 0) ?? buffer.count
        self = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
