import Worker

/// The configuration loader on text: `WorkerConfiguration.parse` with no environment (the process's
/// is never read, so a run depends on the input alone). It reads no file: `keyFile` paths are only
/// recorded. A configuration or a `ConfigurationError`, never a crash.
package enum FuzzConfiguration {
    package static func prepare() {}

    package static func run(_ data: UnsafeBufferPointer<UInt8>) {
        let text = String(decoding: data, as: UTF8.self)
        do {
            let configuration = try WorkerConfiguration.parse(text, file: "fuzz.yaml", environment: [:])
            _ = configuration.description
            _ = configuration.kafkaConsumerConfiguration
            _ = configuration.kafkaProducerConfiguration
        } catch {
            _ = error.description
        }
    }
}
