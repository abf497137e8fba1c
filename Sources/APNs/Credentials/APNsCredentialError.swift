/// A credential that cannot be loaded or used: a configuration problem, never retriable.
public struct APNsCredentialError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let fileUnreadable = Code(rawValue: "fileUnreadable")
        public static let keyUnreadable = Code(rawValue: "keyUnreadable")
        public static let certificateUnreadable = Code(rawValue: "certificateUnreadable")
        /// The private key given with a certificate is another certificate's.
        public static let keyDoesNotMatchCertificate = Code(rawValue: "keyDoesNotMatchCertificate")
        public static let badIdentifier = Code(rawValue: "badIdentifier")
        public static let signingFailed = Code(rawValue: "signingFailed")
        /// The certificate's `notAfter` has passed.
        public static let certificateExpired = Code(rawValue: "certificateExpired")
        /// The certificate's `notBefore` has not come yet (or the clock is wrong).
        public static let certificateNotYetValid = Code(rawValue: "certificateNotYetValid")
    }

    public let code: Code
    public let message: String
    /// OpenSSL's error queue when OpenSSL refused.
    public let openSSL: OpenSSLError?

    public init(_ code: Code, _ message: String, openSSL: OpenSSLError? = nil) {
        self.code = code
        self.message = message
        self.openSSL = openSSL
    }

    /// Credentials do not fix themselves.
    public var isRetriable: Bool { false }

    /// The message in plain words (the code is for programs: `code`), with OpenSSL's reason when
    /// OpenSSL refused.
    public var description: String {
        openSSL.map { "\(message) (\($0))" } ?? message
    }
}
