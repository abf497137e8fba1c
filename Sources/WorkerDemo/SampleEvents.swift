import APNsSimulator
import Foundation
import Kafka
import Worker

/// A mixed batch of notification events, with the outcome each should end in, and the simulator
/// set up to give those outcomes: registered devices, an unregistered one, unknown ones, and tokens
/// that are throttled (429) before they are accepted.
package struct SampleBatch: Sendable {
    /// Records for the input topic, keyed by event id.
    package var records: [KafkaProducerMessage] = []
    /// What each event id should end as.
    package var expected: [String: ResultOutcome] = [:]
    /// Event ids expected to need more than one attempt (throttled first).
    package var throttled: Set<String> = []

    package var expectedCounts: [ResultOutcome: Int] {
        expected.values.reduce(into: [:]) { $0[$1, default: 0] += 1 }
    }

    /// Event ids whose outcome comes with a dead letter.
    package var expectedDeadLetters: Int {
        expected.values.filter { $0 == .invalid || $0 == .failed }.count
    }

    /// `count` events in these proportions: 70% alerts, 8% background, 7% VoIP, 4% throttled then
    /// accepted, 3% unregistered token, 3% unknown token, 3% not JSON, 2% schema-invalid. Their ids
    /// are UUIDs (the same for the same seed), so every event that reaches APNs carries its own id as
    /// its `apns-id`, the same each time it is sent.
    package static func mixed(count: Int, topic: String, simulator: Simulator, seed: UInt64 = 1) -> SampleBatch {
        var batch = SampleBatch()
        var random = SplitMix(state: seed)
        var ids = SplitMix(state: ~seed)
        let bundle = EmbeddedStack.bundleID
        let unregistered = token(&random)
        simulator.devices.unregister(unregistered, at: Date().timeIntervalSince1970 - 86_400)

        for index in 0..<count {
            let id = uuid(&ids)
            let roll = Int(random.next() % 100)
            let deviceToken = token(&random)
            var event: [String: Any] = ["id": id, "deviceToken": deviceToken, "environment": "production"]
            var outcome = ResultOutcome.delivered
            var bytes: [UInt8]?
            switch roll {
            case 0..<70:
                simulator.devices.register(deviceToken)
                event["topic"] = bundle
                event["pushType"] = "alert"
                event["priority"] = 10
                event["collapseId"] = "demo-\(index % 10)"
                event["payload"] = [
                    "aps": ["alert": ["title": "Hello", "body": "Demo notification \(index)"], "badge": index % 9]
                ]
                event["metadata"] = ["tenant": "demo", "index": index]
            case 70..<78:
                simulator.devices.register(deviceToken)
                event["topic"] = bundle
                event["pushType"] = "background"
                event["priority"] = 5
                event["payload"] = ["aps": ["content-available": 1], "sync": index]
            case 78..<85:
                simulator.devices.register(deviceToken)
                event["topic"] = bundle + ".voip"
                event["pushType"] = "voip"
                event["priority"] = 10
                event["expiration"] = 0
                event["payload"] = ["caller": "Demo", "callId": "call-\(index)"]
            case 85..<89:
                simulator.devices.register(deviceToken)
                simulator.faults.script(deviceToken: deviceToken, [.tooManyRequests, nil])
                event["topic"] = bundle
                event["pushType"] = "alert"
                event["payload"] = ["aps": ["alert": "throttled once, then delivered"]]
                batch.throttled.insert(id)
            case 89..<92:
                event["deviceToken"] = unregistered
                event["topic"] = bundle
                event["pushType"] = "alert"
                event["payload"] = ["aps": ["alert": "to a token the app no longer has"]]
                outcome = .unregistered
            case 92..<95:
                // Never registered: the simulator answers 400 BadDeviceToken, as APNs does.
                event["topic"] = bundle
                event["pushType"] = "alert"
                event["payload"] = ["aps": ["alert": "to a token APNs never issued"]]
                outcome = .rejected
            case 95..<98:
                bytes = Array(#"{"id": "\#(id)", "deviceToken": "\#(deviceToken)", "topic": "#.utf8)  // cut short
                outcome = .invalid
            default:
                // Valid JSON, but background pushes must not use priority 10.
                event["topic"] = bundle
                event["pushType"] = "background"
                event["priority"] = 10
                event["payload"] = ["aps": ["content-available": 1]]
                outcome = .invalid
            }
            let value =
                bytes ?? Array((try? JSONSerialization.data(withJSONObject: event, options: [.sortedKeys])) ?? Data())
            batch.records.append(
                KafkaProducerMessage(
                    topic: topic, key: Array(id.utf8), value: value,
                    headers: [KafkaHeader(key: "source", string: "apns-worker demo")]))
            batch.expected[id] = outcome
        }
        return batch
    }

    /// Adds `count` Live Activity updates broadcast to `channel` (a score changing), the last one
    /// ending the activity, each expected `delivered`. Their ids are `broadcast-<n>`.
    package mutating func addBroadcasts(channel: String, count: Int, topic: String) {
        let start = 1_767_225_600
        for index in 0..<count {
            let id = "broadcast-\(index)"
            let last = index == count - 1
            var aps: [String: Any] = [
                "timestamp": start + 60 * index, "event": last ? "end" : "update",
                "content-state": ["home": index / 2, "away": (index + 1) / 3, "minute": 15 * (index + 1)],
            ]
            if last { aps["dismissal-date"] = start + 60 * index + 900 }
            let event: [String: Any] = [
                "id": id, "channelId": channel, "topic": EmbeddedStack.bundleID, "pushType": "liveactivity",
                "priority": last ? 10 : 5, "expiration": 0, "payload": ["aps": aps],
                "metadata": ["match": "demo-final"],
            ]
            let value = Array((try? JSONSerialization.data(withJSONObject: event, options: [.sortedKeys])) ?? Data())
            records.append(
                KafkaProducerMessage(
                    topic: topic, key: Array(id.utf8), value: value,
                    headers: [KafkaHeader(key: "source", string: "apns-worker demo")]))
            expected[id] = .delivered
        }
    }

    /// A version-4 UUID in lowercase, drawn from its own generator: the other draws of a batch stay
    /// what they were for its seed.
    private static func uuid(_ random: inout SplitMix) -> String {
        let high = random.next() & ~0xF000 | 0x4000
        let low = random.next() & ~(0xC << 60) | 0x8 << 60
        let hex = String(format: "%016llx%016llx", high, low)
        let groups = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            hex.utf8.dropFirst(range.lowerBound).prefix(range.count)
        }
        return groups.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "-")
    }

    private static func token(_ random: inout SplitMix) -> String {
        (0..<4).map { _ in String(format: "%016llx", random.next()) }.joined()
    }
}

/// A small deterministic generator, so a demo run is the same every time.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
