/// Little-endian packing as the reference token builders do it.
struct Packer {
    private(set) var bytes: [UInt8] = []

    mutating func uint16(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    mutating func uint32(_ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    /// A uint16 length, then the bytes.
    mutating func string(_ value: [UInt8]) {
        uint16(UInt16(clamping: value.count))
        bytes += value.prefix(Int(UInt16.max))
    }
}

/// Reads what `Packer` writes; nil when the input is too short.
struct Unpacker {
    private let bytes: [UInt8]
    private var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func uint16() -> UInt16? {
        guard position + 2 <= bytes.count else { return nil }
        defer { position += 2 }
        return UInt16(bytes[position]) | UInt16(bytes[position + 1]) << 8
    }

    mutating func uint32() -> UInt32? {
        guard position + 4 <= bytes.count else { return nil }
        defer { position += 4 }
        var value: UInt32 = 0
        for i in 0..<4 { value |= UInt32(bytes[position + i]) << UInt32(8 * i) }
        return value
    }

    mutating func string() -> [UInt8]? {
        guard let length = uint16(), position + Int(length) <= bytes.count else { return nil }
        defer { position += Int(length) }
        return Array(bytes[position..<position + Int(length)])
    }
}

/// CRC-32 (IEEE 802.3, as zlib's `crc32`), used by the token format.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var c = UInt32(index)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
