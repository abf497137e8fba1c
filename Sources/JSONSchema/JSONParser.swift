/// A strict RFC 8259 parser producing ``JSONValue``.
///
/// Strict on purpose, because what it accepts is what the worker will push: invalid UTF-8, unpaired
/// surrogate escapes, duplicate keys (which other parsers resolve differently) and nesting beyond
/// `maxDepth` are errors with a line and column, never a crash. Numbers keep their exact value.
/// A leading UTF-8 byte order mark is skipped.
package enum JSONParser {
    /// The default nesting limit: far beyond any event, far below what could exhaust a stack.
    package static let defaultMaxDepth = 256

    package static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            try parse(buffer, maxDepth: maxDepth)
        }
    }

    package static func parse(_ bytes: ArraySlice<UInt8>, maxDepth: Int = defaultMaxDepth) throws(JSONParseError)
        -> JSONValue
    {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            try parse(buffer, maxDepth: maxDepth)
        }
    }

    package static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

    package static func parse(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth)
        throws(JSONParseError) -> JSONValue
    {
        var reader = JSONReader(buffer, maxDepth: maxDepth)
        return try reader.parseDocument()
    }
}

/// The parser's cursor over the bytes. Recursive descent, bounded by `maxDepth`.
struct JSONReader {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var pos = 0
    var depth = 0
    /// Members of the objects and elements of the arrays being parsed, innermost last. Each
    /// container takes its own off the top, exactly sized, when it closes: one allocation per
    /// container instead of one per doubling (an event's objects have 3 to 10 members; growing 1, 2,
    /// 4, 8, 16 was 4 to 5 allocations and copies each). Members are (name, value) pairs, so an
    /// object is one array, not two.
    private var memberStack: [JSONObject.Member] = []
    private var valueStack: [JSONValue] = []

    init(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        // 20 members is about what an event's open objects hold at once, and 20 pairs (48 bytes each)
        // stay under 1 KiB: glibc's malloc sorts its freed small blocks (malloc_consolidate) before
        // every larger request, which was once per parsed event. Arrays are rare in events: their
        // stack grows when needed.
        memberStack.reserveCapacity(20)
    }

    /// The elements from `base` up, taken off `stack` as one exactly sized array.
    private static func pop<Element>(_ stack: inout [Element], from base: Int) -> [Element] {
        defer { stack.removeSubrange(base...) }
        return Array(stack[base...])
    }

    func error(_ message: String, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(message, at: offset ?? pos, in: bytes)
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { pos = 3 }
        skipWhitespace()
        if pos == bytes.count { throw error("empty document: expected a JSON value") }
        let value = try parseValue()
        skipWhitespace()
        if pos != bytes.count { throw error("unexpected \(describeByte(at: pos)) after the JSON value") }
        return value
    }

    mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x0A, 0x0D, 0x09: pos += 1
            default: return
            }
        }
    }

    func describeByte(at offset: Int) -> String {
        guard offset < bytes.count else { return "end of input" }
        let b = bytes[offset]
        if b >= 0x21 && b < 0x7F { return "character '\(Character(Unicode.Scalar(b)))'" }
        if b < 0x80 { return "character U+\(hex(b, width: 4))" }
        return "byte 0x\(hex(b, width: 2))"
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard pos < bytes.count else { throw error("unexpected end of input: expected a JSON value") }
        switch bytes[pos] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected \(describeByte(at: pos)): expected a JSON value")
        }
    }

    mutating func expectLiteral(_ word: StaticString) throws(JSONParseError) {
        let start = pos
        let n = word.utf8CodeUnitCount
        let w = UnsafeBufferPointer(start: word.utf8Start, count: n)
        for i in 0..<n {
            guard pos + i < bytes.count, bytes[pos + i] == w[i] else {
                throw error("invalid literal: expected '\(word)'", at: start)
            }
        }
        pos += n
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > maxDepth { throw error("nesting deeper than \(maxDepth) levels") }
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        pos += 1
        skipWhitespace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "]") {
            pos += 1
            depth -= 1
            return .array([])
        }
        let base = valueStack.count
        while true {
            skipWhitespace()
            let element = try parseValue()
            valueStack.append(element)
            skipWhitespace()
            guard pos < bytes.count else { throw error("unexpected end of input: expected ',' or ']'") }
            if bytes[pos] == UInt8(ascii: ",") {
                pos += 1
            } else if bytes[pos] == UInt8(ascii: "]") {
                pos += 1
                break
            } else {
                throw error("unexpected \(describeByte(at: pos)): expected ',' or ']'")
            }
        }
        depth -= 1
        return .array(Self.pop(&valueStack, from: base))
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        pos += 1
        var seen: Set<String>? = nil
        skipWhitespace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "}") {
            pos += 1
            depth -= 1
            return .object(JSONObject(uniqueMembers: []))
        }
        let base = memberStack.count
        while true {
            skipWhitespace()
            guard pos < bytes.count else { throw error("unexpected end of input: expected a member name") }
            guard bytes[pos] == UInt8(ascii: "\"") else {
                throw error("unexpected \(describeByte(at: pos)): expected a member name in double quotes")
            }
            let keyStart = pos
            let key = try parseString()
            let count = memberStack.count - base
            if seen == nil && count >= 12 { seen = Set(memberStack[base...].lazy.map(\.key)) }
            let duplicate =
                seen != nil ? !seen!.insert(key).inserted : memberStack[base...].contains { $0.key == key }
            if duplicate { throw error("duplicate member name '\(key)'", at: keyStart) }
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else {
                throw error("unexpected \(describeByte(at: pos)): expected ':' after the member name")
            }
            pos += 1
            skipWhitespace()
            let value = try parseValue()
            memberStack.append((key, value))
            skipWhitespace()
            guard pos < bytes.count else { throw error("unexpected end of input: expected ',' or '}'") }
            if bytes[pos] == UInt8(ascii: ",") {
                pos += 1
            } else if bytes[pos] == UInt8(ascii: "}") {
                pos += 1
                break
            } else {
                throw error("unexpected \(describeByte(at: pos)): expected ',' or '}'")
            }
        }
        depth -= 1
        return .object(JSONObject(uniqueMembers: Self.pop(&memberStack, from: base)))
    }
}

func hex(_ value: some BinaryInteger, width: Int) -> String {
    let s = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, width - s.count)) + s
}
