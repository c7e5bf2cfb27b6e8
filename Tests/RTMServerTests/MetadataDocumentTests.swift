import RTMProtocol
import Testing
@testable import RTMServer

/// Pure-value tests of the metadata compare-and-set rules (AGORA_REFERENCE §2.11).
struct MetadataDocumentTests {
    static func write(_ doc: inout MetadataDocument, _ op: MetadataDocument.Operation, _ items: [MetadataItem], major: Int64 = -1) -> RTMErrorCode? {
        doc.apply(op, Metadata(majorRevision: major, items: items), options: .init(), author: "u", nowMillis: 1, limits: Limits())?.0
    }

    @Test("Every write bumps majorRevision by one; written items take it as their revision; others keep theirs")
    func revisions() {
        var doc = MetadataDocument()
        #expect(Self.write(&doc, .set, [MetadataItem(key: "a", value: "1"), MetadataItem(key: "b", value: "1")]) == nil)
        #expect(Self.write(&doc, .update, [MetadataItem(key: "a", value: "2")]) == nil)
        #expect(doc.metadata.majorRevision == 2)
        #expect(doc.metadata["a"]?.revision == 2)
        #expect(doc.metadata["b"]?.revision == 1)
    }

    @Test("CAS: a stale majorRevision or item revision fails and changes nothing; -1 skips the check; 0 means create-only")
    func compareAndSet() {
        var doc = MetadataDocument()
        _ = Self.write(&doc, .set, [MetadataItem(key: "a", value: "1")])
        let before = doc
        #expect(Self.write(&doc, .set, [MetadataItem(key: "a", value: "x")], major: 0) == .storageOutdatedRevision)
        #expect(Self.write(&doc, .set, [MetadataItem(key: "a", value: "x", revision: 7)]) == .storageOutdatedRevision)
        #expect(Self.write(&doc, .set, [MetadataItem(key: "a", value: "x", revision: 0)]) == .storageOutdatedRevision)
        #expect(Self.write(&doc, .set, [MetadataItem(key: "b", value: "x", revision: 3)]) == .storageInvalidRevision)
        #expect(Self.write(&doc, .update, [MetadataItem(key: "zz", value: "x")]) == .storageInvalidMetadataItem)
        #expect(Self.write(&doc, .set, [MetadataItem(key: "a", value: "x", revision: 1), MetadataItem(key: "c", value: "x", revision: 9)]) == .storageInvalidRevision)
        #expect(doc == before)   // all or nothing
        #expect(Self.write(&doc, .set, [MetadataItem(key: "a", value: "x", revision: 1)], major: 1) == nil)
        #expect(Self.write(&doc, .set, [MetadataItem(key: "new", value: "x", revision: 0)]) == nil)
    }

    @Test("Remove: listed keys, or every item when none is listed; limits on keys, values and the whole set")
    func removeAndLimits() {
        var doc = MetadataDocument()
        _ = Self.write(&doc, .set, [MetadataItem(key: "a", value: "1"), MetadataItem(key: "b", value: "1")])
        #expect(Self.write(&doc, .remove, [MetadataItem(key: "a")]) == nil)
        #expect(doc.metadata.items.map(\.key) == ["b"])
        #expect(Self.write(&doc, .remove, []) == nil)
        #expect(doc.isEmpty)
        #expect(Self.write(&doc, .set, [MetadataItem(key: "", value: "1")]) == .storageInvalidKey)
        #expect(Self.write(&doc, .set, [MetadataItem(key: "has space", value: "1")]) == .storageInvalidKey)
        let half = String(repeating: "v", count: 9 * 1024)
        #expect(Self.write(&doc, .set, [MetadataItem(key: "x", value: half)]) == nil)
        #expect(Self.write(&doc, .set, [MetadataItem(key: "y", value: half)]) == .storageMetadataLengthOverflow)
    }
}
