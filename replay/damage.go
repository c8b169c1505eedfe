package replay

import "github.com/wtrace/wtrace/replay/internal/tape"

// Loss is what a damaged session file lost of one recorded exchange (see
// package replay/internal/tape, which finds them).
type Loss = tape.Loss
