package formats

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// On-disk framing; FORMAT.md specifies every byte.

// Version is the format version this package writes and the newest it
// reads; it reads every version from 1 on. Version 2 added codec 2 (zstd
// with the session dictionary, dict.go); version 3 data blocks of type 4,
// whose records store their times as differences (FORMAT.md §5.1).
const Version = 3

// minVersion is the oldest format version this package reads.
const minVersion = 1

var (
	fileMagic   = [8]byte{0x89, 'W', 'T', 'R', '\r', '\n', 0x1a, '\n'}
	blockMagic  = [4]byte{0x93, 'W', 'T', 'B'}
	footerMagic = [8]byte{0x89, 'W', 'T', 'R', 'e', 'n', 'd', '\n'}
)

const (
	fileHeaderSize = 16 // magic, version, flags, CRC
	footerSize     = 32 // index offset, index length, flags, CRC, magic

	// blockHeaderSize is the size of a version 1 block header. Later
	// versions may write longer headers (the header says its length).
	blockHeaderSize = 48
	// dictHeaderSize is the size of the header of a block compressed with
	// the session dictionary (codec 2): the version 1 fields, the
	// dictionary's length and CRC, the header CRC.
	dictHeaderSize = 56
	// blockPrefixSize is how much of a header a reader needs to learn the
	// header's length: magic, type, codec, header length.
	blockPrefixSize = 8
	// maxBlockHeaderSize bounds the header length a reader accepts: room
	// for later versions to add fields, small enough to read blindly.
	maxBlockHeaderSize = 1024
)

// Block types.
const (
	blockData  = 1
	blockIndex = 2
	blockDict  = 3 // a stored copy of the session dictionary (version 2)
	// blockDelta is a data block whose records store their times as the
	// difference from the record before (version 3, FORMAT.md §5.1).
	blockDelta = 4
)

// isData reports whether blocks of type typ hold records.
func isData(typ uint8) bool { return typ == blockData || typ == blockDelta }

