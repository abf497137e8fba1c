import JSONSchema
import Testing

@Suite("validation errors: locations, keywords, messages")
struct ValidationErrorTests {
    let schema: JSONSchema

    init() throws {
        schema = try JSONSchema(
            text: ##"""
                {
                  "type": "object",
                  "required": ["payload"],
                  "properties": {
                    "payload": {
                      "type": "object",
                      "properties": {
                        "aps": {"type": "object", "required": ["alert"], "additionalProperties": false,
                                "properties": {"alert": {"type": "string"}, "badge": {"type": "integer", "minimum": 0}}}
                      }
                    },
                    "tags": {"type": "array", "items": {"$ref": "#/definitions/tag"}, "uniqueItems": true}
                  },
                  "definitions": {"tag": {"type": "string", "maxLength": 3}}
                }
                """##)
    }

    @Test("a missing property is reported at its parent")
    func required() throws {
        let errors = schema.validate(try JSONParser.parse(##"{"payload": {"aps": {}}}"##))
        let error = try #require(errors.first)
        #expect(errors.count == 1)
        #expect(error.instanceLocation == "/payload/aps")
        #expect(error.keyword == "required")
        #expect(error.schemaLocation == "#/properties/payload/properties/aps/required")
        #expect(error.description == "/payload/aps: required property 'alert' is missing")
    }

    @Test("collect-all finds every failure; first-error stops at one")
    func modes() throws {
        let instance = try JSONParser.parse(
            ##"{"payload": {"aps": {"badge": -1, "sound": "x"}}, "tags": ["abcd", 5, "abcd"]}"##)
        let all = schema.validate(instance, mode: .allErrors)
        #expect(
            all.map(\.instanceLocation) == [
                "/payload/aps", "/payload/aps/badge", "/payload/aps/sound", "/tags/0", "/tags/1", "/tags/2", "/tags",
            ])
        #expect(
            all.map(\.keyword) == [
                "required", "minimum", "additionalProperties", "maxLength", "type", "maxLength", "uniqueItems",
            ])
        #expect(all[3].schemaLocation == "#/definitions/tag/maxLength")
        #expect(all[2].message == "property 'sound' is not allowed")
        #expect(schema.validate(instance).count == 1)
        #expect(schema.isValid(instance) == false)
    }

    @Test("the root is reported as (root)")
    func root() throws {
        let error = try #require(schema.validate(.array([])).first)
        #expect(error.instanceLocation == "")
        #expect(error.description == "(root): expected object, found array")
    }

    @Test("pointer tokens are escaped")
    func escaping() throws {
        let s = try JSONSchema(["additionalProperties": false])
        let error = try #require(s.validate(["a/b~c": 1]).first)
        #expect(error.instanceLocation == "/a~1b~0c")
    }

    @Test(
        "a $ref cycle is refused at compile time",
        arguments: [
            ##"{"$ref": "#"}"##,
            ##"{"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"allOf": [{"$ref": "#/definitions/a"}]}}, "$ref": "#/definitions/a"}"##,
            ##"{"anyOf": [{"type": "string"}, {"$ref": "#"}]}"##,
        ])
    func cycle(text: String) throws {
        do {
            _ = try JSONSchema(text: text)
            Issue.record("compiled a cyclic schema")
        } catch {
            #expect(error.message.contains("reference cycle"), "\(error)")
        }
    }

    @Test("recursion that descends into the instance is fine")
    func recursion() throws {
        let s = try JSONSchema(text: ##"{"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["v"]}"##)
        #expect(s.isValid(try JSONParser.parse(##"{"v": 1, "next": {"v": 2, "next": {"v": 3}}}"##)))
        let error = try #require(s.validate(try JSONParser.parse(##"{"v": 1, "next": {"next": {"v": 3}}}"##)).first)
        #expect(error.instanceLocation == "/next")
    }

    @Test(
        "schema errors say where",
        arguments: [
            (##"{"type": "strin"}"##, "#/type"),
            (##"{"properties": {"a": {"minLength": -1}}}"##, "#/properties/a/minLength"),
            (##"{"pattern": "(unclosed"}"##, "#/pattern"),
            (##"{"items": {"$ref": "#/definitions/missing"}}"##, "#/items/$ref"),
            (##"{"$ref": "http://example.com/other.json"}"##, "#/$ref"),
            (##"{"properties": 5}"##, "#/properties"),
            (##"[1]"##, "#"),
        ])
    func schemaErrors(text: String, location: String) throws {
        do {
            _ = try JSONSchema(text: text)
            Issue.record("compiled an invalid schema")
        } catch {
            #expect(error.location == location, "\(error)")
        }
    }

    @Test("formats are annotations unless asked to assert")
    func formats() throws {
        let text = ##"{"format": "date-time"}"##
        #expect(try JSONSchema(text: text).isValid("yesterday"))
        let asserting = try JSONSchema(text: text, options: .init(formatAssertion: true))
        #expect(asserting.isValid("2026-11-22T03:14:07Z"))
        let error = try #require(asserting.validate("2026-02-30T00:00:00Z").first)
        #expect(error.keyword == "format")
        // Leap seconds only at 23:59 UTC, whatever the offset.
        #expect(asserting.isValid("1998-12-31T23:59:60Z"))
        #expect(asserting.isValid("1998-12-31T15:59:60.123-08:00"))
        #expect(!asserting.isValid("1998-12-31T23:58:60Z"))
        #expect(!asserting.isValid("1998-12-31T22:59:60Z"))
        let email = try JSONSchema(text: ##"{"format": "email"}"##, options: .init(formatAssertion: true))
        #expect(email.isValid("\"joe bloggs\"@example.com"))
        #expect(email.isValid("joe.bloggs@[127.0.0.1]"))
        #expect(!email.isValid("te..st@example.com"))
        let uuid = try JSONSchema(text: ##"{"format": "uuid"}"##, options: .init(formatAssertion: true))
        #expect(uuid.isValid("1b4e28ba-2fa1-11d2-883f-0016d3cca427"))
        #expect(!uuid.isValid("1b4e28ba-2fa1-11d2-883f-0016d3cca42"))
    }

    @Test("patterns follow ECMA-262 where Swift's syntax differs")
    func patterns() throws {
        let dollar = try JSONSchema(text: ##"{"pattern": "^abc$"}"##)
        #expect(dollar.isValid("abc"))
        #expect(!dollar.isValid("abc\n"))
        let digits = try JSONSchema(text: ##"{"pattern": "^\\d+$"}"##)
        #expect(digits.isValid("0123"))
        #expect(!digits.isValid("٠١٢"))  // Arabic-Indic digits are not \d in ECMA-262
        let search = try JSONSchema(text: ##"{"pattern": "b"}"##)
        #expect(search.isValid("abc"))
    }
}
