// Command pcapcat concatenates copies of pcap files into one large capture
// for benchmarks: each copy is shifted in time to follow the previous one,
// and its client ports are moved so connections of different copies never
// share a 4-tuple. It handles what the wtrace corpus holds: classic pcap,
// Ethernet, IPv4 without options, TCP.
//
//	go run ./tools/pcapcat -o /tmp/big.pcap -min 200MiB ../shared/corpus/*/capture.pcap
//
// With -overlap N the copies overlap instead, like many clients of one
// apiserver: the inputs, one after the other, make one sequence; a new
// copy of it starts every 1/N of its span, so about N copies run at once,
// merged in time order; each copy's clients get an address of their own
// (10.x.y.2), the server keeps its own.
//
//	go run ./tools/pcapcat -o /tmp/soak.pcap -min 500MiB -overlap 20 \
//	    ../shared/corpus/{multi-watch,basic-json,protobuf,gone-410}/capture.pcap
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wtrace/wtrace/internal/outfile"
	"github.com/wtrace/wtrace/internal/units"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

func main() {
	out := flag.String("o", "", "output pcap `file`")
	minSize := flag.String("min", "200MiB", "repeat the inputs until the output is at least this `size` (500MB, 2GiB)")
	server := flag.Int("server-port", 8001, "server `port` (left unchanged)")
	overlap := flag.Int("overlap", 0, "copies running at once (`n`); 0 appends them one after the other")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: pcapcat -o OUT.pcap [-min 200MiB] IN.pcap ...")
		os.Exit(2)
	}
	limit, err := units.ParseSize(*minSize)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := outfile.Check(*out, flag.Args()...); err != nil {
		fmt.Fprintln(os.Stderr, "pcapcat:", err)
		os.Exit(2)
	}
	run := run
	if *overlap > 0 {
		run = func(out string, ins []string, limit int64, server uint16) error {
			return runOverlap(out, ins, limit, server, *overlap)
		}
	}
	if err := run(*out, flag.Args(), limit, uint16(*server)); err != nil {
		fmt.Fprintln(os.Stderr, "pcapcat:", err)
		os.Exit(1)
	}
}

func run(out string, ins []string, limit int64, server uint16) error {
	f, err := outfile.Create(out)
	if err != nil {
		return err
	}
	defer f.Abort() // after Commit: nothing
	w := bufio.NewWriterSize(f, 1<<20)
	var written, lastEnd int64
	wroteHeader := false
	for copyN := 0; written < limit; copyN++ {
		for _, in := range ins {
			// Each file starts one second after the previous one ended.
			var shift int64
			if lastEnd != 0 {
				first, err := firstTime(in)
				if err != nil {
					return fmt.Errorf("%s: %w", in, err)
				}
				shift = lastEnd + 1e9 - first
			}
			last, n, err := copyOne(w, in, shift, uint16(copyN*97+1), server, !wroteHeader)
			if err != nil {
				return fmt.Errorf("%s: %w", in, err)
			}
			wroteHeader = true
			written += n
			lastEnd = max(lastEnd, last)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %d MB\n", out, written>>20)
	return f.Commit()
}

// firstTime returns the first packet time of a pcap.
func firstTime(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var h [40]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return 0, err
	}
	nanos := binary.LittleEndian.Uint32(h[0:4]) == 0xa1b23c4d
	sec := int64(binary.LittleEndian.Uint32(h[24:28]))
	frac := int64(binary.LittleEndian.Uint32(h[28:32]))
	if !nanos {
		frac *= 1000
	}
	return sec*1e9 + frac, nil
}

// copyOne appends the packets of one pcap, shifted by shift ns, with client
// ports moved by portDelta. It returns the last (shifted) time and the
// bytes written.
func copyOne(w io.Writer, path string, shift int64, portDelta, server uint16, header bool) (last, n int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var fh [24]byte
	if _, err := io.ReadFull(r, fh[:]); err != nil {
		return 0, 0, err
	}
	magic := binary.LittleEndian.Uint32(fh[0:4])
	if magic != 0xa1b2c3d4 && magic != 0xa1b23c4d {
		return 0, 0, errors.New("not a little-endian classic pcap")
	}
	if binary.LittleEndian.Uint32(fh[20:24]) != 1 {
		return 0, 0, errors.New("not an Ethernet capture")
	}
	nanos := magic == 0xa1b23c4d
	if header {
		// Always write nanosecond resolution.
		binary.LittleEndian.PutUint32(fh[0:4], 0xa1b23c4d)
		if _, err := w.Write(fh[:]); err != nil {
			return 0, 0, err
		}
	}
	var ph [16]byte
	buf := make([]byte, 0, 1<<18)
	for {
		if _, err := io.ReadFull(r, ph[:]); err != nil {
			if err == io.EOF {
				return last, n, nil
			}
			return 0, 0, err
		}
		sec := int64(binary.LittleEndian.Uint32(ph[0:4]))
		frac := int64(binary.LittleEndian.Uint32(ph[4:8]))
		if !nanos {
			frac *= 1000
		}
		t := sec*1e9 + frac + shift
		last = t
		incl := binary.LittleEndian.Uint32(ph[8:12])
		if incl > 1<<18 {
			return 0, 0, fmt.Errorf("packet of %d bytes", incl)
		}
		buf = buf[:incl]
		if _, err := io.ReadFull(r, buf); err != nil {
			return 0, 0, err
		}
		// Ethernet (14) + IPv4 (20) + TCP ports.
		if len(buf) >= 38 && buf[12] == 0x08 && buf[13] == 0x00 && buf[23] == 6 {
			ihl := int(buf[14]&0x0f) * 4
			if len(buf) >= 14+ihl+4 {
				for _, off := range []int{14 + ihl, 14 + ihl + 2} {
					p := binary.BigEndian.Uint16(buf[off:])
					if p != server {
						binary.BigEndian.PutUint16(buf[off:], p+portDelta)
					}
				}
			}
		}
		binary.LittleEndian.PutUint32(ph[0:4], uint32(t/1e9))
		binary.LittleEndian.PutUint32(ph[4:8], uint32(t%1e9))
		if _, err := w.Write(ph[:]); err != nil {
			return 0, 0, err
		}
		if _, err := w.Write(buf); err != nil {
			return 0, 0, err
		}
		n += 16 + int64(incl)
	}
}

// runOverlap writes overlapping copies of the inputs' sequence until limit
// bytes are written (pcaptest.Overlap).
func runOverlap(out string, ins []string, limit int64, server uint16, overlap int) error {
	var pcaps [][]byte
	for _, in := range ins {
		var buf bytes.Buffer
		if _, _, err := copyOne(&buf, in, 0, 0, server, true); err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		pcaps = append(pcaps, buf.Bytes())
	}
	f, err := outfile.Create(out)
	if err != nil {
		return err
	}
	defer f.Abort() // after Commit: nothing
	w := bufio.NewWriterSize(f, 1<<20)
	n, err := pcaptest.Overlap(w, pcaps, limit, overlap, server)
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %d MB\n", out, n>>20)
	return f.Commit()
}
