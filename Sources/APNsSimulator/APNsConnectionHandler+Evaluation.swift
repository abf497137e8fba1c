import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2

/// What the simulator answers a request, by Apple's rules: the credential, the headers, the payload,
/// a broadcast's channel or a channel-management call, the device registry.
extension APNsConnectionHandler {
    /// The verdict of the rules, the token state machine and the registry, before faults.
    func evaluate(_ head: RequestHead, stream: inout PendingStream) -> Outcome {
        var outcome = Outcome()
        if !head.hasDuplicates, head.method == "POST", let path = head.path, let last = lastPath, last.path == path {
            outcome.deviceToken = last.token
        } else {
            if listener == .management { return evaluateManagement(head, stream: stream) }
            if let path = head.path, BroadcastRules.isBroadcastPath(path) {
                return evaluateBroadcast(head, stream: stream)
            }
            switch RequestRules.checkLine(head) {
            case .failure(.badDeviceToken):
                // APNs checks the credential before the token's form: a malformed token with a bad
                // provider token is answered 403 (a client seeing BadDeviceToken knows its credential
                // was taken, which a credential probe relies on).
                if case .failure(let refused) = authorize(head) {
                    outcome.reason = refused
                } else {
                    outcome.reason = .badDeviceToken
                }
                return outcome
            case .failure(let reason):
                outcome.reason = reason
                return outcome
            case .success(let token):
                outcome.deviceToken = token
                lastPath = (head.path!, token)
            }
        }
        let authorization: RequestAuthorization
        switch authorize(head) {
        case .failure(let reason):
            outcome.reason = reason
            return outcome
        case .success(let granted): authorization = granted
        }
        let checked: CheckedRequest
        switch RequestRules.checkHeaders(
            head,
            deviceToken: outcome.deviceToken!,
            authorization: authorization,
            acceptUppercaseMessageID: core.configuration.acceptsUppercaseMessageID
        ) {
        case .failure(let reason):
            outcome.reason = reason
            return outcome
        case .success(let request): checked = request
        }
        outcome.request = checked
        if let payloadReason = checkPayload(stream, limit: checked.maximumPayloadSize) {
            outcome.reason = payloadReason
            return outcome
        }
        switch registryVerdict(token: checked.deviceToken, topic: checked.topic) {
        case .deliver: break
        case .reject(let reason): outcome.reason = reason
        case .unregistered(let since):
            outcome.reason = .unregistered
            outcome.unregisteredSince = since
        }
        return outcome
    }

    /// The provider token (through the connection's state machine) or the client certificate.
    private func authorize(_ head: RequestHead) -> Result<RequestAuthorization, SimulatorReason> {
        switch auth.authorize(
            header: head.authorization, now: core.clock.now(), verifier: core.verifier, ledger: core.tokenLedger)
        {
        case .refuse(let reason):
            return .failure(reason)
        case .authorized(let granted, let raise):
            if raise { liftRestriction() }
            if case .certificate(let identity) = granted {
                switch identity.validity {
                case .valid: break
                case .bad: return .failure(.badCertificate)
                case .wrongEnvironment: return .failure(.badCertificateEnvironment)
                }
            }
            return .success(granted)
        }
    }

    /// Empty, too large, or not a JSON object.
    private func checkPayload(_ stream: PendingStream, limit: Int) -> SimulatorReason? {
        if let body = stream.body {
            return body.withUnsafeReadableBytes { RequestRules.checkPayload($0, size: stream.size, limit: limit) }
        }
        return stream.size == 0 ? .payloadEmpty : .payloadTooLarge
    }

    /// `POST /4/broadcasts/apps/<bundle ID>` on the push listener: line, credential, app, headers, channel,
    /// payload. Nothing is recorded here: a fault may still take the request's place.
    private func evaluateBroadcast(_ head: RequestHead, stream: PendingStream) -> Outcome {
        var outcome = Outcome(other: .broadcast(nil))
        let bundleID: String
        switch BroadcastRules.checkBroadcastLine(head) {
        case .failure(let reason): return outcome.refused(reason)
        case .success(let id): bundleID = id
        }
        if let reason = checkCallerAndApp(head, bundleID: bundleID) { return outcome.refused(reason) }
        let request: BroadcastRequest
        switch BroadcastRules.checkBroadcastHeaders(
            head, bundleID: bundleID, acceptUppercaseRequestID: core.configuration.acceptsUppercaseMessageID)
        {
        case .failure(let reason): return outcome.refused(reason)
        case .success(let checked): request = checked
        }
        outcome.other = .broadcast(request)
        guard let channel = core.channels.channel(request.channelID, bundleID: bundleID) else {
            return outcome.refused(.channelNotRegistered)
        }
        if let reason = BroadcastRules.checkExpiration(request, channel: channel) { return outcome.refused(reason) }
        if let reason = checkPayload(stream, limit: BroadcastRules.maximumPayloadSize) {
            return outcome.refused(reason)
        }
        return outcome
    }

