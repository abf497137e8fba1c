/// Which keys hold secrets, so that their values stay out of errors and logs.
public enum ConfigSecrets {
    /// `sasl.password`, `ssl.key.password`, and any key whose name contains `password` or `secret`
    /// (case-insensitive), wherever it is in the tree.
    public static func isSecret(key: String) -> Bool {
        let lowered = key.lowercased()
        return lowered.contains("password") || lowered.contains("secret")
    }

    /// `properties` with every secret value replaced by `<redacted>`, for logging the configuration.
    public static func redacted(_ properties: [String: String]) -> [String: String] {
        properties.reduce(into: [:]) { result, pair in
            result[pair.key] = isSecret(key: pair.key) ? "<redacted>" : pair.value
        }
    }
}
