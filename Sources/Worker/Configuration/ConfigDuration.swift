import Foundation

/// Durations as the configuration writes them: `"200ms"`, `"1.5s"`, `"10m"`, `"1h"`, or a bare
/// number of seconds (`30`, `0.5`).
enum ConfigDuration {
    static func parse(_ text: String) -> Duration? {
        let text = text.trimmingCharacters(in: .whitespaces)
        let units: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        var number = Substring(text)
        var scale = 1.0
        // "ms" before "m" and "s": the longest suffix wins.
        for unit in units where text.hasSuffix(unit.suffix) {
            number = text.dropLast(unit.suffix.count)
            scale = unit.seconds
            break
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            let value = Double(number), value.isFinite
        else { return nil }
        let nanoseconds = (value * scale * 1e9).rounded()
        guard nanoseconds < Double(Int64.max) else { return nil }
        return .nanoseconds(Int64(nanoseconds))
    }

    /// The shortest exact spelling, for documentation and logs: `200ms`, `30s`, `10m`.
    static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        if milliseconds % 3_600_000 == 0, milliseconds > 0 { return "\(milliseconds / 3_600_000)h" }
        if milliseconds % 60_000 == 0, milliseconds > 0 { return "\(milliseconds / 60_000)m" }
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000)s" }
        return "\(milliseconds)ms"
    }
}
