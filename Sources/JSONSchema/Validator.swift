/// Running a ``Program`` over an instance.
extension Program {
    func validate(_ n: Int, _ value: JSONValue, _ e: inout Evaluation) -> Bool {
        let node = nodes[n]
        var valid = true
        var k = node.firstKeyword
        let end = k + node.keywordCount
        while k < end {
            if !check(keywords[k], n, value, &e) {
                valid = false
                if !e.continuesAfterFailure { return false }
            }
            k += 1
        }
        return valid
    }

    /// Validates `value` (found under `token` in its parent) against a child node.
    @inline(__always)
    func validateChild(_ child: Int, _ value: JSONValue, _ token: @autoclosure () -> PathToken, _ e: inout Evaluation)
        -> Bool
    {
        let mark = e.errors.count
        if validate(child, value, &e) { return true }
        e.prefix(since: mark, with: token())
        return false
    }

    /// Runs several nodes on the same value, all of which must pass.
    func validateAll(_ children: [Int], _ value: JSONValue, _ e: inout Evaluation) -> Bool {
        var valid = true
        for child in children where !validate(child, value, &e) {
            valid = false
            if !e.continuesAfterFailure { return false }
        }
        return valid
    }

    func check(_ keyword: Keyword, _ n: Int, _ value: JSONValue, _ e: inout Evaluation) -> Bool {
        switch keyword {
        case .falseSchema:
            e.fail(locations[n], "false", "no value is allowed here (the schema is false)")
            return false
        case .type(let types):
            if matches(types, value) { return true }
            e.fail(locations[n], "type", "expected \(describe(types)), found \(typeName(value))")
            return false
        case .constant(let i):
            if value == values[i] { return true }
            e.fail(locations[n], "const", "value must be \(brief(values[i]))")
            return false
        case .enumeration(let i):
            for candidate in valueLists[i] where candidate == value { return true }
            // Inside anyOf, oneOf, not or if a failure is only a verdict: build no message for it.
            guard e.wantsMessages else { return false }
            let choices = valueLists[i].map(brief).joined(separator: ", ")
            // "10" against 10, 5, 1: say that the type is what is wrong, not the value.
            let types = Set(valueLists[i].map(typeName))
            if !types.contains(typeName(value)) {
                let expected = types.count == 1 ? "one of the \(types.first!)s " : "one of "
                e.fail(
                    locations[n], "enum",
                    "value \(brief(value)) is \(article(typeName(value))); expected \(expected)\(choices)")
            } else {
                e.fail(locations[n], "enum", "value \(brief(value)) is not one of \(choices)")
            }
            return false
        case .multipleOf, .maximum, .exclusiveMaximum, .minimum, .exclusiveMinimum:
            guard case .number(let number) = value else { return true }
            return checkNumber(keyword, number, n, &e)
        case .maxLength, .minLength, .pattern, .format:
            guard case .string(let s) = value else { return true }
            return checkString(keyword, s, n, &e)
        case .items, .tupleItems, .maxItems, .minItems, .uniqueItems, .contains:
            guard case .array(let a) = value else { return true }
            return checkArray(keyword, a, n, &e)
        case .maxProperties, .minProperties, .required, .properties, .dependencies, .propertyNames:
            guard case .object(let o) = value else { return true }
            return checkObject(keyword, o, n, &e)
        case .conditional(let ifNode, let thenNode, let elseNode):
            let holds = e.verdict { validate(ifNode, value, &$0) }
            if holds && thenNode >= 0 { return validate(thenNode, value, &e) }
            if !holds && elseNode >= 0 { return validate(elseNode, value, &e) }
            return true
        case .allOf(let i):
            return validateAll(nodeLists[i], value, &e)
        case .anyOf(let i):
            for child in nodeLists[i] where e.verdict({ validate(child, value, &$0) }) { return true }
            e.fail(locations[n], "anyOf", "value matches none of the \(nodeLists[i].count) schemas in anyOf")
            return false
        case .oneOf(let i):
            // The first two that match, without an array: this runs for every event our schema checks.
            var first: Int?
            var second: Int?
            for (k, child) in nodeLists[i].enumerated() where e.verdict({ validate(child, value, &$0) }) {
                if first == nil {
                    first = k
                } else {
                    second = k
                    break
                }
            }
            guard let first else {
                e.fail(locations[n], "oneOf", "value matches none of the \(nodeLists[i].count) schemas in oneOf")
                return false
            }
            guard let second else { return true }
            e.fail(locations[n], "oneOf", "value matches oneOf schemas \(first) and \(second); exactly one may match")
            return false
        case .not(let child):
            if !e.verdict({ validate(child, value, &$0) }) { return true }
            e.fail(locations[n], "not", "value must not match the schema in 'not'")
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
