package capture

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
)

// tlsKeyLogSecrets is the pcapng Decryption Secrets Block type of an NSS
// key log ("TLSK", pcapng specification §4.8).
const tlsKeyLogSecrets = 0x544c534b

// Pcap is a packet capture file being recorded: NewPcap reads its header
// (so a file that is not a capture is refused before anything is written),
// Record records it.
type Pcap struct {
	pr   *pcapfile.Reader
	hr   *readAhead
	read int64
	rec  *Recorder // once Record has begun
}

// NewPcap starts reading a packet capture (pcap or pcapng, optionally
// gzip'd or zstd'd) from r. It returns an error wrapping
// pcapfile.ErrNotCapture when r is not a capture. TLS key logs embedded in
// a pcapng file (Decryption Secrets Blocks) are added to keys, if not nil;
// pass the same key log in the Options of Record. Most callers want
// RecordPcap.
func NewPcap(r io.Reader, keys *tlsdec.KeyLog) (*Pcap, error) {
	return newPcap(r, keys, false)
}

// newPcap is NewPcap, also hashing the file with SHA-256 if sha.
func newPcap(r io.Reader, keys *tlsdec.KeyLog, sha bool) (*Pcap, error) {
	p := &Pcap{}
	p.hr = newReadAhead(r, &p.read, sha)
	pr, err := pcapfile.NewReader(p.hr, pcapfile.Options{Secrets: func(typ uint32, data []byte) {
		if typ == tlsKeyLogSecrets && keys != nil {
			if p.rec != nil {
				// The secrets come at their place in the file: what
				// came before is parsed without them, as it would be
				// on one goroutine (Options.Workers).
				p.rec.drain()
			}
			keys.Load(bytes.NewReader(data))
		}
	}})
	if err != nil {
		p.hr.Close()
		return nil, err
	}
	p.pr = pr
	return p, nil
}

// Close releases the capture's decompressor and stops reading ahead; it
// does not close r.
func (p *Pcap) Close() error {
	p.hr.Close()
	return p.pr.Close()
}

// Record sends every packet through a Recorder with opts, writing to
// sink, until the capture ends, turns out damaged, or ctx is done (then it
// stops between two packets, and Result.Note says so). It writes neither
// Meta nor Summary (see RecordPcap). progress, if set, is called every
// 1024 packets with the bytes read from the capture file so far. It
// returns the sink's error if writing fails; a capture damaged part way is
// not an error (see Result.ReadErr).
func (p *Pcap) Record(ctx context.Context, sink Sink, opts Options, progress func(read int64, st Stats)) (Result, error) {
	var res Result
	rec := NewRecorder(sink, opts)
	p.rec = rec
	for {
		if ctx.Err() != nil {
			res.Note = fmt.Sprintf("%v before the end of the capture", context.Cause(ctx))
			break
		}
		pkt, err := p.pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			res.ReadErr = err
			res.Note = "capture file damaged: " + err.Error()
			break
		}
		if err := rec.Packet(Packet{Time: pkt.Time, LinkType: uint16(pkt.LinkType), Data: pkt.Data, Length: pkt.Length}); err != nil {
			return res, err
		}
		if progress != nil && rec.s.stats.Packets%1024 == 0 {
			progress(p.read, *rec.s.stats)
		}
	}
	if err := rec.Close(); err != nil {
		return res, err
	}
	res.Stats = rec.Stats()
	res.Read = p.read
	if res.Note == "" {
		res.XXH64, res.SHA256 = p.hr.Sums()
	}
	return res, nil
}

// totals are the capture's formats.Totals for the formats.FileSink's Summary: the bytes of
// the capture file as given.
func (p *Pcap) totals() formats.Totals {
	if p.rec == nil {
		return formats.Totals{Bytes: p.read}
	}
	st := p.rec.Stats()
	return formats.Totals{Packets: st.Packets, Bytes: p.read, Last: st.Last}
}

