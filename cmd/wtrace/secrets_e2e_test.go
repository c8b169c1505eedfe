package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/testkit/pcaptest"
	"github.com/wtrace/wtrace/testkit/proxytest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// The planted values of the secrets suite: Secret values, tokens and
// credentials that must never reach a session recorded with default
// redaction, in any record, nor what events, inspect and the index show.
const (
	plPassword  = "e2ePw-7d3c1b9a5f" // a Secret's data
	plString    = "e2eSd-4a8e2c6f0b" // a Secret's stringData
	plApplied   = "e2eAp-9f1b3d5c7e" // in a Secret's last-applied-configuration
	plSAToken   = "e2eSa-0a9b8c7d6e" // a service-account token Secret
	plBoot      = "e2eBt-1e2d3c4b5a" // a bootstrap-token Secret's token-secret
	plToken     = "e2eTk-2c4e6a8b0d" // TokenRequest status.token
	plReview    = "e2eRv-5b7d9f1a3c" // TokenReview spec.token
	plPatch     = "e2ePt-3f5a7c9e1b" // patches and creates of Secrets
	plYAML      = "e2eYm-0b2d4f6a8c" // a YAML apply of a Secret
	plDeep      = "e2eDp-7c9e1a3b5d" // a Secret nested deeper than the parser goes
	plBearer    = "e2eBr-8a0c2e4f6b" // the client's bearer token (headers)
	plCookie    = "e2eCk-1d3f5b7a9c" // the client's cookie
	plQuery     = "e2eQt-6e8a0c2b4d" // a token in the query string
	plSetCookie = "e2eSc-4d6f8b0a2c" // the server's Set-Cookie
	plQuoted    = "e2eQm-5a7c9e1b3d" // a Secret manifest quoted in an Event's message (JSON)
	plQuotedYML = "e2eQy-2b4d6f8a0c" // a Secret manifest quoted in an Event's message (YAML)
	plProxied   = "e2ePx-9d1f3b5a7c" // a Secret's JSON served as text/plain through a service's proxy
)

// credentialPlants are never stored, even with --keep-secrets.
var credentialPlants = []string{plBearer, plCookie, plQuery, plSetCookie}

var valuePlants = []string{plPassword, plString, plApplied, plSAToken, plBoot, plToken, plReview, plPatch, plYAML, plDeep,
	plQuoted, plQuotedYML, plProxied}

// plantNeedles are every planted value, raw and base64, and every 8-byte
// piece of them (a stream cut inside a value keeps only a piece).
func plantNeedles(values []string) []wttest.Needle {
	var out []wttest.Needle
	seen := map[string]bool{}
	add := func(v, from string) {
		if !seen[v] {
			seen[v] = true
			out = append(out, wttest.Needle{Value: []byte(v), From: from})
		}
	}
	for _, p := range values {
		for _, v := range []string{p, base64.StdEncoding.EncodeToString([]byte(p))} {
			for i := 0; i+8 <= len(v); i++ {
				add(v[i:i+8], "a piece of "+p)
			}
		}
	}
	return out
}

// e2eScheme knows every kind the suite serves.
func e2eScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = authnv1.AddToScheme(s)
	metav1.AddMetaToScheme(s)
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return s
}

func planted(ns, name string, typ corev1.SecretType, data map[string]string) *corev1.Secret {
	applied, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(plApplied))}})
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "10", UID: types.UID("u-" + name),
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(applied)}},
		Type: typ, Data: map[string][]byte{},
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func plantedSecrets(ns string) []corev1.Secret {
	db := planted(ns, "db", corev1.SecretTypeOpaque, map[string]string{"password": plPassword})
	db.StringData = map[string]string{"plain": plString}
	return []corev1.Secret{*db,
		*planted(ns, "sa-token", corev1.SecretTypeServiceAccountToken, map[string]string{"token": plSAToken, "namespace": ns}),
		*planted(ns, "bootstrap-token-abcdef", corev1.SecretTypeBootstrapToken, map[string]string{"token-id": "abcdef", "token-secret": plBoot}),
	}
}

