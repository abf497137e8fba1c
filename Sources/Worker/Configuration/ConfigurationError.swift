/// Why a configuration could not be loaded: which file, which key, which line, what was expected.
///
/// The message never quotes the value of a secret (`sasl.password`, `*password*`, `*secret*`): see
/// `ConfigSecrets`. Syntax errors carry the parser's problem and position, never the offending line.
package struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem; compare with the static constants.
    package struct Code: Sendable, Hashable, CustomStringConvertible {
        let name: String
        package var description: String { name }

        /// The file cannot be read.
        package static let unreadableFile = Code(name: "unreadableFile")
        /// The file is neither valid YAML nor valid JSON.
        package static let syntax = Code(name: "syntax")
        /// A key the worker does not know (a typo, usually).
        package static let unknownKey = Code(name: "unknownKey")
        /// A required key is absent.
        package static let missingKey = Code(name: "missingKey")
        /// A key holds a value of the wrong type or out of range.
        package static let invalidValue = Code(name: "invalidValue")
        /// An `APNS_WORKER_*` environment variable that matches no key.
        package static let unknownEnvironmentVariable = Code(name: "unknownEnvironmentVariable")
    }

    package var code: Code
    /// The configuration file, or `nil` when the problem is not in a file.
    package var file: String?
    /// The dotted key path (`delivery.retry.maxAttempts`, `apns.credentials[1].topics`), if any.
    package var keyPath: String?
    /// 1-based line in `file`, when the parser knows it.
    package var line: Int?
    /// The environment variable the value came from, when it came from one.
    package var environmentVariable: String?
    /// What is wrong or what was expected.
    package var message: String
    /// The other problems found in the same file, after this one (in the file's order); `all`
    /// lists this one and them.
    package var others: [ConfigurationError] = []

    /// Every problem, one per line, as `check` and `run` print them.
    package var report: String { all.map(\.description).joined(separator: "\n") }

    /// This problem and every other one found in the same file.
    package var all: [ConfigurationError] {
        var first = self
        first.others = []
        return [first] + others
    }

    package init(
        code: Code, file: String? = nil, keyPath: String? = nil, line: Int? = nil,
        environmentVariable: String? = nil, message: String
    ) {
        self.code = code
        self.file = file
        self.keyPath = keyPath
        self.line = line
        self.environmentVariable = environmentVariable
        self.message = message
    }

    /// `config.yaml:12: delivery.retry.maxAtempts: unknown key`, or
    /// `APNS_WORKER_HTTP_PORT: http.port: expected an integer from 0 to 65535`.
    package var description: String {
        var parts: [String] = []
        if let environmentVariable {
            parts.append(environmentVariable)
        } else if let file {
            parts.append(line.map { "\(file):\($0)" } ?? file)
        }
        if let keyPath, !keyPath.isEmpty { parts.append(keyPath) }
        parts.append(message)
        return parts.joined(separator: ": ")
    }
}
