import Foundation
import JSONSchema
import Kafka
import Testing

@testable import Worker

@Suite("Result events: written straight to bytes, valid against schemas/result-event.schema.json")
struct ResultRecordTests {
    static let source = KafkaConsumerMessage(
        topic: "events \"quoted\"", partition: 3, offset: 1_234_567, key: Array("k".utf8), value: nil, headers: [])

    static func results() -> [EventResult] {
        var delivered = EventResult(eventID: "5b0e9a4c-7f2d-4c1e-9a57-0d6c1f4e8b21", outcome: .delivered, attempts: 2)
        delivered.apnsID = "5b0e9a4c-7f2d-4c1e-9a57-0d6c1f4e8b21"
        delivered.status = 200
        delivered.metadata = ["tenant": "acme", "n": .number(JSONNumber(7))]
        var unregistered = EventResult(eventID: "e-2", outcome: .unregistered, attempts: 1)
        unregistered.status = 410
        unregistered.reason = "Unregistered"
        unregistered.apnsTimestamp = 1_700_000_000_000
        var rejected = EventResult(eventID: "e-3", outcome: .rejected, attempts: 1)
        rejected.status = 400
        rejected.reason = "BadDeviceToken"
        rejected.detail = "APNs answered 400\n\t\u{1}"
        var failed = EventResult(eventID: "e-4", outcome: .failed, attempts: 8)
        failed.status = 503
        failed.reason = "ServiceUnavailable"
        failed.detail = "gave up after 8 attempts"
        failed.deadLetter = .retriesExhausted
        var expired = EventResult(eventID: "e-5", outcome: .expired, attempts: 3)
        expired.status = 429
        expired.reason = "TooManyRequests"
        var invalid = EventResult(eventID: nil, outcome: .invalid, attempts: 0)
        invalid.reason = "malformedJSON"
        invalid.detail = "(root): invalid JSON at line 1, column 9: unexpected end of input"
        // Outcomes of events never sent: no credential for the topic, too old, too large.
        var noCredential = EventResult(eventID: "e-7", outcome: .rejected, attempts: 0)
        noCredential.reason = "noCredentialForTopic"
        noCredential.detail =
            "no configured credential matches topic com.other.app; add one to apns.credentials, then replay"
        var stale = EventResult(eventID: "e-8", outcome: .expired, attempts: 0)
        stale.reason = "staleEvent"
        stale.detail = "the record is 7h 0m old, older than delivery.maxEventAge (6h 0m); not sent"
        var tooLarge = EventResult(eventID: nil, outcome: .invalid, attempts: 0)
        tooLarge.reason = "recordTooLarge"
        tooLarge.detail = "(root): the record's value has 300000 bytes, more than delivery.maxRecordBytes (262144)"
        return [delivered, unregistered, rejected, failed, expired, invalid, noCredential, stale, tooLarge]
    }

    @Test("a degraded result (Kafka refused the full one) still validates, without metadata, with its header")
    func degradedResult() throws {
        var result = Self.results()[0]
        result.metadata = ["blob": .string(String(repeating: "m", count: 10_000))]
        result.detail = String(repeating: "d", count: 1_000)
        let message = ResultRecord.degraded(
            for: result, source: Self.source, latency: .milliseconds(3), completedAt: Date(), topic: "results",
            trace: [], error: KafkaError(code: .messageSizeTooLarge, message: "too large"))
        let value = try JSONParser.parse(message.value ?? [])
        #expect(EventSchemas.resultEvent.validate(value, mode: .allErrors).isEmpty)
        #expect(value["metadata"] == nil)
        #expect(value["detail"]?.stringValue?.count == ResultRecord.degradedDetailLimit + 1)
        #expect(message.headers.contains { $0.key == ResultRecord.degradedHeader })
        #expect(message.key == Array(result.eventID!.utf8))
        #expect((message.value?.count ?? 0) < 1_000)
    }

    @Test("an event id too empty to key by: the result keeps its record's key, and says the id as it was")
    func emptyEventID() throws {
        var result = EventResult(eventID: "", outcome: .invalid, attempts: 0)
        result.reason = "schema"
        result.detail = "/id: string is 0 characters long, less than the minimum of 1"
        let message = ResultRecord.message(
            for: result, source: Self.source, latency: .milliseconds(1), completedAt: Date(), topic: "results")
        #expect(message.key == Self.source.key)
        let value = try JSONParser.parse(message.value ?? [])
        #expect(value["eventId"]?.stringValue == "")
        #expect(EventSchemas.resultEvent.validate(value, mode: .allErrors).isEmpty)
    }