    /// A channel-management request: line, credential, app, request id, then what the call needs (the
    /// create body and the app's room for one more channel; the channel of a read or delete). The
    /// registry changes only once the answer is made, after faults.
    private func evaluateManagement(_ head: RequestHead, stream: PendingStream) -> Outcome {
        var outcome = Outcome(other: .management(nil))
        let bundleID: String
        var plan: ManagementPlan
        switch BroadcastRules.checkManagementLine(head) {
        case .failure(let reason): return outcome.refused(reason)
        case .success(let (id, call)):
            bundleID = id
            plan = ManagementPlan(bundleID: id, call: call)
        }
        if let reason = checkCallerAndApp(head, bundleID: bundleID) { return outcome.refused(reason) }
        if let reason = BroadcastRules.checkRequestID(
            head, acceptUppercase: core.configuration.acceptsUppercaseMessageID)
        {
            return outcome.refused(reason)
        }
        switch plan.call {
        case .create:
            if stream.size > BroadcastRules.maximumPayloadSize { return outcome.refused(.payloadTooLarge) }
            switch BroadcastRules.checkCreateBody(stream.body.map { Array($0.readableBytesView) } ?? []) {
            case .failure(let reason): return outcome.refused(reason)
            case .success(let policy): plan.storagePolicy = policy
            }
            if core.channels.count(bundleID: bundleID) >= core.channels.limit {
                return outcome.refused(.cannotCreateChannelConfig)
            }
        case .read, .delete:
            switch BroadcastRules.checkChannelID(head) {
            case .failure(let reason): return outcome.refused(reason)
            case .success(let id): plan.channelID = id
            }
            if core.channels.channel(plan.channelID!, bundleID: bundleID) == nil {
                return outcome.refused(.channelNotRegistered)
            }
        case .list:
            break
        }
        outcome.other = .management(plan)
        return outcome
    }

    /// What broadcasts and channel management check after the line: the credential, the app against
    /// the credential, and the app's broadcast capability.
    private func checkCallerAndApp(_ head: RequestHead, bundleID: String) -> SimulatorReason? {
        let authorization: RequestAuthorization
        switch authorize(head) {
        case .failure(let reason): return reason
        case .success(let granted): authorization = granted
        }
        if let reason = BroadcastRules.checkApp(bundleID, authorization: authorization) { return reason }
        return core.channels.isBroadcastEnabled(bundleID: bundleID) ? nil : .featureNotEnabled
    }

    private func registryVerdict(token: String, topic: String) -> DeviceRegistry.Verdict {
        let generation = core.devices.generation
        if let last = lastVerdict, last.generation == generation, last.token == token, last.topic == topic {
            return last.verdict
        }
        let verdict = core.devices.verdict(token: token, topic: topic, environment: core.configuration.environment)
        lastVerdict = (token, topic, generation, verdict)
        return verdict
    }

    /// What ``Simulator/connections()`` reports.
    var snapshot: ConnectionSnapshot {
        ConnectionSnapshot(
            id: connectionID, acceptedPushes: acceptedPushes, acceptancesAwaitingAnswer: acceptancesAwaitingAnswer)
    }
}

extension APNsConnectionHandler {
    /// The answer to one request before it is written.
    struct Outcome {
        var deviceToken: String?
        var request: CheckedRequest?
        var reason: SimulatorReason?
        var unregisteredSince: Double?
        /// A broadcast or a channel-management call; `nil` for a device push.
        var other: Other?

        /// What a fault script is looked up by: the device token, or a broadcast's channel.
        var faultTarget: String {
            if let deviceToken { return deviceToken }
            if case .broadcast(let request?) = other { return FaultInjector.channelTarget(request.channelID) }
            return ""
        }

        mutating func refused(_ reason: SimulatorReason) -> Outcome {
            self.reason = reason
            return self
        }
    }

    /// The requests that are not device pushes; the payload is there once the request's checks passed.
    enum Other {
        case broadcast(BroadcastRequest?)
        case management(ManagementPlan?)
    }

    /// A channel-management call that passed its checks: what to do to the registry once answered.
    struct ManagementPlan {
        var bundleID: String
        var call: ManagementCall
        var storagePolicy: ChannelRegistry.StoragePolicy?
        var channelID: String?
    }
}
