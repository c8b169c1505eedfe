// Package units reads and writes the sizes people type and read: "500MB",
// "2GiB" (ParseSize: the flags of wtrace and its tools) and "1.5 MiB"
// (Bytes: progress, summaries, inspect). Standard library only (layer 0).
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// multipliers of the units ParseSize knows, lower-cased.
var multipliers = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40,
}

// ParseSize parses a size: a number with an optional unit, decimal (k, KB,
// M, MB, G, GB, T, TB) or binary (Ki, KiB, Mi, MiB, Gi, GiB, Ti, TiB),
// case-insensitive; B or nothing means bytes. It is at least 1 byte and at
// most 2⁶² bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("%q is not a size (examples: 500MB, 2GiB, 1048576)", s)
	}
	mult, ok := multipliers[unit]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, t[i:])
	}
	n := v * mult
	if n < 1 || n > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return int64(n), nil
}

// Bytes says n bytes for people, in binary units: "512 B", "1.5 KiB",
// "20.0 MiB", "2.0 GiB".
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Count says n things: "1 connection", "2 connections".
func Count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
