import Foundation
import Kafka

/// Every problem found in one configuration file, in the order found (the file's, section by
/// section), so that `check` and `run` list them all at once instead of one per run.
final class ConfigProblems {
    private(set) var all: [ConfigurationError] = []

    func record(_ problem: ConfigurationError) { all.append(problem) }

    /// Every problem in the file's order (problems without a line, from the environment, last;
    /// those on one line in the order found).
    var inFileOrder: [ConfigurationError] {
        all.enumerated().sorted { ($0.element.line ?? Int.max, $0.offset) < ($1.element.line ?? Int.max, $1.offset) }
            .map(\.element)
    }
}

/// Typed, checked reads from one mapping of the configuration tree.
///
/// A read that finds a problem records it in `problems` and gives `nil`, so decoding goes on and
/// every problem of the file is found in one pass; the caller then uses the default (the
/// configuration is thrown away when there is any problem). Every key read is remembered;
/// `finish()` then reports each key nobody read as unknown, so a typo (`maxAtempts`) is an error
/// instead of a silently ignored setting.
struct ConfigSection {
    let file: String
    let path: String
    let node: ConfigNode
    let problems: ConfigProblems
    private let pairs: [(key: String, value: ConfigNode)]
    private var read: Set<String> = []

    init(_ node: ConfigNode, file: String, path: String, problems: ConfigProblems) throws(ConfigurationError) {
        guard case .mapping(let pairs) = node.value else {
            throw ConfigurationError(
                code: .invalidValue, file: file, keyPath: path, line: node.line,
                environmentVariable: node.environmentVariable, message: "expected a mapping, found \(node.typeName)")
        }
        self.file = file
        self.path = path
        self.node = node
        self.problems = problems
        self.pairs = pairs
    }

    /// Records a problem found by the caller (a rule across keys, a duplicate name).
    func report(_ problem: ConfigurationError) {
        problems.record(problem)
    }

    /// Runs a checked read; its problem is recorded and the read gives `nil`.
    private static func recording<T>(_ problems: ConfigProblems, _ body: () throws(ConfigurationError) -> T?) -> T? {
        do {
            return try body()
        } catch {
            problems.record(error)
            return nil
        }
    }

    func keyPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The value of `key`, `nil` when absent or null (null means "use the default").
    mutating func node(_ key: String) -> ConfigNode? {
        read.insert(key)
        guard let node = pairs.first(where: { $0.key == key })?.value, !node.isNull else { return nil }
        return node
    }

    func error(_ key: String, _ node: ConfigNode?, _ message: String, code: ConfigurationError.Code = .invalidValue)
        -> ConfigurationError
    {
        var message = message
        // A key missing beside one that looks like it misspelt: say so where the error is read.
        if code == .missingKey, node == nil,
            let near = ConfigSchema.closest(to: key, among: pairs.map(\.key).filter { $0 != key }),
            let found = pairs.first(where: { $0.key == near })
        {
            let place = found.value.line.map { "line \($0) has" } ?? "found"
            message += " (\(place) \(near): did you mean \(key)?)"
        }
        return ConfigurationError(
            code: code, file: file, keyPath: keyPath(key), line: node?.line ?? self.node.line,
            environmentVariable: node?.environmentVariable, message: message)
    }

    /// Quotes a bad value in an error unless the key looks like a secret.
    private func shown(_ key: String, _ text: String) -> String {
        ConfigSecrets.isSecret(key: keyPath(key)) ? "<redacted>" : "\"\(text)\""
    }

    private mutating func checkedScalar(_ key: String) throws(ConfigurationError) -> String? {
        guard let node = node(key) else { return nil }
        guard case .scalar(let text, _) = node.value else {
            throw error(key, node, "expected a single value, found \(node.typeName)")
        }
        return text
    }

    mutating func scalar(_ key: String) -> String? {
        Self.recording(problems) { () throws(ConfigurationError) in try checkedScalar(key) }
    }

