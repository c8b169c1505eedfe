//go:build !race

package tlsdec

const raceEnabled = false
