import Foundation
import Kafka
import Logging

/// What one run's results topic showed.
struct RunFigures {
    var results = 0
    var delivered = 0
    /// From the worker's start (its process launch) to the first result read.
    var firstResult: Double?
    /// From the first result read to the last.
    var drain: Double = 0
    /// Each result's `latencyMs`: from the worker picking the event up to its result being built.
    var latencies: [Double] = []
    /// From each result's `completedAt` (built, about to be produced) to this reader getting it, in
    /// ms: the result's way through the producer, the broker and the reader's fetch.
    var resultLags: [Double] = []
    var peakRSSKiB = 0
    var maxRSSKiB = 0
    var cpuSeconds = 0.0
    var meanInFlight = 0
    /// CPU time the other processes spent during the run (the peers) and this one (the reader).
    var peersCPUSeconds = 0.0
    var readerCPUSeconds = 0.0

    var rate: Double { drain > 0 ? Double(max(results - 1, 0)) / drain : 0 }

    func percentile(_ p: Double, of values: KeyPath<RunFigures, [Double]> = \.latencies) -> Double {
        self[keyPath: values].percentile(p) ?? 0
    }
}

/// Reads a results topic from the beginning (assigned, no group join) until `count` records or the
/// timeout. Counts and scans bytes only, so the reader takes little of the CPU the worker needs.
func readResults(
    topic: String, count: Int, bootstrap: String, timeout: Duration, logger: Logger,
    startWorker: () throws -> ContinuousClock.Instant
) async throws -> RunFigures {
    var configuration = KafkaConsumerConfiguration(bootstrapServers: bootstrap, groupID: "bench-reader-\(topic)")
    configuration.sessionTimeout = .seconds(10)
    // The mock cluster holds a fetch that finds no new data for the whole fetch.wait.max.ms (500 ms by
    // default) even when data arrives meanwhile: a caught-up reader would see results up to 0.5 s late.
    configuration.properties = ["fetch.wait.max.ms": "5"]
    let consumer = try KafkaConsumer(configuration: configuration, logger: logger)
    let partitions = try await consumer.partitions(of: topic)
    try consumer.assign(
        partitions.map { KafkaTopicPartitionOffset(topic: topic, partition: $0, offset: KafkaOffset.beginning) })
    let start = try startWorker()  // once the reader is ready: its set-up is not the worker's time
    let reader = Task {
        var figures = RunFigures()
        figures.latencies.reserveCapacity(count)
        var first: ContinuousClock.Instant?
        var last = ContinuousClock.now
        do {
            for try await record in consumer.messages {
                last = .now
                if first == nil {
                    first = last
                    figures.firstResult = seconds(last - start)
                }
                figures.results += 1
                if let value = record.value {
                    if let latency = number(after: latencyField, in: value) { figures.latencies.append(latency) }
                    if contains(deliveredField, in: value) { figures.delivered += 1 }
                    if let lag = millisecondsSince(completedAtIn: value) { figures.resultLags.append(lag) }
                }
                if figures.results >= count { break }
            }
        } catch {
            logger.error("reading \(topic) stopped: \(error)")
        }
        if let first { figures.drain = seconds(last - first) }
        return figures
    }
    let deadline = Task {
        try await Task.sleep(for: timeout)
        reader.cancel()
    }
    let figures = await reader.value
    deadline.cancel()
    await consumer.close()
    return figures
}

let latencyField = Array(#""latencyMs":"#.utf8)
private let completedAtField = Array(#""completedAt":""#.utf8)

/// Now minus the result's `completedAt` (RFC 3339, UTC, milliseconds), from its time of day only: no
/// date parsing per record.
/// A result read `total` milliseconds after its event's scheduled time, in the three parts
/// `OpenLoop.Step` and `Lanes.Run` report: in (to the worker's decode: the rest), work (the result's
/// `latencyMs`) and out (its `completedAt` to now); `nil` when the result carries neither.
func latencyParts(total: Double, result value: [UInt8]) -> (inbound: Double, work: Double, outbound: Double)? {
    guard let work = number(after: latencyField, in: value), let outbound = millisecondsSince(completedAtIn: value)
    else { return nil }
    return (max(0, total - work - outbound), work, outbound)
}

func millisecondsSince(completedAtIn value: [UInt8]) -> Double? {
    guard let at = find(completedAtField, in: value) else { return nil }
    let start = at + completedAtField.count + 11  // past "YYYY-MM-DDT"
    guard value.count > start + 12 else { return nil }
    func digits(_ offset: Int, _ count: Int) -> Int {
        value[(start + offset)..<(start + offset + count)].reduce(0) { $0 * 10 + Int($1) - 48 }
    }
    let stamp = digits(0, 2) * 3_600_000 + digits(3, 2) * 60_000 + digits(6, 2) * 1000 + digits(9, 3)
    let now = Int((Date().timeIntervalSince1970 * 1000).rounded()) % 86_400_000
    return Double((now - stamp + 86_400_000) % 86_400_000)
}

/// Byte scanning of compact JSON results, shared with `OpenLoop`.
let deliveredField = Array(#""outcome":"delivered""#.utf8)

func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard haystack.count >= needle.count else { return nil }
    var index = 0
    while index <= haystack.count - needle.count {
        if haystack[index] == needle[0], haystack[index..<index + needle.count].elementsEqual(needle) { return index }
        index += 1
    }
    return nil
}

func contains(_ needle: [UInt8], in haystack: [UInt8]) -> Bool { find(needle, in: haystack) != nil }

/// The JSON number right after `field` (compact JSON, as the worker writes it).
func number(after field: [UInt8], in value: [UInt8]) -> Double? {
    guard let at = find(field, in: value) else { return nil }
    var end = at + field.count
    while end < value.count, value[end] != UInt8(ascii: ","), value[end] != UInt8(ascii: "}") { end += 1 }
    return Double(String(decoding: value[(at + field.count)..<end], as: UTF8.self).trimmingCharacters(in: .whitespaces))
}
