import NIOCore

/// Client frame masking as real clients do it (RFC 6455 §5.3): a fresh random key per frame,
/// the payload XORed with it. Keys come from a per-connection wyrand generator seeded from the
/// system's random source (a system call per frame would cost more than the frame), and the XOR
/// runs eight bytes at a time, so that masking stays a small part of the generator's work.
///
/// `unmasked` is the benchmark shortcut `--unmasked-shortcut`: the zero key, which leaves the
/// payload as is and which no real client sends; every figure measured with it says so.
struct FrameMasker {
    private var state: UInt64
    /// The zero-key shortcut.
    let unmasked: Bool

    init(unmasked: Bool = false) {
        var system = SystemRandomNumberGenerator()
        state = system.next()
        self.unmasked = unmasked
    }

    /// The next masking key (wyrand).
    mutating func nextKey() -> UInt32 {
        state &+= 0xA076_1D64_78BD_642F
        let product = state.multipliedFullWidth(by: state ^ 0xE703_7ED1_A0B4_28DB)
        return UInt32(truncatingIfNeeded: product.high ^ product.low)
    }

    /// Appends a final client frame of `opcode` whose payload `body` writes, then masks that
    /// payload in place. `length` must be the number of bytes `body` writes.
    @inline(__always)
    mutating func writeFrame(into buffer: inout ByteBuffer, opcode: UInt8, length: Int, body: (inout ByteBuffer) -> Void) {
        let key = unmasked ? 0 : nextKey()
        let header = Self.headerSize(length)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: header) { out in
            Self.storeHeader(at: out.baseAddress!, opcode: opcode, length: length, key: key)
            return header
        }
        let start = buffer.writerIndex
        body(&buffer)
        precondition(buffer.writerIndex - start == length, "frame length \(length) but \(buffer.writerIndex - start) bytes written")
        if key != 0 { Self.mask(&buffer, from: start, key: key) }
    }

    /// Appends a final client frame of `opcode` whose `length`-byte payload `store` writes at
    /// the pointer it is given, then masks it: header, key and payload in one reservation of
    /// the buffer (no per-field buffer calls), for payloads written byte by byte.
    @inline(__always)
    mutating func writeFrame(into buffer: inout ByteBuffer, opcode: UInt8, length: Int, store: (UnsafeMutableRawPointer) -> Void) {
        let key = unmasked ? 0 : nextKey()
        let header = Self.headerSize(length)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: header + length) { out in
            let base = out.baseAddress!
            Self.storeHeader(at: base, opcode: opcode, length: length, key: key)
            store(base + header)
            if key != 0 { Self.mask(base + header, count: length, key: key) }
            return header + length
        }
    }

    /// The size of a client frame's header (with its masking key) for a `length`-byte payload.
    @inline(__always)
    static func headerSize(_ length: Int) -> Int {
        length < 126 ? 6 : length <= Int(UInt16.max) ? 8 : 14
    }

    /// Stores a final client frame's header: opcode, masked length, masking key.
    @inline(__always)
    static func storeHeader(at base: UnsafeMutableRawPointer, opcode: UInt8, length: Int, key: UInt32) {
        base.storeBytes(of: 0x80 | opcode, as: UInt8.self)
        switch headerSize(length) {
        case 6:
            base.storeBytes(of: UInt8(0x80 | length), toByteOffset: 1, as: UInt8.self)
        case 8:
            base.storeBytes(of: UInt8(0x80 | 126), toByteOffset: 1, as: UInt8.self)
            base.storeBytes(of: UInt16(length).bigEndian, toByteOffset: 2, as: UInt16.self)
        default:
            base.storeBytes(of: UInt8(0x80 | 127), toByteOffset: 1, as: UInt8.self)
            base.storeBytes(of: UInt64(length).bigEndian, toByteOffset: 2, as: UInt64.self)
        }
        base.storeBytes(of: key.bigEndian, toByteOffset: headerSize(length) - 4, as: UInt32.self)
    }

    /// XORs the bytes from `start` (an absolute index) to the writer index with the key as it
    /// was written (big-endian, RFC 6455 §5.3: byte i with key byte i mod 4), eight at a time.
    static func mask(_ buffer: inout ByteBuffer, from start: Int, key: UInt32) {
        let offset = start - buffer.readerIndex
        buffer.withUnsafeMutableReadableBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > offset else { return }
            mask(base + offset, count: bytes.count - offset, key: key)
        }
    }

    /// XORs `count` bytes at `payload` with the key (RFC 6455 §5.3), eight at a time.
    @inline(__always)
    static func mask(_ payload: UnsafeMutableRawPointer, count: Int, key: UInt32) {
        // The key bytes in memory order, repeated: one 64-bit XOR covers eight payload bytes.
        let word = UInt32(bigEndian: key)
        let key8 = UInt64(word) | UInt64(word) << 32
        var i = 0
        while i + 8 <= count {
            let value = payload.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ key8
            payload.storeBytes(of: value, toByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < count {   // i is a multiple of 8 here: key byte i mod 4
            let byte = payload.load(fromByteOffset: i, as: UInt8.self) ^ UInt8(truncatingIfNeeded: key >> (24 - 8 * (i & 3)))
            payload.storeBytes(of: byte, toByteOffset: i, as: UInt8.self)
            i += 1
        }
    }
}