    /// `value`, or `nil` after recording that `key` is missing (when it is not there at all: a
    /// value there that was refused has its own problem already).
    mutating func required<T>(_ key: String, _ value: T?) -> T? {
        if value == nil, node(key) == nil { report(error(key, nil, "required key is missing", code: .missingKey)) }
        return value
    }

    mutating func string(_ key: String) -> String? {
        Self.recording(problems) { () throws(ConfigurationError) in
            guard let text = try checkedScalar(key) else { return nil }
            guard !text.isEmpty else { throw error(key, node(key), "expected a non-empty string") }
            return text
        }
    }

    mutating func bool(_ key: String) -> Bool? {
        Self.recording(problems) { () throws(ConfigurationError) in
            guard let text = try checkedScalar(key) else { return nil }
            switch text {
            case "true": return true
            case "false": return false
            default: throw error(key, node(key), "expected true or false, found \(shown(key, text))")
            }
        }
    }

    /// An integer within `range`. Every number of the file has a finite range, so that nothing the
    /// file accepts can overflow what the worker computes from it at start.
    mutating func int(_ key: String, in range: ClosedRange<Int>) -> Int? {
        Self.recording(problems) { () throws(ConfigurationError) in
            guard let text = try checkedScalar(key) else { return nil }
            guard let value = Int(text.replacingOccurrences(of: "_", with: "")), range.contains(value) else {
                throw error(
                    key, node(key),
                    "expected an integer from \(range.lowerBound) to \(range.upperBound), found \(shown(key, text))")
            }
            return value
        }
    }

    /// A number from 0 to 1 (`0.25`, `1`).
    mutating func fraction(_ key: String) -> Double? {
        Self.recording(problems) { () throws(ConfigurationError) in
            guard let text = try checkedScalar(key) else { return nil }
            guard let value = Double(text), value.isFinite, (0...1).contains(value) else {
                throw error(key, node(key), "expected a number from 0 to 1 such as 0.1, found \(shown(key, text))")
            }
            return value
        }
    }

    /// A duration above zero (or zero, with `allowZero`) and at most `max`.
    mutating func duration(_ key: String, allowZero: Bool = false, max: Duration) -> Duration? {
        Self.recording(problems) { () throws(ConfigurationError) in
            guard let text = try checkedScalar(key) else { return nil }
            guard let value = ConfigDuration.parse(text), value > .zero || (allowZero && value == .zero),
                value <= max
            else {
                throw error(
                    key, node(key),
                    "expected a \(allowZero ? "" : "positive ")duration up to \(ConfigDuration.format(max)) such as \"200ms\", \"1.5s\", \"10m\", \"1h\" or a number of seconds, found \(shown(key, text))"
                )
            }
            return value
        }
    }

    mutating func choice<T: RawRepresentable<String>>(_ key: String, _ all: [T]) -> T? {
        Self.recording(problems) { () throws(ConfigurationError) in
            guard let text = try checkedScalar(key) else { return nil }
            guard let value = T(rawValue: text) else {
                throw error(
                    key, node(key),
                    "expected one of \(all.map(\.rawValue).joined(separator: ", ")), found \(shown(key, text))")
            }
            return value
        }
    }

    /// A list of non-empty strings; a single string counts as a list of one.
    mutating func stringList(_ key: String) -> [String]? {
        Self.recording(problems) { () throws(ConfigurationError) in try checkedStringList(key) }
    }

