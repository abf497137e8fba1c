import Foundation
import Kafka
import Logging
import Synchronization

/// The backlog: valid alert events, each to a device token of its own (the simulator accepts any).
enum Backlog {
    /// WORKER_BENCH_METADATA_BYTES: this many bytes of padding in each event's metadata, for
    /// large records (a notification payload is at most 5 KB; metadata is the producer's).
    static let padding: String = {
        guard let bytes = Int(ProcessInfo.processInfo.environment["WORKER_BENCH_METADATA_BYTES"] ?? ""), bytes > 0
        else { return "" }
        return #","padding":""# + String(repeating: "x", count: bytes) + #"""#
    }()

    /// Event `index`, with id `bench-INDEX` unless given another.
    static func event(_ index: Int, id: String? = nil) -> [UInt8] {
        var random = UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15 | 1
        var token = ""
        for _ in 0..<4 {
            random ^= random << 13
            random ^= random >> 7
            random ^= random << 17
            token += String(random, radix: 16).leftPadded(to: 16)
        }
        let text =
            #"{"id":"\#(id ?? "bench-\(index)")","deviceToken":"\#(token)","environment":"production","#
            + #""topic":"\#(Peers.topic(ofEvent: index))","pushType":"alert","priority":10,"collapseId":"bench-\#(index % 10)","#
            + #""payload":{"aps":{"alert":{"title":"Hello","body":"Benchmark notification \#(index)"},"badge":\#(index % 9)}},"#
            + #""metadata":{"tenant":"bench","index":\#(index)\#(padding)}}"#
        return Array(text.utf8)
    }

    /// Produces `count` events to the input topic (or `topic`) and waits for Kafka to acknowledge
    /// them all. Returns the seconds it took.
    static func produce(_ count: Int, topic: String = Peers.inputTopic, bootstrap: String, logger: Logger) async throws
        -> Double
    {
        var configuration = KafkaProducerConfiguration(bootstrapServers: bootstrap)
        configuration.properties = ["linger.ms": "5"]
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        let failures = Atomic<Int>(0)
        let start = ContinuousClock.now
        for index in 0..<count {
            let message = KafkaProducerMessage(
                topic: topic, key: Array("bench-\(index)".utf8), value: event(index))
            try await producer.send(message) {
                if case .failure = $0 { failures.add(1, ordering: .relaxed) }
            }
        }
        try await producer.flush(timeout: .seconds(300))
        let elapsed = seconds(ContinuousClock.now - start)
        await producer.close()
        guard failures.load(ordering: .relaxed) == 0 else {
            throw BenchmarkFailure("\(failures.load(ordering: .relaxed)) backlog events were not acknowledged")
        }
        return elapsed
    }
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
