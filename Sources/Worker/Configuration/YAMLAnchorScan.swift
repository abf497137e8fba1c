// libyaml is Yams's own parser (its C module); only this file reads its events, and no C type
// leaves it.
internal import CYaml

extension ConfigNode {
    /// Where the first anchor (`&name`) or alias (`*name`) of `text` is: its 1-based line and the key
    /// path of the node that carries it. `nil` when there is none, or when the text is not valid YAML
    /// before one (composing it then reports the syntax error).
    ///
    /// Configuration files may use neither, and they must be refused before Yams composes the
    /// document: Yams hashes every mapping key to find duplicates while it composes, and an alias is
    /// hashed with everything its anchor holds, so nested aliases in a key cost exponential time
    /// (eight levels of nine, 9^8 nodes, from 500 bytes). This reads libyaml's event stream, where an
    /// alias is one event and nothing is expanded: linear in the text, and exact, since it is the
    /// parser Yams composes from.
    static func firstAnchorOrAlias(in text: String) -> (line: Int, path: String)? {
        var text = text
        return text.withUTF8 { bytes in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else { return nil }
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            yaml_parser_set_input_string(&parser, bytes.baseAddress, bytes.count)
            var paths = NodePaths()
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { return nil }
                defer { yaml_event_delete(&event) }
                let line = Int(event.start_mark.line) + 1
                switch event.type {
                case YAML_ALIAS_EVENT:
                    return (line, paths.current)
                case YAML_SCALAR_EVENT:
                    if event.data.scalar.anchor != nil { return (line, paths.current) }
                    var key: String?
                    if paths.atKey {
                        let text = UnsafeBufferPointer(start: event.data.scalar.value, count: event.data.scalar.length)
                        key = String(decoding: text, as: UTF8.self)
                    }
                    paths.completed(key: key)
                case YAML_SEQUENCE_START_EVENT:
                    if event.data.sequence_start.anchor != nil { return (line, paths.current) }
                    paths.open(isMapping: false)
                case YAML_MAPPING_START_EVENT:
                    if event.data.mapping_start.anchor != nil { return (line, paths.current) }
                    paths.open(isMapping: true)
                case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                    paths.close()
                case YAML_STREAM_END_EVENT:
                    return nil
                default:
                    break  // stream and document starts, document ends
                }
            }
        }
    }
}

/// Where the events are: the open collections, from which the key path of the node that starts
/// now is built when it is needed, named as `convert` names it (`a.b[2].c`; a key is named by its
/// mapping's path).
private struct NodePaths {
    private struct Collection {
        let isMapping: Bool
        /// In a mapping: whether the next node is a key.
        var expectsKey = true
        /// In a mapping: the current key, when it is a scalar.
        var key: String?
        /// In a sequence: the index of the current item.
        var index = 0
    }

    private var open: [Collection] = []

    /// Whether the node that starts now is a mapping key (whose text `completed(key:)` takes).
    var atKey: Bool { open.last.map { $0.isMapping && $0.expectsKey } ?? false }

    /// The key path of the node that starts now.
    var current: String {
        var path = ""
        for collection in open {
            if !collection.isMapping {
                path += "[\(collection.index)]"
            } else if !collection.expectsKey {
                let key = collection.key ?? "?"
                path = path.isEmpty ? key : "\(path).\(key)"
            }
        }
        return path
    }

    mutating func open(isMapping: Bool) {
        open.append(Collection(isMapping: isMapping))
    }

    mutating func close() {
        _ = open.popLast()
        completed(key: nil)
    }

    /// A node of the innermost open collection is complete; `key` is its text if it was a scalar key.
    mutating func completed(key: String?) {
        guard let last = open.indices.last else { return }
        if open[last].isMapping {
            if open[last].expectsKey { open[last].key = key }
            open[last].expectsKey.toggle()
        } else {
            open[last].index += 1
        }
    }
}
