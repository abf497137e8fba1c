extension Array where Element == Double {
    /// The value at fraction `p` (0 to 1) of these sorted (the nearest rank below), `nil` when empty.
    func percentile(_ p: Double) -> Double? {
        guard !isEmpty else { return nil }
        let sorted = sorted()
        return sorted[Swift.min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.down)))]
    }
}