// PcapOptions configure RecordPcap. The zero value records every TCP
// connection that carries HTTP into Output, redacting Secret values.
type PcapOptions struct {
	// Options configure the Recorder. KeyLog, when set, also receives the
	// TLS key logs a pcapng file embeds (nil: only those are used).
	// Workers 0 means defaultWorkers(runtime.GOMAXPROCS(0)) here:
	// connections are parsed on every core when there are more than two
	// (1 parses them on the calling goroutine).
	Options
	// Output is where the session goes: Path, or Out (a stream), and the
	// Writer's options. RecordPcap sets its Meta and formats.Totals; MaxSize,
	// MaxDuration and Rotate are for live recordings and are refused.
	// Writer options left zero get the defaults of a capture file (see
	// PcapWriterOptions), not the formats.Writer's.
	Output formats.FileSinkOptions
	// Tool names the recorder in Meta ("wtrace v0.3.0").
	Tool string
	// Name is the capture file's name ("stdin" for a stream): Meta's
	// Description and CaptureFile carry its base name.
	Name string
	// Progress, if set, is called every 1024 packets (see Pcap.Record).
	Progress func(read int64, st Stats)
	// CaptureSHA256 also hashes the capture file with SHA-256 for the
	// Summary, beside its XXH64. It costs about 0.3 s of CPU per 500 MB
	// (the XXH64 0.03 s); it lets sha256sum match a session to its
	// capture.
	CaptureSHA256 bool
}

// RecordPcap records the packet capture read from in (pcap or pcapng,
// optionally gzip'd or zstd'd) into a session file, end to end: it checks
// that in is a capture (an error wrapping pcapfile.ErrNotCapture comes
// before anything is created), creates the session file with its Meta
// (formats.NewMeta, source pcap), records every packet (Pcap.Record), and closes
// the file with its Summary: the counts, the bytes of the capture file,
// its XXH64 (and SHA-256, if asked) when it was read to its end, and a
// note when it was damaged
// or ctx stopped the recording early. Errors of the session file are
// *formats.OutputError.
func RecordPcap(ctx context.Context, in io.Reader, opts PcapOptions) (Result, error) {
	out := opts.Output
	if out.MaxSize != 0 || out.MaxDuration != 0 || out.Rotate {
		return Result{}, errors.New("capture: size and duration limits and rotation apply to live recordings, not to a capture file")
	}
	if opts.KeyLog == nil {
		keys, err := tlsdec.ParseKeyLog(strings.NewReader(""))
		if err != nil {
			return Result{}, err
		}
		opts.KeyLog = keys
	}
	pc, err := newPcap(in, opts.KeyLog, opts.CaptureSHA256)
	if err != nil {
		return Result{}, err
	}
	defer pc.Close()
	out.Writer = PcapWriterOptions(out.Writer)
	base := filepath.Base(opts.Name)
	out.Meta = formats.NewMeta(opts.Tool, formats.SourcePcap, "pcap "+base, opts.KeepSecrets)
	out.Meta.CaptureFile = base
	out.Totals = pc.totals
	fs, err := formats.NewFileSink(out)
	if err != nil {
		return Result{}, err
	}
	if opts.Workers == 0 {
		opts.Workers = defaultWorkers(runtime.GOMAXPROCS(0))
	}
	res, err := pc.Record(ctx, fs, opts.Options, opts.Progress)
	cerr := fs.Close(formats.Ending{Note: res.Note, CaptureSHA256: res.SHA256, CaptureXXH64: res.XXH64})
	res.Files, res.Size = fs.Names(), fs.Size()
	if err == nil {
		err = cerr
	}
	return res, err
}

// PcapBlockSize is the size of the blocks of a session recorded from a
// capture file (records before compression), unless its WriterOptions say
// otherwise.
const PcapBlockSize = 4 << 20

// PcapWriterOptions returns w with the zero fields set to what a
// recording of a capture file uses: blocks of PcapBlockSize cut by size
// only, zstd's default level, and no session dictionary (unless the
// blocks are made smaller than PcapBlockSize).
//
// A live or proxy recording cuts a block every second (its crash
// tolerance: a killed recorder loses at most the last second), so its
// blocks are as small as a second of traffic, tens of KiB for a few
// watches, and the session dictionary is what lets a block refer to
// what came before. A capture file is read hundreds of times faster
// than it was captured and stays on disk: a killed recorder loses the
// blocks it had not yet written, a fraction of a second of its own work,
// and is run again. Its blocks can be cut by size, large enough that
// zstd's window reaches the earlier versions of the objects a block's
// events modify: on the real 8-minute watch soak of docs/BENCHMARKS.md
// the session is 9.5% of the capture against 15.9% with one-second
// blocks, and at this size the default level costs no more CPU than the
// fastest. A block still decodes alone (random access reads at most 4
// MiB), and needs no dictionary.
func PcapWriterOptions(w formats.WriterOptions) formats.WriterOptions {
	if w.BlockSize == 0 {
		w.BlockSize = PcapBlockSize
	}
	if w.BlockInterval == 0 {
		w.BlockInterval = -1
	}
	if w.Level == 0 {
		w.Level = int(zstd.SpeedDefault)
	}
	if w.DictSize == 0 && w.BlockSize >= PcapBlockSize {
		// Blocks this large reach further back than the dictionary
		// would (on the soak, 12.1% with it at 8 MiB, 10.2% without);
		// smaller ones still gain from it (2 MiB: 12.8% against 13.3%).
		w.DictSize = -1
	}
	return w
}

