import Foundation

extension WorkerConfiguration {
    /// Reads `path` (YAML or JSON), applies the `APNS_WORKER_*` variables of `environment`, checks
    /// every key and value. The error thrown is the first problem (by line) and carries every other
    /// one found (`ConfigurationError.all`).
    ///
    /// - Parameter environment: the process environment in production; a dictionary in tests.
    package static func load(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> WorkerConfiguration {
        try loaded(inspect(path: path, environment: environment))
    }

    /// `load` for text already in memory; `file` names it in errors.
    package static func parse(
        _ text: String, file: String = "<config>", environment: [String: String] = [:]
    ) throws(ConfigurationError) -> WorkerConfiguration {
        try loaded(inspect(text: text, file: file, environment: environment))
    }

    /// The configuration when there is no problem; else the first problem, carrying the others.
    private static func loaded(
        _ inspected: (configuration: WorkerConfiguration?, problems: [ConfigurationError])
    ) throws(ConfigurationError) -> WorkerConfiguration {
        if var first = inspected.problems.first {
            first.others = Array(inspected.problems.dropFirst())
            throw first
        }
        // `inspect` gives a configuration whenever it finds no problem.
        guard let configuration = inspected.configuration else {
            throw ConfigurationError(code: .syntax, message: "the configuration could not be read")
        }
        return configuration
    }

    /// Every problem of the file, found in one pass, in the file's order (those without a line,
    /// from the environment, last), and the configuration as far as it could be read: each
    /// problem's key at its default, a credential with a problem left out. `nil` only when the file
    /// cannot be read or parsed, or an `APNS_WORKER_*` variable names no key (these stop at once).
    /// `check` uses it to go on to the credentials when the file has problems; `run` never runs
    /// a configuration with any.
    package static func inspect(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> (configuration: WorkerConfiguration?, problems: [ConfigurationError]) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            return (
                nil,
                [
                    ConfigurationError(
                        code: .unreadableFile, file: path, message: "cannot read the file (\(reason(error)))")
                ]
            )
        }
        return inspect(text: text, file: path, environment: environment)
    }

    static func inspect(
        text: String, file: String, environment: [String: String]
    ) -> (configuration: WorkerConfiguration?, problems: [ConfigurationError]) {
        let overridden: ConfigNode
        let problems = ConfigProblems()
        var root: ConfigSection
        do {
            let parsed = try ConfigNode.parse(text, file: file)
            overridden = try EnvironmentOverrides.apply(environment, to: parsed, file: file)
            root = try ConfigSection(overridden, file: file, path: "", problems: problems)
        } catch {
            return (nil, [error])
        }
        let configuration = decode(&root)
        root.finish()
        let kafka = configuration.kafkaPropertyProblems(
            file: file, environment: environment, root: overridden, combination: problems.all.isEmpty)
        for problem in kafka { problems.record(problem) }
        return (configuration, problems.inFileOrder)
    }

    private static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain
        {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return nsError.localizedDescription
    }
}
