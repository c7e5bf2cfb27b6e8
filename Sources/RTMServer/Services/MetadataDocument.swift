import RTMProtocol

/// One metadata set (of a channel or a user) and the rules for writing it: a plain value, so
/// the compare-and-set rules are unit-tested without a server (AGORA_REFERENCE §2.11).
///
/// Revisions: every successful write increases `majorRevision` by one, and every item it
/// writes takes the new `majorRevision` as its `revision`. A request's `majorRevision` or item
/// `revision` of -1 means "no check"; any other value must equal the current one, else the
/// whole write fails with `storageOutdatedRevision` and nothing changes. An item revision of 0
/// means "the item must not exist yet" (create-only).
struct MetadataDocument: Sendable, Equatable {
    enum Operation: String, Sendable {
        /// Create or overwrite the given items.
        case set
        /// Overwrite existing items only (a missing key is an error).
        case update
        /// Remove the given keys (none: every item).
        case remove
        /// Replace the whole set with the given items.
        case replace
    }

    /// Options of a write.
    struct WriteOptions: Sendable {
        var recordTs = false
        var recordUserId = false
    }

    private(set) var majorRevision: Int64 = 0
    private(set) var items: [String: MetadataItem] = [:]

    /// The set as sent to clients: items sorted by key.
    var metadata: Metadata {
        Metadata(majorRevision: majorRevision, items: items.keys.sorted().compactMap { items[$0] })
    }

    var isEmpty: Bool { items.isEmpty }

    init() {}

    init(_ metadata: Metadata) {
        majorRevision = max(0, metadata.majorRevision)
        for item in metadata.items { items[item.key] = item }
    }

    /// Applies a write, all or nothing. Returns the error code and a reason on failure.
    mutating func apply(_ operation: Operation, _ request: Metadata, options: WriteOptions, author: String,
                        nowMillis: Int64, limits: Limits) -> (RTMErrorCode, String)? {
        if request.majorRevision != -1 && request.majorRevision != majorRevision {
            return (.storageOutdatedRevision, "majorRevision is \(majorRevision), the write expected \(request.majorRevision)")
        }
        var seen: Set<String> = []
        for item in request.items {
            if let problem = limits.metadataKeyProblem(item.key) { return problem }
            guard seen.insert(item.key).inserted else { return (.storageDuplicateKey, "key '\(item.key)' appears twice") }
            if item.value.utf8.count > limits.maxMetadataBytes {
                return (.storageValueLengthOverflow, "value of '\(item.key)' is \(item.value.utf8.count) bytes; the limit is \(limits.maxMetadataBytes)")
            }
            let current = items[item.key]
            switch (item.revision, current) {
            case (-1, nil) where operation == .update || operation == .remove:
                return (.storageInvalidMetadataItem, "no item '\(item.key)' to \(operation.rawValue)")
            case (-1, _):
                break
            case (0, nil) where operation == .set || operation == .replace:
                break
            case (0, .some(let existing)):
                return (.storageOutdatedRevision, "item '\(item.key)' exists (revision \(existing.revision)); the write expected none")
            case (let expected, nil):
                return (.storageInvalidRevision, "item '\(item.key)' does not exist; the write expected revision \(expected)")
            case (let expected, .some(let existing)) where existing.revision != expected:
                return (.storageOutdatedRevision, "item '\(item.key)' is at revision \(existing.revision), the write expected \(expected)")
            default:
                break
            }
        }
        var next = items
        let revision = majorRevision + 1
        switch operation {
        case .set, .update:
            for item in request.items {
                next[item.key] = MetadataItem(key: item.key, value: item.value, revision: revision,
                                              authorUserId: options.recordUserId ? author : nil,
                                              updateTs: options.recordTs ? nowMillis : nil)
            }
        case .remove:
            if request.items.isEmpty { next = [:] } else { for item in request.items { next[item.key] = nil } }
        case .replace:
            next = [:]
            for item in request.items {
                next[item.key] = MetadataItem(key: item.key, value: item.value, revision: revision,
                                              authorUserId: options.recordUserId ? author : nil,
                                              updateTs: options.recordTs ? nowMillis : nil)
            }
        }
        let size = next.values.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        if size > limits.maxMetadataBytes {
            return (.storageMetadataLengthOverflow, "the set would be \(size) bytes; the limit is \(limits.maxMetadataBytes)")
        }
        items = next
        majorRevision = revision
        return nil
    }
}
