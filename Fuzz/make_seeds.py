#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (Fuzz/corpus/<target>/): a handful of valid inputs
each (real frames as the SDK sends them, real tokens minted by `rtm token`), from which libFuzzer
mutates. Run from the repository root: python3 Fuzz/make_seeds.py TOKEN006 TOKEN007."""
import base64, json, os, struct, sys, zlib

def put(target, name, data):
    d = os.path.join("Fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)

def short(s):
    b = s.encode()
    return bytes([len(b)]) + b

def publish(request_id, channel, payload, msg_id=None, custom=None, text=True):
    flags = (0x04 if text else 0) | (0x01 if msg_id is not None else 0) | (0x02 if custom is not None else 0)
    out = bytes([0x01, flags]) + struct.pack("<Q", request_id)
    if msg_id is not None:
        out += struct.pack("<Q", msg_id)
    out += short(channel) + (short(custom) if custom is not None else b"")
    return out + payload

def messages(seq, ts, epoch, channel, publisher, items):
    out = bytes([0x81, 0]) + varint(seq) + varint(ts) + short(epoch) + short(channel) + short(publisher)
    for payload, custom in items:
        out += bytes([0x04 | (0x02 if custom else 0)]) + (short(custom) if custom else b"") + varint(len(payload)) + payload
    return out

def acks(pairs, runs=()):
    out = bytes([0x82]) + struct.pack("<H", len(pairs)) + b"".join(struct.pack("<QQ", a, b) for a, b in pairs)
    return out + b"".join(struct.pack("<H", n) + short(epoch) for n, epoch in runs)

def ws(opcode, payload, fin=True, key=b"\x37\xfa\x21\x3d", rsv=0):
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    n = len(payload)
    mask = 0x80 if key else 0
    if n < 126:
        head += bytes([mask | n])
    elif n < 65536:
        head += bytes([mask | 126]) + struct.pack(">H", n)
    else:
        head += bytes([mask | 127]) + struct.pack(">Q", n)
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        head += key
    return head + payload

token006, token007 = sys.argv[1], sys.argv[2]
app = "0123456789abcdef0123456789abcdef"
frames = {
    "login": {"type": "login", "id": 1, "appId": app, "userId": "alice", "token": token006, "heartbeatInterval": 5, "presenceTimeout": 15},
    "subscribe": {"type": "subscribe", "id": 2, "channel": "room", "withPresence": True, "positions": {"room": {"seq": 3, "epoch": "e1"}}},
    "publish": {"type": "publish", "id": 3, "channel": "room", "text": "hello", "customType": "chat", "msgId": 9, "storeInHistory": True},
    "ping": {"type": "ping", "ts": 1700000000000},
    "setState": {"type": "setState", "id": 4, "channel": "room", "state": {"mood": "busy"}},
    "metadata": {"type": "setChannelMetadata", "id": 5, "channel": "doc", "metadata": {"majorRevision": -1, "items": [{"key": "title", "value": "v2", "revision": 0}]}},
    "sendUser": {"type": "sendUser", "id": 6, "userId": "bob", "data": base64.b64encode(b"\x00\x01binary").decode()},
}
for name, frame in frames.items():
    put("FuzzFrameCodec", name, json.dumps(frame, separators=(",", ":")))
put("FuzzFrameCodec", "ping-fast", '{"type":"ping"}')
# Findings, kept as seeds so every run checks them again.
put("FuzzFrameCodec", "finding-repeated-key", '{"type":"pgin","type":"ping","ts":100}')

pub1 = publish(7, "room", b"hello", msg_id=42)
pub2 = publish(8, "game", b"\x00\xff" * 10, custom="move", text=False)
msg1 = messages(5, 1700000000123, "e1", "room", "alice", [(b"hello", None), (b"again", "chat")])
put("FuzzBinaryFrame", "publish", pub1)
put("FuzzBinaryFrame", "publish-custom", pub2)
put("FuzzBinaryFrame", "message", msg1)
put("FuzzBinaryFrame", "acks", acks([(7, 5), (8, 6)]))
put("FuzzBinaryFrame", "acks-epochs", acks([(7, 5), (8, 6), (9, 1)], [(2, "c1.1"), (1, "c1.2")]))
put("FuzzBinaryFrame", "varint", varint(300) + varint(2**63))

put("FuzzTokens", "token006", b"\x00" + token006.encode())
put("FuzzTokens", "token007", b"\x00" + token007.encode())
put("FuzzTokens", "token007-content", b"\x01" + base64.b64decode(token007[3:] + "=" * (-len(token007[3:]) % 4)))
put("FuzzTokens", "token006-content", b"\x02" + base64.b64decode(token006[35:]))
put("FuzzTokens", "token007-inflated", b"\x01" + zlib.compress(b"\x00" * 40))

login = json.dumps(frames["login"], separators=(",", ":")).encode()
put("FuzzServerFrameDecoder", "text-login", b"\x00" + ws(0x1, login))
put("FuzzServerFrameDecoder", "binary-batch", b"\x03" + ws(0x2, pub1) + ws(0x2, pub2, key=b"\x00\x00\x00\x00") + ws(0x2, pub1))
put("FuzzServerFrameDecoder", "fragmented", b"\x05" + ws(0x1, b'{"type":', fin=False) + ws(0x9, b"ping") + ws(0x0, b'"ping"}'))
put("FuzzServerFrameDecoder", "control", b"\x01" + ws(0x9, b"p") + ws(0xA, b"") + ws(0x8, struct.pack(">H", 1000) + b"bye"))
put("FuzzServerFrameDecoder", "long-header", b"\x07" + ws(0x2, publish(1, "c", b"x" * 300)))

# FuzzJSONPublish: the first byte picks the presentation (0: the frame itself, 1: the rest after
# `"id":`, 2: the text of a plain publish); 16 bytes or more also feed the reply check.
plain = json.dumps(frames["publish"] | {"storeInHistory": None}, separators=(",", ":")).replace(',"storeInHistory":null', "")
put("FuzzJSONPublish", "publish", b"\x00" + plain.encode())
put("FuzzJSONPublish", "publish-spaced", b"\x00" + b' { "channel" : "room" ,\n"id":12, "type":"publish","data":"AP8HAA==" } ')
put("FuzzJSONPublish", "publish-store", b"\x00" + json.dumps(frames["publish"], separators=(",", ":")).encode())
put("FuzzJSONPublish", "after-id", b"\x01" + b'3,"channel":"room","text":"hi","msgId":9223372036854775807,"customType":"chat"}')
put("FuzzJSONPublish", "text-escapes", b"\x02" + 'say \\"hi\\" \\/ \\n \\u00e9 héllo 世界'.encode())
put("FuzzJSONPublish", "reply-epoch", b"\x00" + struct.pack("<QQ", 2**40 + 3, 2**63 + 1) + 'e1.7 "/\\\n é'.encode())
