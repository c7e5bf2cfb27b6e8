import NIOCore
import RTMProtocol
import Testing

/// The `0x82` publish-acks frame with its channel epochs (PROTOCOL.md §2.3, §3.1).
struct PublishAckTests {
    static func acks(_ entries: [(UInt64, UInt64, String)]) -> BinaryFrame.PublishAcks {
        var acks = BinaryFrame.PublishAcks()
        for (id, seq, epoch) in entries { acks.append(requestID: id, seq: seq, epoch: epoch) }
        return acks
    }

    static func frame(_ acks: BinaryFrame.PublishAcks) -> ByteBuffer {
        var buffer = ByteBuffer()
        BinaryFrame.writePublishAcks(into: &buffer, acks)
        return buffer
    }

    @Test("M-2: acks round trip with their channel epochs; consecutive acks of one epoch share one run, so the same seq in two epochs stays two acks")
    func roundTrip() throws {
        let written = Self.acks([(1, 9, "c1.1"), (2, 10, "c1.1"), (3, 1, "c1.2"), (4, 2, "c1.2"), (5, 10, "c1.1")])
        let frame = Self.frame(written)
        // 3 runs: (2, c1.1), (2, c1.2), (1, c1.1), each 2 + 1 + 4 bytes.
        #expect(frame.readableBytes == 3 + 16 * 5 + 3 * 7)
        #expect(frame.readableBytes == written.byteCount)
        guard case .publishAcks(let decoded) = try BinaryFrame.decode(frame) else { Issue.record("not acks"); return }
        #expect(decoded == written.acks)
        #expect(decoded.map(\.epoch) == ["c1.1", "c1.1", "c1.2", "c1.2", "c1.1"])
        #expect(decoded[1].seq == decoded[4].seq && decoded[1].epoch == decoded[4].epoch)   // a resend: the same message
    }

    @Test("The ack of PROTOCOL.md §2.3's example: request 7, seq 300, channel epoch e-1")
    func documentedExample() throws {
        let frame = Self.frame(Self.acks([(7, 300, "e-1")]))
        let hex = frame.readableBytesView.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        #expect(hex == "82" + "0100" + "0700000000000000" + "2c01000000000000" + "0100" + "03" + "652d31")
    }

    @Test("A reader of the pairs alone reads the new frame unchanged; a frame that ends after its pairs has unknown epochs")
    func compatible() throws {
        let frame = Self.frame(Self.acks([(1, 10, "e-1"), (2, 11, "e-2")]))
        // What a reader of `count` × (id, seq) alone takes from it.
        var old = frame
        old.moveReaderIndex(forwardBy: 1)
        let read: UInt16? = old.readInteger(endianness: .little)
        let count = try #require(read)
        let pairs = (0..<count).map { _ in (old.readInteger(endianness: .little, as: UInt64.self), old.readInteger(endianness: .little, as: UInt64.self)) }
        #expect(pairs.map(\.0) == [1, 2] && pairs.map(\.1) == [10, 11])
        // The pairs without runs.
        let bare = frame.getSlice(at: frame.readerIndex, length: 3 + 32)!
        guard case .publishAcks(let decoded) = try BinaryFrame.decode(bare) else { Issue.record("not acks"); return }
        #expect(decoded == [.init(requestID: 1, seq: 10, epoch: nil), .init(requestID: 2, seq: 11, epoch: nil)])
    }

    @Test("Epoch runs that do not cover the acks exactly, or are cut, are typed errors")
    func malformed() throws {
        let frame = Self.frame(Self.acks([(1, 10, "e-1"), (2, 11, "e-1"), (3, 12, "e-2")]))
        let pairsEnd = 3 + 48
        for length in 0..<frame.readableBytes where length != pairsEnd {
            #expect(throws: FrameDecodingError.self) { _ = try BinaryFrame.decode(frame.getSlice(at: 0, length: length)!) }
        }
        var head = frame.getSlice(at: 0, length: pairsEnd)!
        for runs in [[(0, "e-1"), (3, "e-1")], [(2, "e-1")], [(2, "e-1"), (2, "e-2")], [(4, "e-1")]] {
            var bad = head
            for (n, epoch) in runs {
                bad.writeInteger(UInt16(n), endianness: .little)
                bad.writeInteger(UInt8(epoch.utf8.count))
                bad.writeString(epoch)
            }
            #expect(throws: FrameDecodingError.self) { _ = try BinaryFrame.decode(bad) }
        }
        head.writeInteger(UInt16(3), endianness: .little)
        head.writeBytes([3] + Array("e-1".utf8))
        guard case .publishAcks(let decoded) = try BinaryFrame.decode(head) else { Issue.record("not acks"); return }
        #expect(decoded.allSatisfy { $0.epoch == "e-1" })
    }
}
