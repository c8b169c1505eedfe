package report

import (
	"github.com/wtrace/wtrace/export"
)

// The page's data model: one JSON document in the page (a <script
// type="application/json">), read by the page's script. Event and
// request marks are columns of numbers, each a base64 string of zigzag
// varints (varints), so that hundreds of thousands of marks cost a few
// bytes each and decode in milliseconds. Times are microseconds since the
// session's start (its earliest record), the start itself an RFC 3339
// string. What a click shows (event bytes, bodies, an exchange's headers
// and ends) is in the store's chunks, loaded when shown.

// page is the whole document.
type page struct {
	Kind      string     `json:"kind"` // "session" or "diff"
	Title     string     `json:"title"`
	Tool      string     `json:"tool,omitempty"`
	Sessions  []*session `json:"sessions"`
	Diff      *diffModel `json:"diff,omitempty"`
	Items     string     `json:"items"`     // the store's index (store.index)
	Chunks    int        `json:"chunks"`    // chunks written
	Embedded  int64      `json:"embedded"`  // event and body bytes embedded
	Left      int64      `json:"left"`      // event and body bytes left out (the budget)
	MaxBody   int        `json:"maxBody"`   // the cut of one body or event
	StallSecs float64    `json:"stallSecs"` // Options.StallAfter
}

// session is one session's timeline.
type session struct {
	Name    string          `json:"name"`
	Label   string          `json:"label,omitempty"` // "A", "B" in a diff
	Start   string          `json:"start"`           // RFC 3339 (export.Time) of time 0
	Span    int64           `json:"span"`            // µs from the start to the last record
	Meta    *export.Meta    `json:"meta,omitempty"`
	Summary *export.Summary `json:"summary,omitempty"`
	Clean   bool            `json:"clean"`
	// Problems are what opening found wrong (damage, a rebuilt index).
	Problems []string `json:"problems,omitempty"`
	// ClientRule says which clients are under test ("every client of a
	// proxy recording", "user-agent=…", "none").
	ClientRule string   `json:"clientRule"`
	Groups     []group  `json:"groups"`
	Lanes      []*lane  `json:"lanes"`
	Names      []string `json:"names"` // the objects events name, "namespace/name"
	Events     columns  `json:"events"`
	Requests   columns  `json:"requests"`
	Methods    []string `json:"methods"` // the request methods, by the requests' method column
	Anomalies  []mark   `json:"anomalies"`
	// AnomaliesLeft counts the anomalies past maxAnomalies, not listed.
	AnomaliesLeft int `json:"anomaliesLeft,omitempty"`
	// DetailsLeft counts the exchanges whose details were left out (the
	// budget: reads beyond Options.MaxBodyBytes of details).
	DetailsLeft int   `json:"detailsLeft,omitempty"`
	Stats       stats `json:"stats"`
	// Exchanges maps an exchange ID to the store item of its details
	// (exchangeDetail): pairs of numbers, exchange then item.
	Exchanges string `json:"exchanges"`
}

// group is a resource in a namespace: the lanes of its watches and of the
// other requests naming it.
type group struct {
	Resource  string `json:"resource"` // "configmaps", "deployments.apps", "" for paths naming none
	Namespace string `json:"namespace,omitempty"`
	Title     string `json:"title"` // "configmaps -n demo", "nodes", "discovery and other paths"
	Lanes     []int  `json:"lanes"`
}

// lane is one row of the timeline: a watch (one exchange and its events)
// or the other requests of one client on one group.
type lane struct {
	Kind   string `json:"kind"` // "watch" or "requests"
	Group  int    `json:"group"`
	Label  string `json:"label"`
	Title  string `json:"title"`  // the request as sent (a watch), or what the lane holds
	Client string `json:"client"` // User-Agent and address of its client
	// Tested says its client is the client under test.
	Tested bool `json:"tested"`
	// Exchange is a watch's exchange; From and To the span it was open (µs).
	Exchange int64 `json:"exchange"`
	From     int64 `json:"from"`
	To       int64 `json:"to"`
	// Status is a watch's response status (0: none captured); End how it
	// ended ("complete", "truncated", …, "" when the file ended first).
	Status int    `json:"status,omitempty"`
	End    string `json:"end,omitempty"`
	// Events and Requests count its marks; First their index in the
	// columns (the lanes' marks are stored lane after lane, by time).
	Events       int `json:"events"`
	FirstEvent   int `json:"firstEvent"`
	Requests     int `json:"requests"`
	FirstRequest int `json:"firstRequest"`
	// Silence is a watch's longest silence (µs from, to), nil if none.
	Silence []int64 `json:"silence,omitempty"`

	key string
}

// columns are marks, one number per mark in each column (varints).
type columns struct {
	N    int               `json:"n"`
	Cols map[string]string `json:"cols"`
}

// mark is an anomaly: where it happened and what it is.
type mark struct {
	Lane     int    `json:"lane"`
	T        int64  `json:"t"`
	Kind     string `json:"kind"` // "gap", "resync", "cut", "410", "stall", "damage", …
	Text     string `json:"text"`
	Exchange *int64 `json:"exchange,omitempty"`
}

// stats is the summary of a session.
type stats struct {
	Conns     int `json:"conns"`
	Exchanges int `json:"exchanges"`
	Events    int `json:"events"`
	// ByVerb counts exchanges by method and status: [method, status, n].
	ByVerb [][3]any `json:"byVerb"`
	// ByResource counts events per group and type.
	ByResource []resourceCount `json:"byResource"`
	// Busiest are the seconds with the most events: [µs, events].
	Busiest [][2]int64 `json:"busiest"`
	// Types counts events by type.
	Types map[string]int `json:"types"`
	// Writes counts the writes of the client under test and of the others.
	Writes      int `json:"writes"`
	TestedWrite int `json:"testedWrites"`
	// Caused counts the events caused by the writes of the client under
	// test (the rest are the environment).
	Caused int `json:"caused"`
}

type resourceCount struct {
	Group int            `json:"group"`
	Title string         `json:"title"`
	Types map[string]int `json:"types"`
	N     int            `json:"n"`
}

// exchangeDetail is what a click on a request, or a watch's label, shows:
// the exchange as inspect --json says it (headers, ends, redactions, a
// watch's errors and longest silence), its connection, and its bodies.
type exchangeDetail struct {
	Exchange *export.Exchange `json:"exchange"`
	Conn     *export.Conn     `json:"conn,omitempty"`
	Request  *bodyRef         `json:"requestBody,omitempty"`
	Response *bodyRef         `json:"responseBody,omitempty"`
}

// bodyRef names a body in the store: its item, and how it was cut.
type bodyRef struct {
	Item     int    `json:"item"` // -1: left out (the budget)
	Size     int64  `json:"size"` // bytes the session holds
	Shown    int    `json:"shown"`
	Decoded  string `json:"decoded,omitempty"` // "gzip" when the page shows it gunzipped
	Encoding string `json:"encoding,omitempty"`
	Type     string `json:"type,omitempty"` // Content-Type
	// JSON is the store item + 1 of the JSON of a protobuf or CBOR body
	// (as apiserver/codec writes it), 0 none.
	JSON int `json:"json,omitempty"`
}
