/// Which keys hold secrets, so that their values stay out of errors and logs.
package enum ConfigSecrets {
    /// `sasl.password`, `ssl.key.password`, any key whose name contains `password` or `secret`
    /// (case-insensitive), wherever it is in the tree, and librdkafka's properties that hold key
    /// material or token settings inline (`ssl.key.pem`, `sasl.oauthbearer.config`, …).
    package static func isSecret(key: String) -> Bool {
        let lowered = key.lowercased()
        return lowered.contains("password") || lowered.contains("secret")
            || inlineSecrets.contains { lowered.hasSuffix($0) }
    }

    /// librdkafka properties whose values are secrets without saying so in their names.
    static let inlineSecrets = ["ssl.key.pem", "ssl_key.pem", "sasl.oauthbearer.config", "ssl.keystore.location"]

    /// `properties` with every secret value replaced by `<redacted>`, for logging the configuration.
    package static func redacted(_ properties: [String: String]) -> [String: String] {
        properties.reduce(into: [:]) { result, pair in
            result[pair.key] = isSecret(key: pair.key) ? "<redacted>" : pair.value
        }
    }
}