// e2eAPI serves every shape a credential takes, with Kubernetes' own
// serializers: JSON and protobuf objects and lists, Tables,
// PartialObjectMetadata(List), a v1 List holding Secrets elsewhere, watch
// streams (JSON lines, length-prefixed protobuf), streams cut inside a
// Secret event, TokenRequest and TokenReview, gzip when asked.
type e2eAPI struct {
	scheme *runtime.Scheme
	json   *k8sjson.Serializer
	pb     *protobuf.Serializer
}

func newE2EAPI(t *testing.T) *httptest.Server {
	s := e2eScheme()
	a := &e2eAPI{scheme: s, json: k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, s, s, k8sjson.SerializerOptions{}),
		pb: protobuf.NewSerializer(s, s)}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return srv
}

func secretTM() metav1.TypeMeta { return metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"} }

// encode writes obj as JSON or protobuf (as the Accept header prefers),
// gzip'd if Accept-Encoding allows it.
func (a *e2eAPI) write(w http.ResponseWriter, r *http.Request, obj runtime.Object, status int) {
	var buf bytes.Buffer
	ct := "application/json"
	accept := r.Header.Get("Accept")
	if strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf") {
		ct = "application/vnd.kubernetes.protobuf"
		if err := a.pb.Encode(obj, &buf); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
	} else if err := a.json.Encode(obj, &buf); err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Set-Cookie", "session="+plSetCookie+"; HttpOnly")
	body := buf.Bytes()
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(body)
		zw.Close()
		body = z.Bytes()
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.WriteHeader(status)
	// In pieces of 8 KiB, flushed: a large body goes out in many chunks,
	// as the apiserver's do.
	for len(body) > 0 {
		n := min(len(body), 8<<10)
		w.Write(body[:n])
		body = body[n:]
		if len(body) > 0 {
			w.(http.Flusher).Flush()
		}
	}
}

func (a *e2eAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	accept := r.Header.Get("Accept")
	switch {
	case len(parts) == 5 && parts[4] == "secrets" && (parts[3] == "cut" || parts[3] == "cut-pb"):
		a.cutWatch(w, parts[3] == "cut-pb")
	case len(parts) == 5 && parts[4] == "secrets" && q.Get("watch") == "true":
		a.watch(w, r, a.watchEvents(parts[3], strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf")), true)
	case len(parts) == 5 && parts[4] == "secrets" && r.Method == http.MethodGet:
		items := plantedSecrets(parts[3])
		if parts[3] == "big" {
			// Large enough to be sent chunked, over many reads.
			for i := range 300 {
				s := plantedSecrets("big")[i%3]
				s.Name = fmt.Sprintf("%s-%d", s.Name, i)
				items = append(items, s)
			}
		}
		list := &corev1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: items}
		switch {
		case strings.Contains(accept, "as=Table"):
			a.write(w, r, table(items, q.Get("includeObject")), 200)
		case strings.Contains(accept, "as=PartialObjectMetadataList"):
			pl := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"},
				ListMeta: metav1.ListMeta{ResourceVersion: "10"}}
			for _, s := range items {
				pl.Items = append(pl.Items, metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}, ObjectMeta: s.ObjectMeta})
			}
			a.write(w, r, pl, 200)
		default:
			a.write(w, r, list, 200)
		}
	case len(parts) >= 5 && parts[4] == "secrets":
		s := plantedSecrets(parts[3])[0]
		s.TypeMeta = secretTM()
		a.write(w, r, &s, 200)
	case len(parts) >= 7 && parts[4] == "services" && parts[6] == "proxy":
		// A service's proxy passes on what its backend answers: here a
		// Secret's JSON, served as text.
		s := plantedSecrets(parts[3])[0]
		s.TypeMeta = secretTM()
		s.Data = map[string][]byte{"password": []byte(plProxied)}
		s.Annotations = nil
		b, _ := json.Marshal(&s)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(b)
	case len(parts) == 5 && parts[4] == "events" && q.Get("watch") == "true":
		a.watch(w, r, a.quotingEvents(parts[3], strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf")), false)
	case len(parts) == 7 && parts[4] == "serviceaccounts" && parts[6] == "token":
		a.write(w, r, &authnv1.TokenRequest{TypeMeta: metav1.TypeMeta{Kind: "TokenRequest", APIVersion: "authentication.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: parts[5], Namespace: parts[3]},
			Spec:       authnv1.TokenRequestSpec{Audiences: []string{"https://kubernetes.default.svc"}},
			Status:     authnv1.TokenRequestStatus{Token: plToken, ExpirationTimestamp: metav1.Unix(1795000000, 0)}}, 201)
	case strings.HasSuffix(r.URL.Path, "/tokenreviews"):
		a.write(w, r, &authnv1.TokenReview{TypeMeta: metav1.TypeMeta{Kind: "TokenReview", APIVersion: "authentication.k8s.io/v1"},
			Spec: authnv1.TokenReviewSpec{Token: plReview}, Status: authnv1.TokenReviewStatus{Authenticated: true}}, 201)
	case len(parts) == 5 && parts[4] == "configmaps" && q.Get("shape") == "v1list":
		// kubectl get -o json of several kinds: a v1 List, Secrets with
		// their kinds, one of them a nested SecretList.
		s := plantedSecrets(parts[3])
		s0 := s[0]
		s0.TypeMeta = secretTM()
		inner := &corev1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"}, Items: s[1:]}
		l := &corev1.List{TypeMeta: metav1.TypeMeta{Kind: "List", APIVersion: "v1"}}
		for _, o := range []runtime.Object{&s0, inner} {
			var b bytes.Buffer
			if strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf") {
				a.pb.Encode(o, &b)
			} else {
				a.json.Encode(o, &b)
			}
			l.Items = append(l.Items, runtime.RawExtension{Raw: bytes.TrimSpace(b.Bytes())})
		}
		a.write(w, r, l, 200)
	case strings.HasSuffix(r.URL.Path, "/deep"):
		s := plantedSecrets("deep")[0]
		s.TypeMeta = secretTM()
		s.Data = map[string][]byte{"password": []byte(plDeep)}
		b, _ := json.Marshal(&s)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, strings.Repeat(`{"a":`, 10010)+string(b)+strings.Repeat(`}`, 10010))
	default:
		a.write(w, r, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Code: 404, Reason: metav1.StatusReasonNotFound}, 404)
	}
}

