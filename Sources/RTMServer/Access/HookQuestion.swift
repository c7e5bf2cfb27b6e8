import Foundation
import NIOCore
import RTMAuth
import RTMProtocol

/// One question to the authorization hook: may this user do this event (on this channel)?
struct HookQuestion: Sendable {
    /// A publish's payload, as the backend sees it.
    struct Publish: Sendable {
        let payload: ByteBuffer
        let isText: Bool
        let customType: String?
    }

    let event: HookEvent
    let appId: String
    let userId: String
    /// The channel (subscribe, publish).
    var channel: String?
    /// `message` or `stream` (subscribe, publish).
    var channelType: String?
    /// The publish's payload.
    var publish: Publish?
    /// The client's address (connect).
    var address: String?

    /// What a decision on this question is kept under.
    var cacheKey: HookDecisionCache.Key {
        HookDecisionCache.Key(event: event, appId: appId, userId: userId, channel: channel)
    }

    /// The JSON body POSTed to the backend: `event`, `appId`, `userId`, `ts` (ms since the Unix
    /// epoch), and as they apply `channel`, `channelType`, `address`, and for a publish
    /// `payloadSize`, `payloadType` (`string` or `binary`), `customType` and the payload
    /// (`payload` for a string, `payloadBase64` for binary).
    func body(now: Int64) -> Data {
        var object: [String: Any] = ["event": event.rawValue, "appId": appId, "userId": userId, "ts": now]
        if let channel { object["channel"] = channel }
        if let channelType { object["channelType"] = channelType }
        if let address { object["address"] = address }
        if let publish {
            object["payloadSize"] = publish.payload.readableBytes
            object["payloadType"] = publish.isText ? "string" : "binary"
            if let customType = publish.customType { object["customType"] = customType }
            if publish.isText {
                object["payload"] = String(decoding: publish.payload.readableBytesView, as: UTF8.self)
            } else {
                object["payloadBase64"] = Data(publish.payload.readableBytesView).base64EncodedString()
            }
        }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }

    /// The refusal for a deny (the backend's reason, when it gave one).
    func denial(_ reason: String?) -> RequestRefusal {
        let because = reason.map { ": \($0)" } ?? ""
        switch event {
        case .connect:
            return RequestRefusal(code: .notPermitted, reason: "the app's backend refused the login of '\(userId)'\(because)")
        case .subscribe:
            return RequestRefusal(code: .notPermitted, reason: "the app's backend refused '\(userId)' subscribing to channel '\(channel ?? "")'\(because)")
        case .publish:
            return RequestRefusal(code: .notPermitted, reason: "the app's backend refused '\(userId)' publishing to channel '\(channel ?? "")'\(because)")
        }
    }

    /// The refusal for a question the backend could not decide, in a fail-closed namespace.
    func unanswered(_ why: String) -> RequestRefusal {
        let what = channel.map { "\(event.rawValue) on channel '\($0)'" } ?? event.rawValue
        return RequestRefusal(code: .notPermitted, reason: "the app's backend could not be asked about \(what) (\(why)); it fails closed, so try again later")
    }
}

/// The backend's decision on one question.
enum HookVerdict: Sendable, Equatable {
    /// Go ahead, with what the backend rewrote (nil: nothing).
    case allow(HookRewrite?)
    /// Refused, with the reply's error.
    case deny(RequestRefusal)
}

/// What the backend replaced in an allowed request.
struct HookRewrite: Sendable, Equatable {
    /// A login's grants (the capability token's `rtm` claim form), in place of its token's.
    var capabilities: Capabilities?
    /// A publish's payload: text (`payload`) or bytes (`payloadBase64`).
    var payload: ByteBuffer?
    /// Whether `payload` is text.
    var payloadIsText = true
}

/// Reads the backend's answer: `{"result":"allow"|"deny","reason":…,"cacheSeconds":…,
/// "capability":{…},"payload":…|"payloadBase64":…}`.
enum HookAnswer {
    /// A decision, and how long it may be kept (nil: the configured default).
    struct Decision: Equatable {
        var verdict: HookVerdict
        var cacheSeconds: Double?
    }

    /// The decision in `body`, or why it is not one.
    static func read(_ body: ByteBuffer, question: HookQuestion) -> Result<Decision, HookFailure> {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] else {
            return .failure(HookFailure("the answer is not a JSON object"))
        }
        let cacheSeconds = (object["cacheSeconds"] as? NSNumber)?.doubleValue
        switch object["result"] as? String {
        case "deny":
            return .success(Decision(verdict: .deny(question.denial(object["reason"] as? String)), cacheSeconds: cacheSeconds))
        case "allow":
            var rewrite = HookRewrite()
            var rewritten = false
            if let grants = object["capability"] {
                guard question.event == .connect else { return .failure(HookFailure("'capability' may only answer a connect")) }
                do throws(TokenError) {
                    rewrite.capabilities = try CapabilityToken.grants(fromJSON: grants)
                } catch {
                    return .failure(HookFailure("its 'capability' is not valid: \(error.reason)"))
                }
                rewritten = true
            }
            if let text = object["payload"] {
                guard question.event == .publish, let text = text as? String else {
                    return .failure(HookFailure("'payload' must be a string and may only answer a publish"))
                }
                rewrite.payload = ByteBuffer(string: text)
                rewritten = true
            } else if let encoded = object["payloadBase64"] {
                guard question.event == .publish, let encoded = encoded as? String, let bytes = Data(base64Encoded: encoded) else {
                    return .failure(HookFailure("'payloadBase64' must be base64 and may only answer a publish"))
                }
                rewrite.payload = ByteBuffer(bytes: bytes)
                rewrite.payloadIsText = false
                rewritten = true
            }
            return .success(Decision(verdict: .allow(rewritten ? rewrite : nil), cacheSeconds: cacheSeconds))
        default:
            return .failure(HookFailure("its 'result' is not \"allow\" or \"deny\""))
        }
    }
}

/// Why the backend gave no decision.
struct HookFailure: Error, Sendable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
