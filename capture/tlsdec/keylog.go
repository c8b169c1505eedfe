package tlsdec

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// Key log limits.
const (
	// MaxKeyLogLine bounds one key log line, line ending included. The
	// longest valid NSS line is a TLS 1.3 secret of a SHA-384 suite: a
	// 31-byte label, 64 hex digits of client random, 96 hex digits of secret
	// and two separators, 193 bytes. 1 KiB leaves room for odd whitespace and
	// still rejects garbage (a binary file given by mistake) without
	// buffering it.
	MaxKeyLogLine = 1024

	// maxBadLines bounds how many bad lines KeyLogStats remembers with their
	// line numbers; all of them are counted.
	maxBadLines = 16
)

// label names one kind of secret of the NSS key log format
// (https://firefox-source-docs.mozilla.org/security/nss/legacy/key_log_format/).
type label uint8

const (
	labelMaster      label = iota // CLIENT_RANDOM: TLS 1.2 master secret
	labelClientEarly              // CLIENT_EARLY_TRAFFIC_SECRET
	labelClientHS                 // CLIENT_HANDSHAKE_TRAFFIC_SECRET
	labelServerHS                 // SERVER_HANDSHAKE_TRAFFIC_SECRET
	labelClientApp                // CLIENT_TRAFFIC_SECRET_0
	labelServerApp                // SERVER_TRAFFIC_SECRET_0
	labelExporter                 // EXPORTER_SECRET
	numLabels
)

var labelNames = [numLabels]string{
	labelMaster:      "CLIENT_RANDOM",
	labelClientEarly: "CLIENT_EARLY_TRAFFIC_SECRET",
	labelClientHS:    "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
	labelServerHS:    "SERVER_HANDSHAKE_TRAFFIC_SECRET",
	labelClientApp:   "CLIENT_TRAFFIC_SECRET_0",
	labelServerApp:   "SERVER_TRAFFIC_SECRET_0",
	labelExporter:    "EXPORTER_SECRET",
}

func (l label) String() string { return labelNames[l] }

// secretLenOK reports whether n is a valid secret length for l: the TLS 1.2
// master secret is 48 bytes (RFC 5246 §8.1); TLS 1.3 secrets are as long as
// the suite's hash, 32 (SHA-256) or 48 (SHA-384) bytes (RFC 8446 §7.1).
func secretLenOK(l label, n int) bool {
	if l == labelMaster {
		return n == 48
	}
	return n == 32 || n == 48
}

// KeyLog holds the secrets of an NSS key log (SSLKEYLOGFILE), indexed by
// client random. It is safe for concurrent use: many Conns may look secrets
// up while Load adds lines (a Conn looks a secret up when it first needs it,
// so lines added before that moment are found).
type KeyLog struct {
	mu    sync.RWMutex
	m     map[[32]byte]*[numLabels][]byte
	stats KeyLogStats
	gen   atomic.Uint64 // secrets stored so far (Generation)
}

// Generation counts the secret lines stored so far: it changes when Load
// added a secret, so a caller holding connections that wait for secrets
// (Options.KeyWait) knows when to Retry them. Cheap: no lock.
func (k *KeyLog) Generation() uint64 {
	if k == nil {
		return 0
	}
	return k.gen.Load()
}

// KeyLogStats describes what Load read.
type KeyLogStats struct {
	Lines         int       // lines read, comments and blank lines included
	Secrets       int       // secret lines stored (a repeated line replaces the earlier one)
	ClientRandoms int       // distinct client randoms
	Bad           int       // malformed or unsupported lines, ignored
	BadLines      []BadLine // the first 16 bad lines
}

// BadLine is a key log line that was ignored.
type BadLine struct {
	Line   int    // 1-based, counted across all Loads
	Reason string // e.g. "secret is 20 bytes; CLIENT_RANDOM needs 48"
}

func (b BadLine) String() string { return fmt.Sprintf("line %d: %s", b.Line, b.Reason) }

// ParseKeyLog reads an NSS key log. Malformed lines are counted and reported
// in Stats, never fatal; the error is only a read error of r, and the KeyLog
// returned with it holds the lines read before it.
func ParseKeyLog(r io.Reader) (*KeyLog, error) {
	k := &KeyLog{}
	err := k.Load(r)
	return k, err
}

