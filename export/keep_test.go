package export

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestHARKeptSecrets: the HAR of a session recorded with --keep-secrets
// says in its comment that it holds Secret values (it said nothing); the
// HAR of a redacted session does not.
func TestHARKeptSecrets(t *testing.T) {
	sc := scenarios(t)[0]
	for _, keep := range []bool{false, true} {
		f := wttest.OpenSession(t, record(t, sc, keep))
		if KeepsSecrets(f) != keep {
			t.Errorf("keep %v: KeepsSecrets = %v", keep, !keep)
		}
		var b bytes.Buffer
		if _, err := HAR(&b, f, HAROptions{}); err != nil {
			t.Fatal(err)
		}
		var har struct {
			Log struct{ Comment string } `json:"log"`
		}
		if err := json.Unmarshal(b.Bytes(), &har); err != nil {
			t.Fatal(err)
		}
		if says := strings.Contains(har.Log.Comment, "--keep-secrets"); says != keep {
			t.Errorf("keep %v: the HAR's comment is %q", keep, har.Log.Comment)
		}
	}
}
