import Foundation
import JSONSchema

/// The logic of `apns-worker validate`: documents in, report lines out.
///
/// A document is one JSON event, or NDJSON (one event per line: stdin, `.ndjson`, `.jsonl`). Each
/// problem becomes `FILE[:LINE]: <instance pointer>: <message> [<keyword>]`: the schema keyword
/// (`required`, `pattern`, …), `json` for malformed input, or the code of a rule checked in code
/// (`payloadTooLarge`, …), so a script can tell problems apart without parsing the sentence.
package struct EventFileValidator: Sendable {
    /// What events are checked against.
    package enum Target: Sendable {
        /// The notification-event schema plus the APNs rules checked in code.
        case notificationEvents(NotificationEventDecoder)
        /// Any draft-07 schema (`--schema FILE`): the schema only.
        case schema(JSONSchema)
    }

    package struct Tally: Sendable, Equatable {
        package var valid = 0
        package var invalid = 0
        package init(valid: Int = 0, invalid: Int = 0) {
            self.valid = valid
            self.invalid = invalid
        }
    }

    package let target: Target

    package init(target: Target = .notificationEvents(.standard)) {
        self.target = target
    }

    /// Loads and compiles `--schema FILE`. Its `$ref`s to other files (relative or `file:` URIs)
    /// are read from disk; our own schemas are known by their `$id` (`urn:apns-worker:schema:…`).
    package init(schemaFile path: String) throws(SchemaError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SchemaError("cannot read schema file '\(path)'")
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse([UInt8](data))
        } catch {
            throw SchemaError("schema file '\(path)' is not valid JSON: \(error)")
        }
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.absoluteString
        let schema = try JSONSchema(value, options: .init(baseURI: absolute), resolver: Self.fileResolver)
        self.init(target: .schema(schema))
    }

    /// Serves `file:` URIs from disk and our own schemas by `$id`.
    @Sendable static func fileResolver(_ uri: String) throws -> JSONValue? {
        switch uri {
        case "urn:apns-worker:schema:notification-event":
            return try JSONParser.parse(EventSchemas.notificationEventText)
        case "urn:apns-worker:schema:result-event": return try JSONParser.parse(EventSchemas.resultEventText)
        default: break
        }
        guard let url = URL(string: uri), url.isFileURL, let data = FileManager.default.contents(atPath: url.path)
        else { return nil }
        return try JSONParser.parse([UInt8](data))
    }

    /// `<pointer>: <message> [<keyword>]`.
    static func line(_ problem: EventProblem) -> String {
        "\(problem) [\(problem.keyword)]"
    }

    /// Two lines or more, each a JSON value of its own (read as one document, the second is
    /// "unexpected … after the JSON value").
    static func looksLikeNDJSON(_ bytes: [UInt8]) -> Bool {
        let lines = bytes.split(separator: 0x0A).filter { !$0.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D } }
        return lines.count >= 2 && lines.allSatisfy { (try? JSONParser.parse($0)) != nil }
    }

    /// Whether a file is read as NDJSON, by its name (`-` is stdin, always NDJSON).
    package static func isNDJSON(_ name: String) -> Bool {
        name == "-" || name.hasSuffix(".ndjson") || name.hasSuffix(".jsonl")
    }

    /// Validates one document, calling `report` with each problem line; returns the counts.
    package func validate(document bytes: [UInt8], name: String, ndjson: Bool, report: (String) -> Void) -> Tally {
        var tally = Tally()
        if !ndjson {
            let problems = problems(in: bytes[...])
            for p in problems { report("\(name): \(Self.line(p))") }
            if !problems.isEmpty, Self.looksLikeNDJSON(bytes) {
                report(
                    "\(name): this is one JSON value per line (NDJSON): name the file .ndjson or .jsonl, or pass it on standard input (-), to validate each line"
                )
            }
            if problems.isEmpty { tally.valid += 1 } else { tally.invalid += 1 }
            return tally
        }
        var lineNumber = 0
        var start = bytes.startIndex
        while start < bytes.endIndex {
            lineNumber += 1
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.endIndex
            let line = bytes[start..<end]
            start = end + 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            let problems = problems(in: line)
            for p in problems { report("\(name):\(lineNumber): \(Self.line(p))") }
            if problems.isEmpty { tally.valid += 1 } else { tally.invalid += 1 }
        }
        return tally
    }

    func problems(in bytes: ArraySlice<UInt8>) -> [EventProblem] {
        switch target {
        case .notificationEvents(let decoder):
            return decoder.problems(in: bytes)
        case .schema(let schema):
            do {
                let value = try JSONParser.parse(bytes)
                return schema.validate(value, mode: .allErrors).map(EventProblem.init)
            } catch {
                return [EventProblem(error)]
            }
        }
    }
}
