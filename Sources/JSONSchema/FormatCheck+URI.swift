/// RFC 3986 URIs and references (and RFC 3987 IRIs, which also allow non-ASCII characters).
extension FormatCheck {
    static let uriAllowed: Set<UInt8> = Set("-._~:/?#[]@!$&'()*+,;=%".utf8)

    static func uri(_ s: String, requireScheme: Bool, international: Bool) -> Bool {
        let b = Array(s.utf8)
        var i = 0
        // Every character: unreserved, reserved, a percent escape, or (IRI) non-ASCII.
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "%") {
                guard i + 2 < b.count, isHex(b[i + 1]), isHex(b[i + 2]) else { return false }
                i += 3
                continue
            }
            if !(isAlnum(c) || uriAllowed.contains(c) || (international && c >= 0x80)) { return false }
            i += 1
        }
        // The scheme: letters first, then letters, digits, '+', '-', '.', up to the first ':'.
        let firstDelimiter = b.firstIndex(where: {
            $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "/")
                || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
        })
        var rest = b[...]
        if let d = firstDelimiter, b[d] == UInt8(ascii: ":") {
            let scheme = b[..<d]
            guard let first = scheme.first, (first | 0x20) >= 97 && (first | 0x20) <= 122,
                scheme.allSatisfy({
                    isAlnum($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
                })
            else { return false }
            rest = b[(d + 1)...]
        } else if requireScheme {
            return false
        }
        // Authority: brackets only around an IP literal, port digits only.
        if rest.starts(with: "//".utf8) {
            let afterSlashes = rest.dropFirst(2)
            let end =
                afterSlashes.firstIndex(where: {
                    $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?")
                        || $0 == UInt8(ascii: "#")
                }) ?? afterSlashes.endIndex
            var authority = afterSlashes[..<end]
            if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
            if authority.first == UInt8(ascii: "[") {
                guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return false }
                let tail = authority[(close + 1)...]
                guard
                    tail.isEmpty
                        || (tail.first == UInt8(ascii: ":") && tail.dropFirst().allSatisfy { $0 >= 48 && $0 <= 57 })
                else { return false }
            } else {
                if authority.contains(UInt8(ascii: "[")) || authority.contains(UInt8(ascii: "]")) { return false }
                if let colon = authority.firstIndex(of: UInt8(ascii: ":")),
                    !authority[(colon + 1)...].allSatisfy({ $0 >= 48 && $0 <= 57 })
                {
                    return false
                }
            }
            rest = afterSlashes[end...]
        }
        // Outside the authority, brackets are not allowed, and a fragment holds no second '#'.
        if rest.contains(UInt8(ascii: "[")) || rest.contains(UInt8(ascii: "]")) { return false }
        if let hash = rest.firstIndex(of: UInt8(ascii: "#")), rest[(hash + 1)...].contains(UInt8(ascii: "#")) {
            return false
        }
        return true
    }
}
