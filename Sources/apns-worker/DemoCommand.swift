// Built with the `Demo` package trait only (on by default; see Package.swift).
#if Demo
    import ArgumentParser
    import Foundation
    import Logging
    import WorkerDemo

    /// `apns-worker demo`: the embedded default.
    struct DemoCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "demo",
            abstract: "Run the real pipeline over a mixed batch, on an in-process mock Kafka and APNs simulator.",
            discussion: "Prints a summary; exits 0 when every event ended as expected."
        )

        @Option(name: .long, help: "How many events to send.")
        var events = 200

        func run() async throws {
            var logger = Logger(label: "apns-worker.demo")
            logger.logLevel = .warning
            FileOutput.standardOutput.write("starting a mock Kafka cluster and the APNs simulator…\n")
            do {
                let summary = try await Demo.run(events: events, logger: logger)
                FileOutput.standardOutput.write(summary.report + "\n")
                if !summary.isExpected { throw ExitCode(1) }
            } catch let error as ExitCode {
                throw error
            } catch {
                FileOutput.standardError.write("demo failed: \(error)\n")
                throw ExitCode(1)
            }
        }
    }
#endif