// table is what the apiserver answers `kubectl get secrets` with.
func table(items []corev1.Secret, include string) *metav1.Table {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ListMeta:          metav1.ListMeta{ResourceVersion: "10"},
		ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name"}, {Name: "Type", Type: "string"}, {Name: "Data", Type: "string"}}}
	for _, s := range items {
		row := metav1.TableRow{Cells: []any{s.Name, string(s.Type), len(s.Data)}}
		if include == "Object" {
			c := s
			c.TypeMeta = secretTM()
			row.Object = runtime.RawExtension{Object: &c}
		} else {
			row.Object = runtime.RawExtension{Object: &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}, ObjectMeta: s.ObjectMeta}}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// watchEvents are the events of a Secret watch, encoded as the apiserver
// does (see watchFrame).
func (a *e2eAPI) watchEvents(ns string, pb bool) [][]byte {
	var out [][]byte
	items := plantedSecrets(ns)
	for i, s := range append(items, items[0]) {
		s.TypeMeta = secretTM()
		s.ResourceVersion = fmt.Sprint(11 + i)
		typ := "ADDED"
		if i == len(items) {
			typ = "MODIFIED"
		}
		out = append(out, a.watchFrame(typ, &s, pb)...)
	}
	return out
}

// watchFrame is obj as a watch event of type typ, encoded as the
// apiserver does: a JSON object and its newline, or a protobuf WatchEvent
// whose object is enveloped, its length prefix a piece of its own.
func (a *e2eAPI) watchFrame(typ string, obj runtime.Object, pb bool) [][]byte {
	var b bytes.Buffer
	if pb {
		a.pb.Encode(obj, &b)
		m, _ := (&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: b.Bytes()}}).Marshal()
		return [][]byte{binary.BigEndian.AppendUint32(nil, uint32(len(m))), m}
	}
	a.json.Encode(obj, &b)
	m, _ := json.Marshal(metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: bytes.TrimSpace(b.Bytes())}})
	return [][]byte{append(m, '\n')}
}

