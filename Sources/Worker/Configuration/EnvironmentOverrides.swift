import Foundation

/// Applies `APNS_WORKER_<SECTION>_<KEY>` variables to the parsed file, before typing, so that an
/// overridden value is checked exactly like one from the file (and its errors name the variable).
enum EnvironmentOverrides {
    static let prefix = "APNS_WORKER_"

    /// Where one variable lands.
    struct Target {
        var path: [String]
        var schema: ConfigSchema
    }

    static func apply(
        _ environment: [String: String], to root: ConfigNode, file: String
    ) throws(ConfigurationError) -> ConfigNode {
        var root = root
        // Sorted: the same environment gives the same first error.
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) where name.hasPrefix(prefix) {
            let target = try resolve(name)
            let node: ConfigNode
            switch target.schema {
            case .list:
                let items = value.split(separator: ",").map {
                    ConfigNode(
                        value: .scalar(String($0).trimmingCharacters(in: .whitespaces), isNull: false),
                        environmentVariable: name)
                }
                node = ConfigNode(value: .sequence(items), environmentVariable: name)
            default:
                node = ConfigNode(value: .scalar(value, isNull: false), environmentVariable: name)
            }
            root = try set(node, at: target.path[...], in: root, file: file, name: name)
        }
        return root
    }

    /// Matches a variable's name to a key of the schema.
    static func resolve(_ name: String) throws(ConfigurationError) -> Target {
        let rest = String(name.dropFirst(prefix.count))
        if let target = match(rest, in: .worker, path: []) { return target }
        let leaves = ConfigSchema.worker.leaves()
        // A key that only the file may set (credentials, client properties): say so.
        if let fileOnly = leaves.first(where: {
            guard case .fileOnly = $0.schema else { return false }
            let snake = $0.path.map(ConfigSchema.upperSnake).joined(separator: "_")
            return rest == snake || rest.hasPrefix(snake + "_")
        }) {
            let key = fileOnly.path.joined(separator: ".")
            let hint =
                key == "apns.credentials"
                ? "; a key's or password's text can come from the environment through the credential's keyEnv or passwordEnv"
                : "; librdkafka properties can also be set in kafka:, or as APNS_WORKER_KAFKA_<PROPERTY>"
            throw ConfigurationError(
                code: .unknownEnvironmentVariable, environmentVariable: name,
                message: "\(key) is set in the configuration file only\(hint)")
        }
        let names = leaves.compactMap { leaf -> String? in
            switch leaf.schema {
            case .scalar, .list: prefix + leaf.path.map(ConfigSchema.upperSnake).joined(separator: "_")
            default: nil
            }
        }
        let suggestion = ConfigSchema.closest(to: name, among: names).map { "; did you mean \($0)?" } ?? ""
        throw ConfigurationError(
            code: .unknownEnvironmentVariable, environmentVariable: name,
            message:
                "matches no configuration key (expected APNS_WORKER_<SECTION>_<KEY>, e.g. APNS_WORKER_HTTP_PORT)\(suggestion)"
        )
    }

    private static func match(_ rest: String, in schema: ConfigSchema, path: [String]) -> Target? {
        guard case .section(let children) = schema else { return nil }
        for (key, child) in children {
            let snake = ConfigSchema.upperSnake(key)
            switch child {
            case .scalar, .list:
                if rest == snake { return Target(path: path + [key], schema: child) }
            case .properties:
                if rest.hasPrefix(snake + "_"), rest.count > snake.count + 1 {
                    let property = rest.dropFirst(snake.count + 1).lowercased().replacingOccurrences(of: "_", with: ".")
                    return Target(path: path + [key, property], schema: .scalar)
                }
            case .section:
                if rest.hasPrefix(snake + "_"),
                    let target = match(String(rest.dropFirst(snake.count + 1)), in: child, path: path + [key])
                {
                    return target
                }
            case .fileOnly:
                continue
            }
        }
        return nil
    }

    /// Replaces or adds the value at `path`, creating mappings on the way.
    private static func set(
        _ value: ConfigNode, at path: ArraySlice<String>, in node: ConfigNode, file: String, name: String
    ) throws(ConfigurationError) -> ConfigNode {
        guard let key = path.first else { return value }
        var pairs: [(key: String, value: ConfigNode)]
        switch node.value {
        case .mapping(let existing): pairs = existing
        case .scalar(_, isNull: true): pairs = []
        default:
            throw ConfigurationError(
                code: .invalidValue, file: file, line: node.line, environmentVariable: name,
                message: "cannot override inside \(node.typeName)")
        }
        if let index = pairs.firstIndex(where: { $0.key == key }) {
            pairs[index].value = try set(value, at: path.dropFirst(), in: pairs[index].value, file: file, name: name)
        } else {
            let empty = ConfigNode(value: .mapping([]), environmentVariable: name)
            pairs.append((key, try set(value, at: path.dropFirst(), in: empty, file: file, name: name)))
        }
        return ConfigNode(value: .mapping(pairs), line: node.line, environmentVariable: node.environmentVariable)
    }
}
