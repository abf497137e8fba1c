internal import COpenSSL

/// Reads a PEM or DER blob through a read-only memory BIO that lives only for the call.
func withMemoryBIO<T>(_ bytes: [UInt8], _ body: (OpaquePointer) throws -> T) throws -> T {
    try bytes.withUnsafeBytes { raw in
        guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
            throw OpenSSLError(.allocationFailed, "BIO_new_mem_buf failed")
        }
        defer { BIO_free(bio) }
        return try body(bio)
    }
}
