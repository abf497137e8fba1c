import ArgumentParser
import Foundation
import Worker

/// `apns-worker check --config FILE`: what `run` would start with, without consuming anything.
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check a configuration file as run would, without consuming.",
        discussion: """
            Loads and checks the file (and APNS_WORKER_* variables), opens every credential's key or \
            certificate (printing when each certificate expires: within 30 days a warning, expired or \
            not yet valid a problem), and asks the broker whether the input, results and dead-letter topics exist. \
            Prints a summary with secrets redacted. A broker that does not answer is said, not an error. \
            --strict, for a deploy gate, also fails when the broker does not answer (unreachable, a TLS \
            handshake or a SASL login refused) and when a topic the worker produces to has \
            min.insync.replicas above its replication factor (where the broker does not answer \
            DescribeConfigs, it says it could not check), and proves each credential against the APNs \
            environment it serves without delivering anything: one request for the all-zero device \
            token, which APNs answers 400 BadDeviceToken when it took the credential and 403 when it \
            did not (--skip-apns leaves APNs out, where the gate cannot reach it). \
            --offline checks the file alone (no key files, secrets or broker), as deploy/check.py does. \
            Exit status: 0 valid, 2 not (each problem is printed on its own line).
            """
    )

    @Option(name: .long, help: ArgumentHelp("The configuration file (YAML or JSON).", valueName: "FILE"))
    var config: String
    @Flag(help: "Check the file alone: no key files, no secrets from the environment, no broker.")
    var offline = false
    @Flag(help: "Fail when the broker does not answer or a topic cannot take the worker's writes (a deploy gate).")
    var strict = false
    @Option(
        name: .customLong("broker-timeout"),
        help: ArgumentHelp("Seconds the broker has to answer.", valueName: "SECONDS"))
    var brokerTimeout = 10
    @Flag(name: .customLong("skip-apns"), help: "With --strict: do not prove the credentials against APNs.")
    var skipAPNs = false
    @Option(
        name: .customLong("apns-timeout"),
        help: ArgumentHelp("Seconds APNs has to answer each credential's probe.", valueName: "SECONDS"))
    var apnsTimeout = 10

    func run() async throws {
        let check = await ConfigurationCheck.run(
            path: config, offline: offline, brokerTimeout: .seconds(brokerTimeout), strict: strict,
            probesAPNs: !skipAPNs, apnsTimeout: .seconds(apnsTimeout))
        for line in check.summary { FileOutput.standardOutput.write(line + "\n") }
        for note in check.notes { FileOutput.standardError.write("note: \(note)\n") }
        for warning in check.warnings { FileOutput.standardError.write("warning: \(warning)\n") }
        for problem in check.problems { FileOutput.standardError.write("error: \(problem)\n") }
        guard check.isValid else {
            FileOutput.standardError.write("\(config): not valid (\(check.problems.count) problem(s))\n")
            throw ExitCode(2)
        }
        FileOutput.standardOutput.write("\(config): valid\n")
    }
}
