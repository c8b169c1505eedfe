//go:build race

package capture

// raceEnabled skips the memory measurements, which the race detector
// slows tenfold and whose heap it changes; they run without -race.
const raceEnabled = true
