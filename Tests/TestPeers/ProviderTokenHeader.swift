import Foundation

/// The `kid` of the provider token in an `authorization` header (`bearer <JWT>`), as APNs reads it:
/// tests that rotate a key tell by it which key signed each request.
package func providerTokenKeyID(authorization: String) -> String? {
    let header = authorization.dropFirst("bearer ".count).split(separator: ".").first.map(String.init) ?? ""
    var base64 = header.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    guard let data = Data(base64Encoded: base64),
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    else { return nil }
    return object["kid"] as? String
}