// readAhead reads the capture file on a goroutine of its own, a chunk
// ahead of the parser, and hashes it there (the capture's XXH64, and
// SHA-256 if asked, in the Summary): reading and hashing take the second
// core, off the recording path. Read counts the bytes it hands out in *n.
// Close stops the goroutine once its current Read of r returns.
//
// The capture's identity is XXH64 by default, not a cryptographic hash:
// it tells captures apart (as xxhsum does) at 19 GB/s, where SHA-256 runs
// at 1.6 GB/s and took a tenth of a recording's CPU (BenchmarkCaptureDigest).
type readAhead struct {
	r      io.Reader
	x      *xxhash.Digest
	h      hash.Hash   // nil: no SHA-256
	chunks chan []byte // read and hashed, in order
	free   chan []byte
	stop   chan struct{}
	done   chan struct{}
	err    error // why the goroutine stopped (io.EOF at the end); read after chunks closes
	buf    []byte
	cur    []byte
	n      *int64
	once   sync.Once
}

const (
	readAheadChunk  = 1 << 20
	readAheadChunks = 3
)

func newReadAhead(r io.Reader, n *int64, sha bool) *readAhead {
	a := &readAhead{r: r, x: xxhash.New(), n: n, chunks: make(chan []byte, readAheadChunks-1),
		free: make(chan []byte, readAheadChunks), stop: make(chan struct{}), done: make(chan struct{})}
	if sha {
		a.h = sha256.New()
	}
	for range readAheadChunks {
		a.free <- nil // allocated when first used
	}
	go a.run()
	return a
}

func (a *readAhead) run() {
	defer close(a.done)
	defer close(a.chunks)
	for {
		var buf []byte
		select {
		case buf = <-a.free:
		case <-a.stop:
			return
		}
		if buf == nil {
			buf = make([]byte, readAheadChunk)
		}
		n, err := a.r.Read(buf[:cap(buf)])
		for n == 0 && err == nil {
			n, err = a.r.Read(buf[:cap(buf)])
		}
		if n > 0 {
			a.x.Write(buf[:n])
			if a.h != nil {
				a.h.Write(buf[:n])
			}
			select {
			case a.chunks <- buf[:n]:
			case <-a.stop:
				return
			}
		}
		if err != nil {
			a.err = err
			return
		}
	}
}

func (a *readAhead) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.buf != nil {
			a.free <- a.buf[:0]
			a.buf = nil
		}
		b, ok := <-a.chunks
		if !ok {
			return 0, a.err
		}
		a.buf, a.cur = b, b
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	*a.n += int64(n)
	return n, nil
}

// Sums returns the hex XXH64 and SHA-256 (if asked for, else "") of
// everything read from r; call it once Read has returned io.EOF.
func (a *readAhead) Sums() (xxh64, sha string) {
	<-a.done
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], a.x.Sum64())
	xxh64 = hex.EncodeToString(b[:])
	if a.h != nil {
		sha = hex.EncodeToString(a.h.Sum(nil))
	}
	return xxh64, sha
}

// Close stops reading ahead.
func (a *readAhead) Close() { a.once.Do(func() { close(a.stop) }) }

// defaultWorkers is how many connections RecordPcap parses at once on
// procs cores. On two cores the session writer's compression already
// keeps the second one busy, and parsing on workers only adds the cost of
// handing records over: BenchmarkRecordSoak on the 500 MB soak, 2 cores,
// 1.23–1.31 s with 2 workers against 1.15–1.22 s on one goroutine
// (docs/BENCHMARKS.md, "Round 5").
func defaultWorkers(procs int) int {
	if procs <= 2 {
		return 1
	}
	return procs
}