// Payload codecs.
const (
	codecNone     = 0
	codecZstd     = 1
	codecZstdDict = 2 // zstd with the session dictionary (version 2)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// blockHeader is a parsed block header.
type blockHeader struct {
	typ         uint8
	codec       uint8
	hdrLen      int
	seq         uint32
	clen, ulen  int // payload bytes on disk, after decompression
	records     int
	first, last int64
	payloadCRC  uint32
	// The session dictionary a codec 2 payload needs (or a dictionary
	// block holds): its length and CRC.
	dictLen int
	dictCRC uint32
}

// size is the block's size on disk, header included.
func (h *blockHeader) size() int64 { return int64(h.hdrLen) + int64(h.clen) }

// put writes a header into b[:h.headerSize()]: the version 1 fields, and
// for codec 2 and dictionary blocks the dictionary's length and CRC.
func (h *blockHeader) put(b []byte) {
	n := h.headerSize()
	_ = b[n-1]
	copy(b[0:4], blockMagic[:])
	b[4] = h.typ
	b[5] = h.codec
	binary.LittleEndian.PutUint16(b[6:], uint16(n))
	binary.LittleEndian.PutUint32(b[8:], h.seq)
	binary.LittleEndian.PutUint32(b[12:], uint32(h.clen))
	binary.LittleEndian.PutUint32(b[16:], uint32(h.ulen))
	binary.LittleEndian.PutUint32(b[20:], uint32(h.records))
	binary.LittleEndian.PutUint64(b[24:], uint64(h.first))
	binary.LittleEndian.PutUint64(b[32:], uint64(h.last))
	binary.LittleEndian.PutUint32(b[40:], h.payloadCRC)
	if h.namesDict() {
		binary.LittleEndian.PutUint32(b[44:], uint32(h.dictLen))
		binary.LittleEndian.PutUint32(b[48:], h.dictCRC)
	}
	binary.LittleEndian.PutUint32(b[n-4:], crc(b[:n-4]))
}

// headerSize is the length of the header put writes for h.
func (h *blockHeader) headerSize() int {
	if h.namesDict() {
		return dictHeaderSize
	}
	return blockHeaderSize
}

// namesDict reports whether the header carries a session dictionary's
// length and CRC: a codec 2 block, or a dictionary block.
func (h *blockHeader) namesDict() bool { return h.codec == codecZstdDict || h.typ == blockDict }

// headerLen checks the fixed prefix of a block header (at least
// blockPrefixSize bytes) and returns the header's length.
func headerLen(b []byte) (int, error) {
	if [4]byte(b[0:4]) != blockMagic {
		return 0, errMagic
	}
	n := int(binary.LittleEndian.Uint16(b[6:]))
	if n < blockHeaderSize || n > maxBlockHeaderSize {
		return 0, fmt.Errorf("%w: block header length %d", errCorrupt, n)
	}
	return n, nil
}

// parseHeader checks and parses a whole block header b (len(b) ==
// headerLen). Lengths are checked against the limits for the block's type,
// so the caller may allocate them.
func parseHeader(b []byte) (blockHeader, error) {
	n, err := headerLen(b)
	if err != nil {
		return blockHeader{}, err
	}
	if len(b) != n {
		return blockHeader{}, fmt.Errorf("%w: block header length %d, have %d bytes", errCorrupt, n, len(b))
	}
	if got, want := crc(b[:n-4]), binary.LittleEndian.Uint32(b[n-4:]); got != want {
		return blockHeader{}, fmt.Errorf("block header %w (crc %08x, stored %08x)", errChecksum, got, want)
	}
	h := blockHeader{
		typ:        b[4],
		codec:      b[5],
		hdrLen:     n,
		seq:        binary.LittleEndian.Uint32(b[8:]),
		clen:       int(binary.LittleEndian.Uint32(b[12:])),
		ulen:       int(binary.LittleEndian.Uint32(b[16:])),
		records:    int(binary.LittleEndian.Uint32(b[20:])),
		first:      int64(binary.LittleEndian.Uint64(b[24:])),
		last:       int64(binary.LittleEndian.Uint64(b[32:])),
		payloadCRC: binary.LittleEndian.Uint32(b[40:]),
	}
	limit := MaxBlockSize
	if h.typ == blockIndex {
		limit = MaxIndexSize
	}
	if h.clen > limit || h.ulen > limit {
		return h, fmt.Errorf("%w: block of %d bytes (%d uncompressed) exceeds the limit of %d", errCorrupt, h.clen, h.ulen, limit)
	}
	if h.codec == codecNone && h.clen != h.ulen {
		return h, fmt.Errorf("%w: uncompressed block with %d stored and %d uncompressed bytes", errCorrupt, h.clen, h.ulen)
	}
	if h.namesDict() {
		if n < dictHeaderSize {
			return h, fmt.Errorf("%w: block header of %d bytes for type %d, codec %d (need %d)", errCorrupt, n, h.typ, h.codec, dictHeaderSize)
		}
		h.dictLen = int(binary.LittleEndian.Uint32(b[44:]))
		h.dictCRC = binary.LittleEndian.Uint32(b[48:])
		if h.dictLen == 0 || h.dictLen > MaxDictSize {
			return h, fmt.Errorf("%w: session dictionary of %d bytes (limit %d)", errCorrupt, h.dictLen, MaxDictSize)
		}
	}
	return h, nil
}

// decoder decompresses payloads for every reader; zstd.Decoder.DecodeAll is
// safe for concurrent use and starts no goroutines. WithDecodeAllCapLimit
// makes DecodeAll write no more than the capacity of the buffer it is given,
// which the header's (checked) uncompressed length sets.
var decoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxIndexSize),
		zstd.WithDecodeAllCapLimit(true))
})

