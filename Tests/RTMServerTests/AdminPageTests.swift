import Testing
@testable import RTMServer

/// Paging of the admin listings as a value: order, limit, cursors that survive any name.
struct AdminPageTests {
    private func keys(_ names: [String], app: String = "app") -> [AdminPageKey] {
        names.map { AdminPageKey(appId: app, name: $0) }
    }

    @Test("A page holds the first `limit` keys after the cursor, in (app id, name) order; the next page's cursor only while keys remain")
    func pages() {
        let all = keys(["d", "a", "c", "b", "e"]) + keys(["a"], app: "another")
        let first = AdminPage(after: nil, limit: 2).cut(all)
        #expect(first.keys == keys(["a"], app: "another") + keys(["a"]))
        let second = AdminPage(after: AdminPageKey(cursor: first.nextPage ?? ""), limit: 2).cut(all)
        #expect(second.keys == keys(["b", "c"]))
        let last = AdminPage(after: AdminPageKey(cursor: second.nextPage ?? ""), limit: 2).cut(all)
        #expect(last.keys == keys(["d", "e"]) && last.nextPage == nil)
        #expect(AdminPage(after: nil, limit: 6).cut(all).nextPage == nil)
        #expect(AdminPage(after: nil, limit: 5).cut(all).nextPage != nil)
    }

    @Test("A cursor names its key whatever the names hold (newlines aside: they are not in names); any string of the cursor's form is a place in the order; anything else is refused")
    func cursors() throws {
        for key in [AdminPageKey(appId: "0123", name: "room/1+2=?&é✓"), AdminPageKey(appId: "", name: "")] {
            #expect(AdminPageKey(cursor: key.cursor) == key)
            #expect(!key.cursor.contains("+") && !key.cursor.contains("/") && !key.cursor.contains("="))
        }
        // The document's pattern: unpadded base64url, at least 2 digits, never 4n+1 of them.
        // "0" was refused although the document allowed it (schemathesis: page=0 → 400).
        for notACursor in ["", "0", "abcde", "!!", "ab=", "a/b+", "not a cursor"] {
            #expect(AdminPageKey(cursor: notACursor) == nil, "\(notACursor)")
        }
        #expect(throws: AdminFailure.self) { try AdminPage(limit: nil, cursor: "0") }
        // A cursor this server never gave is a place all the same: "AAAA" is three NUL bytes, an
        // app id before every other; "YXBw" is "app" (no newline: before every name of app).
        #expect(AdminPageKey(cursor: "AAAA") == AdminPageKey(appId: "\0\0\0", name: ""))
        let all = keys(["b", "a"]) + keys(["x"], app: "zzz")
        #expect(AdminPage(after: AdminPageKey(cursor: "YXBw"), limit: 10).cut(all).keys == keys(["a", "b"]) + keys(["x"], app: "zzz"))
        #expect(AdminPage(after: AdminPageKey(cursor: "not-a-cursor"), limit: 10).cut(all).keys.count <= all.count)
        #expect(throws: AdminFailure.self) { try AdminPage(limit: 0, cursor: nil) }
        #expect(try AdminPage(limit: nil, cursor: nil).limit == AdminPage.maxLimit)
        #expect(try AdminPage(limit: 7, cursor: nil).limit == 7)
    }
}
