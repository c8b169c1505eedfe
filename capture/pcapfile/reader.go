package pcapfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/klauspost/compress/gzip"

	"github.com/klauspost/compress/zstd"
)

// Limits.
const (
	// MaxPacketSize bounds one packet's captured length. tcpdump's own
	// maximum snap length is 262144 (MAXIMUM_SNAPLEN in libpcap); loopback
	// GSO segments stay below 64 KiB plus headers.
	MaxPacketSize = 262144
	// MaxBlockSize bounds a pcapng block that is read into memory (section
	// headers, interface descriptions, decryption secrets). Larger blocks of
	// types wtrace ignores are skipped without being read into memory.
	MaxBlockSize = 16 << 20
	// maxInterfaces bounds the interfaces of one pcapng section: real
	// captures have a handful; each costs a small struct.
	maxInterfaces = 1 << 16
)

// Sentinel errors.
var (
	// ErrNotCapture: the file starts with neither a pcap nor a pcapng magic.
	ErrNotCapture = errors.New("pcapfile: not a pcap or pcapng file")
	// ErrTruncated: the file ends inside a packet record or block.
	ErrTruncated = errors.New("pcapfile: file ends inside a packet")
)

// Error is a parse error with the offset (in the uncompressed capture
// stream) of the record or block where it was found.
type Error struct {
	Offset int64
	Err    error
}