// decompress checks payload against h and returns its uncompressed bytes,
// in buf if it is large enough. For codecNone it returns payload itself.
// dicts gives the session dictionary a codec 2 payload needs; nil where
// none may be used (the index block).
func decompress(h *blockHeader, payload, buf []byte, dicts dictSource) ([]byte, error) {
	if len(payload) != h.clen {
		return nil, fmt.Errorf("%w: payload of %d bytes, header says %d", errCorrupt, len(payload), h.clen)
	}
	if got := crc(payload); got != h.payloadCRC {
		return nil, fmt.Errorf("payload %w (crc %08x, stored %08x)", errChecksum, got, h.payloadCRC)
	}
	var (
		d   *zstd.Decoder
		err error
	)
	switch {
	case h.codec == codecNone:
		return payload, nil
	case h.codec == codecZstd:
		d, err = decoder()
	case h.codec == codecZstdDict && dicts != nil && isData(h.typ):
		d, err = dicts.decoder(h.dictLen, h.dictCRC)
	default:
		return nil, fmt.Errorf("%w: unknown codec %d", errCorrupt, h.codec)
	}
	if err != nil {
		return nil, err
	}
	if cap(buf) < h.ulen {
		buf = make([]byte, 0, h.ulen)
	}
	out, err := d.DecodeAll(payload, buf[:0:h.ulen])
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", errCorrupt, err)
	}
	if len(out) != h.ulen {
		return nil, fmt.Errorf("%w: payload decompressed to %d bytes, header says %d", errCorrupt, len(out), h.ulen)
	}
	return out, nil
}

// encodeBlock appends a whole block (header and payload) holding raw to dst.
// It compresses with enc (codec 1), or with dict's encoder if dict is not
// nil (codec 2), storing raw bytes instead when compression does not help.
func encodeBlock(dst []byte, enc *zstd.Encoder, dict *sessionDict, h blockHeader, raw []byte) []byte {
	start := len(dst)
	h.codec = codecZstd
	if dict != nil {
		h.codec, enc, h.dictLen, h.dictCRC = codecZstdDict, dict.enc, len(dict.content), dict.sum
	}
	n := h.headerSize()
	dst = append(dst, make([]byte, n)...)
	dst = enc.EncodeAll(raw, dst)
	if len(dst)-start-n >= len(raw) {
		h.dictLen, h.dictCRC = 0, 0
		return appendBlock(dst[:start], h, codecNone, raw, len(raw))
	}
	return finishBlock(dst, start, h, h.codec, len(raw))
}

// appendDictBlock appends a dictionary block numbered seq holding a copy
// of the session dictionary d, compressed with enc (codec 1) or stored
// (codec 0) if that does not make it smaller.
func appendDictBlock(dst []byte, enc *zstd.Encoder, d *sessionDict, seq uint32) []byte {
	start := len(dst)
	h := blockHeader{typ: blockDict, seq: seq, dictLen: len(d.content), dictCRC: d.sum}
	n := h.headerSize()
	dst = append(dst, make([]byte, n)...)
	dst = enc.EncodeAll(d.content, dst)
	if len(dst)-start-n >= len(d.content) {
		return appendBlock(dst[:start], h, codecNone, d.content, len(d.content))
	}
	return finishBlock(dst, start, h, codecZstd, len(d.content))
}

// dictBlockContent checks the payload of the dictionary block h and
// returns the dictionary it holds (in a new slice). Its errors say that
// the block is a copy whose loss costs no records.
func dictBlockContent(h *blockHeader, payload []byte) ([]byte, error) {
	content, err := func() ([]byte, error) {
		if h.codec == codecZstdDict {
			return nil, fmt.Errorf("%w: codec %d", errCorrupt, h.codec)
		}
		if h.ulen != h.dictLen {
			return nil, fmt.Errorf("%w: %d bytes naming a dictionary of %d", errCorrupt, h.ulen, h.dictLen)
		}
		content, err := decompress(h, payload, nil, nil)
		if err != nil {
			return nil, err
		}
		if got := crc(content); got != h.dictCRC {
			return nil, fmt.Errorf("dictionary %w (crc %08x, header says %08x)", errChecksum, got, h.dictCRC)
		}
		return content, nil
	}()
	if err != nil {
		return nil, fmt.Errorf("session dictionary copy (no records lost): %w", err)
	}
	if h.codec == codecNone {
		content = bytes.Clone(content)
	}
	return content, nil
}

