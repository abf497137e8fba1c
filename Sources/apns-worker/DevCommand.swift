// Built with the `Demo` package trait only (on by default; see Package.swift).
#if Demo
    import ArgumentParser
    import Logging
    import WorkerDemo

    /// `apns-worker dev`: the embedded pieces, kept running.
    struct DevCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dev",
            abstract: "Keep a mock Kafka, the APNs simulator and the worker running; print their addresses.",
            discussion: "Produce events with kcat and watch the results. Ctrl-C stops."
        )

        func run() async throws {
            var logger = Logger(label: "apns-worker.dev")
            logger.logLevel = .info
            try await DevEnvironment.run(logger: logger) { FileOutput.standardOutput.write($0 + "\n") }
        }
    }
#endif
