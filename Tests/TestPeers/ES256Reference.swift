import Foundation

/// Deterministic ES256 signatures from OpenSSL's own signer (3.2 or later), made by
/// scripts/es256-reference.py with PyPI `cryptography` in the peers' venv (`make deps-tansu`): the
/// reference the worker's signer is compared with, on an OpenSSL other than the one it links.
package enum ES256Reference {
    package struct Signature: Sendable {
        /// The key, PKCS#8 PEM.
        package var pem: String
        package var message: [UInt8]
        /// r || s.
        package var signature: [UInt8]
    }

    /// `random` fresh keys signing three messages each (from `seed`), after the keys of `scalars`
    /// (private scalars in hex) signing their messages.
    package static func signatures(scalars: [(scalar: String, message: String)] = [], random: Int = 0, seed: Int = 1)
        throws -> [Signature]
    {
        let python = try peerPath(
            variable: "ES256_REFERENCE_PYTHON", installed: ".build/peers/venv/bin/python",
            what: "the peers' Python (with cryptography)")
        let script = packageRoot.appendingPathComponent("scripts/es256-reference.py").path
        var arguments = [script, "--random", "\(random)", "--seed", "\(seed)"]
        for (scalar, message) in scalars { arguments += ["--scalar", scalar, message] }
        let program = try spawnAndWait(python, arguments, timeout: 120)
        guard program.status == 0 else {
            throw TansuBroker.Failure(description: "es256-reference.py exited \(program.status): \(program.stderr)")
        }
        return try program.stdout.split(separator: "\n").map { line in
            struct Line: Decodable {
                var pem: String
                var message: String
                var signature: String
            }
            let decoded = try JSONDecoder().decode(Line.self, from: Data(line.utf8))
            return Signature(
                pem: decoded.pem, message: hexBytes(decoded.message), signature: hexBytes(decoded.signature))
        }
    }

    private static func hexBytes(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }
}
