import ArgumentParser
import Foundation
import Logging
import Worker
import WorkerTelemetry

/// `apns-worker run --config FILE`: the service.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Consume notification events, push them to APNs, publish results and dead letters.",
        discussion: """
            Runs until SIGTERM or SIGINT, then drains in-flight events, commits and leaves the group; a \
            second signal exits at once. Configuration: docs/configuration.md. Exit status: 0 after a \
            clean shutdown, 1 when the worker failed, 2 for configuration errors, 130 when a second \
            signal cut the drain short.
            """
    )

    @Option(name: .long, help: ArgumentHelp("The configuration file (YAML or JSON).", valueName: "FILE"))
    var config: String

    func run() async throws {
        let configuration: WorkerConfiguration
        do {
            configuration = try WorkerConfiguration.load(path: config)
        } catch {
            FileOutput.standardError.write("\(error.report)\n")
            throw ExitCode(2)
        }
        _ = configuration.logging.bootstrapLoggingSystem()
        let logger = Logger(label: "apns-worker")
        let assembly: WorkerRuntime.Assembly
        do {
            assembly = try WorkerRuntime.assemble(configuration, logger: logger, spanExporter: .otlp)
        } catch {
            FileOutput.standardError.write("configuration error: \(error)\n")
            throw ExitCode(2)
        }
        do {
            try await assembly.operations.listen()
        } catch {
            FileOutput.standardError.write("configuration error: \(error)\n")
            throw ExitCode(2)
        }
        WorkerRuntime.exitOnSecondSignal()
        do {
            try await assembly.run()
        } catch let error as PipelineError where error.isConfigurationProblem {
            logger.critical("apns-worker cannot run with this configuration: \(error)")
            FileOutput.standardError.write("configuration error: \(error)\n")
            throw ExitCode(2)
        } catch {
            logger.critical("apns-worker failed: \(error)")
            throw ExitCode(1)
        }
    }
}
