/// Problems that involve two keys, said on the key that was set, with both values.
extension WorkerConfiguration {
    /// initialBackoff above maxBackoff, blamed on the key that was set (initialBackoff when both
    /// were), with both values, and with the unit a bare number stands for (`200` is 200 s).
    static func backoffOrder(_ retry: inout ConfigSection, _ policy: RetryPolicy) -> ConfigurationError {
        func bare(_ key: String) -> String? {
            guard case .scalar(let text, isNull: false)? = retry.node(key)?.value, Double(text) != nil else {
                return nil
            }
            return text
        }
        let initial = ConfigDuration.format(policy.initialBackoff)
        let maximum = ConfigDuration.format(policy.maxBackoff)
        if retry.node("initialBackoff") != nil {
            let hint = bare("initialBackoff").map { "; a bare number is seconds: write \($0)ms for milliseconds" } ?? ""
            let which = retry.node("maxBackoff") == nil ? "maxBackoff's default" : "maxBackoff"
            return retry.error(
                "initialBackoff", retry.node("initialBackoff"), "\(initial) is more than \(which), \(maximum)\(hint)")
        }
        let hint = bare("maxBackoff") == nil ? "" : "; a bare number is seconds"
        return retry.error(
            "maxBackoff", retry.node("maxBackoff"),
            "\(maximum) is less than initialBackoff's default, \(initial)\(hint)")
    }
}
