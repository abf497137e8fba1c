/// The keywords that look at one type of value.
extension Program {
    func checkNumber(_ keyword: Keyword, _ x: JSONNumber, _ n: Int, _ e: inout Evaluation) -> Bool {
        switch keyword {
        case .multipleOf(let i):
            let m = numbers[i]
            if x.isMultiple(of: m) { return true }
            e.fail(locations[n], "multipleOf", "\(x) is not a multiple of \(m)")
        case .maximum(let i):
            let m = numbers[i]
            if x <= m { return true }
            e.fail(locations[n], "maximum", "\(x) is greater than the maximum of \(m)")
        case .exclusiveMaximum(let i):
            let m = numbers[i]
            if x < m { return true }
            e.fail(locations[n], "exclusiveMaximum", "\(x) is not less than \(m)")
        case .minimum(let i):
            let m = numbers[i]
            if x >= m { return true }
            e.fail(locations[n], "minimum", "\(x) is less than the minimum of \(m)")
        case .exclusiveMinimum(let i):
            let m = numbers[i]
            if x > m { return true }
            e.fail(locations[n], "exclusiveMinimum", "\(x) is not greater than \(m)")
        default:
            return true
        }
        return false
    }

    func checkString(_ keyword: Keyword, _ s: String, _ n: Int, _ e: inout Evaluation) -> Bool {
        switch keyword {
        case .maxLength(let max):
            // UTF-8 length bounds the code-point count from above: skip counting when it can.
            if s.utf8.count <= max { return true }
            let length = s.unicodeScalars.count
            if length <= max { return true }
            e.fail(locations[n], "maxLength", "string is \(length) characters long, more than the maximum of \(max)")
        case .minLength(let min):
            if s.utf8.count < min {
                // fewer bytes than needed: certainly too short
            } else if s.utf8.count / 4 >= min || s.unicodeScalars.count >= min {
                return true
            }
            e.fail(
                locations[n], "minLength",
                "string is \(s.unicodeScalars.count) characters long, less than the minimum of \(min)")
        case .pattern(let i):
            let p = patterns[i]
            if p.matches(s) { return true }
            e.fail(locations[n], "pattern", "\(quoted(s)) does not match the pattern '\(p.source)'")
        case .format(let f):
            if f.accepts(s) { return true }
            e.fail(locations[n], "format", "\(quoted(s)) is not a valid \(f.rawValue)")
        default:
            return true
        }
        return false
    }

    func checkArray(_ keyword: Keyword, _ a: [JSONValue], _ n: Int, _ e: inout Evaluation) -> Bool {
        switch keyword {
        case .items(let child):
            var valid = true
            for (i, item) in a.enumerated() where !validateChild(child, item, .index(i), &e) {
                valid = false
                if !e.continuesAfterFailure { return false }
            }
            return valid
        case .tupleItems(let t):
            let children = tuples[t].children
            let additional = tuples[t].additional
            let additionalIsFalse = tuples[t].additionalIsFalse
            var valid = true
            for (i, item) in a.enumerated() {
                let child: Int
                if i < children.count {
                    child = children[i]
                } else if additional >= 0 {
                    if additionalIsFalse {
                        e.fail(locations[n], "additionalItems", "the array may have at most \(children.count) items")
                        return false
                    }
                    child = additional
                } else {
                    break
                }
                if !validateChild(child, item, .index(i), &e) {
                    valid = false
                    if !e.continuesAfterFailure { return false }
                }
            }
            return valid
        case .maxItems(let max):
            if a.count <= max { return true }
            e.fail(locations[n], "maxItems", "array has \(a.count) items, more than the maximum of \(max)")
        case .minItems(let min):
            if a.count >= min { return true }
            e.fail(locations[n], "minItems", "array has \(a.count) items, fewer than the minimum of \(min)")
        case .uniqueItems:
            if a.count < 2 { return true }
            var seen = Set<JSONValue>(minimumCapacity: a.count)
            for (i, item) in a.enumerated() where !seen.insert(item).inserted {
                e.fail(locations[n], "uniqueItems", "items must be unique, but item \(i) repeats an earlier one")
                return false
            }
            return true
        case .contains(let child):
            for item in a where e.verdict({ validate(child, item, &$0) }) { return true }
            e.fail(locations[n], "contains", "no item matches the 'contains' schema")
        default:
            return true
        }
        return false
    }

