import Foundation
import Yams

/// A parsed configuration document before typing: YAML's (and JSON's) tree with where each value
/// came from, so that errors can name a line or an environment variable.
///
/// Yams's own `Node` is not `Sendable` and loses nothing we need here, so it is converted once.
struct ConfigNode: Sendable {
    enum Value: Sendable {
        /// A scalar as written; `isNull` for an unquoted `null`, `~` or empty value.
        case scalar(String, isNull: Bool)
        case sequence([ConfigNode])
        /// Keys in file order (a YAML mapping is ordered for us: first-match credential order matters
        /// only in sequences, but stable error order is nicer).
        case mapping([(key: String, value: ConfigNode)])
    }

    var value: Value
    /// 1-based line in the file, when known.
    var line: Int?
    /// Set when the value came from an environment override.
    var environmentVariable: String?

    /// The line of the value at `path` (keys from here down), when there is one.
    func line(at path: [String]) -> Int? { node(at: path)?.line }

    /// The value at `path` (keys from here down), when there is one.
    func node(at path: some Collection<String>) -> ConfigNode? {
        guard let key = path.first else { return self }
        guard case .mapping(let pairs) = value, let child = pairs.first(where: { $0.key == key })?.value else {
            return nil
        }
        return child.node(at: path.dropFirst())
    }

    var isNull: Bool {
        if case .scalar(_, isNull: true) = value { return true }
        return false
    }

    var typeName: String {
        switch value {
        case .scalar(_, isNull: true): "null"
        case .scalar: "a scalar"
        case .sequence: "a list"
        case .mapping: "a mapping"
        }
    }
}

extension ConfigNode {
    /// Parses YAML (which, for configuration files, JSON is a subset of). An empty document is an
    /// empty mapping, so that "every key missing" errors name the keys.
    static func parse(_ text: String, file: String) throws(ConfigurationError) -> ConfigNode {
        // Anchors and aliases first, in libyaml's events: an alias in a mapping key costs Yams
        // exponential time to compose (`firstAnchorOrAlias`).
        if let (line, path) = firstAnchorOrAlias(in: text) {
            throw aliasesUnsupported(file: file, path: path, line: line)
        }
        let root: Node?
        do {
            root = try Parser(yaml: text).singleRoot()
        } catch let error as YamlError {
            throw syntaxError(error, file: file)
        } catch {
            throw ConfigurationError(code: .syntax, file: file, message: "not valid YAML or JSON")
        }
        guard let root else { return ConfigNode(value: .mapping([]), line: 1) }
        return try convert(root, file: file, path: "")
    }

    private static func convert(_ node: Node, file: String, path: String) throws(ConfigurationError) -> ConfigNode {
        let line = node.mark?.line
        switch node {
        case .scalar(let scalar):
            let isNull = scalar.style == .plain && ["", "~", "null", "Null", "NULL"].contains(scalar.string)
            return ConfigNode(value: .scalar(scalar.string, isNull: isNull), line: line)
        case .sequence(let sequence):
            var items: [ConfigNode] = []
            for (index, item) in sequence.enumerated() {
                items.append(try convert(item, file: file, path: "\(path)[\(index)]"))
            }
            return ConfigNode(value: .sequence(items), line: line)
        case .mapping(let mapping):
            var pairs: [(key: String, value: ConfigNode)] = []
            var seen: Set<String> = []
            for (keyNode, valueNode) in mapping {
                guard case .scalar(let key) = keyNode else {
                    throw ConfigurationError(
                        code: .invalidValue, file: file, keyPath: path, line: keyNode.mark?.line,
                        message: "mapping keys must be strings")
                }
                let childPath = path.isEmpty ? key.string : "\(path).\(key.string)"
                guard seen.insert(key.string).inserted else {
                    throw ConfigurationError(
                        code: .invalidValue, file: file, keyPath: childPath, line: keyNode.mark?.line,
                        message: "duplicate key")
                }
                var child = try convert(valueNode, file: file, path: childPath)
                // A key's line is where the reader looks for it, also when its value is a block.
                child.line = keyNode.mark?.line ?? child.line
                pairs.append((key.string, child))
            }
            return ConfigNode(value: .mapping(pairs), line: line)
        case .alias:  // refused before composing, by `firstAnchorOrAlias`
            throw aliasesUnsupported(file: file, path: path, line: line)
        }
    }

    private static func aliasesUnsupported(file: String, path: String, line: Int?) -> ConfigurationError {
        ConfigurationError(
            code: .invalidValue, file: file, keyPath: path, line: line,
            message: "YAML anchors and aliases are not supported")
    }

    /// The parser's problem and position only: the offending line may hold a secret.
    private static func syntaxError(_ error: YamlError, file: String) -> ConfigurationError {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _),
            .composer(_, let problem, let mark, _):
            return ConfigurationError(
                code: .syntax, file: file, line: mark.line, message: "syntax error: \(problem) (column \(mark.column))")
        case .reader(let problem, _, _, _):
            return ConfigurationError(code: .syntax, file: file, message: "unreadable text: \(problem)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return ConfigurationError(
                code: .syntax, file: file, line: context.mark.line,
                message: "duplicate keys: \(duplicates.joined(separator: ", "))")
        default:
            return ConfigurationError(code: .syntax, file: file, message: "not valid YAML or JSON")
        }
    }
}
