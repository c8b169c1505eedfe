package formats

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The session dictionary (format version 2, FORMAT.md §4.1): the first
// DictSize bytes of a session's records — the uncompressed payloads of its
// first data blocks, numbered 0, 1, 2…, one after the other — used as a
// zstd raw-content dictionary by every later data block (codec 2). Watch
// events of one resource repeat their structure and most of their
// content, which a 1-second block alone cannot see. The Writer also
// stores the dictionary in dictionary blocks (type 3): one right after
// the block that completes it, before the first codec 2 block, and one
// more each time the file has grown by DictCopyEvery. A reader takes it
// from the first blocks or from any intact copy; a codec 2 block header
// names its length and CRC-32C, so a wrong or missing dictionary is damage
// of that block, never a misread, and damage to any one block (one of the
// first, or a copy) costs only that block's records.

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

// prefixDict is a stream's dictionary source (a blockReader's): the
// records of the first blocks, collected as they are read, in block order
// from block 0 (a block missing or damaged among them ends the
// collection), and the last intact dictionary block read. at, if set, is
// the whole file, searched for a dictionary block when neither holds the
// dictionary a codec 2 block names (Recover and an index rebuild read a
// file, not a stream). It holds at most 2 × MaxDictSize bytes.
type prefixDict struct {
	content []byte
	next    uint32 // number of the block that continues it
	broken  bool
	stored  []byte // the last intact dictionary block's content
	at      io.ReaderAt
	size    int64
	found   dictFound
	dec     *zstd.Decoder // for the dictionary of n bytes, CRC sum
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

// addCopy offers the content of an intact dictionary block.
func (p *prefixDict) addCopy(content []byte) { p.stored = content }

func (p *prefixDict) decoder(n int, sum uint32) (*zstd.Decoder, error) {
	if p.dec != nil && p.n == n && p.sum == sum {
		return p.dec, nil
	}
	if d, err := prefixDecoder(p.content, n, sum, &p.dec, &p.n, &p.sum); err == nil {
		return d, nil
	} else if content := p.stored; len(content) == n && crc(content) == sum {
		return prefixDecoder(content, n, sum, &p.dec, &p.n, &p.sum)
	} else if p.at != nil {
		if content := p.found.find(p.at, p.size, n, sum); content != nil {
			return prefixDecoder(content, n, sum, &p.dec, &p.n, &p.sum)
		}
		return nil, err
	} else {
		return nil, err
	}
}

// prefixDecoder checks that content holds the dictionary of n bytes with
// CRC sum and returns a decoder for it, kept in *dec, *dn, *dsum.
func prefixDecoder(content []byte, n int, sum uint32, dec **zstd.Decoder, dn *int, dsum *uint32) (*zstd.Decoder, error) {
	if len(content) < n {
		return nil, fmt.Errorf("%w (%d of its %d bytes intact in the first blocks, no intact copy)", errNoDict, len(content), n)
	}
	if got := crc(content[:n]); got != sum {
		return nil, fmt.Errorf("%w (the first blocks' %d bytes have crc %08x, the block names %08x; no intact copy)", errNoDict, n, got, sum)
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

// dictFound remembers the result of searching a file for a dictionary
// block (findDictAt), so that the blocks of a file whose copies are all
// damaged search it once, not once each. A sound file has one dictionary;
// a file whose blocks name many (crafted) is searched for the first
// maxDictSearches only, so reading it stays linear in its size.
type dictFound struct {
	searches int
	n        int
	sum      uint32
	content  []byte // nil: none found
}

const maxDictSearches = 4

func (f *dictFound) find(r io.ReaderAt, size int64, n int, sum uint32) []byte {
	if f.searches > 0 && f.n == n && f.sum == sum {
		return f.content
	}
	if f.searches >= maxDictSearches {
		return nil
	}
	f.searches++
	f.n, f.sum, f.content = n, sum, findDictAt(r, size, n, sum)
	return f.content
}

// findDictAt searches r (a session file of size bytes) for an intact
// dictionary block holding the dictionary of n bytes with CRC sum, at any
// offset a block magic starts (so damage elsewhere does not hide it), and
// returns its content, or nil. It reads the file once, readChunk bytes at
// a time, plus each candidate block.
func findDictAt(r io.ReaderAt, size int64, n int, sum uint32) []byte {
	buf := make([]byte, readChunk+maxBlockHeaderSize)
	for off := int64(fileHeaderSize); off < size; off += readChunk {
		k, _ := r.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		chunk := buf[:k]
		for i := 0; i < min(k, readChunk); i++ {
			j := bytes.Index(chunk[i:], blockMagic[:])
			if j < 0 || i+j >= readChunk {
				break
			}
			i += j
			if content := dictBlockAt(r, size, off+int64(i), chunk[i:], n, sum); content != nil {
				return content
			}
		}
	}
	return nil
}

// dictBlockAt returns the content of the dictionary block at off, whose
// first bytes are p, if it is intact and holds the dictionary of n bytes
// with CRC sum; else nil.
func dictBlockAt(r io.ReaderAt, size, off int64, p []byte, n int, sum uint32) []byte {
	if len(p) < blockPrefixSize || p[4] != blockDict {
		return nil
	}
	hl, err := headerLen(p)
	if err != nil || hl > len(p) {
		return nil
	}
	h, err := parseHeader(p[:hl])
	if err != nil || h.dictLen != n || h.dictCRC != sum || h.size() > size-off {
		return nil
	}
	raw := make([]byte, h.size())
	if k, _ := r.ReadAt(raw, off); k < len(raw) {
		return nil
	}
	content, err := dictBlockContent(&h, raw[hl:])
	if err != nil {
		return nil
	}
	return content
}

// fileDict is a File's dictionary source: the first blocks its index lists
// (numbered 0, 1, 2… from the start), read when a codec 2 block is first
// read, or else a dictionary block found anywhere in the file. Safe for
// concurrent use.
type fileDict struct {
	f     *File
	mu    sync.Mutex
	dec   *zstd.Decoder
	n     int
	sum   uint32
	found dictFound
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
	dec, err := prefixDecoder(content, n, sum, &d.dec, &d.n, &d.sum)
	if err == nil {
		return dec, nil
	}
	if stored := d.found.find(d.f.r, d.f.size, n, sum); stored != nil {
		return prefixDecoder(stored, n, sum, &d.dec, &d.n, &d.sum)
	}
	return nil, err
}

// dictWindow is the zstd window of codec 2 frames: the default dictionary
// and a block fit it, and each compressor of a Writer holds about twice
// that (instead of about 9 MiB with zstd's default 8 MiB window). On the
// soak of docs/BENCHMARKS.md 1, 2 and 8 MiB give the same size to 0.1%.
const dictWindow = 2 << 20
