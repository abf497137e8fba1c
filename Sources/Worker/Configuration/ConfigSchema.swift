/// The shape of the configuration, for matching `APNS_WORKER_*` variables to keys.
///
/// Decoding (`WorkerConfiguration+Decoding.swift`) is what checks keys and values; this tree only
/// has to know where a variable lands. A test walks every leaf so the two cannot drift apart.
indirect enum ConfigSchema {
    /// One value.
    case scalar
    /// A list; comma-separated in the environment.
    case list
    /// librdkafka properties: `_` → `.`, lowercased.
    case properties
    /// Not settable from the environment (credentials: through `keyEnv` / `passwordEnv` only).
    case fileOnly
    case section([(key: String, schema: ConfigSchema)])

    static let worker: ConfigSchema = .section([
        ("kafka", .properties),
        (
            "consumer",
            .section([
                ("group", .scalar), ("groupProtocol", .scalar), ("topics", .list), ("bufferCapacity", .scalar),
                ("bufferBytes", .scalar),
                ("stallAfter", .scalar), ("properties", .fileOnly),
            ])
        ),
        ("producer", .section([("deliveryTimeout", .scalar), ("properties", .fileOnly)])),
        ("topics", .section([("results", .scalar), ("deadLetters", .scalar)])),
        (
            "apns",
            .section([
                ("connectionsPerCredential", .scalar), ("requestTimeout", .scalar), ("eventLoopThreads", .scalar),
                ("caFile", .scalar), ("proxy", .scalar), ("collapseIdFromEventId", .scalar), ("tokenPeriod", .scalar),
                ("credentialReloadInterval", .scalar), ("connectionReplaceInterval", .scalar),
                (
                    "endpoints",
                    .section([
                        ("production", .section([("host", .scalar), ("port", .scalar)])),
                        ("development", .section([("host", .scalar), ("port", .scalar)])),
                    ])
                ),
                ("credentials", .fileOnly),
            ])
        ),
        (
            "delivery",
            .section([
                ("maxInFlight", .scalar), ("maxInFlightBytes", .scalar), ("maxInFlightPerCredential", .scalar),
                ("maxParked", .scalar), ("commitInterval", .scalar),
                (
                    "retry",
                    .section([
                        ("maxAttempts", .scalar), ("initialBackoff", .scalar), ("maxBackoff", .scalar),
                        ("maxRetryDuration", .scalar),
                    ])
                ),
                ("revocationTimeout", .scalar), ("shutdownTimeout", .scalar), ("maxEventAge", .scalar),
                ("maxRecordBytes", .scalar), ("publishBlockedLimit", .scalar), ("progressTopic", .scalar),
            ])
        ),
        ("http", .section([("host", .scalar), ("port", .scalar)])),
        ("logging", .section([("level", .scalar), ("format", .scalar)])),
        (
            "tracing",
            .section([("endpoint", .scalar), ("sampleRatio", .scalar), ("parent", .scalar), ("serviceName", .scalar)])
        ),
    ])

    /// `maxInFlight` → `MAX_IN_FLIGHT`.
    static func upperSnake(_ key: String) -> String {
        var result = ""
        for character in key {
            if character.isUppercase, !result.isEmpty { result.append("_") }
            result.append(contentsOf: character.uppercased())
        }
        return result
    }

    /// Every leaf's key path and kind, for tests and documentation.
    /// The candidate a misspelt `word` most likely meant: one that differs only in case, else the
    /// nearest within two edits (three for long words); `nil` when none is that near.
    static func closest(to word: String, among candidates: some Collection<String>) -> String? {
        // Keys and variable names are short; a long word is no misspelling (and costs its length
        // times each candidate's to compare).
        guard word.utf8.count <= 64 else { return nil }
        if let same = candidates.first(where: { $0.lowercased() == word.lowercased() }) { return same }
        let limit = word.count >= 12 ? 3 : 2
        return candidates.map { ($0, editDistance(word.lowercased(), $0.lowercased())) }
            .filter { $0.1 <= limit }
            .min { ($0.1, $0.0) < ($1.1, $1.0) }?.0
    }

    /// Levenshtein distance (keys are short).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    func leaves(prefix: [String] = []) -> [(path: [String], schema: ConfigSchema)] {
        guard case .section(let children) = self else { return [(prefix, self)] }
        return children.flatMap { $0.schema.leaves(prefix: prefix + [$0.key]) }
    }
}