    private mutating func checkedStringList(_ key: String) throws(ConfigurationError) -> [String]? {
        guard let node = node(key) else { return nil }
        switch node.value {
        case .scalar(let text, _):
            guard !text.isEmpty else { throw error(key, node, "expected a list of non-empty strings") }
            return [text]
        case .sequence(let items):
            var strings: [String] = []
            for (index, item) in items.enumerated() {
                guard case .scalar(let text, isNull: false) = item.value, !text.isEmpty else {
                    throw ConfigurationError(
                        code: .invalidValue, file: file, keyPath: "\(keyPath(key))[\(index)]",
                        line: item.line ?? node.line, environmentVariable: node.environmentVariable,
                        message: "expected a non-empty string, found \(item.typeName)")
                }
                strings.append(text)
            }
            return strings
        case .mapping:
            throw error(key, node, "expected a list of strings, found a mapping")
        }
    }

    /// A free-form `string: scalar` mapping (librdkafka properties): keys are not checked, values
    /// are passed on as written (`true`, `5000`).
    mutating func properties(_ key: String) -> [String: String]? {
        guard let node = node(key) else { return nil }
        return Self.recording(problems) { () throws(ConfigurationError) in
            try ConfigSection.properties(node, file: file, path: keyPath(key), problems: problems)
        }
    }

    /// A librdkafka property the worker's at-least-once guarantee rests on, the values it may take,
    /// and why.
    struct GuardedProperty: Sendable {
        var name: String
        var allowed: [String]
        var reason: String
    }

    static let guardedProperties: [GuardedProperty] = [
        GuardedProperty(
            name: "enable.auto.commit", allowed: ["false"], reason: "offsets are committed only for finished events"),
        GuardedProperty(
            name: "enable.auto.offset.store", allowed: ["false"],
            reason: "offsets are committed only for finished events"),
        GuardedProperty(
            name: "enable.idempotence", allowed: ["true"],
            reason: "results are produced idempotently, never stored twice"),
        GuardedProperty(
            name: "acks", allowed: ["all", "-1"], reason: "a result counts as stored once every in-sync replica has it"),
        GuardedProperty(
            name: "isolation.level", allowed: ["read_committed"],
            reason: "read_uncommitted would push the events of aborted transactions"),
        GuardedProperty(
            name: "auto.offset.reset", allowed: ["earliest", "error"],
            reason:
                "latest (largest, end) would skip, without a result, what a new group or a partition reset to its end would read"
        ),
    ]

    /// A librdkafka property the worker sets from a key of its own configuration: that key is its one
    /// source, so the property map may not set it (under any of librdkafka's names for it).
    struct OwnedProperty: Sendable {
        var name: String
        /// The configuration key that sets it.
        var key: String
        var reason: String
        /// A value librdkafka takes, used to see whether another name writes this property.
        var probe: String
    }

    static let ownedProperties: [OwnedProperty] = [
        OwnedProperty(
            name: "group.id", key: "consumer.group",
            reason:
                "the worker's group, its replay cursors' groups and check's probe group are all named from consumer.group; "
                + "a group.id beside it would move the worker alone, and check's probe or a replay cursor would land in the "
                + "worker's own group",
            probe: "apns-worker-owned-probe"),
        OwnedProperty(
            name: "group.protocol", key: "consumer.groupProtocol",
            reason:
                "the worker leaves out of librdkafka's configuration what the broker owns under the next-generation "
                + "protocol, and the progress topic's readers and check's probe follow consumer.groupProtocol",
            probe: "consumer"),
        OwnedProperty(
            name: "message.timeout.ms", key: "producer.deliveryTimeout",
            reason: "the worker bounds its own waits for an acknowledgement on producer.deliveryTimeout",
            probe: "123457"),
    ]

    /// The owned property `key` sets, itself or through one of librdkafka's other names for it
    /// (`delivery.timeout.ms` is `message.timeout.ms`).
    static func ownedProperty(_ key: String, _ value: String) -> OwnedProperty? {
        ownedProperties.first { owned in
            guard key != owned.name else { return true }
            let before = KafkaPropertyReading.value(of: owned.name, after: [(owned.name, owned.probe)])
            let after = KafkaPropertyReading.value(of: owned.name, after: [(owned.name, owned.probe), (key, value)])
            return after != nil && after != before
        }
    }

