package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"

	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
)

// PcapHooks let a caller follow and stop Pcap.Record. The zero value does
// neither.
type PcapHooks struct {
	// Progress, if set, is called every 1024 packets with the bytes read
	// from the capture file so far.
	Progress func(read int64, st Stats)
	// Stop, if set, is polled between packets; when it returns true the
	// recording ends there, cleanly.
	Stop func() bool
}

// PcapResult says what Pcap.Record read and recorded.
type PcapResult struct {
	Stats
	// Read is the number of bytes read from the capture file (as given,
	// before decompression).
	Read int64
	// SHA256 is the hex SHA-256 of the capture file, if it was read to
	// its end.
	SHA256 string
	// ReadErr is set when the capture file is damaged or cut: every packet
	// before the damage was recorded, nothing after it.
	ReadErr error
	// Stopped is set when Hooks.Stop ended the recording early.
	Stopped bool
}

// tlsKeyLogSecrets is the pcapng Decryption Secrets Block type of an NSS
// key log ("TLSK", pcapng specification §4.8).
const tlsKeyLogSecrets = 0x544c534b

// Pcap is a packet capture file being recorded: NewPcap reads its header
// (so a file that is not a capture is refused before anything is written),
// Record records it.
type Pcap struct {
	pr   *pcapfile.Reader
	hr   *hashingReader
	read int64
	opts Options
}

// NewPcap starts reading a packet capture (pcap or pcapng, optionally
// gzip'd or zstd'd) from r. It returns an error wrapping
// pcapfile.ErrNotCapture when r is not a capture. TLS key logs embedded in
// a pcapng file (Decryption Secrets Blocks) are added to keys, if not nil;
// pass the same key log in the Options of Record.
func NewPcap(r io.Reader, keys *tlsdec.KeyLog) (*Pcap, error) {
	p := &Pcap{}
	p.hr = &hashingReader{r: r, h: sha256.New(), n: &p.read}
	pr, err := pcapfile.NewReader(p.hr, pcapfile.Options{Secrets: func(typ uint32, data []byte) {
		if typ == tlsKeyLogSecrets && keys != nil {
			keys.Load(bytes.NewReader(data))
		}
	}})
	if err != nil {
		return nil, err
	}
	p.pr = pr
	return p, nil
}

// Close releases the capture's decompressor; it does not close r.
func (p *Pcap) Close() error { return p.pr.Close() }

// Record sends every packet through a Recorder with opts, then writes a
// Summary record. The caller writes the Meta record to sink first and
// closes the file after. It returns the sink's error if writing fails; a
// capture damaged part way is not an error (see PcapResult.ReadErr).
func (p *Pcap) Record(sink Sink, opts Options, hooks PcapHooks) (PcapResult, error) {
	var res PcapResult
	rec := NewRecorder(sink, opts)
	for {
		if hooks.Stop != nil && hooks.Stop() {
			res.Stopped = true
			break
		}
		pkt, err := p.pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			res.ReadErr = err
			break
		}
		if err := rec.Packet(pkt); err != nil {
			return res, err
		}
		if hooks.Progress != nil && rec.s.stats.Packets%1024 == 0 {
			hooks.Progress(p.read, rec.s.stats)
		}
	}
	if err := rec.Close(); err != nil {
		return res, err
	}
	res.Stats = rec.Stats()
	res.Read = p.read
	sum := &formats.Summary{
		Time:      res.Last,
		Packets:   res.Packets,
		Bytes:     res.Read,
		Conns:     res.Conns,
		Exchanges: res.Exchanges,
		Events:    res.Events,
		Anomalies: res.Anomalies,
	}
	switch {
	case res.ReadErr != nil:
		sum.Note = "capture file damaged: " + res.ReadErr.Error()
	case res.Stopped:
		sum.Note = "stopped by the user before the end of the capture"
	default:
		res.SHA256 = hex.EncodeToString(p.hr.h.Sum(nil))
		sum.CaptureSHA256 = res.SHA256
	}
	if err := sink.Write(sum); err != nil {
		return res, err
	}
	return res, nil
}

// hashingReader counts and hashes what passes through it.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n *int64
}

func (c *hashingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.h.Write(p[:n])
		*c.n += int64(n)
	}
	return n, err
}
