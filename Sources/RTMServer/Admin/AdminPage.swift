import Foundation

/// One page of an admin listing sorted by (app id, name): `/v1/sessions` and `/v1/channels`
/// take `limit` (1–1000, default 1000) and `page` (the previous page's `nextPage`, an opaque
/// cursor naming the last item it held), and answer `total` (every item that matches) and
/// `nextPage` while more remain. A plain value: the hub's state is paged under its lock
/// without building the items it leaves out.
struct AdminPage: Sendable, Equatable {
    /// The most items one page holds, and the default.
    static let maxLimit = 1000

    /// Items after this (app id, name), in order; nil: from the first.
    let after: AdminPageKey?
    let limit: Int

    /// The page a request asks for: its `limit` and `page` query parameters.
    init(query: [String: String]) throws {
        if let text = query["limit"] {
            guard let limit = Int(text), (1...Self.maxLimit).contains(limit) else {
                throw AdminFailure.badRequest("limit must be 1–\(Self.maxLimit), got '\(text)'")
            }
            self.limit = limit
        } else {
            self.limit = Self.maxLimit
        }
        if let cursor = query["page"] {
            guard let key = AdminPageKey(cursor: cursor) else {
                throw AdminFailure.badRequest("page '\(cursor)' is not a nextPage this server gave")
            }
            self.after = key
        } else {
            self.after = nil
        }
    }

    init(after: AdminPageKey?, limit: Int) {
        self.after = after
        self.limit = limit
    }

    /// The keys of this page among `keys` (any order), sorted, and the next page's cursor
    /// when keys remain after it.
    func cut(_ keys: some Sequence<AdminPageKey>) -> (keys: [AdminPageKey], nextPage: String?) {
        let remaining = keys.filter { key in after.map { key > $0 } ?? true }.sorted()
        let page = Array(remaining.prefix(limit))
        return (page, remaining.count > limit ? page.last?.cursor : nil)
    }
}

/// An item's place in an admin listing: its app id and name (user id, channel name).
struct AdminPageKey: Hashable, Comparable, Sendable {
    let appId: String
    let name: String

    init(appId: String, name: String) {
        self.appId = appId
        self.name = name
    }

    /// Read back from a cursor; nil when it is not one.
    init?(cursor: String) {
        var base64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else { return nil }
        let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        self.init(appId: String(parts[0]), name: String(parts[1]))
    }

    /// The opaque cursor naming this item (base64url of the app id and the name).
    var cursor: String {
        Data("\(appId)\n\(name)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func < (lhs: Self, rhs: Self) -> Bool { (lhs.appId, lhs.name) < (rhs.appId, rhs.name) }
}
