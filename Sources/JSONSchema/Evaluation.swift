/// How much a validation run reports.
package enum ValidationMode: Sendable {
    /// Stop at the first failure and report it (the hot path).
    case firstError
    /// Report every failure (for people: the CLI, tests).
    case allErrors
}

/// The state of one validation run: the mode, the errors so far, and nothing else. Passed `inout`
/// down the recursion; the success path allocates nothing here.
struct Evaluation {
    enum Mode {
        /// Inside `anyOf`, `oneOf`, `not`, `if`, `contains`: only the verdict matters, no messages.
        case verdict
        case first
        case all
    }

    var mode: Mode
    var errors: [PendingError] = []

    var wantsMessages: Bool { mode != .verdict }
    var continuesAfterFailure: Bool { mode == .all }

    /// Records a failure of `keyword` in the schema at `location` (skipped when only the verdict counts).
    @inline(__always)
    mutating func fail(_ location: @autoclosure () -> String, _ keyword: String, _ message: @autoclosure () -> String) {
        guard wantsMessages else { return }
        errors.append(PendingError(schemaLocation: location() + "/" + keyword, keyword: keyword, message: message()))
    }

    /// Adds `token` to the instance path of every error recorded since `mark`.
    mutating func prefix(since mark: Int, with token: PathToken) {
        guard wantsMessages, mark < errors.count else { return }
        for i in mark..<errors.count { errors[i].reversedPath.append(token) }
    }

    /// Runs `body` for a verdict only, restoring the mode afterwards.
    mutating func verdict(_ body: (inout Evaluation) -> Bool) -> Bool {
        let saved = mode
        mode = .verdict
        defer { mode = saved }
        return body(&self)
    }
}

/// Short renderings of values for messages: strings quoted, long ones cut.
func brief(_ value: JSONValue) -> String {
    switch value {
    case .null: return "null"
    case .bool(let b): return String(b)
    case .number(let n): return n.description
    case .string(let s): return quoted(s)
    case .array(let a): return a.isEmpty ? "[]" : "an array"
    case .object(let o): return o.isEmpty ? "{}" : "an object"
    }
}

func quoted(_ s: String) -> String {
    let limit = 40
    if s.unicodeScalars.count <= limit { return "'" + s + "'" }
    return "'" + String(String.UnicodeScalarView(s.unicodeScalars.prefix(limit))) + "…'"
}

/// "a string", "an object", "an integer".
func article(_ name: String) -> String {
    (["a", "e", "i", "o", "u"].contains { name.hasPrefix($0) } ? "an " : "a ") + name
}

func typeName(_ value: JSONValue) -> String {
    if case .number(let n) = value, n.isInteger { return "integer" }
    return value.typeName
}
