import ArgumentParser
import Foundation
import Kafka
import Logging
import Worker

/// `apns-worker replay`: dead letters back to their topic.
struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Put dead letters back on their source topic (or another).",
        discussion: """
            Reads the dead-letter topic up to the end offsets it sees at the start, keeps the records \
            that pass the filters, and re-produces each with its original key, value and headers plus \
            a replay counter. Without --reason it replays credentials, no-credential and \
            retries-exhausted (what a replay can fix); name malformed-json, schema, rule or \
            record-too-large to replay those. Each reason remembers which of its dead letters were \
            replayed, so running the same replay twice replays once, and what a filtered run (--source-topic, \
            --since, --until) leaves is replayed by a later run; --from-beginning reads everything again. A \
            dead letter replayed --max-replays times already is refused. A run reserves its reasons' cursors \
            while it runs: a second run over the same reason is refused. Prints a table of what it \
            did, by action, reason and destination, with how many had failed again after an earlier \
            replay (a loop: fix the cause before replaying them again). Exit status: 0 done, 1 the replay failed part-way (the next run resumes from its last \
            checkpoint) or another run has reserved the cursors, 2 usage or configuration errors (an unknown \
            reason, a topic that does not exist).
            """
    )

    @Option(name: .long, help: ArgumentHelp("The dead-letter topic to read.", valueName: "TOPIC"))
    var from: String
    @Option(name: .long, help: ArgumentHelp("Produce here instead of each record's source topic.", valueName: "TOPIC"))
    var to: String?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only this dlq-reason (repeatable): \(DeadLetterReason.allCases.map(\.rawValue).joined(separator: ", ")); the result's spelling of the same reason (malformedJSON, recordTooLarge, noCredentialForTopic) works too.",
            valueName: "REASON"))
    var reason: [String] = []
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only dead letters that failed at or after this time: RFC 3339 (2026-12-02T09:30:00Z), or a date (its start in UTC).",
            valueName: "TIME"))
    var since: String?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only dead letters that failed before this time: RFC 3339, or a date (its start in UTC).",
            valueName: "TIME"))
    var until: String?
    @Option(
        name: .customLong("source-topic"),
        help: ArgumentHelp("Only dead letters from this topic (repeatable).", valueName: "TOPIC"))
    var sourceTopic: [String] = []
    @Flag(name: .customLong("from-beginning"), help: "Ignore what earlier runs replayed; read the whole topic.")
    var fromBeginning = false
    @Flag(name: .customLong("dry-run"), help: "Report what would be replayed; produce nothing.")
    var dryRun = false
    @Option(name: .customLong("max-replays"), help: "Refuse dead letters already replayed this many times.")
    var maxReplays = ReplayRequest.defaultMaxReplays
    @Option(name: .long, help: ArgumentHelp("Kafka settings from the worker's configuration file.", valueName: "FILE"))
    var config: String?
    @Option(
        name: .customLong("bootstrap-servers"),
        help: ArgumentHelp("Kafka brokers, without a configuration file.", valueName: "HOSTS"))
    var bootstrapServers: String?

    func validate() throws {
        if (config == nil) == (bootstrapServers == nil) {
            throw ValidationError("give exactly one of --config FILE and --bootstrap-servers HOSTS")
        }
        if let since, DeadLetterTimeParsing.argument(since) == nil {
            throw ValidationError(
                "--since: not an RFC 3339 time or a date: \(since) (\(DeadLetterTimeParsing.argumentExample))")
        }
        if let until, DeadLetterTimeParsing.argument(until) == nil {
            throw ValidationError(
                "--until: not an RFC 3339 time or a date: \(until) (\(DeadLetterTimeParsing.argumentExample))")
        }
        if maxReplays < 1 { throw ValidationError("--max-replays must be at least 1") }
        for reason in reason where DeadLetterReason(spelling: reason) == nil {
            throw ValidationError(
                "--reason: unknown dlq-reason '\(reason)'; expected one of "
                    + DeadLetterReason.allCases.map(\.rawValue).joined(separator: ", ")
                    + " (or the result's spelling of the same reason: malformedJSON, recordTooLarge, noCredentialForTopic)"
            )
        }
    }

    func run() async throws {
        var logger = Logger(label: "apns-worker.replay")
        logger.logLevel = .warning
        let replayer: DeadLetterReplayer
        if let config {
            do {
                replayer = DeadLetterReplayer(configuration: try WorkerConfiguration.load(path: config), logger: logger)
            } catch {
                FileOutput.standardError.write("\(error.report)\n")
                throw ExitCode(2)
            }
        } else {
            replayer = DeadLetterReplayer(bootstrapServers: bootstrapServers!, logger: logger)
        }
        var request = ReplayRequest(deadLetterTopic: from)
        request.targetTopic = to
        request.reasons = Set(reason.compactMap(DeadLetterReason.init(spelling:)))
        request.fromBeginning = fromBeginning
        request.sourceTopics = Set(sourceTopic)
        request.since = since.flatMap(DeadLetterTimeParsing.argument)
        request.until = until.flatMap(DeadLetterTimeParsing.argument)
        request.dryRun = dryRun
        request.maxReplays = maxReplays
        do {
            let report = try await replayer.run(request)
            FileOutput.standardOutput.write(report.table + "\n")
        } catch let error as KafkaError {
            FileOutput.standardError.write("replay: \(error)\n")
            throw ExitCode(2)
        } catch let error as DeadLetterReplayer.ReplayError where error.isUsageError {
            FileOutput.standardError.write("replay: \(error)\n")
            throw ExitCode(2)
        } catch {
            FileOutput.standardError.write("replay failed: \(error)\n")
            throw ExitCode(1)
        }
    }
}