// watch serves the pieces of a watch's body, each flushed, then waits for
// the client to leave or for timeoutSeconds (30 by default) when wait.
func (a *e2eAPI) watch(w http.ResponseWriter, r *http.Request, pieces [][]byte, wait bool) {
	if strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	for _, p := range pieces {
		w.Write(p)
		w.(http.Flusher).Flush()
	}
	if !wait {
		return
	}
	select {
	case <-r.Context().Done():
	case <-time.After(time.Duration(max(1, atoiDefault(r.URL.Query().Get("timeoutSeconds"), 30))) * time.Second):
	}
}

// quotingEvents are the events of a watch of Events whose messages quote
// a Secret manifest, as an admission webhook's denial (JSON) and a failed
// apply (YAML) report it.
func (a *e2eAPI) quotingEvents(ns string, pb bool) [][]byte {
	manifest, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db", "namespace": ns},
		"data": map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(plQuoted))}})
	var out [][]byte
	for i, msg := range []string{
		`admission webhook "deny.example.com" denied the request: ` + string(manifest),
		"failed to apply:\napiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + plQuotedYML + "\n",
	} {
		out = append(out, a.watchFrame("ADDED", &corev1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("web.%d", i), Namespace: ns, ResourceVersion: fmt.Sprint(20 + i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Deployment", Namespace: ns, Name: "web"},
			Reason:         "FailedCreate", Message: msg, Type: "Warning"}, pb)...)
	}
	return out
}

func atoiDefault(s string, d int) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		return d
	}
	return n
}

// cutWatch sends a Secret watch whose connection dies inside its second
// event, after the event's data began.
func (a *e2eAPI) cutWatch(w http.ResponseWriter, pb bool) {
	evs := a.watchEvents("cut", pb)
	stream := bytes.Join(evs, nil)
	first := len(evs[0]) // the first event (JSON), or its length prefix
	if pb {
		first += len(evs[1])
	}
	// The second Secret holds a service-account token: cut four bytes into
	// it (base64 in JSON, raw in protobuf).
	tok := base64.StdEncoding.EncodeToString([]byte(plSAToken))
	if pb {
		tok = plSAToken
	}
	cut := first + bytes.Index(stream[first:], []byte(tok[:6])) + 4
	conn, bw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	ct := "application/json"
	if pb {
		ct = "application/vnd.kubernetes.protobuf;stream=watch"
	}
	fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n", ct)
	fmt.Fprintf(bw, "%x\r\n%s\r\n", first, stream[:first])
	fmt.Fprintf(bw, "%x\r\n%s\r\n", cut-first+20, stream[first:cut]) // a chunk that promises more
	bw.Flush()
}

