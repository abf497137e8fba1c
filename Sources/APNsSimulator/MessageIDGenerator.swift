/// Version-4 UUIDs in canonical lowercase form for `apns-id`s the simulator makes up. Foundation's
/// `UUID().uuidString` costs a system random call and a formatted print per answer, a visible share of
/// a benchmark's time; a per-connection generator seeded once from the system does not.
struct MessageIDGenerator {
    private var random: SplitMix64

    init() {
        var system = SystemRandomNumberGenerator()
        random = SplitMix64(seed: system.next())
    }

    mutating func next() -> String {
        var high = random.next()
        var low = random.next()
        high = (high & ~0xF000) | 0x4000  // version 4
        low = (low & ~(0xC << 60)) | (0x8 << 60)  // RFC 4122 variant
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var out = 0
            func put(_ value: UInt64, nibbles: Int, _ buffer: UnsafeMutableBufferPointer<UInt8>) {
                for i in stride(from: nibbles - 1, through: 0, by: -1) {
                    buffer[out] = digits.utf8Start[Int((value >> (UInt64(i) * 4)) & 0xF)]
                    out += 1
                }
            }
            put(high >> 32, nibbles: 8, buffer)
            buffer[out] = 0x2D; out += 1
            put((high >> 16) & 0xFFFF, nibbles: 4, buffer)
            buffer[out] = 0x2D; out += 1
            put(high & 0xFFFF, nibbles: 4, buffer)
            buffer[out] = 0x2D; out += 1
            put(low >> 48, nibbles: 4, buffer)
            buffer[out] = 0x2D; out += 1
            put(low & 0xFFFF_FFFF_FFFF, nibbles: 12, buffer)
            return out
        }
    }
}