    @Test(
        "a degraded dead letter stays small: an event id longer than 256 bytes left out, a short one kept; dlq-detail cut short"
    )
    func degradedDeadLetterEventID() {
        // A member name as long as the record allows makes a detail as long (its JSON pointer).
        let longDetail = "/" + String(repeating: "n", count: 10_000) + ": property is not allowed"
        for (id, kept) in [(String(repeating: "i", count: 300), false), ("e-1", true)] {
            var result = EventResult(eventID: id, outcome: .invalid, attempts: 0)
            result.reason = "schema"
            result.detail = kept ? "/id: string is too long" : longDetail
            result.deadLetter = .schema
            let source = KafkaConsumerMessage(
                topic: "events", partition: 1, offset: 7, key: Array("k".utf8), value: Array("{}".utf8))
            let full = DeadLetterRecord.message(
                for: source, result: result, reason: .schema, consumerGroup: "g", topic: "dead", now: Date())
            #expect(full.headers.lastString(DeadLetterHeader.eventID) == id)
            let degraded = DeadLetterRecord.degraded(
                full, source: source, error: KafkaError(code: .messageSizeTooLarge, message: "too large"))
            #expect(degraded.headers.lastString(DeadLetterHeader.eventID) == (kept ? id : nil), "\(id.count)")
            #expect(degraded.headers.lastString(DeadLetterHeader.reason) == "schema")
            let detail = degraded.headers.lastString(DeadLetterHeader.detail)
            #expect(
                detail == (kept ? result.detail : String(longDetail.prefix(ResultRecord.degradedDetailLimit)) + "…"))
        }
    }

    @Test("every outcome validates and says what the result says")
    func everyOutcome() throws {
        let completedAt = Date(timeIntervalSince1970: 1_795_421_717.123)
        for result in Self.results() {
            let message = ResultRecord.message(
                for: result, source: Self.source, latency: .microseconds(12_345), completedAt: completedAt,
                topic: "results")
            let value = try JSONParser.parse(message.value ?? [])
            let errors = EventSchemas.resultEvent.validate(value, mode: .allErrors)
            #expect(errors.isEmpty, "\(result.outcome): \(errors)")
            #expect(value["outcome"]?.stringValue == result.outcome.rawValue)
            #expect(value["eventId"]?.stringValue == result.eventID)
            #expect(value["reason"]?.stringValue == result.reason)
            #expect(value["detail"]?.stringValue == result.detail)
            #expect(value["status"]?.numberValue?.intValue == result.status)
            #expect(value["attempts"]?.numberValue?.intValue == result.attempts)
            #expect(value["apnsTimestamp"]?.numberValue?.int64Value == result.apnsTimestamp)
            #expect(value["latencyMs"]?.numberValue == JSONNumber(12.345))
            #expect(value["completedAt"]?.stringValue == DeadLetterTime.format(completedAt))
            #expect(value["source"]?["topic"]?.stringValue == Self.source.topic)
            #expect(value["source"]?["partition"]?.numberValue?.intValue == 3)
            #expect(value["source"]?["offset"]?.numberValue?.int64Value == 1_234_567)
            #expect(value["metadata"] == result.metadata)
            #expect(message.key == (result.eventID.map { Array($0.utf8) } ?? Self.source.key))
        }
    }

    @Test("an invalid event whose member name has spaces or a line break still gets a result its schema accepts")
    func memberNamesWithSpaces() throws {
        // Found by the event decoder's fuzzer: a JSON pointer may hold any character, and the
        // schema's pattern for an invalid result's detail allowed none after the first space.
        for name in ["         priority", "a\nb", "x: y"] {
            let event = Array(
                #"{"id":"e1","deviceToken":"abcd","topic":"com.example.app","pushType":"alert","payload":{"aps":{"alert":"hi"}}}"#
                    .utf8)
            var object = try #require(try JSONParser.parse(event).objectValue)
            object[name] = 10
            var result = EventResult(eventID: "e1", outcome: .invalid, attempts: 0)
            do {
                _ = try NotificationEventDecoder.standard.decode(JSONValue.object(object).serialized())
                Issue.record("accepted a member named \(name)")
            } catch {
                result.reason = error.resultReason
                result.detail = error.deadLetterDetail
            }
            #expect(result.detail?.hasPrefix("/" + name + ": ") == true, "\(result.detail ?? "")")
            let message = ResultRecord.message(
                for: result, source: Self.source, latency: .microseconds(1), completedAt: Date(), topic: "results")
            let value = try JSONParser.parse(message.value ?? [])
            #expect(EventSchemas.resultEvent.validate(value, mode: .allErrors).isEmpty, "\(name)")
        }
    }

    @Test(
        "timestamps as Foundation's ISO 8601 formatter writes them",
        arguments: [
            0, 951_782_400.5, 1_795_421_717.123, 1_795_421_717.9999, 4_102_444_799.999, 1_709_164_800.001,
        ])
    func timestamps(seconds: Double) {
        let date = Date(timeIntervalSince1970: seconds)
        var out: [UInt8] = []
        RFC3339.write(date, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == DeadLetterTime.format(date))
    }

    @Test("latency in milliseconds, shortest form, three decimals at most")
    func milliseconds() {
        func text(_ duration: Duration) -> String {
            var out: [UInt8] = []
            ResultRecord.writeMilliseconds(duration, into: &out)
            return String(decoding: out, as: UTF8.self)
        }
        #expect(text(.zero) == "0")
        #expect(text(.milliseconds(12)) == "12")
        #expect(text(.microseconds(12_500)) == "12.5")
        #expect(text(.microseconds(12_050)) == "12.05")
        #expect(text(.microseconds(12_345)) == "12.345")
        #expect(text(.nanoseconds(1_499)) == "0.001")
        #expect(text(.seconds(90)) == "90000")
    }
}
