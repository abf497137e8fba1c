import Crypto
import Foundation
import Kafka
import Worker
import WorkerDemo

/// Records and settings the scenarios and the integration tests share.
package enum Samples {
    /// A valid alert event for the demo app (or `topic`) to `deviceToken` (64 hex digits), as a
    /// record of the embedded stack's input topic, keyed by its id.
    package static func alert(
        id: String, deviceToken: String, topic: String = EmbeddedStack.bundleID, partition: Int32? = nil,
        timestampMilliseconds: Int64? = nil
    ) -> KafkaProducerMessage {
        KafkaProducerMessage(
            topic: EmbeddedStack.inputTopic, partition: partition, key: Array(id.utf8),
            value: Array(
                #"{"id":"\#(id)","deviceToken":"\#(deviceToken)","topic":"\#(topic)","pushType":"alert","payload":{"aps":{"alert":"hi"}}}"#
                    .utf8),
            timestampMilliseconds: timestampMilliseconds)
    }

    /// Event `n` of a numbered `series` as a UUID, so the worker sends it as the `apns-id` and the
    /// simulator can tell a push sent twice (an id that is not a UUID gets a new `apns-id` each time).
    package static func eventID(_ series: UInt16, _ n: Int) -> String {
        String(format: "00000000-%04x-4000-8000-%012llx", series, UInt64(n))
    }

    /// The device token `n` as 64 hex digits.
    package static func deviceToken(_ n: Int) -> String { String(format: "%064x", n) }

    /// Writes a fresh signing key APNs does not know into `directory` and returns its path: a
    /// worker using it gets 403 InvalidProviderToken for every request.
    package static func unknownKeyFile(in directory: String) throws -> String {
        let path = directory + "/unknown-key.p8"
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Signs with the key in `file` instead of the configured one (the first credential).
    package static func use(key file: String, in configuration: inout WorkerConfiguration) {
        guard case .token(var token) = configuration.apns.credentials[0].kind else { return }
        token.key = .file(file)
        configuration.apns.credentials[0].kind = .token(token)
    }
}
