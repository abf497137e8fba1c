import JSONSchema
import Testing

@Suite("compiled schemas: sharing, resolvers, serialization")
struct SchemaAPITests {
    @Test("one compiled schema validates from many tasks at once, with the same answers")
    func concurrent() async throws {
        let schema = try JSONSchema(
            text:
                #"{"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}, "s": {"pattern": "^[a-f]+$"}}}"#
        )
        let verdicts = await withTaskGroup(of: (Int, Bool).self) { group in
            for i in 0..<200 {
                group.addTask {
                    let value: JSONValue = ["n": .number(JSONNumber(i)), "s": i % 2 == 0 ? "abc" : "xyz"]
                    return (i, schema.isValid(value) && schema.validate(value, mode: .allErrors).isEmpty)
                }
            }
            var all: [Int: Bool] = [:]
            for await (i, ok) in group { all[i] = ok }
            return all
        }
        for i in 0..<200 { #expect(verdicts[i] == (i % 3 == 0 && i % 2 == 0)) }
    }

    @Test("remote references go through the resolver, once per document")
    func resolver() throws {
        final class Counter {
            var calls: [String] = []
        }
        let counter = Counter()
        let schema = try JSONSchema(
            text:
                ##"{"properties": {"a": {"$ref": "http://x.test/defs.json#/definitions/small"}, "b": {"$ref": "http://x.test/defs.json#/definitions/small"}}}"##,
            resolver: { uri in
                counter.calls.append(uri)
                return uri == "http://x.test/defs.json" ? ["definitions": ["small": ["maximum": 9]]] : nil
            })
        #expect(counter.calls == ["http://x.test/defs.json"])
        let error = try #require(schema.validate(["a": 1, "b": 10]).first)
        #expect(error.instanceLocation == "/b")
        #expect(error.schemaLocation == "http://x.test/defs.json#/definitions/small/maximum")
        #expect(throws: SchemaError.self) {
            try JSONSchema(text: #"{"$ref": "http://x.test/none.json"}"#, resolver: { _ in nil })
        }
    }

    @Test("$id changes the base URI for the references below it")
    func baseURI() throws {
        let schema = try JSONSchema(
            text: ##"""
                {"$id": "http://x.test/root.json",
                 "properties": {"inner": {"$id": "folder/", "items": {"$ref": "item.json"}}},
                 "definitions": {"item": {"$id": "http://x.test/folder/item.json", "type": "integer"}}}
                """##)
        #expect(schema.isValid(["inner": [1, 2]]))
        let error = try #require(schema.validate(["inner": [1, "x"]]).first)
        #expect(error.instanceLocation == "/inner/1")
        #expect(error.keyword == "type")
    }

    @Test("serialization is compact, escapes what JSON needs, and round-trips")
    func serialization() throws {
        let value: JSONValue = [
            "s": "quote \" backslash \\ newline \n tab \t bell \u{07} é 😀", "n": [1, -2, .number(JSONNumber(0.5)!)],
            "big": .number(try #require(JSONParser.parse("123456789012345678901234567890").numberValue)),
            "t": true, "z": nil, "o": [:],
        ]
        let text = value.jsonText
        #expect(text.contains(#""quote \" backslash \\ newline \n tab \t bell \u0007 é 😀""#))
        #expect(text.contains(#""big":123456789012345678901234567890"#))
        #expect(!text.contains(" :") && !text.contains(", "))
        #expect(try JSONParser.parse(text) == value)
    }
}