// driveShapes sends every request of the suite to base with a client
// that carries credentials (a bearer token, a cookie, a bearer in a header
// of its own, a token in the query).
func driveShapes(t *testing.T, base string) {
	t.Helper()
	// A large list first, on a connection of its own: the capture that
	// begins inside the first response begins inside its chunked body.
	big := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 20 * time.Second}
	resp, err := big.Get(base + "/api/v1/namespaces/big/secrets")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	big.CloseIdleConnections()
	cl := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 20 * time.Second}
	do := func(method, path, accept, enc, ct, body string) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+plBearer)
		req.Header.Set("Cookie", "session="+plCookie)
		req.Header.Set("X-Forwarded-Credentials", "Bearer "+plBearer)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := cl.Do(req)
		if err != nil {
			if strings.Contains(path, "/cut") {
				return
			}
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	const (
		js    = "application/json"
		pb    = "application/vnd.kubernetes.protobuf"
		tbl   = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
		pomPB = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
		pomJS = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	)
	secretJSON := fmt.Sprintf(`{"apiVersion":"v1","data":{"password":%q},"kind":"Secret","metadata":{"name":"new","namespace":"demo"},"stringData":{"plain":%q}}`,
		base64.StdEncoding.EncodeToString([]byte(plPatch)), plPatch)
	for _, enc := range []string{"identity", "gzip"} {
		for _, accept := range []string{js, pb, tbl, pomPB, pomJS} {
			do("GET", "/api/v1/namespaces/shapes/secrets", accept, enc, "", "")
		}
		do("GET", "/api/v1/namespaces/shapes/secrets?includeObject=Object", tbl, enc, "", "")
		do("GET", "/api/v1/namespaces/shapes/secrets/db", js, enc, "", "")
		do("GET", "/api/v1/namespaces/shapes/secrets/db", pb, enc, "", "")
		do("GET", "/api/v1/namespaces/shapes/%73ecrets/db", js, enc, "", "")
		do("GET", "/api/v1/namespaces/shapes/configmaps?shape=v1list", js, enc, "", "")
		do("GET", "/api/v1/namespaces/shapes/configmaps?shape=v1list", pb, enc, "", "")
		do("POST", "/api/v1/namespaces/shapes/serviceaccounts/default/token", js, enc, js, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"audiences":["api"]}}`)
		do("POST", "/api/v1/namespaces/shapes/serviceaccounts/default/token", pb, enc, js, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}`)
	}
	do("GET", "/apis/example.com/v1/deep", js, "", "", "")
	do("GET", "/api/v1/namespaces/shapes/configmaps?access_token="+plQuery+"&watch=false&token="+plQuery, js, "", "", "")
	do("POST", "/apis/authentication.k8s.io/v1/tokenreviews", js, "", js, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"`+plReview+`"}}`)
	do("POST", "/api/v1/namespaces/shapes/secrets", js, "", js, secretJSON)
	do("PATCH", "/api/v1/namespaces/shapes/secrets/db", js, "", "application/merge-patch+json",
		fmt.Sprintf(`{"data":{"password":%q},"stringData":{"plain":%q}}`, base64.StdEncoding.EncodeToString([]byte(plPatch)), plPatch))
	do("PATCH", "/api/v1/namespaces/shapes/secrets/db", js, "", "application/json-patch+json",
		fmt.Sprintf(`[{"op":"replace","path":"/data/password","value":%q}]`, base64.StdEncoding.EncodeToString([]byte(plPatch))))
	do("PATCH", "/api/v1/namespaces/shapes/secrets/db?fieldManager=kubectl", js, "", "application/apply-patch+yaml",
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  plain: "+plYAML+"\n")
	do("PATCH", "/api/v1/namespaces/shapes/%73ecrets/db", js, "", "application/strategic-merge-patch+json",
		fmt.Sprintf(`{"stringData":{"plain":%q}}`, plPatch))
	do("GET", "/api/v1/namespaces/shapes/services/db-backend:8080/proxy/dump", "", "", "", "")
	do("GET", "/api/v1/namespaces/shapes/events?watch=true&timeoutSeconds=1", js, "", "", "")
	do("GET", "/api/v1/namespaces/shapes/events?watch=true&timeoutSeconds=1", pb, "", "", "")
	do("GET", "/api/v1/namespaces/cut/secrets?watch=true", js, "", "", "")
	do("GET", "/api/v1/namespaces/cut-pb/secrets?watch=true", pb, "", "", "")
}

// driveInformers runs Secret informers (JSON in namespace demo, protobuf
// in pb) against base until they have every event.
func driveInformers(t *testing.T, base string) {
	t.Helper()
	for _, tc := range []struct{ ns, ct string }{{"demo", ""}, {"pb", "application/vnd.kubernetes.protobuf"}} {
		cfg := &rest.Config{Host: base, BearerToken: plBearer}
		cfg.ContentType = tc.ct
		if tc.ct != "" {
			cfg.AcceptContentTypes = tc.ct + ",application/json"
		}
		syncInformer(t, cfg, tc.ns, 3, true)
	}
}

// syncInformer runs a Secret informer in ns until it holds n Secrets
// (and, with wantUpdate, has seen the watch's MODIFIED event), and returns
// what it holds.
func syncInformer(t *testing.T, cfg *rest.Config, ns string, n int, wantUpdate bool) []*corev1.Secret {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Secrets().Informer()
	updated := make(chan struct{}, 1)
	inf.AddEventHandler(k8scache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) {
		select {
		case updated <- struct{}{}:
		default:
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if !k8scache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		t.Fatalf("informer on %s (%s) did not sync within 30s", ns, cfg.Host)
	}
	if wantUpdate {
		select {
		case <-updated:
		case <-time.After(30 * time.Second):
			t.Fatalf("informer on %s (%s) saw no watch event within 30s", ns, cfg.Host)
		}
	}
	var out []*corev1.Secret
	for _, o := range inf.GetStore().List() {
		out = append(out, o.(*corev1.Secret))
	}
	if len(out) != n {
		t.Fatalf("informer on %s holds %d Secrets; want %d", ns, len(out), n)
	}
	return out
}

// checkClean greps every record of a session, its index, and what
// inspect and events --data print, for the planted values.
func checkClean(t *testing.T, wt string, needles []wttest.Needle) {
	t.Helper()
	found, err := wttest.Find(wt, needles)
	if err != nil {
		t.Fatalf("reading %s: %v", wt, err)
	}
	for i, f := range found {
		if i == 20 {
			t.Errorf("… and %d more", len(found)-i)
			break
		}
		t.Errorf("%s: %s", filepath.Base(wt), f)
	}
	for _, args := range [][]string{{"events", "--data", wt}, {"inspect", wt}, {"inspect", "--json", wt}} {
		out, stderr, code := wtrace(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		for _, n := range needles {
			if strings.Contains(out, string(n.Value)) {
				t.Errorf("%v prints %q (%s)", args, n.Value, n.From)
				break
			}
		}
	}
}

// redactionsIn counts the Redactions of a session's index, by reason.
func redactionsIn(t *testing.T, wt string) map[formats.RedactReason]int64 {
	t.Helper()
	f, err := formats.Open(wt, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[formats.RedactReason]int64{}
	for _, x := range f.Index().Exchanges {
		for _, e := range []*formats.End{x.RequestEnd, x.End} {
			if e != nil {
				for _, r := range e.Redactions {
					out[r.Reason] += r.Count
				}
			}
		}
	}
	return out
}

// TestSecretsNeverStored is the secrets suite: every shape a credential
// takes (see e2eAPI) is recorded through `record --proxy`'s proxy and
// through pcaps of the same traffic — one whole, one that begins between
// each connection's first request and its response — and no planted value
// appears anywhere in the sessions; replay of them still serves Secrets
// client-go decodes.
func TestSecretsNeverStored(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	api := newE2EAPI(t)
	dir := t.TempDir()
	if keep := os.Getenv("WTRACE_E2E_KEEP"); keep != "" {
		dir = keep // a directory to keep the sessions and pcaps in, to look at
	}
	needles := plantNeedles(append(slices.Clone(valuePlants), credentialPlants...))

	// Through the recording proxy.
	kc := writeE2EKubeconfig(t, api.URL)
	proxyWT := filepath.Join(dir, "proxy.wt")
	// What `wtrace record --proxy` runs.
	px := proxytest.Record(t, kc, proxy.RecordOptions{Output: formats.FileSinkOptions{Path: proxyWT}, ShutdownGrace: time.Second})
	pxURL := px.URL
	driveShapes(t, pxURL)
	driveInformers(t, pxURL)
	px.Stop()

	// Through a tap, then pcaps of what it saw.
	tp, err := pcaptest.NewTap(strings.TrimPrefix(api.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	base := "http://" + tp.Addr()
	driveShapes(t, base)
	driveInformers(t, base)
	waitTapClosed(t, tp)
	sessions := map[string]string{"proxy": proxyWT}
	for _, name := range []string{"pcap", "pcap-midstream", "pcap-midbody"} {
		mid := name != "pcap"
		pcap := filepath.Join(dir, name+".pcap")
		if err := os.WriteFile(pcap, tp.Pcap(pcaptest.TapCapture{Midstream: mid, Midbody: name == "pcap-midbody"}), 0o644); err != nil {
			t.Fatal(err)
		}
		wt := filepath.Join(dir, name+".wt")
		if _, stderr, code := wtrace(t, "record", "--pcap", pcap, "-o", wt); code != 0 {
			t.Fatalf("record %s: exit %d: %s", name, code, stderr)
		}
		sessions[name] = wt
		if !mid {
			kept := filepath.Join(dir, "kept.wt")
			if _, stderr, code := wtrace(t, "record", "--pcap", pcap, "--keep-secrets", "-o", kept); code != 0 {
				t.Fatalf("record --keep-secrets: exit %d: %s", code, stderr)
			}
			sessions["kept"] = kept
		}
	}

	for name, wt := range sessions {
		t.Run(name, func(t *testing.T) { checkStoredSession(t, name, wt, needles) })
	}
}

// checkStoredSession checks one session of TestSecretsNeverStored: no
// planted value anywhere (kept ones for --keep-secrets, never the
// credentials), every kind of redaction reported, and (whole captures)
// replayed Secrets client-go decodes.
func checkStoredSession(t *testing.T, name, wt string, needles []wttest.Needle) {
	mid := strings.HasPrefix(name, "pcap-mid")
	if name == "kept" {
		// --keep-secrets keeps values (the grep sees them) but
		// never credentials in headers or the query.
		checkClean(t, wt, plantNeedles(credentialPlants))
		if found, _ := wttest.Find(wt, plantNeedles([]string{plPassword})); len(found) == 0 {
			t.Error("--keep-secrets session holds no Secret value: the grep proves nothing")
		}
		return
	}
	checkClean(t, wt, needles)
	red := redactionsIn(t, wt)
	for _, r := range []formats.RedactReason{formats.RedactSecretValue, formats.RedactLastApplied, formats.RedactToken, formats.RedactUnparsed} {
		if red[r] == 0 {
			t.Errorf("no %v redaction recorded: %v", r, red)
		}
	}
	if !mid && red[formats.RedactQuery] == 0 {
		t.Errorf("no query credential redaction recorded: %v", red)
	}
	out, _, _ := wtrace(t, "inspect", "--anomalies", "0", wt)
	for _, want := range []string{"redacted: request headers Authorization, Cookie, X-Forwarded-Credentials", "Secret values of Secret shapes/db (data.password", "tokens of TokenRequest shapes/default (status.token", "unparsed (fail closed)"} {
		if mid && strings.HasPrefix(want, "redacted: request") {
			continue
		}
		if !strings.Contains(out, want) {
			t.Errorf("inspect does not say %q:\n%s", want, clipOut(out))
		}
	}
	if mid {
		return
	}
	// Replay serves the redacted Secrets, and client-go decodes them.
	srv, err := replay.Open(wt, replay.Options{Writes: replay.WritesReject})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct{ ns, ct string }{{"demo", ""}, {"pb", "application/vnd.kubernetes.protobuf"}} {
		cfg := &rest.Config{Host: srv.URL}
		cfg.ContentType = tc.ct
		if tc.ct != "" {
			cfg.AcceptContentTypes = tc.ct + ",application/json"
		}
		for _, s := range syncInformer(t, cfg, tc.ns, 3, false) {
			for k, v := range s.Data {
				for _, p := range valuePlants {
					if len(v) == len(p) && string(v) == p {
						t.Errorf("replayed Secret %s/%s data.%s holds %s", s.Namespace, s.Name, k, p)
					}
				}
			}
			if want := plantedSecrets(tc.ns); len(s.Data) == 0 || len(s.Data) != len(want[slices.IndexFunc(want, func(w corev1.Secret) bool { return w.Name == s.Name })].Data) {
				t.Errorf("replayed Secret %s/%s has data keys %v", s.Namespace, s.Name, keysOf(s.Data))
			}
		}
	}
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func clipOut(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "…"
	}
	return s
}

func waitTapClosed(t *testing.T, tp *pcaptest.Tap) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for tp.Open() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d tapped connections still open after 20s", tp.Open())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeE2EKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster: {server: %q}\nusers:\n- name: u\n  user: {token: %s}\ncontexts:\n- name: e2e\n  context: {cluster: e2e, user: u}\ncurrent-context: e2e\n", server, plBearer)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
