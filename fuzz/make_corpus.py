#!/usr/bin/env python3
"""Builds the fuzzers' seed corpora (docs/fuzzing.md).

protocol: every command buffer the context and robustness suites send, cut from capture files
          (RVGL_CAPTURE_DIR, docs/capture-format.md), each prefixed with the harness's mode byte.
api:      short scripts of virglrenderer calls in fuzz_api.cpp's op encoding.
vtest:    server reply streams as virgl_test_server 0.10.4 sends them (vtest_protocol.h).

Usage: fuzz/make_corpus.py BUILD_DIR   (BUILD_DIR holds tests/context_tests etc.)
"""
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SUBM = 0x4d425553


def write(kind, data):
    d = os.path.join(HERE, "corpus", kind)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def captures(build):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, RVGL_CAPTURE_DIR=tmp, RVGL_EMU_PROFILE="gfx1100")
        for t in ("tests/context_tests", "tests/robustness_tests"):
            subprocess.run([os.path.join(build, t), "~[load]", "~[sweep]"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        seen = set()
        for name in sorted(os.listdir(tmp)):
            raw = open(os.path.join(tmp, name), "rb").read()
            pos = 32
            while pos + 32 <= len(raw):
                rtype, length = struct.unpack_from("<II", raw, pos)
                payload = raw[pos + 32:pos + 32 + length]
                pos += 32 + (length + 7) // 8 * 8
                if rtype == SUBM and payload and payload not in seen:
                    seen.add(payload)
                    write("protocol", bytes([1]) + payload)
        return len(seen)


def api_seeds():
    # op, ctx, res, then op arguments (see fuzz_api.cpp)
    create = bytes([0, 0, 0, 1])             # ctx 1, capset ROCM
    shmem = bytes([2, 0, 0, 1, 0])           # res 1: HOST3D MAPPABLE, blob_id 0
    nop = struct.pack("<IIII", 1, 16, 1, 0)  # NOP with a response slot
    submit = bytes([4, 0, 0, len(nop) // 8]) + nop
    fence = bytes([5, 0, 0, 0]) + struct.pack("<I", 7)
    poll = bytes([6, 0, 0])
    userptr = bytes([3, 0, 1, 0, 2, 3, 0, 1, 0, 1])
    claim = bytes([2, 0, 2, 7, 1, 4])
    unref = bytes([9, 0, 0])
    destroy = bytes([1, 0, 0])
    for s in (create + shmem + submit + fence + poll + destroy,
              create + userptr + poll + unref + destroy,
              create + shmem + claim + bytes([10, 0, 2, 11, 0, 2, 12, 0, 2]) + destroy,
              create + bytes([7, 0, 5, 8, 0, 5, 13, 0, 0]) + destroy):
        write("api", s)


def vtest_seeds():
    hdr = lambda length, cmd: struct.pack("<II", length, cmd)
    ping = hdr(0, 10)                      # PING_PROTOCOL_VERSION: bare header
    version = hdr(1, 11) + struct.pack("<I", 3)
    capset = bytearray(256)
    struct.pack_into("<IHHQI", capset, 0, 1, 1, 0, 0x3f, 65536)
    get_capset = hdr(1 + 64, 16) + struct.pack("<I", 1) + bytes(capset)
    blob = hdr(1, 18) + struct.pack("<I", 5)
    for s in (b"", ping, ping + version, ping + version + get_capset,
              ping + version + get_capset + blob, ping + hdr(1, 11) + struct.pack("<I", 2)):
        write("vtest", s)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    n = captures(sys.argv[1])
    api_seeds()
    vtest_seeds()
    print(f"protocol: {n} captured command buffers; api and vtest seeds written")


if __name__ == "__main__":
    main()
