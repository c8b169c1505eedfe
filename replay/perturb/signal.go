package perturb

import "syscall"

// Signals are the signals client-restart:signal=NAME sends, by name
// (without SIG).
var Signals = map[string]syscall.Signal{
	"HUP":  syscall.SIGHUP,
	"INT":  syscall.SIGINT,
	"QUIT": syscall.SIGQUIT,
	"TERM": syscall.SIGTERM,
	"KILL": syscall.SIGKILL,
}
