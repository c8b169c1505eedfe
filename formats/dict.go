package formats

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The session dictionary (format version 2, FORMAT.md §4.1): the first
// DictSize bytes of a session's records — the uncompressed payloads of its
// first data blocks, numbered 0, 1, 2…, one after the other — used as a
// zstd raw-content dictionary by every later data block (codec 2). Watch
// events of one resource repeat their structure and most of their
// content, which a 1-second block alone cannot see. The dictionary is
// not stored again: a reader takes it from the blocks themselves, and a
// codec 2 block header names its length and CRC-32C, so a wrong or
// missing dictionary is damage of that block, never a misread.

// DefaultDictSize is the dictionary size a zero WriterOptions.DictSize
// means: on watch traffic 1 MiB cuts the file by a fifth against none,
// 128 KiB by a tenth (docs/BENCHMARKS.md).
const DefaultDictSize = 1 << 20

// MaxDictSize bounds the session dictionary a reader accepts (and a Writer
// builds): a reader holds it, and the blocks it is taken from, in memory.
const MaxDictSize = 4 << 20

// errNoDict is a codec 2 block whose dictionary is not at hand: a block
// it is taken from is damaged or missing.
var errNoDict = fmt.Errorf("%w: session dictionary unavailable", errCorrupt)

// sessionDict is a Writer's dictionary once complete: its content, CRC and
// an encoder using it.
type sessionDict struct {
	content []byte
	sum     uint32
	enc     *zstd.Encoder
}

// dictID is the zstd dictionary ID under which a dictionary of CRC sum is
// named in the frames of codec 2 payloads: the CRC, or 1 if it is 0 (zstd
// reserves ID 0 for "no dictionary").
func dictID(sum uint32) uint32 { return max(sum, 1) }

func newSessionDict(content []byte, level zstd.EncoderLevel) (*sessionDict, error) {
	d := &sessionDict{content: content, sum: crc(content)}
	var err error
	d.enc, err = zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(compressors()),
		zstd.WithEncoderCRC(false),
		zstd.WithWindowSize(dictWindow),
		zstd.WithEncoderDictRaw(dictID(d.sum), content))
	if err != nil {
		return nil, fmt.Errorf("formats: session dictionary: %w", err)
	}
	return d, nil
}

// dictSource gives the decoder of a codec 2 block's dictionary, of n bytes
// with CRC sum.
type dictSource interface {
	decoder(n int, sum uint32) (*zstd.Decoder, error)
}

// dictDecoder returns a decoder for the raw-content dictionary content.
func dictDecoder(content []byte, sum uint32) (*zstd.Decoder, error) {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxIndexSize),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderDictRaw(dictID(sum), content))
	if err != nil {
		return nil, fmt.Errorf("%w: session dictionary: %v", errCorrupt, err)
	}
	return d, nil
}

// prefixDict collects a stream's dictionary as a blockReader reads the
// first blocks, in block order from block 0; a block missing or damaged
// among them ends the collection (later codec 2 blocks are then damage).
// It holds at most MaxDictSize bytes.
type prefixDict struct {
	content []byte
	next    uint32 // number of the block that continues it
	broken  bool
	dec     *zstd.Decoder // for content[:n], CRC sum
	n       int
	sum     uint32
}

// add offers the payload of data block seq, as read, stored with codec.
// The dictionary comes before the first block that uses it: collection
// stops there.
func (p *prefixDict) add(seq uint32, codec uint8, payload []byte) {
	if codec == codecZstdDict {
		p.broken = true
	}
	if p.broken || len(p.content) >= MaxDictSize {
		return
	}
	if seq != p.next {
		p.broken = true
		return
	}
	p.next++
	p.content = append(p.content, payload[:min(len(payload), MaxDictSize-len(p.content))]...)
}

func (p *prefixDict) decoder(n int, sum uint32) (*zstd.Decoder, error) {
	if p.dec != nil && p.n == n && p.sum == sum {
		return p.dec, nil
	}
	return prefixDecoder(p.content, n, sum, &p.dec, &p.n, &p.sum)
}

// prefixDecoder checks that content holds the dictionary of n bytes with
// CRC sum and returns a decoder for it, kept in *dec, *dn, *dsum.
func prefixDecoder(content []byte, n int, sum uint32, dec **zstd.Decoder, dn *int, dsum *uint32) (*zstd.Decoder, error) {
	if len(content) < n {
		return nil, fmt.Errorf("%w (%d of its %d bytes intact in the first blocks)", errNoDict, len(content), n)
	}
	if got := crc(content[:n]); got != sum {
		return nil, fmt.Errorf("%w (the first blocks' %d bytes have crc %08x, the block names %08x)", errNoDict, n, got, sum)
	}
	d, err := dictDecoder(content[:n:n], sum)
	if err != nil {
		return nil, err
	}
	if *dec != nil {
		(*dec).Close()
	}
	*dec, *dn, *dsum = d, n, sum
	return d, nil
}

// fileDict is a File's dictionary, read from the first blocks its index
// lists (numbered 0, 1, 2… from the start) when a codec 2 block is first
// read. Safe for concurrent use.
type fileDict struct {
	f   *File
	mu  sync.Mutex
	dec *zstd.Decoder
	n   int
	sum uint32
}

func (d *fileDict) decoder(n int, sum uint32) (*zstd.Decoder, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dec != nil && d.n == n && d.sum == sum {
		return d.dec, nil
	}
	var (
		content []byte
		raw     []byte
	)
	for i, bi := range d.f.idx.Blocks {
		if len(content) >= n {
			break
		}
		if bi.Size > MaxBlockSize+maxBlockHeaderSize {
			break
		}
		if int64(cap(raw)) < bi.Size {
			raw = make([]byte, bi.Size)
		}
		raw = raw[:bi.Size]
		if k, _ := d.f.r.ReadAt(raw, bi.Offset); k < len(raw) {
			break
		}
		h, err := parseBlock(raw, blockData)
		if err != nil || h.seq != uint32(i) {
			break
		}
		payload, err := decompress(&h, raw[h.hdrLen:], nil, nil)
		if err != nil {
			break
		}
		content = append(content, payload[:min(len(payload), n-len(content))]...)
	}
	return prefixDecoder(content, n, sum, &d.dec, &d.n, &d.sum)
}

// dictWindow is the zstd window of codec 2 frames: the default dictionary
// and a block fit it, and each compressor of a Writer holds about twice
// that (instead of about 9 MiB with zstd's default 8 MiB window). On the
// soak of docs/BENCHMARKS.md 1, 2 and 8 MiB give the same size to 0.1%.
const dictWindow = 2 << 20
