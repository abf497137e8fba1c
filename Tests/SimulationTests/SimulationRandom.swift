import TestPeers

/// The simulation's only source of chance: `SplitMix64` (TestPeers) from a seed, so that a run
/// replays exactly from its seed. Nothing in a run may depend on anything else that varies between processes (a
/// dictionary's iteration order, the wall clock, thread timing): the simulation iterates sorted keys.
struct SimulationRandom: RandomNumberGenerator {
    private var generator: SplitMix64

    init(seed: UInt64) {
        generator = SplitMix64(state: seed)
    }

    mutating func next() -> UInt64 { generator.next() }

    /// True with probability `probability`.
    mutating func chance(_ probability: Double) -> Bool {
        Double(next() >> 11) / Double(1 << 53) < probability
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int {
        Int.random(in: range, using: &self)
    }

    mutating func pick<T>(_ items: [T]) -> T? {
        items.isEmpty ? nil : items[int(0...items.count - 1)]
    }
}
