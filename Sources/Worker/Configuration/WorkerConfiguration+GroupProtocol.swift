import Kafka

/// What the consumer group protocol (`consumer.groupProtocol`) and a static member's id
/// (`group.instance.id`) allow in `kafka:` and `consumer.properties`, checked once both are read.
extension WorkerConfiguration {
    /// Kafka's own rule for a `group.instance.id` (the broker refuses any other): at most 249 of
    /// these characters, and not `.` or `..`.
    static let instanceIDCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    static let instanceIDMaxLength = 249
    /// What the urgent lane's member appends to the instance id.
    static let urgentInstanceSuffix = "-urgent"

    /// Under the next-generation protocol, each property of `kafka:` or `consumer.properties` that
    /// the broker owns (librdkafka would refuse to make the consumer); under the classic one,
    /// `group.remote.assignor`, which only the next-generation protocol reads; and an instance id
    /// Kafka would refuse. Each said at its own line (or its variable).
    static func groupProtocolProblems(
        _ root: inout ConfigSection, kafka: [String: String], consumer: ConsumerSettings
    ) -> [ConfigurationError] {
        let sections: [(path: [String], properties: [String: String])] = [
            (["kafka"], kafka), (["consumer", "properties"], consumer.properties),
        ]
        let chosen = consumer.groupProtocol
        let chosenBy = root.node("consumer").flatMap(Self.protocolSource) ?? "the default"
        var problems: [ConfigurationError] = []
        for (path, properties) in sections {
            let parent = root.node(path[0])?.node(at: path.dropFirst())
            func problem(_ name: String, _ message: String) -> ConfigurationError {
                let node = parent?.node(at: [name])
                return ConfigurationError(
                    code: .invalidValue, file: node?.environmentVariable == nil ? root.file : nil,
                    keyPath: (path + [name]).joined(separator: "."), line: node?.line,
                    environmentVariable: node?.environmentVariable, message: message)
            }
            for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
                if let owned = chosen.brokerOwnedProperty(set: name, to: value) {
                    problems.append(
                        problem(
                            name,
                            "consumer.groupProtocol is consumer (\(chosenBy)), which leaves \(owned.property) to the "
                                + "broker; librdkafka refuses the consumer when it is set at all: remove it and set "
                                + "\(owned.instead)"))
                } else if chosen == .classic, name == "group.remote.assignor" {
                    problems.append(
                        problem(
                            name,
                            "only the next-generation group protocol reads it, and consumer.groupProtocol is classic "
                                + "(\(chosenBy)): set consumer.groupProtocol: consumer, or use "
                                + "partition.assignment.strategy"))
                } else if name == "group.instance.id", let why = instanceIDProblem(value, lanes: consumer.urgent != nil)
                {
                    problems.append(problem(name, why))
                }
            }
        }
        return problems
    }

    /// Why Kafka would refuse `id` as a `group.instance.id` (with the urgent lane's suffix when
    /// there are lanes), or `nil`. An empty id means none.
    static func instanceIDProblem(_ id: String, lanes: Bool) -> String? {
        guard !id.isEmpty else { return nil }
        if id == "." || id == ".." { return "\"\(id)\" is not an instance id Kafka takes" }
        if let bad = id.first(where: { !instanceIDCharacters.contains($0) }) {
            return "'\(bad)' is not allowed in an instance id: Kafka takes only ASCII letters, digits, '.', '_' and '-'"
        }
        let limit = instanceIDMaxLength - (lanes ? urgentInstanceSuffix.count : 0)
        if id.count > limit {
            let why = lanes ? " (the urgent lane's member adds \"\(urgentInstanceSuffix)\" to it)" : ""
            return "\(id.count) characters, and Kafka takes at most \(limit) here\(why)"
        }
        return nil
    }

    /// Where `consumer.groupProtocol` was set: "line N" or the variable.
    private static func protocolSource(_ consumer: ConfigNode) -> String? {
        guard let node = consumer.node(at: ["groupProtocol"]) else { return nil }
        if let variable = node.environmentVariable { return "set by \(variable)" }
        return node.line.map { "line \($0)" }
    }
}
