#!/usr/bin/env python3
"""Regenerates the fixtures in this directory from ../../../shared/corpus.

Needs tshark. Run from this directory: python3 extract.py
  basic-json-watch.chunked     body of the basic-json WATCH response (whole, wire bytes after the head)
  large-objects-watch.chunked  first ~1 MiB of the large-objects JSON WATCH body, cut at a chunk
                               boundary and terminated with "0\\r\\n\\r\\n"
  midstream-m1.raw, -m2.raw    first 232 KiB of the server->client TCP payload of the midstream
                               connections (M1 starts 12796 bytes into a chunk's data)
  midstream.json               truth events lying completely inside the decodable part of those
"""
import hashlib, json, os, re, subprocess, sys

CORPUS = os.path.join('..', '..', '..', 'shared', 'corpus')
MID_BYTES = 232 << 10


def server_stream(pcap, stream, port=':8001'):
    """Server->client bytes of a TCP stream via tshark -z follow,tcp,raw."""
    out = subprocess.run(['tshark', '-r', pcap, '-q', '-z', f'follow,tcp,raw,{stream}'],
                         capture_output=True, text=True, check=True).stdout
    lines = out.split('\n')
    i = next(k for k, l in enumerate(lines) if l.startswith('Node 1:'))
    node0_server = lines[i - 1].strip().endswith(port)
    buf = bytearray()
    for l in lines[i + 1:]:
        if l.startswith('===='):
            break
        if not l or l.startswith('\t') == node0_server:
            continue
        b = bytes.fromhex(l.strip())
        if re.fullmatch(rb'\[\d+ bytes missing in capture file\]\x00', b):
            continue  # tshark's marker for the byte before the capture started
        buf += b
    return bytes(buf)


def chunks(x, p=0):
    """Yields (line_start, data_start, size) of each chunk from x[p:], stopping at the end of x."""
    while True:
        e = x.find(b'\r\n', p)
        if e < 0:
            return
        size = int(x[p:e].split(b';')[0], 16)
        yield p, e + 2, size
        if size == 0:
            return
        p = e + 2 + size + 2


def response_body(raw, nth):
    heads = [m.start() for m in re.finditer(rb'HTTP/1\.1 \d{3} ', raw)]
    h = raw.index(b'\r\n\r\n', heads[nth]) + 4
    return raw[h:]


def main():
    bj = response_body(server_stream(os.path.join(CORPUS, 'basic-json', 'capture.pcap'), 0), 1)
    end = [d + s for _, d, s in chunks(bj) if s == 0][0] + 2
    open('basic-json-watch.chunked', 'wb').write(bj[:end])

    lo = response_body(server_stream(os.path.join(CORPUS, 'large-objects', 'capture.pcap'), 0), 1)
    cut = next(d + s + 2 for _, d, s in chunks(lo) if d + s + 2 >= 1 << 20)
    open('large-objects-watch.chunked', 'wb').write(lo[:cut] + b'0\r\n\r\n')

    meta = json.load(open(os.path.join(CORPUS, 'midstream', 'meta.json')))['midstream']
    truth = [json.loads(l) for l in open(os.path.join(CORPUS, 'midstream', 'truth.jsonl'))]
    out = []
    for stream, m in enumerate(meta):
        raw = server_stream(os.path.join(CORPUS, 'midstream', 'capture.pcap'), stream)
        assert len(raw) == m['captured_stream_bytes']
        raw = raw[:MID_BYTES]
        name = 'midstream-m%d.raw' % (stream + 1)
        open(name, 'wb').write(raw)
        skip = m['first_chunk_header_at_captured_offset']
        body = bytearray()
        for _, d, s in chunks(raw, skip):
            body += raw[d:d + s]
        start = m['body_offset_of_capture_start'] + m['partial_chunk_data_bytes_at_start']
        events = []
        for t in truth:
            if t['conn'] != m['conn'] or t['body_offset'] < start or t['body_end'] > start + len(body):
                continue
            off = t['body_offset'] - start
            assert hashlib.sha256(body[off:off + t['event_len']]).hexdigest() == t['event_sha256']
            events.append({'offset': off, 'len': t['event_len'], 'sha256': t['event_sha256'],
                           'type': t['type'], 'name': t['name']})
        out.append({'file': name, 'client': m['client'], 'skip': skip, 'events': events})
    json.dump(out, open('midstream.json', 'w'), indent=1)
    print('ok', [(o['file'], o['skip'], len(o['events'])) for o in out])


if __name__ == '__main__':
    sys.exit(main())
