/// A parsed JSON document. Numbers keep their exact decimal value (see ``JSONNumber``) and objects
/// keep their members in document order, so nothing is lost between the bytes and the validator.
///
/// Equality is JSON equality as JSON Schema defines it: `1` equals `1.0`, and objects compare
/// without regard to member order.
package enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The JSON Schema type name of this value ("integer" is reported as "number" here).
    package var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    package var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    package var numberValue: JSONNumber? {
        if case .number(let n) = self { return n }
        return nil
    }

    package var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    package var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    package var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The member named `key` when this is an object.
    package subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
}

extension JSONValue: Equatable {
    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a.utf8.count == b.utf8.count && a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }
}

extension JSONValue: Hashable {
    package func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(1); hasher.combine(b)
        case .number(let n): hasher.combine(2); hasher.combine(n)
        case .string(let s): hasher.combine(3); hasher.combine(s)
        case .array(let a): hasher.combine(4); hasher.combine(a)
        case .object(let o): hasher.combine(5); hasher.combine(o)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByNilLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    package init(stringLiteral value: String) { self = .string(value) }
    package init(integerLiteral value: Int) { self = .number(JSONNumber(value)) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    package init(nilLiteral: ()) { self = .null }
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements))
    }
}
