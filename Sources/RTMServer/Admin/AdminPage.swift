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
    init(limit: Int?, cursor: String?) throws {
        if let limit {
            guard (1...Self.maxLimit).contains(limit) else {
                throw AdminFailure.badRequest("limit must be 1–\(Self.maxLimit), got '\(limit)'")
            }
            self.limit = limit
        } else {
            self.limit = Self.maxLimit
        }
        if let cursor {
            guard let key = AdminPageKey(cursor: cursor) else {
                throw AdminFailure.badRequest("page '\(cursor)' is not a cursor: a nextPage is unpadded base64url (A-Z a-z 0-9 - _)")
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

    /// Read back from a cursor; nil when it is not one. Any string of the cursor's form (unpadded
    /// base64url: at least 2 of `A-Z a-z 0-9 - _`, a length that is not 1 more than a multiple of
    /// 4; the document's pattern) is a place in the order, whether this server gave it or not: its
    /// bytes read as UTF-8 (an invalid sequence as U+FFFD) are the app id, a newline, and the name
    /// (no newline: the app id, before every name of it). Bits past the last whole byte are ignored.
    init?(cursor: String) {
        let digits = Array(cursor.utf8)
        guard digits.count >= 2, digits.count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        var bits: UInt32 = 0
        var bitCount = 0
        for digit in digits {
            guard let value = Self.base64URLValue(digit) else { return nil }
            bits = (bits << 6 | UInt32(value)) & 0xFFFFFF
            bitCount += 6
            if bitCount >= 8 {
                bitCount -= 8
                bytes.append(UInt8(truncatingIfNeeded: bits >> UInt32(bitCount)))
            }
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        self.init(appId: String(parts[0]), name: parts.count == 2 ? String(parts[1]) : "")
    }

    /// A base64url digit's value (RFC 4648 §5).
    private static func base64URLValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): digit - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): digit - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }

    /// The opaque cursor naming this item (base64url of the app id and the name).
    var cursor: String {
        Data("\(appId)\n\(name)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func < (lhs: Self, rhs: Self) -> Bool { (lhs.appId, lhs.name) < (rhs.appId, rhs.name) }
}
