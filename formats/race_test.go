//go:build race

package formats

// raceEnabled thins the exhaustive damage tests, which the race detector
// slows tenfold; without -race they cover every offset and bit.
const raceEnabled = true
