import Foundation
import JSONSchema

/// Debian's `json-schema-test-suite`: where it is, its remote documents, and running its files.
enum TestSuite {
    static let root =
        ProcessInfo.processInfo.environment["JSON_SCHEMA_TEST_SUITE"]
        ?? "/usr/share/json-schema-test-suite"
    static var draft7: String { root + "/tests/draft7" }
    static var remotes: String { root + "/remotes" }

    /// Serves `http://localhost:1234/…` from the suite's `remotes/` folder, as the suite expects.
    static func resolver(_ uri: String) throws -> JSONValue? {
        let prefix = "http://localhost:1234/"
        guard uri.hasPrefix(prefix) else { return nil }
        let path = remotes + "/" + uri.dropFirst(prefix.count)
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try JSONParser.parse([UInt8](data))
    }

    struct Failure: CustomStringConvertible {
        let file: String
        let group: String
        let test: String
        let detail: String
        var description: String { "\(file) | \(group) | \(test): \(detail)" }
    }

    struct FileResult {
        let file: String
        var passed = 0
        var failures: [Failure] = []
    }

    static func files(in folder: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().map { folder + "/" + $0 }
    }

    /// Runs one suite file. Format assertion is on, as the `optional/format` files require; the
    /// required files never depend on it.
    static func run(_ path: String) throws -> FileResult {
        let name = String(path.dropFirst(draft7.count + 1))
        var result = FileResult(file: name)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SuiteError(message: "cannot read \(path)")
        }
        guard case .array(let groups) = try JSONParser.parse([UInt8](data)) else {
            throw SuiteError(message: "\(path) is not an array of test groups")
        }
        for group in groups {
            let description = group["description"]?.stringValue ?? "?"
            let tests = group["tests"]?.arrayValue ?? []
            let schema: JSONSchema
            do {
                schema = try JSONSchema(
                    group["schema"] ?? .null, options: .init(formatAssertion: true), resolver: resolver)
            } catch {
                for test in tests {
                    result.failures.append(
                        Failure(
                            file: name, group: description, test: test["description"]?.stringValue ?? "?",
                            detail: "schema did not compile: \(error)"))
                }
                continue
            }
            for test in tests {
                let expected = test["valid"]?.boolValue ?? false
                let instance = test["data"] ?? .null
                let verdict = schema.isValid(instance)
                let errors = schema.validate(instance, mode: .allErrors)
                // The three ways of asking must agree, or the report would lie.
                let consistent = verdict == errors.isEmpty && verdict == schema.validate(instance).isEmpty
                if verdict == expected && consistent {
                    result.passed += 1
                } else {
                    result.failures.append(
                        Failure(
                            file: name, group: description, test: test["description"]?.stringValue ?? "?",
                            detail: consistent
                                ? "expected \(expected ? "valid" : "invalid"), got \(verdict ? "valid" : "invalid")"
                                : "verdict and error list disagree"))
                }
            }
        }
        return result
    }
}

struct SuiteError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
