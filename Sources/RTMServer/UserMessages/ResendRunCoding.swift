import Foundation

/// The bytes of the embedded store's resend records (`SQLiteResendRecords`): a run's store ids,
/// and one commit's runs as a single log row. Little-endian throughout.
///
/// A log row: `ts` (8 bytes, ms), the number of senders (4), then per sender its app id and
/// user id (each a 2-byte length and UTF-8), its number of runs (4) and per run the first
/// client id (8), the number of ids (4) and the store ids (8 each).
enum ResendRunCoding {
    /// A log row that does not decode (the file was damaged or written by something else).
    struct Malformed: Error, CustomStringConvertible {
        let offset: Int
        var description: String { "malformed resend record (user_message_sent_log) at byte \(offset)" }
    }

    /// Store ids, eight bytes each.
    static func encodeIDs(_ ids: [Int64]) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ids.count * 8)
        for id in ids { append(id, to: &bytes) }
        return Data(bytes)
    }

    /// The `index`th id of `encodeIDs`'s output; nil if out of range.
    static func decodeID(_ data: Data, at index: Int) -> Int64? {
        guard index >= 0, (index + 1) * 8 <= data.count else { return nil }
        return data.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(fromByteOffset: index * 8, as: Int64.self)) }
    }

    /// One commit's runs, per sender in the order given, recorded at `now` (ms). Written into
    /// one array sized up front, then copied once (appending to `Data` an integer at a time
    /// cost as much as the inserts it records).
    static func encode(_ senders: [(sender: SQLiteResendRecords.Sender, runs: [SQLiteResendRecords.Run])], at now: Int64) -> Data {
        var size = 12
        for (sender, runs) in senders {
            size += 8 + sender.appId.utf8.count + sender.userId.utf8.count
            for run in runs { size += 12 + 8 * run.ids.count }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        append(now, to: &bytes)
        append(UInt32(senders.count), to: &bytes)
        for (sender, list) in senders {
            appendString(sender.appId, to: &bytes)
            appendString(sender.userId, to: &bytes)
            append(UInt32(list.count), to: &bytes)
            for run in list {
                append(run.first, to: &bytes)
                append(UInt32(run.ids.count), to: &bytes)
                for id in run.ids { append(id, to: &bytes) }
            }
        }
        return Data(bytes)
    }

    /// The runs `encode` wrote, dated by its `now`.
    static func decode(_ data: Data) throws -> [SQLiteResendRecords.Sender: [SQLiteResendRecords.Run]] {
        var reader = Reader(bytes: [UInt8](data))
        let now: Int64 = try reader.read()
        let senders: UInt32 = try reader.read()
        var result: [SQLiteResendRecords.Sender: [SQLiteResendRecords.Run]] = [:]
        for _ in 0..<senders {
            let sender = SQLiteResendRecords.Sender(appId: try reader.readString(), userId: try reader.readString())
            let count: UInt32 = try reader.read()
            var runs: [SQLiteResendRecords.Run] = []
            for _ in 0..<count {
                let first: Int64 = try reader.read()
                let ids: UInt32 = try reader.read()
                guard Int(ids) * 8 <= reader.remaining, ids > 0 else { throw Malformed(offset: reader.offset) }
                var run = SQLiteResendRecords.Run(first: first, ids: [], recordedAt: now)
                run.ids.reserveCapacity(Int(ids))
                for _ in 0..<ids { run.ids.append(try reader.read()) }
                runs.append(run)
            }
            result[sender, default: []].append(contentsOf: runs)
        }
        guard reader.remaining == 0 else { throw Malformed(offset: reader.offset) }
        return result
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private static func appendString(_ string: String, to bytes: inout [UInt8]) {
        let utf8 = string.utf8.prefix(Int(UInt16.max))
        append(UInt16(utf8.count), to: &bytes)
        bytes.append(contentsOf: utf8)
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0
        var remaining: Int { bytes.count - offset }

        mutating func read<T: FixedWidthInteger>() throws -> T {
            let size = MemoryLayout<T>.size
            guard remaining >= size else { throw Malformed(offset: offset) }
            let value = bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
            offset += size
            return value
        }

        mutating func readString() throws -> String {
            let length: UInt16 = try read()
            guard remaining >= Int(length) else { throw Malformed(offset: offset) }
            defer { offset += Int(length) }
            return String(decoding: bytes[offset..<(offset + Int(length))], as: UTF8.self)
        }
    }
}
