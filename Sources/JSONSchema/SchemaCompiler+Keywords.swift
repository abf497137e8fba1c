/// Compiling one subschema's keywords, checking each keyword's value as it goes.
extension SchemaCompiler {
    mutating func compile(_ location: Location) throws(SchemaError) -> Int {
        if let done = memo[location] { return done }
        let index = nodes.count
        nodes.append(SchemaNode(location: locationString(location)))
        memo[location] = index
        guard let value = JSONPointer.resolve(location.pointer, in: documents[location.document]) else {
            throw SchemaError("no schema here", at: locationString(location))
        }
        switch value {
        case .bool(true):
            break
        case .bool(false):
            nodes[index].keywords = [.falseSchema]
        case .object(let object):
            _ = base(at: location)
            nodes[index].keywords = try compileKeywords(object, at: location)
        default:
            throw SchemaError(
                "a schema must be an object or a boolean, not \(value.typeName)", at: locationString(location))
        }
        return index
    }

    mutating func compileKeywords(_ o: JSONObject, at loc: Location) throws(SchemaError) -> [SchemaKeyword] {
        func fail(_ keyword: String, _ message: String) -> SchemaError {
            SchemaError(message, at: locationString(loc.appending(keyword)))
        }
        func number(_ keyword: String) throws(SchemaError) -> JSONNumber? {
            guard let v = o[keyword] else { return nil }
            guard case .number(let n) = v else { throw fail(keyword, "'\(keyword)' must be a number") }
            return n
        }
        func count(_ keyword: String) throws(SchemaError) -> Int? {
            guard let v = o[keyword] else { return nil }
            guard case .number(let n) = v, n.isInteger, !n.isNegative else {
                throw fail(keyword, "'\(keyword)' must be a non-negative integer")
            }
            return n.intValue ?? Int.max
        }
        if let ref = o["$ref"] {
            guard case .string(let reference) = ref else { throw fail("$ref", "'$ref' must be a string") }
            // Draft-07: keywords beside `$ref` are ignored.
            return [.ref(try compile(try resolveReference(reference, from: loc)))]
        }

        var k: [SchemaKeyword] = []
        if let t = o["type"] {
            var set = TypeSet()
            let names: [JSONValue] = t.arrayValue ?? [t]
            for name in names {
                guard case .string(let s) = name, let type = TypeSet.names.first(where: { $0.0 == s }) else {
                    throw fail("type", "'type' must be a type name or an array of them")
                }
                set.insert(type.1)
            }
            k.append(.type(set))
        }
        if let c = o["const"] { k.append(.constant(c)) }
        if let e = o["enum"] {
            guard case .array(let values) = e else { throw fail("enum", "'enum' must be an array") }
            k.append(.enumeration(values))
        }
        if let m = try number("multipleOf") {
            guard !m.isNegative && !m.isZero else { throw fail("multipleOf", "'multipleOf' must be greater than 0") }
            k.append(.multipleOf(m))
        }
        if let n = try number("maximum") { k.append(.maximum(n)) }
        if let n = try number("exclusiveMaximum") { k.append(.exclusiveMaximum(n)) }
        if let n = try number("minimum") { k.append(.minimum(n)) }
        if let n = try number("exclusiveMinimum") { k.append(.exclusiveMinimum(n)) }
        if let n = try count("maxLength") { k.append(.maxLength(n)) }
        if let n = try count("minLength") { k.append(.minLength(n)) }
        if let p = o["pattern"] {
            guard case .string(let source) = p else { throw fail("pattern", "'pattern' must be a string") }
            do {
                k.append(.pattern(try Pattern(source)))
            } catch {
                throw fail("pattern", error.message)
            }
        }
        if formatAssertion, case .string(let name)? = o["format"], let format = Format(rawValue: name) {
            k.append(.format(format))
        }
        try compileArrayKeywords(o, at: loc, into: &k)
        try compileObjectKeywords(o, at: loc, into: &k)
        if o["if"] != nil {
            let ifNode = try compile(loc.appending("if"))
            let thenNode = o["then"] == nil ? nil : try compile(loc.appending("then"))
            let elseNode = o["else"] == nil ? nil : try compile(loc.appending("else"))
            if thenNode != nil || elseNode != nil { k.append(.conditional(if: ifNode, then: thenNode, else: elseNode)) }
        }
        for keyword in ["allOf", "anyOf", "oneOf"] {
            guard let v = o[keyword] else { continue }
            guard case .array(let list) = v, !list.isEmpty else {
                throw fail(keyword, "'\(keyword)' must be a non-empty array of schemas")
            }
            var children: [Int] = []
            for i in list.indices { children.append(try compile(loc.appending(keyword).appending(String(i)))) }
            switch keyword {
            case "allOf": k.append(.allOf(children))
            case "anyOf": k.append(.anyOf(children))
            default: k.append(.oneOf(children))
            }
        }
        if o["not"] != nil { k.append(.not(try compile(loc.appending("not")))) }
        return k
    }