// appendBlock appends a block of header h holding payload, stored with
// codec, of ulen bytes once decoded.
func appendBlock(dst []byte, h blockHeader, codec uint8, payload []byte, ulen int) []byte {
	start := len(dst)
	h.codec = codec
	dst = append(dst, make([]byte, h.headerSize())...)
	dst = append(dst, payload...)
	return finishBlock(dst, start, h, codec, ulen)
}

// finishBlock fills in the header at dst[start:] of the block whose
// payload follows it to the end of dst.
func finishBlock(dst []byte, start int, h blockHeader, codec uint8, ulen int) []byte {
	h.codec = codec
	h.hdrLen = h.headerSize()
	payload := dst[start+h.hdrLen:]
	h.clen = len(payload)
	h.ulen = ulen
	h.payloadCRC = crc(payload)
	h.put(dst[start:])
	return dst
}

// fileHeader returns the file header.
func fileHeader() []byte {
	b := make([]byte, fileHeaderSize)
	copy(b, fileMagic[:])
	binary.LittleEndian.PutUint16(b[8:], Version)
	binary.LittleEndian.PutUint16(b[10:], 0)
	binary.LittleEndian.PutUint32(b[12:], crc(b[:12]))
	return b
}

var errHeaderChecksum = fmt.Errorf("file header %w", errChecksum)

// checkFileHeader checks the file header b. n is how many bytes of it the
// file holds (fewer than fileHeaderSize for a cut file); next holds the
// bytes that follow it (up to maxBlockHeaderSize), read only when the magic
// is wrong. A damaged header is a *DamageError (the blocks may still be
// read): a checksum mismatch, or a magic that is wrong while the rest of
// the header checks out with the right one or the first block's header is
// intact. Otherwise a wrong magic is ErrNotSession, a newer version
// ErrVersion.
func checkFileHeader(b, next []byte) error {
	n := len(b)
	if n < fileHeaderSize {
		if n <= len(fileMagic) && string(b) == string(fileMagic[:n]) ||
			n > len(fileMagic) && [8]byte(b[:8]) == fileMagic {
			return &DamageError{Offset: 0, Block: -1, Err: io.ErrUnexpectedEOF}
		}
		return ErrNotSession
	}
	stored := binary.LittleEndian.Uint32(b[12:])
	version := binary.LittleEndian.Uint16(b[8:])
	if [8]byte(b[:8]) != fileMagic {
		fixed := append(fileMagic[:], b[8:12]...)
		switch {
		case crc(fixed) == stored:
			// Only the magic is damaged: the version is what it says.
		case blockHeaderAt(next):
			// The version cannot be trusted: read the blocks as this one
			// (which reads those of every earlier version).
			version = Version
		default:
			return ErrNotSession
		}
		if version < minVersion || version > Version {
			return fmt.Errorf("%w %d (this reader knows versions %d to %d)", ErrVersion, version, minVersion, Version)
		}
		return &DamageError{Offset: 0, Block: -1, Err: fmt.Errorf("%w (% x)", errFileMagic, b[:8])}
	}
	if crc(b[:12]) != stored {
		return &DamageError{Offset: 0, Block: -1, Err: errHeaderChecksum}
	}
	if version < minVersion || version > Version {
		return fmt.Errorf("%w %d (this reader knows versions %d to %d)", ErrVersion, version, minVersion, Version)
	}
	return nil
}

// blockHeaderAt reports whether p begins with an intact block header.
func blockHeaderAt(p []byte) bool {
	if len(p) < blockPrefixSize {
		return false
	}
	n, err := headerLen(p)
	if err != nil || n > len(p) {
		return false
	}
	_, err = parseHeader(p[:n])
	return err == nil
}
