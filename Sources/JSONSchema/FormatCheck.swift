/// The format checkers themselves: hand-written parsers of the RFC grammars, no regexes.
enum FormatCheck {
    static func digits(_ b: ArraySlice<UInt8>, _ count: Int) -> Int? {
        guard b.count == count, b.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return b.reduce(0) { $0 * 10 + Int($1 - 48) }
    }

    /// RFC 3339 full-date, with real month lengths and leap years.
    static func date(_ b: ArraySlice<UInt8>) -> Bool {
        guard b.count == 10 else { return false }
        let s = b.startIndex
        guard b[s + 4] == UInt8(ascii: "-"), b[s + 7] == UInt8(ascii: "-"),
            let year = digits(b[s..<s + 4], 4), let month = digits(b[s + 5..<s + 7], 2),
            let day = digits(b[s + 8..<s + 10], 2), (1...12).contains(month), day >= 1
        else { return false }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        return day <= lengths[month - 1]
    }

    /// RFC 3339 full-time: partial-time plus a mandatory offset (`Z` or `±hh:mm`). A leap second
    /// (`:60`) is valid only at 23:59 UTC, once the offset is applied.
    static func time(_ b: ArraySlice<UInt8>) -> Bool {
        guard b.count >= 9 else { return false }
        let s = b.startIndex
        guard b[s + 2] == UInt8(ascii: ":"), b[s + 5] == UInt8(ascii: ":"),
            let h = digits(b[s..<s + 2], 2), let m = digits(b[s + 3..<s + 5], 2), let sec = digits(b[s + 6..<s + 8], 2),
            h <= 23, m <= 59, sec <= 60
        else { return false }
        var i = s + 8
        if b[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < b.endIndex && b[i] >= 48 && b[i] <= 57 { i += 1 }
            if i == start { return false }
        }
        guard i < b.endIndex else { return false }
        let offset = b[i...]
        var offsetMinutes = 0
        if offset.count == 1 {
            guard offset.first == UInt8(ascii: "Z") || offset.first == UInt8(ascii: "z") else { return false }
        } else {
            guard offset.count == 6, offset.first == UInt8(ascii: "+") || offset.first == UInt8(ascii: "-"),
                offset[i + 3] == UInt8(ascii: ":"),
                let oh = digits(offset[i + 1..<i + 3], 2), let om = digits(offset[i + 4..<i + 6], 2), oh <= 23, om <= 59
            else { return false }
            offsetMinutes = (oh * 60 + om) * (offset.first == UInt8(ascii: "-") ? -1 : 1)
        }
        if sec == 60 {
            let utc = ((h * 60 + m - offsetMinutes) % 1440 + 1440) % 1440
            return utc == 23 * 60 + 59
        }
        return true
    }

    static func dateTime(_ s: String) -> Bool {
        let b = Array(s.utf8)[...]
        guard b.count > 11, b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t") else { return false }
        return date(b[0..<10]) && time(b[11...])
    }

    static func email(_ s: String, international: Bool) -> Bool {
        guard let at = s.lastIndex(of: "@") else { return false }
        let local = s[..<at]
        let domain = s[s.index(after: at)...]
        guard !local.isEmpty, !domain.isEmpty else { return false }
        // A quoted local part ("joe bloggs"@example.com) may hold almost anything.
        let quoted = local.count >= 2 && local.hasPrefix("\"") && local.hasSuffix("\"")
        guard quoted || (!local.hasPrefix(".") && !local.hasSuffix(".") && !local.contains("..")) else { return false }
        let localOK =
            quoted
            || local.unicodeScalars.allSatisfy { c in
                (international && c.value >= 0x80) || c.properties.isASCIIHexDigit
                    || (c.isASCII
                        && (("a"..."z").contains(c) || ("A"..."Z").contains(c) || ("0"..."9").contains(c)
                            || "!#$%&'*+/=?^_`{|}~.-".unicodeScalars.contains(c)))
            }
        if !localOK { return false }
        if domain.hasPrefix("[") && domain.hasSuffix("]") {
            let literal = domain.dropFirst().dropLast()
            if literal.hasPrefix("IPv6:") { return ipv6(String(literal.dropFirst(5))) }
            return ipv4(Substring(literal))
        }
        return international ? !domain.contains(where: { $0 == " " }) : hostname(String(domain))
    }

    /// RFC 1123 host names: dot-separated labels of letters, digits and inner hyphens.
    static func hostname(_ s: String) -> Bool {
        var name = Substring(s)
        if name.hasSuffix(".") { name = name.dropLast() }
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        for label in name.split(separator: ".", omittingEmptySubsequences: false) {
            guard (1...63).contains(label.utf8.count), label.first != "-", label.last != "-",
                label.utf8.allSatisfy({ isAlnum($0) || $0 == UInt8(ascii: "-") })
            else { return false }
        }
        return true
    }

    static func isAlnum(_ b: UInt8) -> Bool {
        (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122)
    }

    static func isHex(_ b: UInt8) -> Bool {
        (b >= 48 && b <= 57) || (b >= 65 && b <= 70) || (b >= 97 && b <= 102)
    }

    /// Dotted quad, each part 0...255 without leading zeros.
    static func ipv4(_ s: Substring) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return false }
        return parts.allSatisfy { p in
            guard (1...3).contains(p.utf8.count), p.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                p.count == 1 || !p.hasPrefix("0"), let v = Int(p)
            else { return false }
            return v <= 255
        }
    }

    /// RFC 4291 text form: up to eight groups of 1-4 hex digits, one `::`, an IPv4 tail allowed.
    static func ipv6(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= 45 else { return false }
        let halves = s.split(separator: "::", omittingEmptySubsequences: false).map(String.init)
        guard halves.count <= 2 else { return false }
        func groups(_ part: String, allowIPv4Tail: Bool) -> Int? {
            if part.isEmpty { return 0 }
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            var count = 0
            for (i, piece) in pieces.enumerated() {
                if allowIPv4Tail && i == pieces.count - 1 && piece.contains(".") {
                    guard ipv4(piece) else { return nil }
                    count += 2
                } else {
                    guard (1...4).contains(piece.utf8.count), piece.utf8.allSatisfy(isHex) else { return nil }
                    count += 1
                }
            }
            return count
        }
        if halves.count == 1 {
            return groups(halves[0], allowIPv4Tail: true) == 8
        }
        guard let left = groups(halves[0], allowIPv4Tail: false), let right = groups(halves[1], allowIPv4Tail: true)
        else { return false }
        return left + right <= 7
    }

    static func uuid(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count == 36 else { return false }
        for (i, c) in b.enumerated() {
            if [8, 13, 18, 23].contains(i) {
                if c != UInt8(ascii: "-") { return false }
            } else if !isHex(c) {
                return false
            }
        }
        return true
    }

    static func relativeJSONPointer(_ s: String) -> Bool {
        let digitsEnd = s.firstIndex(where: { !("0"..."9").contains($0) }) ?? s.endIndex
        let number = s[..<digitsEnd]
        guard !number.isEmpty, number == "0" || !number.hasPrefix("0") else { return false }
        let rest = String(s[digitsEnd...])
        return rest == "#" || JSONPointer.tokens(rest) != nil
    }

    static func uriTemplate(_ s: String) -> Bool {
        var open = false
        for c in s.unicodeScalars {
            switch c {
            case "{":
                if open { return false }
                open = true
            case "}":
                if !open { return false }
                open = false
            case " ", "\"", "'", "<", ">", "\\", "^", "`", "|":
                return false
            default:
                if c.value < 0x20 { return false }
            }
        }
        return !open
    }
}