    /// The guarded property `key` sets (itself, or through one of librdkafka's other names for it) to
    /// a value it may not take, as librdkafka reads it.
    static func guardViolation(_ key: String, _ value: String) -> GuardedProperty? {
        for guarded in guardedProperties {
            let permitted = Set(
                guarded.allowed.compactMap { KafkaPropertyReading.value(of: guarded.name, after: [(guarded.name, $0)]) }
            )
            // Set to a permitted value first, so that a key that does not touch the property leaves it permitted.
            guard
                let read = KafkaPropertyReading.value(
                    of: guarded.name, after: [(guarded.name, guarded.allowed[0]), (key, value)])
            else { continue }  // librdkafka refuses the value itself: its own check says so
            if !permitted.contains(read) { return guarded }
        }
        return nil
    }

    /// Each property checked on its own: a value that is not a scalar, or one that breaks a guarded
    /// property, is recorded in `problems` and left out; the mapping itself not being one throws.
    static func properties(_ node: ConfigNode, file: String, path: String, problems: ConfigProblems)
        throws(ConfigurationError) -> [String: String]
    {
        guard case .mapping(let pairs) = node.value else {
            throw ConfigurationError(
                code: .invalidValue, file: file, keyPath: path, line: node.line,
                environmentVariable: node.environmentVariable,
                message: "expected a mapping of librdkafka properties, found \(node.typeName)")
        }
        var result: [String: String] = [:]
        for (key, value) in pairs {
            guard case .scalar(let text, isNull: false) = value.value else {
                problems.record(
                    ConfigurationError(
                        code: .invalidValue, file: file, keyPath: "\(path).\(key)", line: value.line,
                        environmentVariable: value.environmentVariable,
                        message: "expected a single value for this librdkafka property, found \(value.typeName)"))
                continue
            }
            if let owned = ownedProperty(key, text) {
                let named = owned.name == key ? "" : " ('\(owned.name)', which librdkafka reads this property as)"
                problems.record(
                    ConfigurationError(
                        code: .invalidValue, file: file, keyPath: "\(path).\(key)", line: value.line,
                        environmentVariable: value.environmentVariable,
                        message:
                            "set \(owned.key) instead\(named): it is this property's one source, because \(owned.reason)"
                    ))
                continue
            }
            if let guarded = guardViolation(key, text) {
                let named =
                    guarded.name == key ? "this property" : "'\(guarded.name)', which librdkafka reads this property as"
                problems.record(
                    ConfigurationError(
                        code: .invalidValue, file: file, keyPath: "\(path).\(key)", line: value.line,
                        environmentVariable: value.environmentVariable,
                        message:
                            "the worker's at-least-once delivery rests on \(named): \(guarded.reason); it may only be "
                            + guarded.allowed.map { "\"\($0)\"" }.joined(separator: " or ") + ", found \"\(text)\""))
                continue
            }
            result[key] = text
        }
        return result
    }

    mutating func section(_ key: String) -> ConfigSection? {
        guard let node = node(key) else { return nil }
        return Self.recording(problems) { () throws(ConfigurationError) in
            try ConfigSection(node, file: file, path: keyPath(key), problems: problems)
        }
    }

    mutating func list(_ key: String) -> [ConfigNode]? {
        guard let node = node(key) else { return nil }
        guard case .sequence(let items) = node.value else {
            report(error(key, node, "expected a list, found \(node.typeName)"))
            return nil
        }
        return items
    }

    /// Reports each key that was never read.
    func finish() {
        for (key, value) in pairs where !read.contains(key) {
            let suggestion = ConfigSchema.closest(to: key, among: read).map { " (did you mean \($0)?)" } ?? ""
            report(
                ConfigurationError(
                    code: .unknownKey, file: file, keyPath: keyPath(key), line: value.line,
                    environmentVariable: value.environmentVariable, message: "unknown key\(suggestion)"))
        }
    }
}
