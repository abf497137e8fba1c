/// Running a ``Program`` over an instance.
extension Program {
    func validate(_ nodeIndex: Int, _ value: JSONValue, _ e: inout Evaluation) -> Bool {
        let node = nodes[nodeIndex]
        var valid = true
        for keyword in node.keywords {
            if !check(keyword, node, value, &e) {
                valid = false
                if !e.continuesAfterFailure { return false }
            }
        }
        return valid
    }

    /// Validates `value` (found under `token` in its parent) against a child node.
    @inline(__always)
    func validateChild(_ nodeIndex: Int, _ value: JSONValue, _ token: @autoclosure () -> PathToken, _ e: inout Evaluation)
        -> Bool
    {
        let mark = e.errors.count
        if validate(nodeIndex, value, &e) { return true }
        e.prefix(since: mark, with: token())
        return false
    }

    func check(_ keyword: Keyword, _ node: Node, _ value: JSONValue, _ e: inout Evaluation) -> Bool {
        switch keyword {
        case .falseSchema:
            e.fail(node, "false", "no value is allowed here (the schema is false)")
            return false
        case .type(let types):
            if matches(types, value) { return true }
            e.fail(node, "type", "expected \(describe(types)), found \(typeName(value))")
            return false
        case .constant(let expected):
            if value == expected { return true }
            e.fail(node, "const", "value must be \(brief(expected))")
            return false
        case .enumeration(let allowed):
            for candidate in allowed where candidate == value { return true }
            e.fail(node, "enum", "value \(brief(value)) is not one of \(allowed.map(brief).joined(separator: ", "))")
            return false
        case .multipleOf, .maximum, .exclusiveMaximum, .minimum, .exclusiveMinimum:
            guard case .number(let n) = value else { return true }
            return checkNumber(keyword, n, node, &e)
        case .maxLength, .minLength, .pattern, .format:
            guard case .string(let s) = value else { return true }
            return checkString(keyword, s, node, &e)
        case .items, .tupleItems, .maxItems, .minItems, .uniqueItems, .contains:
            guard case .array(let a) = value else { return true }
            return checkArray(keyword, a, node, &e)
        case .maxProperties, .minProperties, .required, .properties, .dependencies, .propertyNames:
            guard case .object(let o) = value else { return true }
            return checkObject(keyword, o, node, &e)
        case .conditional(let ifNode, let thenNode, let elseNode):
            let holds = e.verdict { validate(ifNode, value, &$0) }
            if holds, let thenNode { return validate(thenNode, value, &e) }
            if !holds, let elseNode { return validate(elseNode, value, &e) }
            return true
        case .allOf(let children):
            var valid = true
            for child in children where !validate(child, value, &e) {
                valid = false
                if !e.continuesAfterFailure { return false }
            }
            return valid
        case .anyOf(let children):
            for child in children where e.verdict({ validate(child, value, &$0) }) { return true }
            e.fail(node, "anyOf", "value matches none of the \(children.count) schemas in anyOf")
            return false
        case .oneOf(let children):
            var matched: [Int] = []
            for (i, child) in children.enumerated() where e.verdict({ validate(child, value, &$0) }) {
                matched.append(i)
                if matched.count > 1 { break }
            }
            if matched.count == 1 { return true }
            if matched.isEmpty {
                e.fail(node, "oneOf", "value matches none of the \(children.count) schemas in oneOf")
            } else {
                e.fail(node, "oneOf", "value matches oneOf schemas \(matched[0]) and \(matched[1]); exactly one may match")
            }
            return false
        case .not(let child):
            if !e.verdict({ validate(child, value, &$0) }) { return true }
            e.fail(node, "not", "value must not match the schema in 'not'")
            return false
        case .ref(let target):
            return validate(target, value, &e)
        }
    }

    func matches(_ types: TypeSet, _ value: JSONValue) -> Bool {
        switch value {
        case .null: return types.contains(.null)
        case .bool: return types.contains(.boolean)
        case .string: return types.contains(.string)
        case .array: return types.contains(.array)
        case .object: return types.contains(.object)
        case .number(let n): return types.contains(.number) || (types.contains(.integer) && n.isInteger)
        }
    }

    func describe(_ types: TypeSet) -> String {
        let names = TypeSet.names.filter { types.contains($0.1) }.map(\.0)
        return names.count == 1 ? names[0] : "one of " + names.joined(separator: ", ")
    }
}
