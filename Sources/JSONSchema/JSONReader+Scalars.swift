/// Strings and numbers: the parts of the grammar that look at single bytes.
extension JSONReader {
    /// Parses a string starting at its opening quote. ASCII without escapes (most strings) is
    /// copied in one go; anything else goes through a checked UTF-8 and escape decoder.
    mutating func parseString() throws(JSONParseError) -> String {
        pos += 1
        let start = pos
        while pos < bytes.count {
            let b = bytes[pos]
            if b == UInt8(ascii: "\"") {
                let s = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<pos]), as: UTF8.self)
                pos += 1
                return s
            }
            if b == UInt8(ascii: "\\") || b < 0x20 || b >= 0x80 { break }
            pos += 1
        }
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<pos]))
        while true {
            guard pos < bytes.count else { throw error("unexpected end of input inside a string", at: start - 1) }
            let b = bytes[pos]
            switch b {
            case UInt8(ascii: "\""):
                pos += 1
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                try parseEscape(into: &out)
            case 0..<0x20:
                throw error("control character U+\(hex(b, width: 4)) in a string must be escaped")
            case 0x20..<0x80:
                out.append(b)
                pos += 1
            default:
                let n = utf8SequenceLength(at: pos)
                guard n > 0 else { throw error("invalid UTF-8 byte 0x\(hex(b, width: 2)) in a string") }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[pos..<pos + n]))
                pos += n
            }
        }
    }

    /// The length of the well-formed UTF-8 sequence at `i` (RFC 3629 table), or 0.
    func utf8SequenceLength(at i: Int) -> Int {
        let b0 = bytes[i]
        func cont(_ k: Int, _ lo: UInt8 = 0x80, _ hi: UInt8 = 0xBF) -> Bool {
            i + k < bytes.count && bytes[i + k] >= lo && bytes[i + k] <= hi
        }
        switch b0 {
        case 0xC2...0xDF: return cont(1) ? 2 : 0
        case 0xE0: return cont(1, 0xA0) && cont(2) ? 3 : 0
        case 0xE1...0xEC, 0xEE...0xEF: return cont(1) && cont(2) ? 3 : 0
        case 0xED: return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0
        case 0xF0: return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0
        case 0xF1...0xF3: return cont(1) && cont(2) && cont(3) ? 4 : 0
        case 0xF4: return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0
        default: return 0
        }
    }

    mutating func parseEscape(into out: inout [UInt8]) throws(JSONParseError) {
        let escapeStart = pos
        pos += 1
        guard pos < bytes.count else { throw error("unexpected end of input inside a string") }
        let c = bytes[pos]
        pos += 1
        switch c {
        case UInt8(ascii: "\""): out.append(0x22)
        case UInt8(ascii: "\\"): out.append(0x5C)
        case UInt8(ascii: "/"): out.append(0x2F)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if scalar >= 0xD800 && scalar <= 0xDBFF {
                guard pos + 1 < bytes.count, bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u")
                else {
                    throw error("unpaired surrogate escape \\u\(hex(scalar, width: 4))", at: escapeStart)
                }
                pos += 2
                let low = try parseHex4()
                guard low >= 0xDC00 && low <= 0xDFFF else {
                    throw error("unpaired surrogate escape \\u\(hex(scalar, width: 4))", at: escapeStart)
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                throw error("unpaired surrogate escape \\u\(hex(scalar, width: 4))", at: escapeStart)
            }
            out.append(contentsOf: Unicode.UTF8.encode(Unicode.Scalar(scalar)!)!)
        default:
            throw error("invalid escape sequence '\\\(Character(Unicode.Scalar(c)))'", at: escapeStart)
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard pos < bytes.count else { throw error("unexpected end of input in a \\u escape") }
            let b = bytes[pos]
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - 48
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - 87
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - 55
            default: throw error("invalid hex digit in a \\u escape")
            }
            v = v << 4 | UInt32(d)
            pos += 1
        }
        return v
    }

    /// RFC 8259 number grammar; the value is kept exactly (see ``JSONNumber``).
    mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let start = pos
        var negative = false
        if bytes[pos] == UInt8(ascii: "-") {
            negative = true
            pos += 1
        }
        let intStart = pos
        guard pos < bytes.count, isDigit(bytes[pos]) else { throw error("invalid number: expected a digit", at: start) }
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
            if pos < bytes.count && isDigit(bytes[pos]) {
                throw error("invalid number: leading zeros are not allowed", at: start)
            }
        } else {
            while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
        }
        let intEnd = pos
        var fracEnd = pos
        if pos < bytes.count && bytes[pos] == UInt8(ascii: ".") {
            pos += 1
            guard pos < bytes.count, isDigit(bytes[pos]) else {
                throw error("invalid number: expected a digit after the decimal point", at: start)
            }
            while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
            fracEnd = pos
        }
        var exponent = 0
        var hasExponent = false
        if pos < bytes.count && (bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E")) {
            hasExponent = true
            pos += 1
            var expNegative = false
            if pos < bytes.count && (bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-")) {
                expNegative = bytes[pos] == UInt8(ascii: "-")
                pos += 1
            }
            guard pos < bytes.count, isDigit(bytes[pos]) else {
                throw error("invalid number: expected a digit in the exponent", at: start)
            }
            while pos < bytes.count && isDigit(bytes[pos]) {
                exponent = exponent * 10 + Int(bytes[pos] - 48)
                if exponent > 999_999_999 { throw error("invalid number: exponent out of range", at: start) }
                pos += 1
            }
            if expNegative { exponent = -exponent }
        }
        // Fast path: a plain integer of at most 18 digits.
        if fracEnd == intEnd && !hasExponent && intEnd - intStart <= 18 {
            var v: Int64 = 0
            for i in intStart..<intEnd { v = v * 10 + Int64(bytes[i] - 48) }
            return JSONNumber(int64: negative ? -v : v)
        }
        var digits: [UInt8] = []
        digits.reserveCapacity(fracEnd - intStart)
        for i in intStart..<intEnd { digits.append(bytes[i] - 48) }
        let fracStart = intEnd + 1
        if fracEnd > intEnd {
            for i in fracStart..<fracEnd { digits.append(bytes[i] - 48) }
        }
        let fractionDigits = fracEnd > intEnd ? fracEnd - fracStart : 0
        return JSONNumber(negative: negative, digits: digits, exponent: exponent - fractionDigits)
    }

    func isDigit(_ b: UInt8) -> Bool { b >= 48 && b <= 57 }
}
