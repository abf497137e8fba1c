/// The parsed form of an ECMA-262 pattern, for the subset ``ECMARegex`` runs itself.
indirect enum RegexNode {
    case empty
    case scalar(UInt32)
    case set(ScalarSet)
    case any
    case start
    case end
    case wordBoundary(Bool)
    case concat([RegexNode])
    case alternation([RegexNode])
    case repeated(RegexNode, min: Int, max: Int?)
}

/// A set of code points: sorted ranges, with a bitmap for ASCII (nearly every test is ASCII).
struct ScalarSet: Sendable {
    var ranges: [ClosedRange<UInt32>] = []
    var negated = false
    private(set) var ascii: (UInt64, UInt64) = (0, 0)

    mutating func insert(_ range: ClosedRange<UInt32>) {
        ranges.append(range)
    }

    mutating func insert(_ other: ScalarSet) {
        if other.negated {
            // Complement of `other`, as ranges.
            var next: UInt32 = 0
            for r in other.ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
                if r.lowerBound > next { ranges.append(next...(r.lowerBound - 1)) }
                next = max(next, r.upperBound &+ 1)
            }
            if next <= 0x10FFFF { ranges.append(next...0x10FFFF) }
        } else {
            ranges += other.ranges
        }
    }

    /// Builds the ASCII bitmap; call once the ranges are complete.
    mutating func finish() {
        var lo: UInt64 = 0
        var hi: UInt64 = 0
        for c in UInt32(0)..<128 where rangesContain(c) {
            if c < 64 { lo |= 1 << UInt64(c) } else { hi |= 1 << UInt64(c - 64) }
        }
        ascii = (lo, hi)
    }

    private func rangesContain(_ c: UInt32) -> Bool {
        ranges.contains { $0.contains(c) }
    }

    @inline(__always)
    func contains(_ c: UInt32) -> Bool {
        let inside: Bool
        if c < 64 {
            inside = ascii.0 & (1 << UInt64(c)) != 0
        } else if c < 128 {
            inside = ascii.1 & (1 << UInt64(c - 64)) != 0
        } else {
            inside = rangesContain(c)
        }
        return inside != negated
    }

    static func of(_ ranges: [ClosedRange<UInt32>], negated: Bool = false) -> ScalarSet {
        var s = ScalarSet()
        s.ranges = ranges
        s.negated = negated
        return s
    }

    static let digit = of([48...57])
    static let word = of([48...57, 65...90, 95...95, 97...122])
    /// ECMA-262 WhiteSpace and LineTerminator.
    static let space = of([
        9...13, 32...32, 0xA0...0xA0, 0x1680...0x1680, 0x2000...0x200A, 0x2028...0x2029, 0x202F...0x202F,
        0x205F...0x205F, 0x3000...0x3000, 0xFEFF...0xFEFF,
    ])
    /// What `.` does not match.
    static let lineTerminators = of([10...10, 13...13, 0x2028...0x2029])
    /// What `.` matches: every code point but the line terminators.
    static let dot = of(lineTerminators.ranges, negated: true)
}

/// Why a pattern is not run by ``ECMARegex`` (it then goes to Swift's `Regex`, or is invalid).
enum RegexSyntaxIssue: Error {
    /// Valid ECMA-262 but outside the subset (lookaround, backreferences).
    case unsupported
    case invalid(String)
}