// Load adds the lines of r to k, as if appended to the file read so far
// (line numbers continue). A later secret for the same client random and
// label replaces the earlier one. Lines longer than MaxKeyLogLine are bad
// lines. The error is a read error of r; lines before it are kept.
func (k *KeyLog) Load(r io.Reader) error {
	br := bufio.NewReaderSize(r, MaxKeyLogLine)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Overlong line: skip to its end without buffering it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			k.mu.Lock()
			k.stats.Lines++
			k.badLocked(fmt.Sprintf("line longer than %d bytes", MaxKeyLogLine))
			k.mu.Unlock()
		} else if len(line) > 0 {
			k.addLine(line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tlsdec: key log: %w", err)
		}
	}
}

func (k *KeyLog) addLine(line []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stats.Lines++
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] == '#' {
		return
	}
	f := bytes.Fields(line)
	if len(f) != 3 {
		k.badLocked(fmt.Sprintf("%d fields; want 3 (label, client random, secret)", len(f)))
		return
	}
	l, ok := numLabels, false
	for i, name := range labelNames {
		if string(f[0]) == name {
			l, ok = label(i), true
			break
		}
	}
	if !ok {
		name := string(f[0])
		if len(name) > 40 {
			name = name[:40] + "…"
		}
		k.badLocked(fmt.Sprintf("unsupported label %q", name))
		return
	}
	var cr [32]byte
	if len(f[1]) != 64 {
		k.badLocked(fmt.Sprintf("client random has %d hex digits; want 64", len(f[1])))
		return
	}
	if _, err := hex.Decode(cr[:], f[1]); err != nil {
		k.badLocked("client random is not hex")
		return
	}
	secret := make([]byte, hex.DecodedLen(len(f[2])))
	if _, err := hex.Decode(secret, f[2]); err != nil || len(f[2])%2 != 0 {
		k.badLocked("secret is not hex")
		return
	}
	if !secretLenOK(l, len(secret)) {
		want := "32 or 48"
		if l == labelMaster {
			want = "48"
		}
		k.badLocked(fmt.Sprintf("secret is %d bytes; %s needs %s", len(secret), l, want))
		return
	}
	if k.m == nil {
		k.m = make(map[[32]byte]*[numLabels][]byte)
	}
	e := k.m[cr]
	if e == nil {
		e = new([numLabels][]byte)
		k.m[cr] = e
		k.stats.ClientRandoms++
	}
	if e[l] == nil {
		k.stats.Secrets++
	}
	e[l] = secret
	k.gen.Add(1)
}

func (k *KeyLog) badLocked(reason string) {
	k.stats.Bad++
	if len(k.stats.BadLines) < maxBadLines {
		k.stats.BadLines = append(k.stats.BadLines, BadLine{Line: k.stats.Lines, Reason: reason})
	}
}

// Stats returns what was read so far. BadLines is a copy.
func (k *KeyLog) Stats() KeyLogStats {
	k.mu.RLock()
	defer k.mu.RUnlock()
	s := k.stats
	s.BadLines = append([]BadLine(nil), s.BadLines...)
	return s
}

// secret returns the secret for cr and l, or nil. The slice is shared and
// never modified.
func (k *KeyLog) secret(cr *[32]byte, l label) []byte {
	if k == nil {
		return nil
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if e := k.m[*cr]; e != nil {
		return e[l]
	}
	return nil
}

// has reports whether k holds any secret for cr.
func (k *KeyLog) has(cr *[32]byte) bool {
	if k == nil {
		return false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.m[*cr] != nil
}

// LoadKeyLog reads the key log file at path, which must hold at least one
// secret; an empty path gives an empty KeyLog (which a pcapng file's own
// secrets may fill).
func LoadKeyLog(path string) (*KeyLog, error) {
	if path == "" {
		return ParseKeyLog(strings.NewReader(""))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	keys, err := ParseKeyLog(f)
	if err != nil {
		return nil, fmt.Errorf("reading key log %s: %w", path, err)
	}
	if st := keys.Stats(); st.Secrets == 0 {
		return nil, fmt.Errorf("%s holds no TLS secrets (%d lines, %d not understood): %w", path, st.Lines, st.Bad, ErrNoSecrets)
	}
	return keys, nil
}

// ErrNoSecrets is LoadKeyLog's error for a file without a secret.
var ErrNoSecrets = errors.New("no secrets")