    func checkObject(_ keyword: Keyword, _ o: JSONObject, _ n: Int, _ e: inout Evaluation) -> Bool {
        switch keyword {
        case .maxProperties(let max):
            if o.count <= max { return true }
            e.fail(locations[n], "maxProperties", "object has \(o.count) properties, more than the maximum of \(max)")
        case .minProperties(let min):
            if o.count >= min { return true }
            e.fail(locations[n], "minProperties", "object has \(o.count) properties, fewer than the minimum of \(min)")
        case .required(let r):
            let names = nameLists[r]
            var valid = true
            for name in names where o.position(of: name) == nil {
                e.fail(locations[n], "required", "required property '\(name)' is missing")
                valid = false
                if !e.continuesAfterFailure { return false }
            }
            return valid
        case .properties(let p):
            return checkProperties(propertyTables[p], o, n, &e)
        case .dependencies(let d):
            let deps = dependencyTables[d]
            var valid = true
            for (name, dependency) in deps where o.position(of: name) != nil {
                switch dependency {
                case .properties(let needed):
                    for other in needed where o.position(of: other) == nil {
                        e.fail(
                            locations[n], "dependencies", "property '\(other)' is required when '\(name)' is present")
                        valid = false
                        if !e.continuesAfterFailure { return false }
                    }
                case .schema(let child):
                    if !validate(child, .object(o), &e) {
                        valid = false
                        if !e.continuesAfterFailure { return false }
                    }
                }
            }
            return valid
        case .propertyNames(let child):
            var valid = true
            for key in o.keys where !validateChild(child, .string(key), .key(key), &e) {
                valid = false
                if !e.continuesAfterFailure { return false }
            }
            return valid
        default:
            return true
        }
        return false
    }

    func checkProperties(_ p: Properties, _ o: JSONObject, _ n: Int, _ e: inout Evaluation) -> Bool {
        var valid = true
        if p.patterns.isEmpty && p.additional < 0 {
            // Only `properties`: visit the schema's names, a short linear lookup each.
            for (k, name) in p.names.enumerated() {
                guard let i = o.position(of: name) else { continue }
                if !validateChild(p.nodes[k], o.values[i], .key(name), &e) {
                    valid = false
                    if !e.continuesAfterFailure { return false }
                }
            }
            return valid
        }
        for (i, key) in o.keys.enumerated() {
            let value = o.values[i]
            var matched = false
            if let child = p.node(for: key) {
                matched = true
                if !validateChild(child, value, .key(key), &e) {
                    valid = false
                    if !e.continuesAfterFailure { return false }
                }
            }
            for (pattern, child) in p.patterns where pattern.matches(key) {
                matched = true
                if !validateChild(child, value, .key(key), &e) {
                    valid = false
                    if !e.continuesAfterFailure { return false }
                }
            }
            if !matched, p.additional >= 0 {
                let additional = p.additional
                if p.additionalIsFalse {
                    if e.wantsMessages {
                        let mark = e.errors.count
                        e.fail(locations[n], "additionalProperties", "property '\(key)' is not allowed")
                        e.prefix(since: mark, with: .key(key))
                    }
                    valid = false
                    if !e.continuesAfterFailure { return false }
                } else if !validateChild(additional, value, .key(key), &e) {
                    valid = false
                    if !e.continuesAfterFailure { return false }
                }
            }
        }
        return valid
    }
}
