package replay_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
)

// TestControl: the control endpoint (docs/CONTROL.md) answers its five
// calls as documented — status, settle (true once the clients are quiet;
// false at its timeout while a client keeps asking), environment (with a
// wait), requests (the clients', without their credentials; control
// calls are not among them), stop (answered, then Control.Stop) — and its
// errors: 404, 405 with Allow, 400, 501. Without Options.Control /wtrace/
// is a path like any other.
func TestControl(t *testing.T) {
	path := replay.CorpusSession(t, "basic-json")
	stopped := make(chan struct{})
	srv := replaytest.NewServer(t, path, replay.Options{Speed: 0, Control: &replay.Control{Session: "basic.wt", Run: "run.wt", Stop: func() { close(stopped) }}})
	call := func(method, p string, out any) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+p, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: Content-Type %q", method, p, resp.Header.Get("Content-Type"))
		}
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, p, err, b)
			}
		}
		return resp.StatusCode, resp.Header
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/namespaces/corpus-basic/configmaps", nil)
	req.Header.Set("Authorization", "Bearer secret-token-of-the-client")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("LIST: %v", err)
	} else {
		resp.Body.Close()
	}

	// The request log takes an answer once it ended, which its client
	// may see first.
	var st replay.ControlStatus
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		call("GET", "/wtrace/v1/status", &st)
		if st.Requests > 0 || time.Now().After(deadline) {
			break
		}
	}
	if code, _ := call("GET", "/wtrace/v1/status", &st); code != 200 || st.APIVersion != "wtrace/v1" || st.Kind != "Status" ||
		st.Session != "basic.wt" || st.Writes != "answer" || st.Pace != "recorded" || st.Requests != 1 {
		t.Errorf("status: %d %+v", code, st)
	}
	var set replay.ControlSettle
	if code, _ := call("GET", "/wtrace/v1/settle?quiet=50ms&timeout=1m", &set); code != 200 || !set.Settled {
		t.Errorf("settle: %d %+v; want settled", code, set)
	}
	// A client that keeps asking: the run never settles within 300 ms.
	busy := make(chan struct{})
	go func() {
		for {
			select {
			case <-busy:
				return
			default:
			}
			if resp, err := http.Get(srv.URL + "/api/v1/namespaces/corpus-basic/configmaps"); err == nil {
				resp.Body.Close()
			}
		}
	}()
	if code, _ := call("GET", "/wtrace/v1/settle?quiet=10s&timeout=300ms", &set); code != 200 || set.Settled {
		t.Errorf("settle with a busy client: %d %+v; want not settled", code, set)
	}
	close(busy)
	var env replay.ControlEnvironment
	if code, _ := call("GET", "/wtrace/v1/environment?wait=1m", &env); code != 200 || !env.Done || env.Changes == 0 || env.Applied != env.Changes || env.Dropped == nil {
		t.Errorf("environment: %d %+v", code, env)
	}
	var reqs replay.ControlRequests
	call("GET", "/wtrace/v1/requests", &reqs)
	if len(reqs.Items) < 2 || reqs.Items[0].Target != "/api/v1/namespaces/corpus-basic/configmaps" || reqs.Items[0].Status != 200 || reqs.Items[0].How == "" {
		t.Errorf("requests: %+v", reqs.Items[:min(2, len(reqs.Items))])
	}
	for _, r := range reqs.Items {
		if strings.HasPrefix(r.Target, "/wtrace/") || r.Header["Authorization"] != nil {
			t.Errorf("a request listed %s with headers %v: control calls and credentials are not listed", r.Target, r.Header)
		}
	}
	call("GET", "/wtrace/v1/requests?writes=true", &reqs)
	if len(reqs.Items) != 0 {
		t.Errorf("writes: %+v", reqs.Items)
	}
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/wtrace/v1/nope", 404},
		{"GET", "/wtrace/v2/status", 404},
		{"GET", "/wtrace/v1/stop", 405},
		{"POST", "/wtrace/v1/status", 405},
		{"GET", "/wtrace/v1/settle?quiet=soon", 400},
		{"GET", "/wtrace/v1/environment?wait=-1s", 400},
	} {
		var e struct {
			Kind    string
			Code    int
			Message string
		}
		code, h := call(tc.method, tc.path, &e)
		if code != tc.code || e.Kind != "Error" || e.Code != tc.code || e.Message == "" || code == 405 && h.Get("Allow") == "" {
			t.Errorf("%s %s: %d %+v (Allow %q); want %d", tc.method, tc.path, code, e, h.Get("Allow"), tc.code)
		}
	}
	var stop replay.ControlStop
	if code, _ := call("POST", "/wtrace/v1/stop", &stop); code != 202 || !stop.Stopping || stop.Run != "run.wt" {
		t.Errorf("stop: %d %+v", code, stop)
	}
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("Control.Stop was not called within a minute of the stop")
	}

	plain := replaytest.NewServer(t, path, replay.Options{Speed: 0})
	if resp, err := http.Get(plain.URL + "/wtrace/v1/status"); err != nil || resp.StatusCode != 404 {
		t.Errorf("without Control: %v %v", resp.Status, err)
	} else {
		resp.Body.Close()
	}
	noStop := replaytest.NewServer(t, path, replay.Options{Speed: 0, Control: &replay.Control{}})
	if resp, err := http.Post(noStop.URL+"/wtrace/v1/stop", "", nil); err != nil || resp.StatusCode != 501 {
		t.Errorf("a stop without Control.Stop: %v %v", resp.Status, err)
	} else {
		resp.Body.Close()
	}
}
