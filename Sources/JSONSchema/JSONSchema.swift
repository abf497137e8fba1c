/// A compiled JSON Schema (draft-07), ready to validate any number of instances.
///
/// Compiling does all the work a schema needs: `$id`s are indexed, every `$ref` becomes a direct
/// link (remote documents are fetched once, through `resolver`), keyword values are checked,
/// patterns are compiled, and reference cycles that could never finish are refused. Validation then
/// walks the compiled form; it parses nothing and, on success, allocates nothing of its own.
///
/// ```swift
/// let schema = try JSONSchema(JSONParser.parse(schemaText))
/// let errors = schema.validate(try JSONParser.parse(eventBytes), mode: .allErrors)
/// ```
package struct JSONSchema: Sendable {
    /// Returns the document at an absolute URI (no fragment), or nil when it is unknown.
    package typealias Resolver = (_ uri: String) throws -> JSONValue?

    package struct Options: Sendable {
        /// Treat `format` as an assertion (draft-07 makes it an annotation by default).
        package var formatAssertion: Bool
        /// The base URI of the root schema when it has no `$id` of its own.
        package var baseURI: String

        package init(formatAssertion: Bool = false, baseURI: String = "") {
            self.formatAssertion = formatAssertion
            self.baseURI = baseURI
        }
    }

    let program: Program

    package init(_ schema: JSONValue, options: Options = Options(), resolver: Resolver? = nil) throws(SchemaError) {
        var compiler = SchemaCompiler(resolver: resolver, formatAssertion: options.formatAssertion)
        program = try compiler.compile(root: schema, baseURI: options.baseURI)
    }

    /// Parses and compiles schema text.
    package init(text: String, options: Options = Options(), resolver: Resolver? = nil) throws(SchemaError) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(text)
        } catch {
            throw SchemaError("the schema is not valid JSON: \(error)")
        }
        try self.init(value, options: options, resolver: resolver)
    }

    /// The failures of `instance`, empty when it is valid. `.firstError` returns at most one.
    package func validate(_ instance: JSONValue, mode: ValidationMode = .firstError) -> [ValidationError] {
        var evaluation = Evaluation(mode: mode == .firstError ? .first : .all)
        if program.validate(program.root, instance, &evaluation) { return [] }
        return evaluation.errors.map { $0.finished() }
    }

    /// The verdict alone: the cheapest way to ask.
    package func isValid(_ instance: JSONValue) -> Bool {
        var evaluation = Evaluation(mode: .verdict)
        return program.validate(program.root, instance, &evaluation)
    }
}
