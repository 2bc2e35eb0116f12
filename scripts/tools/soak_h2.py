"""HTTP/2 framing and the bits of HPACK the soak's hostile peers need (python3 stdlib only)."""

import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# HTTP/2 frame types and flags
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20

# HPACK static table entries 8..14 are ":status" with these values.
STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}



def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def settings(pairs=()):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def hpack_str(s):
    b = s.encode()
    assert len(b) < 127
    return bytes([len(b)]) + b


def request_block(method_index, path, authority):
    # :method (static 2 GET / 3 POST), :scheme https (static 7), :path and :authority as
    # literals without indexing, names from the static table (4 and 1).
    return (
        bytes([0x80 | method_index, 0x87, 0x04]) + hpack_str(path) + b"\x01" + hpack_str(authority)
    )


def hpack_int(data, i, prefix_bits):
    mask = (1 << prefix_bits) - 1
    v = data[i] & mask
    i += 1
    if v < mask:
        return v, i
    m = 0
    while True:
        b = data[i]
        i += 1
        v += (b & 0x7F) << m
        m += 7
        if not b & 0x80:
            return v, i


def huffman_digits(raw):
    """Decodes a Huffman-coded string of ASCII digits (all a :status needs); None otherwise."""
    bits = "".join(f"{b:08b}" for b in raw)
    out, i = [], 0
    while i < len(bits):
        rest = bits[i:]
        if len(rest) < 8 and set(rest) == {"1"}:
            break  # EOS padding
        if len(rest) >= 5 and int(rest[:5], 2) <= 2:
            out.append(chr(ord("0") + int(rest[:5], 2)))
            i += 5
        elif len(rest) >= 6 and 0x19 <= int(rest[:6], 2) <= 0x1F:
            out.append(chr(ord("3") + int(rest[:6], 2) - 0x19))
            i += 6
        else:
            return None
    return "".join(out)


def status_of_block(block):
    """The :status of a response header block. The server encodes pseudo-headers first, and
    we announce SETTINGS_HEADER_TABLE_SIZE=0, so the dynamic table stays empty."""
    i = 0
    try:
        while i < len(block) and block[i] & 0xE0 == 0x20:  # dynamic table size update
            _, i = hpack_int(block, i, 5)
        b = block[i]
        if b & 0x80:
            idx, _ = hpack_int(block, i, 7)
            return str(STATIC_STATUS.get(idx, f"idx{idx}"))
        idx, i = hpack_int(block, i, 6 if b & 0x40 else 4)
        if idx != 8:
            return "?"
        huff = block[i] & 0x80
        n, i = hpack_int(block, i, 7)
        raw = block[i : i + n]
        s = huffman_digits(raw) if huff else raw.decode("ascii", "replace")
        return s or "?"
    except IndexError:
        return "?"
