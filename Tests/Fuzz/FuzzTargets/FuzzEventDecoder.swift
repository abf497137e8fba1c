import APNs
import Foundation
import JSONSchema
import Kafka
import Worker

/// The path of a Kafka record's value: decoded to a notification or to its problems (both modes must
/// agree), then the result event the worker publishes for it, which must be valid against
/// `result-event.schema.json` whatever the record held.
package enum FuzzEventDecoder {
    /// Compiles the schemas before the first input, so that no input pays for it.
    package static func prepare() {
        _ = NotificationEventDecoder.standard
        _ = EventSchemas.resultEvent
    }

    static let source = KafkaConsumerMessage(topic: "notifications", partition: 3, offset: 42, key: nil, value: nil)
    static let completedAt = Date(timeIntervalSince1970: 1_700_000_000.125)

    package static func run(_ data: UnsafeBufferPointer<UInt8>) {
        let bytes = Array(data)
        let decoder = NotificationEventDecoder.standard
        let problems = decoder.problems(in: bytes[...])
        var result: EventResult
        do {
            let event = try decoder.decode(bytes)
            fuzzCheck(problems.isEmpty, "decode accepted an event with problems: \(problems)")
            result = EventResult(eventID: event.id, outcome: .delivered, attempts: 1)
            result.status = 200
            switch event.push {
            case .notification(let notification):
                let limit = notification.pushType == .voip ? 5120 : 4096
                fuzzCheck(
                    notification.payload.count <= limit, "payload of \(notification.payload.count) bytes accepted")
                fuzzCheck(
                    notification.deviceToken.hex.utf8.allSatisfy {
                        (0x30...0x39).contains($0) || (0x61...0x66).contains($0)
                    },
                    "device token not lowercase hex: \(notification.deviceToken.hex)")
                fuzzCheck(
                    (try? JSONParser.parse(notification.payload))?.objectValue != nil, "payload is not a JSON object")
                result.apnsID = notification.apnsID?.uuidString ?? "5b0e9a4c-7f2d-4c1e-9a57-0d6c1f4e8b21"
            case .broadcast(let broadcast):
                fuzzCheck(
                    broadcast.payload.count <= 5120, "broadcast payload of \(broadcast.payload.count) bytes accepted")
                fuzzCheck(
                    (try? JSONParser.parse(broadcast.payload))?.objectValue != nil, "payload is not a JSON object")
                fuzzCheck(
                    !broadcast.bundleID.isEmpty && !broadcast.bundleID.hasSuffix(".push-type.liveactivity"),
                    "broadcast to topic \(broadcast.bundleID) accepted")
                result.apnsRequestID =
                    broadcast.requestID?.uuidString.lowercased() ?? "5b0e9a4c-7f2d-4c1e-9a57-0d6c1f4e8b21"
            }
            result.metadata = event.metadata
        } catch {
            fuzzCheck(!problems.isEmpty, "decode refused an event without problems: \(error)")
            fuzzCheck(
                error.problems.first?.kind == problems.first?.kind,
                "the modes disagree on the kind of problem: \(error) / \(problems)")
            // As EventProcessor reports an invalid event.
            result = EventResult(eventID: error.eventID, outcome: .invalid, attempts: 0)
            result.reason = error.resultReason
            result.detail = error.deadLetterDetail
            result.deadLetter = error.deadLetterReason
            _ = error.description
        }
        let value = ResultRecord.value(
            for: result, source: source, latency: .microseconds(12_345), completedAt: completedAt)
        let text = String(decoding: value, as: UTF8.self)
        guard let parsed = try? JSONParser.parse(value) else {
            fuzzCheck(false, "the result event is not JSON: \(text)")
            return
        }
        let errors = EventSchemas.resultEvent.validate(parsed, mode: .allErrors)
        fuzzCheck(errors.isEmpty, "the result event breaks its schema: \(errors) in \(text)")
    }
}
