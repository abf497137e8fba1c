import Foundation
import JSONSchema
import Testing
import Worker

@Suite("schemas/: files, examples, embedded copies")
struct EventSchemaFileTests {
    func load(_ name: String) throws -> JSONValue {
        let data = try Data(contentsOf: EventFixtures.schemaFile(name))
        return try JSONParser.parse([UInt8](data))
    }

    @Test("the binary carries the files in schemas/ (SwiftPM embeds them through Sources/Worker/Schemas' links)")
    func embedded() throws {
        for name in ["notification-event", "result-event"] {
            let file = try load("\(name).schema.json")
            let embedded = try JSONParser.parse(
                name == "result-event" ? EventSchemas.resultEventText : EventSchemas.notificationEventText)
            #expect(file == embedded, "\(name): the embedded copy differs from schemas/\(name).schema.json")
        }
    }

    @Test("both schemas are valid draft-07 (against the meta-schema)")
    func metaSchema() throws {
        let meta = try JSONSchema(["$ref": "http://json-schema.org/draft-07/schema#"])
        for name in ["notification-event", "result-event"] {
            let errors = meta.validate(try load("\(name).schema.json"), mode: .allErrors)
            #expect(errors.isEmpty, "\(name): \(errors)")
        }
    }

    @Test("every notification-event example decodes, code rules included")
    func notificationExamples() throws {
        let examples = try #require(try load("notification-event.schema.json")["examples"]?.arrayValue)
        #expect(examples.count >= 4)
        for example in examples {
            let event = try NotificationEventDecoder.standard.decode(example.serialized())
            #expect(event.id == example["id"]?.stringValue)
        }
    }

    @Test("every result-event example validates, one per outcome")
    func resultExamples() throws {
        let schema = EventSchemas.resultEvent
        let examples = try #require(try load("result-event.schema.json")["examples"]?.arrayValue)
        for example in examples {
            #expect(schema.validate(example, mode: .allErrors).isEmpty, "\(example.jsonText)")
        }
        let outcomes = Set(examples.compactMap { $0["outcome"]?.stringValue })
        #expect(outcomes == ["delivered", "unregistered", "rejected", "failed", "expired", "invalid"])
    }

    @Test("result events: each outcome's fields are enforced")
    func resultRules() throws {
        let schema = EventSchemas.resultEvent
        let examples = try #require(try load("result-event.schema.json")["examples"]?.arrayValue)
        func changed(_ index: Int, _ key: String, _ value: JSONValue?) -> JSONValue {
            guard case .object(var o) = examples[index] else { return .null }
            o[key] = value
            return .object(o)
        }
        let cases: [(JSONValue, String, String)] = [
            (changed(0, "status", 500), "/status", "const"),
            (changed(1, "apnsTimestamp", nil), "", "required"),
            (changed(1, "reason", "BadDeviceToken"), "/reason", "enum"),
            (changed(5, "attempts", 2), "/attempts", "const"),
            (changed(0, "outcome", "lost"), "/outcome", "enum"),
            (changed(0, "completedAt", "yesterday"), "/completedAt", "format"),
            (changed(0, "source", ["topic": "t", "partition": -1, "offset": 0]), "/source/partition", "minimum"),
            (changed(0, "apnsId", "5B0E9A4C-7F2D-4C1E-9A57-0D6C1F4E8B21"), "/apnsId", "pattern"),
        ]
        for (instance, pointer, keyword) in cases {
            let error = try #require(schema.validate(instance).first, "\(instance.jsonText)")
            #expect(error.instanceLocation == pointer)
            #expect(error.keyword == keyword, "\(error)")
        }
    }
}