func (e *Error) Error() string { return fmt.Sprintf("pcapfile: offset %d: %v", e.Offset, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// LinkType is a LINKTYPE_ value (https://www.tcpdump.org/linktypes.html).
type LinkType uint16

// Link types wtrace decodes.
const (
	LinkNull     LinkType = 0   // BSD loopback: 4-byte host-order address family
	LinkEthernet LinkType = 1   // IEEE 802.3
	LinkRaw      LinkType = 101 // raw IPv4/IPv6
	LinkLoop     LinkType = 108 // OpenBSD loopback: 4-byte network-order address family
	LinkLinuxSLL LinkType = 113 // Linux cooked capture v1 (tcpdump -i any, older libpcap)
	LinkIPv4     LinkType = 228
	LinkIPv6     LinkType = 229
	LinkSLL2     LinkType = 276 // Linux cooked capture v2 (tcpdump -i any, libpcap ≥ 1.10)
)

// Packet is one captured packet.
type Packet struct {
	Data      []byte // captured bytes; owned by the Reader, valid until the next call to Next
	Time      int64  // capture time, nanoseconds since the Unix epoch
	Length    int    // original length on the wire (≥ len(Data) when the snap length cut it)
	LinkType  LinkType
	Interface int // pcapng interface number (0 for classic pcap)
}

// Format names the container format.
type Format string

const (
	FormatPcap   Format = "pcap"
	FormatPcapNG Format = "pcapng"
)

// Options configure a Reader. The zero value is ready to use.
type Options struct {
	// Secrets, if set, is called with the contents of every pcapng
	// Decryption Secrets Block (typ 0x544c534b is an NSS TLS key log).
	Secrets func(typ uint32, data []byte)
}

// Reader reads packets from a capture file.
type Reader struct {
	br      *bufio.Reader
	closers []io.Closer
	off     int64 // offset in the uncompressed stream of the next unread byte
	opts    Options

	format      Format
	compression string
	order       binary.ByteOrder

	// classic pcap
	nanos    bool
	linkType LinkType

	// pcapng
	ifaces []iface

	hdr [32]byte
	buf []byte
	err error
}

type iface struct {
	linkType LinkType
	snapLen  uint32
	// timestamps are units of 1/tsDiv seconds (tsPow2: units of 2^-n s)
	tsUnitsPerSec uint64
	tsOffset      int64 // seconds
}

const (
	magicMicros   = 0xa1b2c3d4
	magicNanos    = 0xa1b23c4d
	magicNG       = 0x0a0d0d0a
	ngByteOrder   = 0x1a2b3c4d
	blockIDB      = 0x00000001
	blockPB       = 0x00000002 // obsolete Packet Block
	blockSPB      = 0x00000003
	blockEPB      = 0x00000006
	blockDSB      = 0x0000000a
	optEnd        = 0
	optIfTsResol  = 9
	optIfTsOffset = 14
)

// NewReader detects compression and the file format from the first bytes of
// r and reads the file header.
func NewReader(r io.Reader, opts Options) (*Reader, error) {
	rd := &Reader{opts: opts}
	br := bufio.NewReaderSize(r, 256<<10)
	head, _ := br.Peek(4)
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("pcapfile: gzip: %w", err)
		}
		rd.closers = append(rd.closers, zr)
		rd.compression = "gzip"
		br = bufio.NewReaderSize(zr, 256<<10)
	case len(head) == 4 && bytes.Equal(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderMaxMemory(256<<20), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("pcapfile: zstd: %w", err)
		}
		rd.closers = append(rd.closers, closerFunc(func() error { zr.Close(); return nil }))
		rd.compression = "zstd"
		br = bufio.NewReaderSize(zr, 256<<10)
	}
	rd.br = br
	head, err := br.Peek(4)
	if err != nil {
		if len(head) == 0 {
			return nil, fmt.Errorf("pcapfile: empty file: %w", ErrNotCapture)
		}
		return nil, ErrNotCapture
	}
	le := binary.LittleEndian.Uint32(head)
	be := binary.BigEndian.Uint32(head)
	switch {
	case le == magicNG:
		rd.format = FormatPcapNG
		if err := rd.readSHB(); err != nil {
			return nil, err
		}
	case le == magicMicros || le == magicNanos:
		rd.order = binary.LittleEndian
		rd.nanos = le == magicNanos
		err = rd.readPcapHeader()
	case be == magicMicros || be == magicNanos:
		rd.order = binary.BigEndian
		rd.nanos = be == magicNanos
		err = rd.readPcapHeader()
	default:
		return nil, ErrNotCapture
	}
	if err != nil {
		return nil, err
	}
	return rd, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// Format returns the container format.
func (r *Reader) Format() Format { return r.format }

// Compression returns "gzip", "zstd" or "".
func (r *Reader) Compression() string { return r.compression }

// Offset returns the offset, in the uncompressed capture stream, of the
// next unread byte.
func (r *Reader) Offset() int64 { return r.off }

// LinkType returns the link type of a classic pcap file, or of the first
// interface of a pcapng file (0 if none was described yet).
func (r *Reader) LinkType() LinkType {
	if r.format == FormatPcap {
		return r.linkType
	}
	if len(r.ifaces) > 0 {
		return r.ifaces[0].linkType
	}
	return 0
}

// Close releases decompressors. It does not close the underlying reader.
func (r *Reader) Close() error {
	for _, c := range r.closers {
		c.Close()
	}
	return nil
}

func (r *Reader) readFull(p []byte) error {
	n, err := io.ReadFull(r.br, p)
	r.off += int64(n)
	return err
}

func (r *Reader) discard(n int64) error {
	for n > 0 {
		step := n
		if step > 1<<30 {
			step = 1 << 30
		}
		d, err := r.br.Discard(int(step))
		r.off += int64(d)
		n -= int64(d)
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *Reader) fail(off int64, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || (errors.Is(err, io.EOF) && r.off > off) {
		err = ErrTruncated
	}
	r.err = &Error{Offset: off, Err: err}
	return r.err
}

func (r *Reader) readPcapHeader() error {
	h := r.hdr[:24]
	if err := r.readFull(h); err != nil {
		return r.fail(0, fmt.Errorf("file header: %w", io.ErrUnexpectedEOF))
	}
	major := r.order.Uint16(h[4:6])
	if major != 2 {
		return r.fail(0, fmt.Errorf("unsupported pcap version %d.%d", major, r.order.Uint16(h[6:8])))
	}
	// The upper bits of the link-type field carry FCS information.
	r.linkType = LinkType(r.order.Uint32(h[20:24]) & 0xffff)
	r.format = FormatPcap
	r.buf = make([]byte, 0, 64<<10)
	return nil
}

// Next returns the next packet. It returns io.EOF at the clean end of the
// file, and an *Error (wrapping ErrTruncated for a file cut inside a packet)
// otherwise; errors are sticky.
func (r *Reader) Next() (Packet, error) {
	if r.err != nil {
		return Packet{}, r.err
	}
	if r.format == FormatPcap {
		return r.nextPcap()
	}
	return r.nextNG()
}

func (r *Reader) nextPcap() (Packet, error) {
	off := r.off
	h, err := r.br.Peek(16)
	if err != nil {
		if err == io.EOF && len(h) == 0 {
			r.err = io.EOF
			return Packet{}, io.EOF
		}
		r.off += int64(len(h))
		return Packet{}, r.fail(off, fmt.Errorf("packet record header: %w", io.ErrUnexpectedEOF))
	}
	sec := int64(r.order.Uint32(h[0:4]))
	frac := int64(r.order.Uint32(h[4:8]))
	incl := r.order.Uint32(h[8:12])
	orig := r.order.Uint32(h[12:16])
	if incl > MaxPacketSize {
		return Packet{}, r.fail(off, fmt.Errorf("packet length %d exceeds the limit of %d bytes (corrupt file?)", incl, MaxPacketSize))
	}
	if !r.nanos {
		frac *= 1000
	}
	r.br.Discard(16) // peeked: cannot fail
	r.off += 16
	data, err := r.packetData(int64(incl), int(incl))
	if err != nil {
		return Packet{}, r.fail(off, fmt.Errorf("packet data: %w", io.ErrUnexpectedEOF))
	}
	length := int(orig)
	if length < len(data) {
		length = len(data)
	}
	return Packet{Data: data, Time: sec*1e9 + frac, Length: length, LinkType: r.linkType}, nil
}

// packetData consumes the next n bytes of the stream and returns the first
// keep of them (keep ≤ n, keep ≤ MaxPacketSize): in place in the read
// buffer when all n fit it, without a copy, else copied to r.buf. Either
// way they are valid until the next call to Next.
func (r *Reader) packetData(n int64, keep int) ([]byte, error) {
	if n <= int64(r.br.Size()) {
		b, err := r.br.Peek(int(n))
		d, _ := r.br.Discard(len(b)) // peeked: cannot fail
		r.off += int64(d)
		if err != nil {
			return nil, err
		}
		return b[:keep], nil
	}
	data, _ := r.grow(keep)
	if err := r.readFull(data); err != nil {
		return nil, err
	}
	return data, r.discard(n - int64(keep))
}

func (r *Reader) grow(n int) ([]byte, error) {
	if cap(r.buf) < n {
		r.buf = make([]byte, n, max(n, 64<<10))
	}
	return r.buf[:n], nil
}

// pcapng

// readBlockHeader reads type and total length. The body (total-12 bytes,
// followed by the trailing length) is left unread.
func (r *Reader) readBlockHeader() (typ uint32, bodyLen uint32, err error) {
	h := r.hdr[:8]
	n, err := io.ReadFull(r.br, h)
	r.off += int64(n)
	if err != nil {
		if err == io.EOF {
			return 0, 0, io.EOF
		}
		return 0, 0, io.ErrUnexpectedEOF
	}
	typ = r.order.Uint32(h[0:4])
	total := r.order.Uint32(h[4:8])
	if typ == magicNG {
		// The section's byte order is not known yet; sectionHeader checks.
		return typ, 0, nil
	}
	if total < 12 || total%4 != 0 {
		return 0, 0, fmt.Errorf("block type 0x%x: bad total length %d", typ, total)
	}
	return typ, total - 12, nil
}

// readBody reads a block body of n bytes (n ≤ MaxBlockSize) plus the
// trailing total length.
func (r *Reader) readBody(n uint32) ([]byte, error) {
	if n > MaxBlockSize {
		return nil, fmt.Errorf("block of %d bytes exceeds the limit of %d", n, MaxBlockSize)
	}
	b, _ := r.grow(int(n) + 4)
	if err := r.readFull(b); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return b[:n], nil
}

func (r *Reader) readSHB() error {
	// The byte order is not known before the byte-order magic, which
	// follows type and length.
	h := r.hdr[:12]
	if err := r.readFull(h); err != nil {
		return r.fail(0, fmt.Errorf("section header: %w", io.ErrUnexpectedEOF))
	}
	return r.sectionHeader(h, r.off-12)
}

func (r *Reader) sectionHeader(h []byte, off int64) error {
	switch {
	case binary.LittleEndian.Uint32(h[8:12]) == ngByteOrder:
		r.order = binary.LittleEndian
	case binary.BigEndian.Uint32(h[8:12]) == ngByteOrder:
		r.order = binary.BigEndian
	default:
		return r.fail(off, errors.New("section header: bad byte-order magic"))
	}
	total := r.order.Uint32(h[4:8])
	if total < 28 || total%4 != 0 || total-12 > MaxBlockSize {
		return r.fail(off, fmt.Errorf("section header: bad length %d", total))
	}
	body, err := r.readBody(total - 12 - 4 + 0) // version etc. follow the magic
	if err != nil {
		return r.fail(off, fmt.Errorf("section header: %w", err))
	}
	if major := r.order.Uint16(body[0:2]); major != 1 {
		return r.fail(off, fmt.Errorf("unsupported pcapng version %d", major))
	}
	r.ifaces = r.ifaces[:0]
	if r.buf == nil || cap(r.buf) < 64<<10 {
		r.buf = make([]byte, 0, 64<<10)
	}
	return nil
}

func (r *Reader) nextNG() (Packet, error) {
	for {
		off := r.off
		typ, n, err := r.readBlockHeader()
		if err != nil {
			if err == io.EOF {
				r.err = io.EOF
				return Packet{}, io.EOF
			}
			return Packet{}, r.fail(off, err)
		}
		switch typ {
		case magicNG:
			// A new section: re-read with its own byte order.
			h := r.hdr[:12]
			copy(h[:8], r.hdr[:8])
			if err := r.readFull(h[8:12]); err != nil {
				return Packet{}, r.fail(off, fmt.Errorf("section header: %w", io.ErrUnexpectedEOF))
			}
			if err := r.sectionHeader(h, off); err != nil {
				return Packet{}, err
			}
		case blockIDB:
			body, err := r.readBody(n)
			if err != nil {
				return Packet{}, r.fail(off, err)
			}
			if err := r.interfaceDescription(body); err != nil {
				return Packet{}, r.fail(off, err)
			}
		case blockEPB, blockPB:
			return r.packetBlock(typ, n, off)
		case blockSPB:
			return r.simplePacketBlock(n, off)
		case blockDSB:
			if err := r.decryptionSecrets(n, off); err != nil {
				return Packet{}, err
			}
		default:
			if err := r.discard(int64(n) + 4); err != nil {
				return Packet{}, r.fail(off, io.ErrUnexpectedEOF)
			}
		}
	}
}

// packetBlock reads an enhanced (or obsolete) packet block of n bytes
// after its header, at file offset off.
func (r *Reader) packetBlock(typ, n uint32, off int64) (Packet, error) {
	if n < 20 {
		return Packet{}, r.fail(off, fmt.Errorf("packet block too short (%d bytes)", n))
	}
	if n > MaxPacketSize+MaxBlockSize {
		return Packet{}, r.fail(off, fmt.Errorf("packet block of %d bytes exceeds the limit", n))
	}
	h := r.hdr[8:28]
	if err := r.readFull(h); err != nil {
		return Packet{}, r.fail(off, io.ErrUnexpectedEOF)
	}
	var ifc int
	if typ == blockEPB {
		ifc = int(r.order.Uint32(h[0:4]))
	} else {
		ifc = int(r.order.Uint16(h[0:2]))
	}
	ts := uint64(r.order.Uint32(h[4:8]))<<32 | uint64(r.order.Uint32(h[8:12]))
	capLen := r.order.Uint32(h[12:16])
	orig := r.order.Uint32(h[16:20])
	if ifc >= len(r.ifaces) {
		return Packet{}, r.fail(off, fmt.Errorf("packet refers to interface %d, but the section describes %d", ifc, len(r.ifaces)))
	}
	if capLen > MaxPacketSize {
		return Packet{}, r.fail(off, fmt.Errorf("packet length %d exceeds the limit of %d bytes", capLen, MaxPacketSize))
	}
	padded := (capLen + 3) &^ 3
	if padded > n-20 {
		return Packet{}, r.fail(off, fmt.Errorf("packet length %d does not fit its block (%d bytes)", capLen, n))
	}
	// The data, then padding, options and the trailing length.
	data, err := r.packetData(int64(n-20)+4, int(capLen))
	if err != nil {
		return Packet{}, r.fail(off, io.ErrUnexpectedEOF)
	}
	ifd := &r.ifaces[ifc]
	length := int(orig)
	if length < len(data) {
		length = len(data)
	}
	return Packet{Data: data, Time: ifd.nanos(ts), Length: length, LinkType: ifd.linkType, Interface: ifc}, nil
}

// simplePacketBlock reads a simple packet block of n bytes after its
// header, at file offset off: the first interface's, with no timestamp.
func (r *Reader) simplePacketBlock(n uint32, off int64) (Packet, error) {
	if n < 4 {
		return Packet{}, r.fail(off, fmt.Errorf("simple packet block too short (%d bytes)", n))
	}
	if len(r.ifaces) == 0 {
		return Packet{}, r.fail(off, errors.New("simple packet block before any interface description"))
	}
	h := r.hdr[8:12]
	if err := r.readFull(h); err != nil {
		return Packet{}, r.fail(off, io.ErrUnexpectedEOF)
	}
	orig := r.order.Uint32(h)
	capLen := min(orig, n-4)
	if s := r.ifaces[0].snapLen; s != 0 && capLen > s {
		capLen = s
	}
	if capLen > MaxPacketSize {
		return Packet{}, r.fail(off, fmt.Errorf("packet length %d exceeds the limit of %d bytes", capLen, MaxPacketSize))
	}
	data, _ := r.grow(int(capLen))
	if err := r.readFull(data); err != nil {
		return Packet{}, r.fail(off, io.ErrUnexpectedEOF)
	}
	if err := r.discard(int64(n-4-capLen) + 4); err != nil {
		return Packet{}, r.fail(off, io.ErrUnexpectedEOF)
	}
	// A simple packet block has no timestamp.
	return Packet{Data: data, Length: int(max(orig, capLen)), LinkType: r.ifaces[0].linkType}, nil
}

// decryptionSecrets reads a decryption secrets block of n bytes after its
// header, at file offset off, and hands its secrets to Options.Secrets.
func (r *Reader) decryptionSecrets(n uint32, off int64) error {
	body, err := r.readBody(n)
	if err != nil {
		return r.fail(off, err)
	}
	if len(body) < 8 {
		return r.fail(off, errors.New("decryption secrets block too short"))
	}
	styp := r.order.Uint32(body[0:4])
	slen := r.order.Uint32(body[4:8])
	if uint64(slen) > uint64(len(body)-8) {
		return r.fail(off, fmt.Errorf("decryption secrets length %d exceeds its block", slen))
	}
	if r.opts.Secrets != nil {
		r.opts.Secrets(styp, bytes.Clone(body[8:8+slen]))
	}
	return nil
}

func (r *Reader) interfaceDescription(body []byte) error {
	if len(body) < 8 {
		return errors.New("interface description too short")
	}
	if len(r.ifaces) >= maxInterfaces {
		return fmt.Errorf("more than %d interfaces in one section", maxInterfaces)
	}
	ifd := iface{
		linkType:      LinkType(r.order.Uint16(body[0:2])),
		snapLen:       r.order.Uint32(body[4:8]),
		tsUnitsPerSec: 1e6,
	}
	opts := body[8:]
	for len(opts) >= 4 {
		code := r.order.Uint16(opts[0:2])
		l := int(r.order.Uint16(opts[2:4]))
		opts = opts[4:]
		if code == optEnd {
			break
		}
		if l > len(opts) {
			return errors.New("interface option runs past its block")
		}
		v := opts[:l]
		switch code {
		case optIfTsResol:
			if l >= 1 {
				res := v[0]
				if res&0x80 != 0 {
					p := uint(res & 0x7f)
					if p > 63 {
						return fmt.Errorf("timestamp resolution 2^-%d not supported", p)
					}
					ifd.tsUnitsPerSec = 1 << p
				} else {
					if res > 19 {
						return fmt.Errorf("timestamp resolution 10^-%d not supported", res)
					}
					u := uint64(1)
					for range res {
						u *= 10
					}
					ifd.tsUnitsPerSec = u
				}
			}
		case optIfTsOffset:
			if l >= 8 {
				ifd.tsOffset = int64(r.order.Uint64(v))
			}
		}
		pad := (l + 3) &^ 3
		if pad > len(opts) {
			break
		}
		opts = opts[pad:]
	}
	r.ifaces = append(r.ifaces, ifd)
	return nil
}

// nanos converts a pcapng timestamp in interface units to Unix nanoseconds
// without overflowing for any resolution.
func (f *iface) nanos(ts uint64) int64 {
	sec := ts / f.tsUnitsPerSec
	rem := ts % f.tsUnitsPerSec
	hi, lo := bits.Mul64(rem, 1e9)
	frac, _ := bits.Div64(hi, lo, f.tsUnitsPerSec)
	return (int64(sec)+f.tsOffset)*1e9 + int64(frac)
}
