#!/usr/bin/env python3
"""Independent reader of a TensorBoard events file, standard library only (no TensorFlow, no protobuf package).

Checks the TFRecord framing (uint64 length, masked CRC-32C of the length, payload, masked CRC-32C of the payload)
and decodes the protobuf wire format of Event{wall_time=1 double, step=2 int64, file_version=3 string, summary=5}
/ Summary{value=1} / Value{tag=1 string, simple_value=2 float}. Prints JSON:
  {"records": n, "file_version": "...", "scalars": [{"tag", "step", "value", "wall_time"}, ...]}
Exits 1 with a message on any framing, CRC or wire-format error.
Usage: test_tensorboard_decode.py EVENTS_FILE
"""
import json
import struct
import sys


def crc32c(data: bytes) -> int:
    # Bit-at-a-time CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): deliberately not table-driven.
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fail(msg: str):
    print(msg, file=sys.stderr)
    sys.exit(1)


def varint(buf: bytes, i: int):
    shift = result = 0
    while True:
        if i >= len(buf):
            fail("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def fields(buf: bytes):
    """Yields (field_number, wire_type, value) of one message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v = buf[i:i + 8]
            i += 8
        elif wire == 2:
            n, i = varint(buf, i)
            v = buf[i:i + n]
            i += n
        elif wire == 5:
            v = buf[i:i + 4]
            i += 4
        else:
            fail(f"unsupported wire type {wire}")
        if i > len(buf):
            fail("field runs past the end of its message")
        yield field, wire, v


def main(path: str):
    data = open(path, "rb").read()
    pos = records = 0
    out = {"records": 0, "file_version": None, "scalars": []}
    while pos < len(data):
        if pos + 12 > len(data):
            fail(f"truncated record header at offset {pos}")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (len_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if len_crc != masked(header):
            fail(f"bad length CRC at offset {pos}")
        payload = data[pos + 12:pos + 12 + length]
        if len(payload) != length or pos + 16 + length > len(data):
            fail(f"truncated record at offset {pos}")
        (data_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if data_crc != masked(payload):
            fail(f"bad data CRC at offset {pos}")
        pos += 16 + length
        records += 1
        wall_time, step, summary = None, 0, None
        for f, w, v in fields(payload):
            if f == 1 and w == 1:
                (wall_time,) = struct.unpack("<d", v)
            elif f == 2 and w == 0:
                step = v - (1 << 64) if v >= (1 << 63) else v
            elif f == 3 and w == 2:
                out["file_version"] = v.decode()
            elif f == 5 and w == 2:
                summary = v
        if summary is not None:
            for f, w, v in fields(summary):
                if f != 1 or w != 2:
                    continue
                tag, value = None, None
                for vf, vw, vv in fields(v):
                    if vf == 1 and vw == 2:
                        tag = vv.decode()
                    elif vf == 2 and vw == 5:
                        (value,) = struct.unpack("<f", vv)
                out["scalars"].append({"tag": tag, "step": step, "value": value, "wall_time": wall_time})
    out["records"] = records
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail(__doc__)
    main(sys.argv[1])
