/// A strict RFC 8259 syntax check, no allocation: the simulator only needs to know that a payload is a
/// JSON object, and parsing it into Foundation objects would cost more than the rest of the request.
package enum JSONSyntax {
    /// True when `bytes` hold exactly one JSON object (surrounding whitespace allowed).
    package static func isObject(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var parser = Parser(bytes: bytes)
        parser.skipWhitespace()
        guard parser.peek() == UInt8(ascii: "{"), parser.value(depth: 0) else { return false }
        parser.skipWhitespace()
        return parser.index == bytes.count
    }

    private struct Parser {
        let bytes: UnsafeRawBufferPointer
        var index = 0
        static let maximumDepth = 64

        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let c = peek(), c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { index += 1 }
        }

        mutating func expect(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            for i in 0..<count where bytes[index + i] != literal.utf8Start[i] { return false }
            index += count
            return true
        }

        mutating func value(depth: Int) -> Bool {
            guard depth < Self.maximumDepth else { return false }
            skipWhitespace()
            guard let c = peek() else { return false }
            switch c {
            case UInt8(ascii: "{"): return object(depth: depth)
            case UInt8(ascii: "["): return array(depth: depth)
            case UInt8(ascii: "\""): return string()
            case UInt8(ascii: "t"): return expect("true")
            case UInt8(ascii: "f"): return expect("false")
            case UInt8(ascii: "n"): return expect("null")
            default: return number()
            }
        }

        mutating func object(depth: Int) -> Bool {
            index += 1
            skipWhitespace()
            if peek() == UInt8(ascii: "}") {
                index += 1
                return true
            }
            while true {
                skipWhitespace()
                guard peek() == UInt8(ascii: "\""), string() else { return false }
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { return false }
                index += 1
                guard value(depth: depth + 1) else { return false }
                skipWhitespace()
                switch peek() {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    return true
                default: return false
                }
            }
        }

        mutating func array(depth: Int) -> Bool {
            index += 1
            skipWhitespace()
            if peek() == UInt8(ascii: "]") {
                index += 1
                return true
            }
            while true {
                guard value(depth: depth + 1) else { return false }
                skipWhitespace()
                switch peek() {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    return true
                default: return false
                }
            }
        }

        mutating func string() -> Bool {
            index += 1
            index = Self.plainRun(bytes, from: index)
            while let c = peek() {
                index += 1
                switch c {
                case UInt8(ascii: "\""): return true
                case UInt8(ascii: "\\"):
                    guard let e = peek() else { return false }
                    index += 1
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        continue
                    case UInt8(ascii: "u"):
                        for _ in 0..<4 {
                            guard let h = peek(), h.isHexDigit else { return false }
                            index += 1
                        }
                    default: return false
                    }
                case 0..<0x20: return false
                default: continue
                }
            }
            return false
        }

        /// The end of the run of plain string bytes (no quote, backslash or control character) starting at
        /// `start`: eight bytes at a time with the usual SWAR tests (which never miss such a byte), then one by
        /// one. Most of a payload is string contents, so this loop is most of the check.
        static func plainRun(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            let count = bytes.count
            var i = start
            while i + 8 <= count {
                let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                let quote = word ^ (ones &* 0x22)
                let backslash = word ^ (ones &* 0x5C)
                let special =
                    ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word)
                if special & highs != 0 { break }
                i += 8
            }
            while i < count {
                let c = bytes[i]
                if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 { break }
                i += 1
            }
            return i
        }

        mutating func number() -> Bool {
            if peek() == UInt8(ascii: "-") { index += 1 }
            guard let first = peek(), first.isDigit else { return false }
            index += 1
            if first != UInt8(ascii: "0") { digits() }
            if peek() == UInt8(ascii: ".") {
                index += 1
                guard let d = peek(), d.isDigit else { return false }
                digits()
            }
            if let e = peek(), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
                index += 1
                if let s = peek(), s == UInt8(ascii: "+") || s == UInt8(ascii: "-") { index += 1 }
                guard let d = peek(), d.isDigit else { return false }
                digits()
            }
            return true
        }

        mutating func digits() {
            while let d = peek(), d.isDigit { index += 1 }
        }
    }
}

extension UInt8 {
    var isDigit: Bool { self >= 0x30 && self <= 0x39 }
    var isHexDigit: Bool { isDigit || (self >= 0x61 && self <= 0x66) || (self >= 0x41 && self <= 0x46) }
    var isLowerHexDigit: Bool { isDigit || (self >= 0x61 && self <= 0x66) }
}
