import Foundation

extension WorkerConfiguration {
    /// Reads `path` (YAML or JSON), applies the `APNS_WORKER_*` variables of `environment`, checks
    /// every key and value.
    ///
    /// - Parameter environment: the process environment in production; a dictionary in tests.
    package static func load(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> WorkerConfiguration {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(
                code: .unreadableFile, file: path, message: "cannot read the file (\(reason(error)))")
        }
        return try parse(text, file: path, environment: environment)
    }

    /// `load` for text already in memory; `file` names it in errors.
    package static func parse(
        _ text: String, file: String = "<config>", environment: [String: String] = [:]
    ) throws(ConfigurationError) -> WorkerConfiguration {
        let parsed = try ConfigNode.parse(text, file: file)
        let overridden = try EnvironmentOverrides.apply(environment, to: parsed, file: file)
        var root = try ConfigSection(overridden, file: file, path: "")
        let configuration = try decode(&root)
        try root.finish()
        try configuration.checkKafkaProperties(file: file, environment: environment)
        return configuration
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
