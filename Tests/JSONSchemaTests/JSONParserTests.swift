import JSONSchema
import Testing

@Suite("JSON parser")
struct JSONParserTests {
    func parseError(_ text: String) -> JSONParseError? {
        do {
            _ = try JSONParser.parse(text)
            return nil
        } catch {
            return error
        }
    }

    func parseError(bytes: [UInt8]) -> JSONParseError? {
        do {
            _ = try JSONParser.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test("values of every kind, members in document order")
    func values() throws {
        let v = try JSONParser.parse(#"{"b": [1, -2.5, true, false, null], "a": "x\u00e9\n\ud83d\ude00"}"#)
        let o = try #require(v.objectValue)
        #expect(Array(o.keys) == ["b", "a"])
        #expect(v["a"] == .string("xé\n😀"))
        #expect(v["b"] == [1, .number(JSONNumber(-2.5)!), true, false, nil])
    }

    @Test(
        "malformed JSON reports line and column",
        arguments: [
            ("{\"a\": 1,\n  \"b\": }", 2, 8, "expected a JSON value"),
            ("[1, 2", 1, 6, "expected ',' or ']'"),
            ("{\"a\" 1}", 1, 6, "expected ':'"),
            ("[01]", 1, 2, "leading zeros"),
            ("[1.]", 1, 2, "after the decimal point"),
            ("tru", 1, 1, "expected 'true'"),
            ("{\"a\": 1} x", 1, 10, "after the JSON value"),
            ("", 1, 1, "empty document"),
            ("\"a\tb\"", 1, 3, "must be escaped"),
            ("\"\\x\"", 1, 2, "invalid escape"),
            ("[\"\\ud800\"]", 1, 3, "unpaired surrogate"),
            ("{\"a\": 1, \"a\": 2}", 1, 10, "duplicate member name 'a'"),
        ])
    func malformed(text: String, line: Int, column: Int, message: String) throws {
        let error = try #require(parseError(text))
        #expect(error.line == line)
        #expect(error.column == column)
        #expect(error.message.contains(message), "\(error)")
    }

    @Test(
        "invalid UTF-8 is an error with its position",
        arguments: [
            [0x22, 0xFF, 0x22],  // not a UTF-8 byte
            [0x22, 0xC3, 0x22],  // truncated sequence
            [0x22, 0xE0, 0x80, 0x80, 0x22],  // overlong
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // encoded surrogate
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // beyond U+10FFFF
        ] as [[UInt8]])
    func invalidUTF8(bytes: [UInt8]) throws {
        let error = try #require(parseError(bytes: bytes))
        #expect(error.message.contains("invalid UTF-8"), "\(error)")
        #expect(error.offset == 1)
        #expect(error.line == 1 && error.column == 2)
    }

    @Test("a byte outside a string that is not JSON")
    func strayByte() throws {
        let error = try #require(parseError(bytes: [0x5B, 0xC3, 0xA9, 0x5D]))
        #expect(error.message.contains("byte 0xC3"))
    }

    @Test("nesting 10,000 deep is refused, not a stack overflow")
    func deepNesting() throws {
        let text = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let error = try #require(parseError(text))
        #expect(error.message == "nesting deeper than \(JSONParser.defaultMaxDepth) levels")
        #expect(error.offset == JSONParser.defaultMaxDepth)
        let objects = String(repeating: "{\"a\":", count: 10_000) + "1" + String(repeating: "}", count: 10_000)
        #expect(parseError(objects)?.message.hasPrefix("nesting deeper") == true)
        // At the limit itself, it parses.
        let limit = JSONParser.defaultMaxDepth
        _ = try JSONParser.parse(String(repeating: "[", count: limit) + String(repeating: "]", count: limit))
    }

    @Test("a 10 MB string parses whole")
    func hugeString() throws {
        let body = String(repeating: "abcdefghij", count: 1_000_000)
        let v = try JSONParser.parse("{\"s\": \"" + body + "\"}")
        #expect(v["s"]?.stringValue?.utf8.count == 10_000_000)
        let schema = try JSONSchema(["properties": ["s": ["maxLength": 4096]]])
        let errors = schema.validate(v)
        #expect(errors.map(\.instanceLocation) == ["/s"])
        #expect(errors.first?.message.contains("10000000 characters") == true)
        // Unterminated, it fails cleanly.
        #expect(parseError("\"" + body)?.message.contains("inside a string") == true)
    }

    @Test("numbers keep their exact value")
    func exactNumbers() throws {
        let big = try JSONParser.parse("[18446744073709551617, 18446744073709551616, 9007199254740993]")
        let a = try #require(big.arrayValue)
        #expect(a[0] != a[1])
        #expect(a[0].numberValue?.description == "18446744073709551617")
        #expect(a[2].numberValue?.int64Value == 9_007_199_254_740_993)
        #expect(try JSONParser.parse("1.0") == JSONParser.parse("1"))
        #expect(try JSONParser.parse("1e2") == JSONParser.parse("100"))
        #expect(try JSONParser.parse("0.1").numberValue?.description == "0.1")
        #expect(try JSONParser.parse("-0") == JSONParser.parse("0"))
        let tenth = try #require(JSONParser.parse("0.1").numberValue)
        #expect(try #require(JSONParser.parse("0.3").numberValue).isMultiple(of: tenth))
        #expect(try #require(JSONParser.parse("4.0000000000000000001").numberValue).isMultiple(of: tenth) == false)
        #expect(try #require(JSONParser.parse("1e400").numberValue).isInteger)
        #expect(try #require(JSONParser.parse("1e-400").numberValue).isInteger == false)
        #expect(try #require(JSONParser.parse("1e-400").numberValue) > JSONNumber(0))
        #expect(parseError("1e9999999999")?.message.contains("exponent out of range") == true)
        // Huge divisors: exact answers, not Double's (1 / 1e999 rounds to 0, an integer).
        let huge = try #require(JSONParser.parse("1e999").numberValue)
        #expect(JSONNumber(1).isMultiple(of: huge) == false)
        #expect(try #require(JSONParser.parse("2e999").numberValue).isMultiple(of: huge))
        #expect(try #require(JSONParser.parse("1e400").numberValue).isMultiple(of: JSONNumber(3)) == false)
        #expect(try #require(JSONParser.parse("3e400").numberValue).isMultiple(of: JSONNumber(3)))
    }

    @Test("a leading byte order mark is skipped")
    func byteOrderMark() throws {
        #expect(try JSONParser.parse([0xEF, 0xBB, 0xBF, 0x31]) == 1)
    }
}
