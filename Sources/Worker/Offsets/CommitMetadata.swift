import Foundation

/// What a committed offset says beyond itself, in the commit's metadata string: which offsets above
/// it are done as well, and, for replay's cursors, which run has reserved them.
///
/// Kafka stores a string of up to `offset.metadata.max.bytes` (4,096 by default) with each committed
/// offset and gives it back with the offset. The worker writes
///
///     apns-worker/1 c=<committed offset> d=<done ranges> [l=<holder>@<expiry, ms since 1970>] s=<checksum>
///
/// `d` is the done ranges from the committed offset on as unsigned LEB128 pairs (the gap before a
/// range, its length minus one; the first gap counts from the committed offset itself), base64url
/// without padding. Where the done offsets are scattered (many short runs: what is still in flight
/// near the top), a bitmap is shorter and is written instead as `m=<bits>` (bit i, least significant
/// first, is offset committed + i), base64url too. A commit's own metadata never names its offset
/// (that record is the first not done); a progress record written when a revocation could not
/// commit does (everything from the broker's committed offset on that was finished). `s` is
/// FNV-1a (32 bits, hex) of everything before it. A reader trusts nothing it cannot check: a string of another program or version, a
/// truncated or altered one, or one written for another committed offset (someone moved the offset
/// without it) is refused, and the offset alone counts, so nothing is skipped that has no result.
package struct CommitMetadata: Equatable, Sendable {
    /// The committed offset the string was written with.
    package var committed: Int64
    /// Offsets from `committed` on that are done too.
    package var done: OffsetRanges
    package var reservation: Reservation?

    /// A replay run's reservation of a cursor: its id and until when.
    package struct Reservation: Equatable, Sendable {
        /// Letters, digits and `._:-`, at most 64.
        package var holder: String
        /// Milliseconds since 1970.
        package var expires: Int64

        var expiryDate: Date { Date(timeIntervalSince1970: Double(expires) / 1000) }

        /// A holder id of the form replay runs write (`makeRunID`): letters, digits and `._:-`, 1 to 64.
        var holderIsValid: Bool {
            (1...64).contains(holder.utf8.count)
                && holder.unicodeScalars.allSatisfy {
                    $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._:-".unicodeScalars.contains($0))
                }
        }

        /// Why no replay run reserving for `duration` could have written this reservation, if none could: a
        /// holder of another form, or an expiry further ahead of `now` than `duration` (and a few
        /// minutes of clocks apart).
        func implausibility(now: Date, duration: Duration) -> String? {
            guard holderIsValid else { return "a holder id no replay run writes" }
            let latest = now.addingTimeInterval(duration.seconds + 300)
            guard expiryDate <= latest else {
                return
                    "an expiry at \(expires) ms, beyond \(DeadLetterTime.format(latest)), longer than any run reserves"
            }
            return nil
        }
    }

    static let prefix = "apns-worker/1 "

    package init(committed: Int64, done: OffsetRanges = OffsetRanges(), reservation: Reservation? = nil) {
        self.committed = committed
        self.done = done
        self.done.removeAll(below: committed)
        self.reservation = reservation
    }

    /// The string to commit, at most `maxBytes` long. What does not fit is left out from the top:
    /// the highest done ranges are then not recorded (a crash would push those events again), and
    /// `omitted` says how many offsets that leaves out.
    package func encoded(maxBytes: Int = 4096) -> (text: String, omitted: Int64) {
        let runs = text(ranges: done.ranges.count)
        let span = (done.ranges.last?.upperBound ?? committed) - committed
        // A bitmap costs a bit per offset of the span; only worth building when it can be shorter.
        let bitmap = span / 6 < runs.utf8.count ? text(bitmapOffsets: span) : nil
        let whole = bitmap.map { $0.utf8.count < runs.utf8.count ? $0 : runs } ?? runs
        if whole.utf8.count <= maxBytes { return (whole, 0) }
        // What fits: the longest prefix of ranges, or of the bitmap, whichever records more.
        var low = 0
        var high = done.ranges.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if text(ranges: middle).utf8.count <= maxBytes { low = middle } else { high = middle - 1 }
        }
        let keptRuns = done.prefix(low)
        let overhead = text(bitmapOffsets: 0).utf8.count
        let bits = Int64(max(0, maxBytes - overhead)) / 4 * 3 * 8
        var keptBits = done
        keptBits.removeAll(atOrAbove: committed + bits)
        if keptBits.count > keptRuns.count {
            return (text(bitmapOffsets: bits), done.count - keptBits.count)
        }
        return (text(ranges: low), done.count - keptRuns.count)
    }

    private func text(ranges count: Int) -> String {
        var bytes: [UInt8] = []
        var previous = committed - 1
        for range in done.ranges.prefix(count) {
            Self.appendVarint(UInt64(range.lowerBound - previous - 1), to: &bytes)
            Self.appendVarint(UInt64(range.count - 1), to: &bytes)
            previous = range.upperBound - 1
        }
        return signed("d=" + Self.base64url(bytes))
    }

    /// The done offsets among the `count` above the committed one, a bit each.
    private func text(bitmapOffsets count: Int64) -> String {
        var bytes = [UInt8](repeating: 0, count: Int((count + 7) / 8))
        let first = committed
        for range in done.ranges where range.lowerBound < first + count {
            for offset in range.clamped(to: first..<first + count) {
                let bit = Int(offset - first)
                bytes[bit / 8] |= 1 << UInt8(bit % 8)
            }
        }
        return signed("m=" + Self.base64url(bytes))
    }

    private func signed(_ doneField: String) -> String {
        var body = Self.prefix + "c=\(committed) " + doneField
        if let reservation { body += " l=\(reservation.holder)@\(reservation.expires)" }
        return body + " s=" + Self.checksum(body)
    }

    /// Why a commit's metadata string was not used.
    package enum Problem: Error, Equatable, CustomStringConvertible {
        /// Not written by the worker (another program, or none of ours): nothing to read.
        case foreign
        /// Ours, but truncated, altered or of a version this release does not read.
        case corrupt(String)
        /// Written with another committed offset: the offset was moved without it.
        case stale(writtenWith: Int64)

        package var description: String {
            switch self {
            case .foreign: "not written by apns-worker"
            case .corrupt(let why): "unreadable (\(why))"
            case .stale(let written): "written for offset \(written), not the committed one"
            }
        }
    }

    /// The committed offset a string of ours says it was written for, unchecked (`decode` checks).
    package static func writtenFor(_ text: String) -> Int64? {
        guard text.hasPrefix(prefix) else { return nil }
        for field in text.dropFirst(prefix.count).split(separator: " ") where field.hasPrefix("c=") {
            return Int64(field.dropFirst(2))
        }
        return nil
    }

    /// Reads a commit's metadata string, checking it against the offset it came with.
    package static func decode(_ text: String, committed: Int64) throws(Problem) -> CommitMetadata {
        guard text.hasPrefix(prefix) else {
            if text.hasPrefix("apns-worker/") { throw .corrupt("an unknown version") }
            throw .foreign
        }
        guard let checksumRange = text.range(of: " s=", options: .backwards) else { throw .corrupt("no checksum") }
        let body = String(text[..<checksumRange.lowerBound])
        guard String(text[checksumRange.upperBound...]) == checksum(body) else { throw .corrupt("checksum mismatch") }
        var fields: [String: String] = [:]
        for field in body.dropFirst(prefix.count).split(separator: " ") {
            guard let equals = field.firstIndex(of: "=") else { throw .corrupt("a field without '='") }
            fields[String(field[..<equals])] = String(field[field.index(after: equals)...])
        }
        guard let written = fields["c"].flatMap({ Int64($0) }), written >= 0, written < Int64.max / 4 else {
            throw .corrupt("no committed offset")
        }
        guard written == committed else { throw .stale(writtenWith: written) }
        var done = OffsetRanges()
        if let encoded = fields["d"] {
            guard let bytes = base64urlDecoded(encoded) else { throw .corrupt("bad ranges") }
            var index = 0
            var previous = committed - 1
            while index < bytes.count {
                guard let gap = readVarint(bytes, &index), let length = readVarint(bytes, &index),
                    gap < UInt64(Int64.max / 4), length < UInt64(Int64.max / 4)
                else { throw .corrupt("bad ranges") }
                let lower = previous + 1 + Int64(gap)
                let upper = lower + Int64(length) + 1
                guard upper < Int64.max / 2 else { throw .corrupt("bad ranges") }
                done.insert(lower..<upper)
                previous = upper - 1
            }
        } else if let encoded = fields["m"] {
            guard let bytes = base64urlDecoded(encoded) else { throw .corrupt("bad bitmap") }
            for (index, byte) in bytes.enumerated() where byte != 0 {
                for bit in 0..<8 where byte & (1 << UInt8(bit)) != 0 {
                    done.insert(committed + Int64(index * 8 + bit))
                }
            }
        } else {
            throw .corrupt("no done offsets")
        }
        var reservation: Reservation?
        if let text = fields["l"] {
            guard let at = text.lastIndex(of: "@"), let expires = Int64(text[text.index(after: at)...]) else {
                throw .corrupt("bad reservation")
            }
            reservation = Reservation(holder: String(text[..<at]), expires: expires)
        }
        return CommitMetadata(committed: committed, done: done, reservation: reservation)
    }

    // MARK: encoding pieces

    private static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private static func readVarint(_ bytes: [UInt8], _ index: inout Int) -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.count, shift < 64 {
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    private static func base64url(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    private static func base64urlDecoded(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map(Array.init)
    }

    private static func checksum(_ text: String) -> String {
        var hash: UInt32 = 0x811C_9DC5
        for byte in text.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}
