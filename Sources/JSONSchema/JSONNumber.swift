/// A JSON number with its exact decimal value.
///
/// Integers below 10^18 in magnitude (nearly every number in practice) are held as an `Int64`;
/// anything else as a normalized decimal: a sign, a significand's digits with no leading or trailing
/// zeros, and a power of ten. Every value has exactly one form, so equality and hashing are
/// structural, `1.0 == 1`, and `0.1` really is a tenth when `multipleOf` divides by it.
package struct JSONNumber: Sendable, Hashable {
    enum Storage: Sendable, Hashable {
        case int(Int64)
        /// value = (negative ? -1 : 1) * digits * 10^exponent; digits non-empty, no leading or
        /// trailing zeros, each 0...9.
        case decimal(negative: Bool, digits: [UInt8], exponent: Int)
    }

    let storage: Storage

    private init(storage: Storage) {
        self.storage = storage
    }

    /// 10^18: integers strictly below this magnitude are stored as `Int64`.
    static let smallIntLimit: Int64 = 1_000_000_000_000_000_000

    package init(_ value: Int) {
        self.init(int64: Int64(value))
    }

    package init(int64 value: Int64) {
        if value > -Self.smallIntLimit && value < Self.smallIntLimit {
            self.init(storage: .int(value))
        } else {
            let magnitude = value.magnitude
            let digits = String(magnitude).utf8.map { $0 - 48 }
            self.init(negative: value < 0, digits: digits, exponent: 0)
        }
    }

    /// A number from the shortest decimal that round-trips `value`. Not finite values are not JSON.
    package init?(_ value: Double) {
        guard value.isFinite else { return nil }
        guard let parsed = try? JSONParser.parse(Array(value.description.utf8)), case .number(let n) = parsed else {
            return nil
        }
        self = n
    }

    /// Normalizes sign, digits (each 0...9, possibly with leading or trailing zeros) and exponent.
    init(negative: Bool, digits: [UInt8], exponent: Int) {
        var start = 0
        var end = digits.count
        while start < end && digits[start] == 0 { start += 1 }
        var exp = exponent
        while end > start && digits[end - 1] == 0 {
            end -= 1
            exp += 1
        }
        if start == end {
            storage = .int(0)
            return
        }
        let count = end - start
        if exp >= 0 && count + exp <= 18 {
            var v: Int64 = 0
            for i in start..<end { v = v * 10 + Int64(digits[i]) }
            for _ in 0..<exp { v *= 10 }
            storage = .int(negative ? -v : v)
            return
        }
        storage = .decimal(negative: negative, digits: Array(digits[start..<end]), exponent: exp)
    }

    /// True when the value has no fractional part (`1.0` is an integer, as JSON Schema says).
    package var isInteger: Bool {
        switch storage {
        case .int: return true
        case .decimal(_, _, let exponent): return exponent >= 0
        }
    }

    /// The value when it is an integer that fits in `Int64`.
    package var int64Value: Int64? {
        switch storage {
        case .int(let v): return v
        case .decimal(let negative, let digits, let exponent):
            guard exponent >= 0, digits.count + exponent <= 19 else { return nil }
            var v: Int64 = 0
            for d in digits {
                let (m, o1) = v.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(negative ? -Int64(d) : Int64(d))
                if o1 || o2 { return nil }
                v = a
            }
            for _ in 0..<exponent {
                let (m, o) = v.multipliedReportingOverflow(by: 10)
                if o { return nil }
                v = m
            }
            return v
        }
    }

    package var intValue: Int? { int64Value.map { Int($0) } }

    /// The nearest `Double` (may round or overflow to infinity for extreme values).
    package var doubleValue: Double {
        switch storage {
        case .int(let v): return Double(v)
        case .decimal: return Double(scientificDescription) ?? .nan
        }
    }

    package var isNegative: Bool {
        switch storage {
        case .int(let v): return v < 0
        case .decimal(let negative, _, _): return negative
        }
    }

    package var isZero: Bool {
        if case .int(0) = storage { return true }
        return false
    }

    /// Sign, digits and exponent whatever the storage.
    var decimalParts: (negative: Bool, digits: [UInt8], exponent: Int) {
        switch storage {
        case .decimal(let n, let d, let e): return (n, d, e)
        case .int(let v):
            if v == 0 { return (false, [], 0) }
            var digits = String(v.magnitude).utf8.map { $0 - 48 }
            var exp = 0
            while digits.last == 0 {
                digits.removeLast()
                exp += 1
            }
            return (v < 0, digits, exp)
        }
    }

    var scientificDescription: String {
        let (negative, digits, exponent) = decimalParts
        if digits.isEmpty { return "0" }
        var s = negative ? "-" : ""
        s += String(decoding: digits.map { $0 + 48 }, as: UTF8.self)
        if exponent != 0 { s += "e\(exponent)" }
        return s
    }
}