    mutating func compileArrayKeywords(_ o: JSONObject, at loc: Location, into k: inout [SchemaKeyword])
        throws(SchemaError)
    {
        if let items = o["items"] {
            if case .array(let list) = items {
                var children: [Int] = []
                for i in list.indices { children.append(try compile(loc.appending("items").appending(String(i)))) }
                let additional = o["additionalItems"] == nil ? nil : try compile(loc.appending("additionalItems"))
                k.append(
                    .tupleItems(
                        children, additional: additional, additionalIsFalse: o["additionalItems"] == .bool(false)))
            } else {
                k.append(.items(try compile(loc.appending("items"))))
            }
        }
        if let n = try nonNegative(o, "maxItems", loc) { k.append(.maxItems(n)) }
        if let n = try nonNegative(o, "minItems", loc) { k.append(.minItems(n)) }
        if let u = o["uniqueItems"] {
            guard case .bool(let unique) = u else {
                throw SchemaError("'uniqueItems' must be a boolean", at: locationString(loc.appending("uniqueItems")))
            }
            if unique { k.append(.uniqueItems) }
        }
        if o["contains"] != nil { k.append(.contains(try compile(loc.appending("contains")))) }
    }

    func nonNegative(_ o: JSONObject, _ keyword: String, _ loc: Location) throws(SchemaError) -> Int? {
        guard let v = o[keyword] else { return nil }
        guard case .number(let n) = v, n.isInteger, !n.isNegative else {
            throw SchemaError("'\(keyword)' must be a non-negative integer", at: locationString(loc.appending(keyword)))
        }
        return n.intValue ?? Int.max
    }

    mutating func compileObjectKeywords(_ o: JSONObject, at loc: Location, into k: inout [SchemaKeyword])
        throws(SchemaError)
    {
        func fail(_ keyword: String, _ message: String) -> SchemaError {
            SchemaError(message, at: locationString(loc.appending(keyword)))
        }
        if let n = try nonNegative(o, "maxProperties", loc) { k.append(.maxProperties(n)) }
        if let n = try nonNegative(o, "minProperties", loc) { k.append(.minProperties(n)) }
        if let r = o["required"] {
            guard case .array(let list) = r else { throw fail("required", "'required' must be an array of strings") }
            var names: [String] = []
            for item in list {
                guard case .string(let s) = item else {
                    throw fail("required", "'required' must be an array of strings")
                }
                names.append(s)
            }
            if !names.isEmpty { k.append(.required(names)) }
        }
        if o["properties"] != nil || o["patternProperties"] != nil || o["additionalProperties"] != nil {
            var p = PropertySchemas()
            if let props = o["properties"] {
                guard case .object(let map) = props else { throw fail("properties", "'properties' must be an object") }
                for name in map.keys {
                    let child = try compile(loc.appending("properties").appending(name))
                    p.namedOrder.append((name, child))
                }
            }
            if let pats = o["patternProperties"] {
                guard case .object(let map) = pats else {
                    throw fail("patternProperties", "'patternProperties' must be an object")
                }
                for source in map.keys {
                    let pattern: Pattern
                    do {
                        pattern = try Pattern(source)
                    } catch {
                        throw fail("patternProperties", error.message)
                    }
                    p.patterns.append((pattern, try compile(loc.appending("patternProperties").appending(source))))
                }
            }
            if let additional = o["additionalProperties"] {
                p.additional = try compile(loc.appending("additionalProperties"))
                p.additionalIsFalse = additional == .bool(false)
            }
            k.append(.properties(p))
        }
        if let d = o["dependencies"] {
            guard case .object(let map) = d else { throw fail("dependencies", "'dependencies' must be an object") }
            var deps: [(String, Dependency)] = []
            for (name, value) in map.members {
                if case .array(let list) = value {
                    var names: [String] = []
                    for item in list {
                        guard case .string(let s) = item else {
                            throw fail("dependencies", "a property dependency must list property names")
                        }
                        names.append(s)
                    }
                    deps.append((name, .properties(names)))
                } else {
                    deps.append((name, .schema(try compile(loc.appending("dependencies").appending(name)))))
                }
            }
            if !deps.isEmpty { k.append(.dependencies(deps)) }
        }
        if o["propertyNames"] != nil { k.append(.propertyNames(try compile(loc.appending("propertyNames")))) }
    }
}
