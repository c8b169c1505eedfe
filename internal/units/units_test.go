package units

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"1", 1}, {"1048576", 1 << 20}, {"500MB", 500e6}, {"500mb", 500e6}, {"2GiB", 2 << 30}, {"2Gi", 2 << 30},
		{"1.5G", 1.5e9}, {"64KiB", 64 << 10}, {"10k", 10e3}, {"1TiB", 1 << 40}, {" 3 MiB ", 3 << 20}, {"7B", 7},
		{"500MiB", 500 << 20}, {"4GiB", 4 << 30},
	} {
		if got, err := ParseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "GiB", "2XB", "-1", "0", "0.1", "1e3", "99999999999TiB"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d; want an error", in, got)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1536, "1.5 KiB"}, {20 << 20, "20.0 MiB"}, {2 << 30, "2.0 GiB"}} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q; want %q", tc.n, got, tc.want)
		}
	}
	if got := Count(1, "event", "events") + ", " + Count(3, "event", "events"); got != "1 event, 3 events" {
		t.Errorf("Count: %q", got)
	}
}
