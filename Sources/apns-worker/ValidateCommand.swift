import ArgumentParser
import APNs
import Foundation
import Worker

/// `apns-worker validate [--schema FILE] FILE…`
struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check events against the notification-event schema and the APNs rules.",
        discussion: """
            Each FILE holds one JSON event, or one event per line when it is '-' (stdin) or ends in \
            .ndjson or .jsonl. Every problem prints as FILE[:LINE]: <instance pointer>: <message> \
            [<keyword>] (the schema keyword, json for malformed input, or the code of a rule checked in code). \
            Exit status: 0 all valid, 1 some invalid, 2 usage, file or schema error.
            """
    )

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Validate against this draft-07 schema instead (schema only, no APNs rules).", valueName: "FILE"))
    var schema: String?

    @Argument(help: ArgumentHelp("Event files; '-' reads NDJSON from stdin.", valueName: "FILE"))
    var files: [String]

    func validate() throws {
        if files.isEmpty { throw ValidationError("give at least one FILE, or '-' for stdin") }
    }

    func run() throws {
        let validator: EventFileValidator
        do {
            validator = try schema.map { try EventFileValidator(schemaFile: $0) } ?? EventFileValidator()
        } catch {
            FileOutput.standardError.write("apns-worker validate: schema error: \(error)\n")
            throw ExitCode(2)
        }
        var tally = EventFileValidator.Tally()
        for name in files {
            let data: [UInt8]
            do {
                data = name == "-" ? [UInt8](FileHandle.standardInput.readDataToEndOfFile()) : try readWholeFile(name)
            } catch {
                FileOutput.standardError.write("apns-worker validate: cannot read '\(name)': \(error.reason)\n")
                throw ExitCode(2)
            }
            let counts = validator.validate(
                document: data, name: name == "-" ? "<stdin>" : name,
                ndjson: EventFileValidator.isNDJSON(name)
            ) { line in
                FileOutput.standardOutput.write(line + "\n")
            }
            tally.valid += counts.valid
            tally.invalid += counts.invalid
        }
        FileOutput.standardError.write(
            "\(tally.valid + tally.invalid) events: \(tally.valid) valid, \(tally.invalid) invalid\n")
        if tally.invalid > 0 { throw ExitCode(1) }
    }
}
