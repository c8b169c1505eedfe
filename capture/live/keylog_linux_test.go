//go:build linux

package live_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/live"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// lateKeyLog is a client's SSLKEYLOGFILE written late: each line reaches
// the file only delay after the TLS stack logged it (a client that
// buffers its key log, or a slow disk), while its connection already
// carries encrypted records.
type lateKeyLog struct {
	path  string
	delay time.Duration
	wg    sync.WaitGroup
	mu    sync.Mutex
}

func (l *lateKeyLog) Write(p []byte) (int, error) {
	line := append([]byte(nil), p...)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		time.Sleep(l.delay)
		l.mu.Lock()
		defer l.mu.Unlock()
		f, err := os.OpenFile(l.path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.Write(line)
		f.Close()
	}()
	return len(p), nil
}

// TestLiveKeyLogLate records, live on lo, a watch served over TLS 1.3 and
// HTTP/2 by a client whose key log lines reach the file 300 ms after its
// handshake: the records of the connection wait for the secrets while the
// file is re-read, and every event is recorded, decrypted, with its own
// capture time. Needs CAP_NET_RAW (skipped without).
func TestLiveKeyLogLate(t *testing.T) {
	evs := liveEvents(30)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		for _, e := range evs {
			io.WriteString(w, e+"\n")
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port, _ := strconv.Atoi(srv.URL[strings.LastIndexByte(srv.URL, ':')+1:])
	h, err := live.Open("lo", live.Options{Filter: live.Filter{Port: port}, PollInterval: 10 * time.Millisecond})
	if errors.Is(err, live.ErrPermission) {
		t.Skipf("live capture needs CAP_NET_RAW: %v", err)
	}
	if err != nil {
		t.Fatalf("Open(lo): %v", err)
	}
	defer h.Close()

	dir := t.TempDir()
	path, keyPath := filepath.Join(dir, "live.wt"), filepath.Join(dir, "keys.log")
	if err := os.WriteFile(keyPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	kf, err := tlsdec.OpenKeyLogFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stopped := errors.New("test over")
	var mu sync.Mutex
	var ended bool
	type result struct {
		res capture.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := live.Record(ctx, h, live.RecordOptions{
			Output:        formats.FileSinkOptions{Path: path},
			Recorder:      capture.Options{Port: port, KeyLog: kf.KeyLog(), KeyLogSource: kf},
			Tool:          "test",
			FlushInterval: 10 * time.Millisecond,
			OnTick: func(st capture.Stats) {
				mu.Lock()
				over := ended
				mu.Unlock()
				if over && st.Events >= int64(len(evs)) {
					cancel(stopped)
				}
			},
		})
		done <- result{res, err}
	}()

	late := &lateKeyLog{path: keyPath, delay: 300 * time.Millisecond}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, KeyLogWriter: late},
		ForceAttemptHTTP2: true}
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/namespaces/demo/secrets?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+liveToken)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if err != nil || resp.ProtoMajor != 2 {
		t.Fatalf("client: %v, %s", err, resp.Proto)
	}
	if want := strings.Join(evs, "\n") + "\n"; string(body) != want {
		t.Fatalf("client got %d bytes; want %d", len(body), len(want))
	}
	late.wg.Wait()
	mu.Lock()
	ended = true
	mu.Unlock()
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		cancel(errors.New("timeout"))
		r = <-done
		t.Fatalf("the capture did not see the %d events within a minute (stats %+v)", len(evs), r.res.Stats)
	}
	if r.err != nil || r.res.TLSConns != 1 || r.res.TLSUndecrypted != 0 {
		t.Fatalf("Record() = %+v, %v; want one TLS connection, decrypted", r.res, r.err)
	}
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []*formats.Frame
	var tlsRec *formats.TLS
	for r, err := range f.Records().All() {
		if err != nil {
			t.Fatal(err)
		}
		switch v := r.(type) {
		case *formats.Frame:
			got = append(got, v)
		case *formats.TLS:
			tlsRec = v
		}
	}
	if tlsRec == nil || !tlsRec.Decrypted || tlsRec.ALPN != "h2" {
		t.Fatalf("TLS record %+v; want decrypted, h2", tlsRec)
	}
	if len(got) != len(evs) {
		t.Fatalf("%d events recorded; want %d", len(got), len(evs))
	}
	for i, e := range evs {
		secret := strings.Contains(e, `"kind":"Secret"`)
		switch {
		case !secret && string(got[i].Data) != e:
			t.Errorf("event %d = %q; want %q", i, got[i].Data, e)
		case secret && (len(got[i].Data) != len(e) || len(got[i].Redacted) == 0):
			t.Errorf("Secret event %d = %q; want it redacted, same length", i, got[i].Data)
		}
		if i > 0 && got[i].Time < got[i-1].Time {
			t.Errorf("event %d at %d, before event %d at %d", i, got[i].Time, i-1, got[i-1].Time)
		}
	}
	// The events were sent 5 ms apart, from right after the handshake:
	// their capture times span the stream, not the moment the key log
	// was read.
	if span := time.Duration(got[len(got)-1].Time - got[0].Time); span < 100*time.Millisecond {
		t.Errorf("events span %v: they carry the time the keys came, not their own", span)
	}
	wttest.CheckNoSecrets(t, path, liveToken, liveSecret, base64.StdEncoding.EncodeToString([]byte(liveSecret)))
}
