package report_test

import (
	"fmt"
	"strconv"
	"strings"
)

func strconvI(v int64) string { return strconv.FormatInt(v, 10) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// hexdump is the page's dump of binary bytes (page.js, hexdump): 16 bytes
// a line, at most 4096.
func hexdump(b []byte) string {
	var lines []string
	for i := 0; i < len(b) && i < 4096; i += 16 {
		row := b[i:min(i+16, len(b))]
		var hx, asc []string
		for _, c := range row {
			hx = append(hx, fmt.Sprintf("%02x", c))
			if c >= 32 && c < 127 {
				asc = append(asc, string(rune(c)))
			} else {
				asc = append(asc, ".")
			}
		}
		lines = append(lines, fmt.Sprintf("%06x  %-48s  %s", i, strings.Join(hx, " "), strings.Join(asc, "")))
	}
	return strings.Join(lines, "\n")
}
