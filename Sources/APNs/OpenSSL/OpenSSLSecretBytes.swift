internal import COpenSSL

/// A fixed buffer for a secret (the private scalar's octets, HMAC_DRBG's K and V, a nonce): kept out
/// of Swift's copy-on-write arrays, which leave copies wherever they were resized or passed, and
/// cleansed with `OPENSSL_cleanse` (a write the compiler may not drop) when freed.
final class SecretBytes {
    let count: Int
    private let buffer: UnsafeMutableRawBufferPointer

    init(count: Int, repeating byte: UInt8 = 0) {
        self.count = count
        buffer = .allocate(byteCount: count, alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: byte)
    }

    deinit {
        OPENSSL_cleanse(buffer.baseAddress, count)
        buffer.deallocate()
    }

    func withBytes<T>(_ body: (UnsafePointer<UInt8>, Int) throws -> T) rethrows -> T {
        try body(UnsafePointer(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)), count)
    }

    func withMutableBytes<T>(_ body: (UnsafeMutablePointer<UInt8>, Int) throws -> T) rethrows -> T {
        try body(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count)
    }
}
