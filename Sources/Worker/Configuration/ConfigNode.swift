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
        // `Yams.compose`, with the parser kept alive while converting: nodes hold their anchors weakly,
        // the parser strongly (`convert` refuses anchors).
        if let line = aliasKeyLine(in: text) {
            throw ConfigurationError(
                code: .syntax, file: file, line: line,
                message: "an alias as a mapping key: YAML anchors and aliases are not supported")
        }
        let parser: Parser
        let root: Node?
        do {
            parser = try Parser(yaml: text)
            root = try parser.singleRoot()
        } catch let error as YamlError {
            throw syntaxError(error, file: file)
        } catch {
            throw ConfigurationError(code: .syntax, file: file, message: "not valid YAML or JSON")
        }
        guard let root else { return ConfigNode(value: .mapping([]), line: 1) }
        defer { withExtendedLifetime(parser) {} }
        return try convert(root, file: file, path: "")
    }

    private static func convert(_ node: Node, file: String, path: String) throws(ConfigurationError) -> ConfigNode {
        let line = node.mark?.line
        // Yams resolves an alias to its anchor's node, so aliases are refused by their anchors: walking
        // them expanded, nine levels of nine aliases are 9^9 nodes from a few hundred bytes.
        if node.anchor != nil { throw aliasesUnsupported(file: file, path: path, line: line) }
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
        case .alias:
            throw aliasesUnsupported(file: file, path: path, line: line)
        }
    }

    /// The line of the first alias in a mapping key (`*name: …`, `[*name]: …`, `? *name`), if any.
    /// Yams hashes every mapping key to find duplicates while it composes the document, before
    /// `convert` can refuse anchors, and an alias is hashed with everything its anchor holds: with
    /// nested aliases that is exponential (eight levels of nine, 9^8 nodes, from 500 bytes). A plain
    /// scalar cannot start with `*`, so outside quotes and comments a `*` that starts a token is an
    /// alias. (A line of a block scalar that looks like such a key is taken for one too.)
    static func aliasKeyLine(in text: String) -> Int? {
        let bytes = Array(text.utf8)
        var line = 1
        var index = 0
        // The last byte outside quotes and comments: what a token may start after.
        var previous = UInt8(ascii: "\n")
        // The line starts with `? ` (an explicit key): an alias anywhere on it is in a key.
        var explicitKeyLine = startsExplicitKey(bytes, at: 0)
        // Per open flow collection (`[`, `{`), the line of the first alias in it: a collection that
        // turns out to be a key (`]:`) is refused with that line.
        var flowAliases: [Int?] = []
        let tokenStart = " \t\n[{,:?-".utf8
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\n"):
                line += 1
                explicitKeyLine = startsExplicitKey(bytes, at: index + 1)
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                guard tokenStart.contains(previous) else { break }
                // A quoted scalar: skip to its end (a double-quoted one has escapes, a single-quoted
                // one doubles its quote).
                index += 1
                while index < bytes.count,
                    bytes[index] != byte
                        || (byte == UInt8(ascii: "'") && index + 1 < bytes.count && bytes[index + 1] == byte)
                {
                    if bytes[index] == UInt8(ascii: "\n") { line += 1 }
                    if byte == UInt8(ascii: "\""), bytes[index] == UInt8(ascii: "\\") { index += 1 }
                    if byte == UInt8(ascii: "'"), bytes[index] == byte { index += 1 }
                    index += 1
                }
            case UInt8(ascii: "#") where " \t\n".utf8.contains(previous):
                while index + 1 < bytes.count, bytes[index + 1] != UInt8(ascii: "\n") { index += 1 }
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                if tokenStart.contains(previous) { flowAliases.append(nil) }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                guard let alias = flowAliases.popLast(), let aliasLine = alias else { break }
                if followedByKeyColon(bytes, from: index + 1) { return aliasLine }
                if let last = flowAliases.indices.last, flowAliases[last] == nil { flowAliases[last] = aliasLine }
            case UInt8(ascii: "*") where tokenStart.contains(previous):
                var end = index + 1
                while end < bytes.count, !" \t\r\n,[]{}:".utf8.contains(bytes[end]) { end += 1 }
                guard end > index + 1 else { break }
                if explicitKeyLine || followedByKeyColon(bytes, from: end) { return line }
                if let last = flowAliases.indices.last, flowAliases[last] == nil { flowAliases[last] = line }
                index = end - 1
            default:
                break
            }
            guard index < bytes.count else { break }  // a quote left open ran to the end
            previous = bytes[index]
            index += 1
        }
        return nil
    }

    /// Whether spaces and then a `:` that ends a key (before a space, a line end or a flow
    /// indicator) follow `index`.
    private static func followedByKeyColon(_ bytes: [UInt8], from index: Int) -> Bool {
        var next = index
        while next < bytes.count, bytes[next] == UInt8(ascii: " ") || bytes[next] == UInt8(ascii: "\t") { next += 1 }
        return next < bytes.count && bytes[next] == UInt8(ascii: ":")
            && (next + 1 == bytes.count || " \t\r\n,]}".utf8.contains(bytes[next + 1]))
    }

    /// Whether the line starting at `index` starts, after its indentation, with `?` and a space.
    private static func startsExplicitKey(_ bytes: [UInt8], at index: Int) -> Bool {
        var position = index
        while position < bytes.count, bytes[position] == UInt8(ascii: " ") { position += 1 }
        return position < bytes.count && bytes[position] == UInt8(ascii: "?")
            && (position + 1 == bytes.count || " \t\r\n".utf8.contains(bytes[position + 1]))
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
