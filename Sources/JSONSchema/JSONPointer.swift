/// RFC 6901 JSON pointers: building them token by token and following them into a value.
package enum JSONPointer {
    /// Escapes one reference token (`~` → `~0`, `/` → `~1`).
    package static func escape(_ token: String) -> String {
        guard token.contains(where: { $0 == "~" || $0 == "/" }) else { return token }
        return token.replacingTildeAndSlash()
    }

    /// A pointer from tokens: `["payload", "aps"]` → `/payload/aps`.
    package static func from(_ tokens: [String]) -> String {
        tokens.map { "/" + escape($0) }.joined()
    }

    /// The unescaped tokens of `pointer`, or nil when it is not a pointer.
    package static func tokens(_ pointer: String) -> [String]? {
        if pointer.isEmpty { return [] }
        guard pointer.hasPrefix("/") else { return nil }
        var result: [String] = []
        for raw in pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            var token = ""
            var it = raw.makeIterator()
            while let c = it.next() {
                if c == "~" {
                    switch it.next() {
                    case "0": token.append("~")
                    case "1": token.append("/")
                    default: return nil
                    }
                } else {
                    token.append(c)
                }
            }
            result.append(token)
        }
        return result
    }

    /// The value `pointer` designates in `root`, or nil.
    package static func resolve(_ pointer: String, in root: JSONValue) -> JSONValue? {
        guard let tokens = tokens(pointer) else { return nil }
        var current = root
        for token in tokens {
            switch current {
            case .object(let o):
                guard let next = o[token] else { return nil }
                current = next
            case .array(let a):
                guard let i = arrayIndex(token), i < a.count else { return nil }
                current = a[i]
            default:
                return nil
            }
        }
        return current
    }

    static func arrayIndex(_ token: String) -> Int? {
        guard !token.isEmpty, token.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            token == "0" || !token.hasPrefix("0")
        else { return nil }
        return Int(token)
    }
}

extension String {
    fileprivate func replacingTildeAndSlash() -> String {
        var out = ""
        for c in self {
            switch c {
            case "~": out += "~0"
            case "/": out += "~1"
            default: out.append(c)
            }
        }
        return out
    }

    /// Decodes `%XX` escapes (as URI fragments carry them); nil when they are not valid UTF-8.
    func percentDecoded() -> String? {
        guard contains("%") else { return self }
        var bytes: [UInt8] = []
        var utf8 = Array(self.utf8)[...]
        while let b = utf8.popFirst() {
            if b == UInt8(ascii: "%") {
                guard utf8.count >= 2,
                    let v = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(v)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
