// Built with the `Demo` package trait only (on by default; see Package.swift).
#if Demo
    import ArgumentParser
    import WorkerDemo

    /// `apns-worker dev`: the embedded pieces, kept running.
    struct DevCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dev",
            abstract: "Keep a mock Kafka, the APNs simulator and the worker running; print their addresses.",
            discussion: """
                Produce events with kcat and watch the results. The simulator takes any 32-byte device token \
                and answers 400 BadDeviceToken to other lengths; the flags below make it answer as APNs does \
                when things go wrong (docs/dev.md). Ctrl-C stops.
                """
        )

        @Option(
            help: ArgumentHelp(
                "A device token APNs answers 410 Unregistered (since UNIXSECONDS, or now). Repeatable.",
                valueName: "TOKEN[=UNIXSECONDS]"))
        var unregistered: [String] = []
        @Option(
            help: ArgumentHelp(
                "The share (0 to 1) of device tokens answered 410 Unregistered, picked by each token's hash (a token keeps its answer).",
                valueName: "SHARE"))
        var unregisteredFraction = 0.0
        @Option(
            help: ArgumentHelp(
                "The share (0 to 1) of pushes answered 429 TooManyRequests (the worker retries them).",
                valueName: "SHARE"))
        var throttleFraction = 0.0
        @Option(
            help: ArgumentHelp(
                "The share (0 to 1) of pushes answered a server error, half 500 InternalServerError and half 503 ServiceUnavailable (the worker retries them).",
                valueName: "SHARE"))
        var faultFraction = 0.0
        @Option(
            help: ArgumentHelp(
                "Any reason of Apple's tables at a rate, e.g. TooManyRequests=0.05 or Shutdown=0.1. Repeatable.",
                valueName: "REASON=RATE"))
        var fault: [String] = []
        @Option(
            help: ArgumentHelp(
                "Close each APNs connection abruptly (no answer) on its Nth request; the worker reconnects and sends again.",
                valueName: "N"))
        var closeAfter: Int?
        @Option(
            help: ArgumentHelp(
                "The worker's logging.level in the configuration dev writes: trace, debug, info, notice, warning, error, critical.",
                valueName: "LEVEL"))
        var logLevel = "warning"
        @Option(
            help: ArgumentHelp("The worker's logging.format: text or json.", valueName: "FORMAT"))
        var logFormat = "text"
        @Option(
            help: ArgumentHelp(
                "Export a span per event to this OpenTelemetry collector (its OTLP/HTTP base URL, e.g. http://127.0.0.1:4318).",
                valueName: "URL"))
        var tracingEndpoint: String?

        var options: DevEnvironment.Options {
            var options = DevEnvironment.Options()
            options.unregistered = unregistered
            options.unregisteredFraction = unregisteredFraction
            options.throttleFraction = throttleFraction
            options.faultFraction = faultFraction
            options.faults = fault
            options.closeAfter = closeAfter
            options.logLevel = logLevel
            options.logFormat = logFormat
            options.tracingEndpoint = tracingEndpoint
            return options
        }

        func validate() throws {
            if let problem = options.problem { throw ValidationError(problem) }
        }

        func run() async throws {
            try await DevEnvironment.run(options: options) { FileOutput.standardOutput.write($0 + "\n") }
        }
    }
#endif