extension JSONNumber: Comparable {
    package static func < (lhs: JSONNumber, rhs: JSONNumber) -> Bool {
        compare(lhs, rhs) < 0
    }

    /// -1, 0 or 1, exactly.
    static func compare(_ a: JSONNumber, _ b: JSONNumber) -> Int {
        if case .int(let x) = a.storage, case .int(let y) = b.storage {
            return x < y ? -1 : (x == y ? 0 : 1)
        }
        let pa = a.decimalParts
        let pb = b.decimalParts
        let signA = pa.digits.isEmpty ? 0 : (pa.negative ? -1 : 1)
        let signB = pb.digits.isEmpty ? 0 : (pb.negative ? -1 : 1)
        if signA != signB { return signA < signB ? -1 : 1 }
        if signA == 0 { return 0 }
        let magnitude = compareMagnitude(pa.digits, pa.exponent, pb.digits, pb.exponent)
        return signA < 0 ? -magnitude : magnitude
    }

    static func compareMagnitude(_ da: [UInt8], _ ea: Int, _ db: [UInt8], _ eb: Int) -> Int {
        // Position of the leading digit decides first; then digit by digit.
        let leadA = da.count + ea
        let leadB = db.count + eb
        if leadA != leadB { return leadA < leadB ? -1 : 1 }
        let n = max(da.count, db.count)
        for i in 0..<n {
            let x = i < da.count ? da[i] : 0
            let y = i < db.count ? db[i] : 0
            if x != y { return x < y ? -1 : 1 }
        }
        return 0
    }
}

extension JSONNumber {
    /// Whether `self / divisor` is an integer, computed exactly when the divisor's significand
    /// (scaled to the common exponent) has at most 37 digits, which covers every practical
    /// `multipleOf`. Beyond that it falls back to `Double` division, as most validators do everywhere.
    package func isMultiple(of divisor: JSONNumber) -> Bool {
        if isZero { return true }
        if divisor.isZero { return false }
        if case .int(let a) = storage, case .int(let b) = divisor.storage {
            return a % b == 0
        }
        let a = decimalParts
        let b = divisor.decimalParts
        // A non-zero value smaller than the divisor is no multiple of it (and must not reach the
        // Double fallback, where 1 / 1e999 rounds to 0, an integer).
        if Self.compareMagnitude(a.digits, a.exponent, b.digits, b.exponent) < 0 { return false }
        let e = min(a.exponent, b.exponent)
        let bScale = b.exponent - e
        let aScale = a.exponent - e
        if b.digits.count + bScale <= 37 {
            // modulus < 10^37 < 2^123, so r * 10 + 9 never overflows.
            var modulus: UInt128 = 0
            for d in b.digits { modulus = modulus * 10 + UInt128(d) }
            for _ in 0..<bScale { modulus *= 10 }
            var r: UInt128 = 0
            for d in a.digits { r = (r * 10 + UInt128(d)) % modulus }
            if aScale <= 10_000 {
                for _ in 0..<aScale where r != 0 { r = r * 10 % modulus }
                return r == 0
            }
            if modulus < UInt128(1) << 63 {
                return r * Self.powerOfTen(aScale, modulo: modulus) % modulus == 0
            }
        }
        let q = doubleValue / divisor.doubleValue
        return q.isFinite && q == q.rounded()
    }

    private static func powerOfTen(_ exponent: Int, modulo m: UInt128) -> UInt128 {
        var result: UInt128 = 1 % m
        var base: UInt128 = 10 % m
        var e = exponent
        while e > 0 {
            if e & 1 == 1 { result = result * base % m }
            base = base * base % m
            e >>= 1
        }
        return result
    }
}

extension JSONNumber: CustomStringConvertible {
    /// Plain notation where it stays short, scientific otherwise.
    package var description: String {
        switch storage {
        case .int(let v): return String(v)
        case .decimal(let negative, let digits, let exponent):
            let ds = String(decoding: digits.map { $0 + 48 }, as: UTF8.self)
            let sign = negative ? "-" : ""
            if exponent >= 0 && digits.count + exponent <= 40 {
                return sign + ds + String(repeating: "0", count: exponent)
            }
            if exponent < 0 && -exponent < digits.count {
                let point = ds.index(ds.startIndex, offsetBy: digits.count + exponent)
                return sign + ds[..<point] + "." + ds[point...]
            }
            if exponent < 0 && -exponent - digits.count < 10 {
                return sign + "0." + String(repeating: "0", count: -exponent - digits.count) + ds
            }
            let first = ds.prefix(1)
            let rest = ds.dropFirst()
            let e = exponent + digits.count - 1
            return sign + first + (rest.isEmpty ? "" : "." + rest) + "e" + (e >= 0 ? "+" : "") + String(e)
        }
    }
}
