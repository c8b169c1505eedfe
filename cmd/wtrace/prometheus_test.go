package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
)

// TestReplayPrometheus: a real Prometheus (the distribution's
// `prometheus`; skipped when absent) scrapes `wtrace replay` while 50
// watchers follow a steady timeline at speed 1. What it stored agrees
// with what the clients measured: as many lateness observations as
// events the clients received (and as many events sent), and, bucket by
// bucket, no more lateness than the clients saw (the server measures when
// it wrote an event, a client when it read it: a client's lateness is the
// server's plus the delivery). The quantiles of both are logged.
func TestReplayPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Prometheus and a replay under load")
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (apt-get install prometheus)")
	}
	const events, gap, watchers = 100, 50 * time.Millisecond, 50
	session := steadySession(t, events, gap)
	times, respTime := eventTimes(t, session)

	c := startChild(t, "replay", session, "--listen", "127.0.0.1:0", "--speed", "1", "--writes", "reject")
	base := waitMatch(t, c.errw.lines, `^Listening on (http://127\.0\.0\.1:\d+)`, c.errw.String)[1]
	prom := startPrometheus(t, promBin, strings.TrimPrefix(base, "http://"))
	// Prometheus has scraped the replay once before the load starts.
	waitQuery(t, prom, `up{job="wtrace-replay"}`, func(v float64) bool { return v == 1 })

	lateness := make([][]float64, watchers)
	var wg sync.WaitGroup
	for i := range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lateness[i] = watchLateness(t, base, times, respTime)
		}()
	}
	wg.Wait()
	var client []float64
	for _, l := range lateness {
		client = append(client, l...)
	}
	if len(client) != watchers*events {
		t.Fatalf("the clients got %d events; want %d", len(client), watchers*events)
	}
	sort.Float64s(client)

	// Every event observed, and scraped.
	n := float64(len(client))
	waitQuery(t, prom, `wtrace_replay_event_lateness_seconds_count`, func(v float64) bool { return v == n })
	if v := query(t, prom, `wtrace_replay_watch_events_sent_total`); v != n {
		t.Errorf("wtrace_replay_watch_events_sent_total = %v; want %v", v, n)
	}
	for _, le := range replay.LatenessBuckets {
		server := query(t, prom, fmt.Sprintf(`wtrace_replay_event_lateness_seconds_bucket{le="%s"}`, strconv.FormatFloat(le, 'g', -1, 64))) / n
		clientCDF := float64(sort.SearchFloat64s(client, math.Nextafter(le, math.Inf(1)))) / n
		if server < clientCDF {
			t.Errorf("lateness ≤ %gs: Prometheus has %.3f of the events, the clients %.3f: the server reports more lateness than the clients saw", le, server, clientCDF)
		}
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		server := query(t, prom, fmt.Sprintf(`histogram_quantile(%g, wtrace_replay_event_lateness_seconds_bucket)`, q))
		t.Logf("p%g lateness: Prometheus %.2f ms (interpolated in buckets), clients %.2f ms", q*100, server*1e3, client[int(q*n)-1]*1e3)
	}
	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t); code != 0 {
		t.Errorf("replay exit %d", code)
	}
}

// eventTimes returns the capture times of the events of the session's
// watch, and its response's time.
func eventTimes(t *testing.T, path string) (times []int64, resp int64) {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for id, x := range f.Index().Exchanges {
		if x.Frames == 0 {
			continue
		}
		resp = x.Response.Time
		sc := f.ExchangeRecords(int64(id))
		for {
			r, err := sc.Next()
			if err == io.EOF {
				return times, resp
			}
			if err != nil {
				t.Fatal(err)
			}
			if fr, ok := r.(*formats.Frame); ok {
				times = append(times, fr.Time)
			}
		}
	}
	t.Fatal("no watch in the session")
	return nil, 0
}

// watchLateness follows the steady watch at base and returns how late
// each event arrived: its arrival against the request's sending plus its
// recorded offset (so never less than the server's measure, which starts
// at the request's arrival and ends at the write).
func watchLateness(t *testing.T, base string, times []int64, respTime int64) []float64 {
	addr := strings.TrimPrefix(base, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	// The timeline starts when the request is sent: before it arrives at
	// the server, whose timeline starts then.
	start := time.Now()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", steadyWatch, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Error(err)
		return nil
	}
	br := bufio.NewReader(resp.Body)
	var out []float64
	for i := 0; ; i++ {
		if _, err := br.ReadSlice('\n'); err != nil {
			if err != io.EOF {
				t.Errorf("watch: %v", err)
			}
			return out
		}
		if i >= len(times) {
			t.Errorf("more events than recorded")
			return out
		}
		due := start.Add(time.Duration(times[i] - respTime))
		out = append(out, max(time.Since(due), 0).Seconds())
	}
}

// startPrometheus runs Prometheus scraping target every second and
// returns its base URL once it is ready.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: wtrace-replay
    static_configs:
      - targets: ["%s"]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	base := "http://" + addr
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Fatalf("Prometheus not ready within a minute:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// query runs an instant PromQL query whose result is one sample (the
// sum of the samples of a vector) and returns its value.
func query(t *testing.T, prom, q string) float64 {
	t.Helper()
	v, err := queryErr(prom, q)
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	return v
}

func queryErr(prom, q string) (float64, error) {
	resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s", r.Error)
	}
	if len(r.Data.Result) == 0 {
		return math.NaN(), nil
	}
	var sum float64
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// waitQuery waits (a minute at most) until query q's value satisfies ok.
func waitQuery(t *testing.T, prom, q string, ok func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last float64
	for {
		v, err := queryErr(prom, q)
		if err == nil && ok(v) {
			return
		}
		last = v
		if time.Now().After(deadline) {
			t.Fatalf("query %s: still %v (%v) after a minute", q, last, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
