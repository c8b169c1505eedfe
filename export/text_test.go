package export

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestSessionCarriesText: what inspect's text says of each watch — its
// ERROR events, its longest silence — the Session document (inspect
// --json) says too, exchange by exchange (it used to say neither).
func TestSessionCarriesText(t *testing.T) {
	exchangeLine := regexp.MustCompile(`^  #(\d+) `)
	errorLine := regexp.MustCompile(`^        ! event (\d+) at \S+: ERROR (\d+) (\S*): (.*)$`)
	silenceLine := regexp.MustCompile(`^        longest silence \S+, until (.*) at \S+$`)
	notes := 0
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := wttest.OpenSession(t, record(t, sc, false))
			var b bytes.Buffer
			if err := Text(&b, f, TextOptions{Name: sc.name}); err != nil {
				t.Fatal(err)
			}
			fromText := map[string][]string{}
			ex := ""
			for _, l := range strings.Split(b.String(), "\n") {
				if m := exchangeLine.FindStringSubmatch(l); m != nil {
					ex = m[1]
				}
				if m := errorLine.FindStringSubmatch(l); m != nil {
					fromText[ex] = append(fromText[ex], fmt.Sprintf("error %s %s %s %s", m[1], m[2], m[3], m[4]))
				}
				if m := silenceLine.FindStringSubmatch(l); m != nil {
					fromText[ex] = append(fromText[ex], "silence until "+m[1])
				}
			}
			fromJSON := map[string][]string{}
			for _, x := range NewSession(f).Exchanges {
				id := fmt.Sprint(x.Exchange)
				for _, e := range x.Errors {
					fromJSON[id] = append(fromJSON[id], fmt.Sprintf("error %d %d %s %s", e.Seq, e.Code, e.Reason, e.Message))
				}
				if s := x.LongestSilence; s != nil {
					fromJSON[id] = append(fromJSON[id], "silence until "+s.Until)
				}
			}
			if fmt.Sprint(fromText) != fmt.Sprint(fromJSON) {
				t.Errorf("inspect's text says\n%v\ninspect --json says\n%v", fromText, fromJSON)
			}
			notes += len(fromText)
		})
	}
	if notes == 0 {
		t.Error("no scenario has a watch note: the test checks nothing")
	}
}
