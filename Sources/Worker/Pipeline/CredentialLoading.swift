import APNs
import Foundation

/// The bytes of every file a credential is read from, by path, as read at one moment: what
/// `CredentialReloader` compares to see that a key or certificate changed, and loads from (not
/// reading the files a second time, which could find them changed again).
package struct CredentialFiles: Sendable, Hashable {
    package var contents: [String: [UInt8]]

    package init(_ contents: [String: [UInt8]]) {
        self.contents = contents
    }

    /// Reads each file `settings` names. A file that cannot be read throws, saying which and why.
    package static func read(_ settings: CredentialSettings) throws(APNsCredentialError) -> CredentialFiles {
        var contents: [String: [UInt8]] = [:]
        for path in settings.files { contents[path] = try readCredentialFile(path) }
        return CredentialFiles(contents)
    }

    /// Whether a key or certificate file may be read by any user (mode o+r): a private key should
    /// not be. A certificate alone is public, but its file is often the key's too.
    package static func isReadableByOthers(_ path: String) -> Bool {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue
        else { return false }
        return mode & 0o004 != 0
    }

    func bytes(_ path: String) throws(APNsCredentialError) -> [UInt8] {
        if let bytes = contents[path] { return bytes }
        return try readCredentialFile(path)
    }
}

extension CredentialSettings {
    /// The files that hold a private key (the token key, a certificate's key, a PKCS#12 bundle):
    /// those no other user of the machine should read.
    package var privateKeyFiles: [String] {
        switch kind {
        case .token(let token):
            if case .file(let path) = token.key { return [path] }
            return []
        case .certificate(let certificate):
            switch certificate.source {
            case .pem(_, let privateKeyFile): return [privateKeyFile]
            case .pkcs12(let file): return [file]
            }
        }
    }

    /// The files the credential is read from: none for a key given in an environment variable
    /// (`keyEnv`), which cannot change without a restart.
    package var files: [String] {
        switch kind {
        case .token(let token):
            var files: [String] = []
            if case .file(let path) = token.key { files.append(path) }
            if case .file(let path) = token.keyID { files.append(path) }
            return files
        case .certificate(let certificate):
            switch certificate.source {
            case .pem(let certificateFile, let privateKeyFile): return [certificateFile, privateKeyFile]
            case .pkcs12(let file): return [file]
            }
        }
    }
}

extension APNsSender {
    /// Reads the key or certificate a credential names (from `files` where given, else from disk).
    /// Errors name the credential (unless the caller names it itself: `namingCredential: false`),
    /// never the secret.
    static func load(
        _ settings: CredentialSettings, environment: [String: String], namingCredential: Bool = true,
        authenticators: TokenAuthenticators = TokenAuthenticators(), files: CredentialFiles = CredentialFiles([:])
    ) throws -> APNsCredential {
        func secret(_ variable: String) throws -> String {
            guard let value = environment[variable] else {
                throw APNsCredentialError(.fileUnreadable, "environment variable \(variable) is not set")
            }
            return value
        }
        do {
            switch settings.kind {
            case .token(let token):
                let keyID: String
                switch token.keyID {
                case .value(let id): keyID = id
                case .file(let path):
                    keyID = String(decoding: try files.bytes(path), as: UTF8.self)
                        .trimmingCharacters(in: .whitespacesAndNewlines)
                    guard keyID.utf8.count == 10, keyID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
                    else {
                        throw APNsCredentialError(
                            .badIdentifier, "keyIdFile \(path): expected a key id of 10 letters or digits")
                    }
                }
                let pem: [UInt8]
                switch token.key {
                case .file(let path): pem = try files.bytes(path)
                case .environment(let variable): pem = Array(try secret(variable).utf8)
                }
                return .token(try authenticators.authenticator(teamID: token.teamID, keyID: keyID, pem: pem))
            case .certificate(let certificate):
                // The password is read only when the variable is set: an unencrypted key (or a
                // PKCS#12 bundle without a password) loads without it, and one that needs it says
                // which variable is missing.
                let variable = certificate.passwordEnvironmentVariable
                let password = variable.flatMap { environment[$0] }
                let identity: Result<APNsCertificateIdentity, APNsCredentialError>
                switch certificate.source {
                case .pem(let certificateFile, let privateKeyFile):
                    identity = Result { () throws(APNsCredentialError) in
                        try APNsCertificateIdentity(
                            certificatePEM: try files.bytes(certificateFile), keyPEM: try files.bytes(privateKeyFile),
                            password: password)
                    }
                case .pkcs12(let file):
                    identity = Result { () throws(APNsCredentialError) in
                        try APNsCertificateIdentity(pkcs12: try files.bytes(file), password: password ?? "")
                    }
                }
                switch identity {
                case .success(let identity): return .certificate(identity)
                case .failure(let error):
                    guard error.code == .certificateUnreadable, password == nil else { throw error }
                    let hint =
                        variable.map { "passwordEnv names \($0), which is not set" }
                        ?? "if the key is encrypted, name the variable holding its password in passwordEnv"
                    throw APNsCredentialError(error.code, "\(error.message) (\(hint))", openSSL: error.openSSL)
                }
            }
        } catch let error as APNsCredentialError where namingCredential {
            throw APNsCredentialError(
                error.code, "credential \(settings.name): \(error.message)", openSSL: error.openSSL)
        }
    }
}
