internal import COpenSSL

/// A failure inside OpenSSL (key parsing, signing, TLS context setup, the handshake).
///
/// `stack` is OpenSSL's thread-local error queue, drained at the moment the failure was seen, so the
/// error carries OpenSSL's own words ("certificate verify failed", "wrong tag") and the queue is left
/// empty for the next call on the same thread.
public struct OpenSSLError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What we were doing when OpenSSL failed.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let keyUnreadable = Code(rawValue: "keyUnreadable")
        public static let keyNotP256 = Code(rawValue: "keyNotP256")
        public static let signingFailed = Code(rawValue: "signingFailed")
        /// A signature made did not verify with the key's public half (and was not used).
        public static let signatureUnverified = Code(rawValue: "signatureUnverified")
        public static let certificateUnreadable = Code(rawValue: "certificateUnreadable")
        public static let pkcs12Unreadable = Code(rawValue: "pkcs12Unreadable")
        public static let contextSetupFailed = Code(rawValue: "contextSetupFailed")
        public static let caFileUnreadable = Code(rawValue: "caFileUnreadable")
        public static let allocationFailed = Code(rawValue: "allocationFailed")
    }

    public let code: Code
    /// A sentence for people (never key material).
    public let message: String
    /// OpenSSL's error queue, oldest first, as `ERR_error_string_n` prints each entry.
    public let stack: [String]

    public init(_ code: Code, _ message: String, stack: [String] = OpenSSLError.drainErrorStack()) {
        self.code = code
        self.message = message
        self.stack = stack
    }

    public var description: String {
        stack.isEmpty ? message : "\(message) [\(stack.joined(separator: "; "))]"
    }

    /// Empties the calling thread's OpenSSL error queue and returns its entries, oldest first.
    public static func drainErrorStack() -> [String] {
        var entries: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            entries.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return entries
    }
}
