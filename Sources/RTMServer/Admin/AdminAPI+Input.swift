import Foundation
import RTMProtocol

/// What the admin API checks of a request beyond the document's types: app ids, names, ranges,
/// a message's payload, history channels; and the `null`s no request field takes.
extension AdminAPI {
    /// A JSON object's top-level `null`s replaced by a value no request field takes (an object),
    /// so that decoding a field given as `null` fails with the type it takes: no field of a
    /// request body is nullable (`openapi/admin.yaml`), and the generated types would take a
    /// `null` as a field left out. A `null` under a key the body does not know is ignored like
    /// the key. Returns the body unchanged when it holds no `null`, with the names of the fields
    /// that were.
    static func markingNulls(_ data: Data) -> (Data, Set<String>) {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return (data, []) }
        let nullFields = Set(object.compactMap { key, value in value is NSNull ? key : nil })
        guard !nullFields.isEmpty else { return (data, []) }
        var marked = object
        for field in nullFields { marked[field] = ["null": true] }
        guard let reencoded = try? JSONSerialization.data(withJSONObject: marked) else { return (data, []) }
        return (reencoded, nullFields)
    }

    /// The app a request is about: the one named, or the only one the server serves.
    func app(_ named: String?) throws -> String {
        let apps = hub.configuration.apps
        if let named {
            guard !named.isEmpty else { throw AdminFailure.badRequest("appId is empty: name an app, or leave appId out") }
            guard apps[named] != nil else { throw AdminFailure.notFound("unknown app id '\(named)'", code: RTMErrorCode.invalidAppId.rawValue) }
            return named
        }
        guard apps.count == 1, let only = apps.keys.first else {
            throw AdminFailure.badRequest("appId is required: the server serves \(apps.count) apps")
        }
        return only
    }

    func channelName(_ name: String?) throws -> String {
        guard let name, !name.isEmpty else { throw AdminFailure.badRequest("missing field 'channel'") }
        if let problem = hub.configuration.limits.nameProblem(name, kind: "channel name") {
            throw AdminFailure.badRequest(problem, code: RTMErrorCode.invalidChannelName.rawValue)
        }
        return name
    }

    func userId(_ name: String?, field: String = "user") throws -> String {
        guard let name, !name.isEmpty else { throw AdminFailure.badRequest("missing field '\(field)'") }
        if let problem = hub.configuration.limits.nameProblem(name, kind: field) {
            throw AdminFailure.badRequest(problem, code: RTMErrorCode.invalidUserId.rawValue)
        }
        return name
    }

    /// An integer query parameter in `range`, or `fallback` when absent.
    func bounded(_ value: Int?, _ name: String, fallback: Int, _ range: ClosedRange<Int>) throws -> Int {
        guard let value else { return fallback }
        guard range.contains(value) else {
            throw AdminFailure.badRequest("query parameter '\(name)' must be an integer in [\(range.lowerBound), \(range.upperBound)]")
        }
        return value
    }

    /// The stored channel `/v1/history` reads. Its characters are checked first (400, as the
    /// document's pattern: 1 to 129 of Name's characters); then whether it can name a channel
    /// (at most 64 characters) or, with `channelType=user`, a conversation (two user ids, `alice:bob`):
    /// one that cannot is answered 404, as a channel or conversation that does not exist.
    func historyChannel(_ text: String?, channelType: String) throws -> String {
        guard let text, !text.isEmpty else { throw AdminFailure.badRequest("missing query parameter 'channel'") }
        let limits = hub.configuration.limits
        // Name's rules, but up to a conversation's length: two names and a colon.
        var conversation = limits
        conversation.maxNameLength = 2 * limits.maxNameLength + 1
        if let problem = conversation.nameProblem(text, kind: "channel") {
            throw AdminFailure.badRequest(problem, code: RTMErrorCode.invalidChannelName.rawValue)
        }
        guard channelType == "user" else {
            if let problem = limits.nameProblem(text, kind: "channel name") {
                throw AdminFailure.notFound("no channel '\(text)': \(problem)", code: RTMErrorCode.invalidChannelName.rawValue)
            }
            return text
        }
        let users = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard users.count == 2, users.allSatisfy({ limits.nameProblem($0, kind: "user id") == nil }) else {
            throw AdminFailure.notFound("no conversation '\(text)': with channelType=user, channel names two user ids, 'userA:userB'",
                                        code: RTMErrorCode.invalidUserId.rawValue)
        }
        return HistoryRecord.userPair(users[0], users[1])
    }

    /// Checks a message body: exactly one of text and data, within the payload and custom type limits.
    func checkPayload(text: String?, data: Data?, customType: String?, stored: Bool) throws {
        guard (text == nil) != (data == nil) else {
            throw AdminFailure.badRequest("a message needs exactly one of 'message' (text) or 'data' (base64)",
                                          code: RTMErrorCode.channelInvalidMessage.rawValue)
        }
        let size = text?.utf8.count ?? data?.count ?? 0
        if let (code, problem) = hub.configuration.limits.payloadProblem(size: size, customType: customType) {
            throw AdminFailure.badRequest(problem, code: code.rawValue)
        }
        // A text a store keeps (a user message, a history record) without NUL, as over WebSocket.
        if stored, let text, let problem = Limits.storedTextProblem(text.utf8) {
            throw AdminFailure.badRequest(problem, code: RTMErrorCode.channelInvalidMessage.rawValue)
        }
    }
}
