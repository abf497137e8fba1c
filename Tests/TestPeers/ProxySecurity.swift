import NIOCore
import NIOSSL
import NIOTLS
import X509

/// What a Kafka-framed `FaultProxy` asks of its clients before it forwards their bytes to the
/// broker: TLS (with a client certificate for mutual TLS), SASL/PLAIN, or both (`SASL_SSL`). The
/// proxy terminates both and talks plain TCP to the broker, which has neither.
package struct ProxySecurity: Sendable {
    /// TLS as the server: the certificate chain it presents and, for mutual TLS, the CA a client's
    /// certificate must chain to (a client without one is refused).
    package struct TLS: Sendable {
        package var server: TestIdentity
        package var clientCA: Certificate?

        package init(server: TestIdentity, clientCA: Certificate? = nil) {
            self.server = server
            self.clientCA = clientCA
        }
    }

    /// SASL/PLAIN with one user.
    package struct SASLPlain: Sendable {
        package var username: String
        package var password: String

        package init(username: String, password: String) {
            self.username = username
            self.password = password
        }
    }

    package var tls: TLS?
    package var sasl: SASLPlain?
    /// Lets through clients that open with neither TLS nor a SASL handshake, untouched: the test's own
    /// helpers (which produce the input and read the results without the security under test) then
    /// share the broker with the client under test. Off, such a client is reset.
    package var admitsPlainClients: Bool

    package init(tls: TLS? = nil, sasl: SASLPlain? = nil, admitsPlainClients: Bool = false) {
        self.tls = tls
        self.sasl = sasl
        self.admitsPlainClients = admitsPlainClients
    }

    /// The TLS context, made once per `setSecurity`, not per connection.
    func makeContext() throws -> NIOSSLContext? {
        guard let tls else { return nil }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [
                .certificate(try NIOSSLCertificate(bytes: Array(tls.server.certificatePEM.utf8), format: .pem))
            ],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(tls.server.privateKeyPEM.utf8), format: .pem)))
        if let clientCA = tls.clientCA {
            // A server asking for a certificate fails the handshake when none comes.
            configuration.certificateVerification = .noHostnameVerification
            let pem = try clientCA.serializeAsPEM().pemString
            configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(pem.utf8), format: .pem)])
        }
        return try NIOSSLContext(configuration: configuration)
    }
}

/// The first handler of a connection to a proxy with TLS: a TLS record (content type 22, a
/// handshake) first puts a TLS server in front of the rest; anything else is a plain client, let
/// through or reset. Then it leaves the pipeline. Unchecked: confined to the proxy's loop.
final class TLSSniffHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    let pair: ProxyPair
    let context: NIOSSLContext
    let admitsPlainClients: Bool

    init(pair: ProxyPair, context: NIOSSLContext, admitsPlainClients: Bool) {
        self.pair = pair
        self.context = context
        self.admitsPlainClients = admitsPlainClients
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        guard let first = bytes.getInteger(at: bytes.readerIndex, as: UInt8.self) else { return }
        if first == 22 {
            let handlers: [any ChannelHandler] = [
                NIOSSLServerHandler(context: self.context), TLSOutcomeHandler(proxy: pair.proxy),
            ]
            try? context.pipeline.syncOperations.addHandlers(handlers, position: .after(self))
        } else if !admitsPlainClients {
            pair.proxy.statistics.plainRefused += 1
            pair.reset()
            return
        }
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

/// Counts TLS handshakes that completed and failed (a failure closes the connection, as a broker's
/// would). Unchecked: confined to the proxy's loop.
final class TLSOutcomeHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    unowned let proxy: FaultProxy
    private var done = false

    init(proxy: FaultProxy) {
        self.proxy = proxy
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent, !done {
            done = true
            proxy.statistics.tlsAccepted += 1
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !done {
            done = true
            proxy.statistics.tlsRefused += 1
            proxy.statistics.tlsErrors.append("\(error)")
        }
        context.close(promise: nil)
    }
}
