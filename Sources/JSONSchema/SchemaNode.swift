/// One subschema at compile time: the checks it makes, in the order cheapest first.
struct SchemaNode {
    var keywords: [SchemaKeyword] = []
    /// Where it lives, for error reports: base URI + `#` + JSON pointer.
    var location: String
}

/// The JSON Schema primitive types, as a bit set.
struct TypeSet: OptionSet, Sendable {
    let rawValue: UInt8
    static let null = TypeSet(rawValue: 1)
    static let boolean = TypeSet(rawValue: 2)
    static let object = TypeSet(rawValue: 4)
    static let array = TypeSet(rawValue: 8)
    static let number = TypeSet(rawValue: 16)
    static let integer = TypeSet(rawValue: 32)
    static let string = TypeSet(rawValue: 64)

    static let names: [(String, TypeSet)] = [
        ("null", .null), ("boolean", .boolean), ("object", .object), ("array", .array),
        ("number", .number), ("integer", .integer), ("string", .string),
    ]
}

/// `dependencies` entries: either more required properties or a schema.
enum Dependency: Sendable {
    case properties([String])
    case schema(Int)
}

/// `properties`, `patternProperties` and `additionalProperties` together, so an object's members
/// are visited once. `additional == nil` means anything goes.
struct PropertySchemas: Sendable {
    var namedOrder: [(String, Int)] = []
    var patterns: [(Pattern, Int)] = []
    var additional: Int?
    var additionalIsFalse = false
}

/// One keyword as the compiler builds it (node indices refer to the compiler's node list). The
/// validator runs the flat ``Program`` lowered from these.
enum SchemaKeyword {
    case falseSchema
    case type(TypeSet)
    case enumeration([JSONValue])
    case constant(JSONValue)
    case multipleOf(JSONNumber)
    case maximum(JSONNumber)
    case exclusiveMaximum(JSONNumber)
    case minimum(JSONNumber)
    case exclusiveMinimum(JSONNumber)
    case maxLength(Int)
    case minLength(Int)
    case pattern(Pattern)
    case format(Format)
    case items(Int)
    case tupleItems([Int], additional: Int?, additionalIsFalse: Bool)
    case maxItems(Int)
    case minItems(Int)
    case uniqueItems
    case contains(Int)
    case maxProperties(Int)
    case minProperties(Int)
    case required([String])
    case properties(PropertySchemas)
    case dependencies([(String, Dependency)])
    case propertyNames(Int)
    case conditional(if: Int, then: Int?, else: Int?)
    case allOf([Int])
    case anyOf([Int])
    case oneOf([Int])
    case not(Int)
    case ref(Int)
}
