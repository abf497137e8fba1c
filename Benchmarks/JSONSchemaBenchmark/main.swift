// Validations per second of notification events on one core: schema only (the figure compared with
// Python's jsonschema), parse + schema, and the worker's full decode (parse + schema + APNs rules).
// Usage: JSONSchemaBenchmark SCHEMA EVENT... ; prints one line per (measure, event):
//   <measure> <event file name> <validations per second>
import Foundation
import JSONSchema
import Worker

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: JSONSchemaBenchmark SCHEMA EVENT...\n".utf8))
    exit(2)
}
let seconds = Double(ProcessInfo.processInfo.environment["BENCH_SECONDS"] ?? "") ?? 1.0
/// BENCH_ONLY=full-decode (say) runs one measure, for profiling.
let only = ProcessInfo.processInfo.environment["BENCH_ONLY"]

func report(_ measure: String, _ name: String, _ suffix: String = "", _ body: () -> Bool) {
    if let only, only != measure { return }
    print("\(measure) \(name) \(Int(rate(body)))\(suffix)")
}

func read(_ path: String) -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        FileHandle.standardError.write(Data("cannot read \(path)\n".utf8))
        exit(2)
    }
    return [UInt8](data)
}

let schema = try JSONSchema(JSONParser.parse(read(arguments.first!)))
let decoder = NotificationEventDecoder(schema: schema)

/// BENCH_ITERATIONS=N runs each measure exactly N times and prints N instead of a rate: for
/// instruction counting under valgrind, which is immune to the machine's other load.
let iterations = Int(ProcessInfo.processInfo.environment["BENCH_ITERATIONS"] ?? "")

/// Runs `body` in batches for `seconds`, three times after a warm-up; returns the median rate.
func rate(_ body: () -> Bool) -> Double {
    if let iterations {
        var sink = 0
        for _ in 0..<iterations where body() { sink &+= 1 }
        return sink == -1 ? 0 : Double(iterations)
    }
    var sink = 0
    func measure(_ duration: Double) -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        var count = 0
        var elapsed = 0.0
        repeat {
            for _ in 0..<1000 where body() { sink &+= 1 }
            count += 1000
            elapsed =
                Double((clock.now - start).components.attoseconds) / 1e18
                + Double((clock.now - start).components.seconds)
        } while elapsed < duration
        return Double(count) / elapsed
    }
    _ = measure(seconds / 4)
    let rates = (0..<3).map { _ in measure(seconds) }.sorted()
    if sink == -1 { print(sink) }
    return rates[1]
}

for path in arguments.dropFirst() {
    let name = (path as NSString).lastPathComponent
    let bytes = read(path)
    let value = try JSONParser.parse(bytes)
    let valid = schema.isValid(value)
    report("schema-only", name, " valid=\(valid)") { schema.isValid(value) }
    report("schema-first-error", name) { schema.validate(value).isEmpty }
    report("parse+schema", name) { (try? JSONParser.parse(bytes)).map(schema.isValid) ?? false }
    report("full-decode", name) { (try? decoder.decode(bytes)) != nil }
}
