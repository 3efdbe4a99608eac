package initproc

import (
	"os"
	"os/signal"
	"syscall"
)

// Pause is PID 1 of a network-namespace holder (see docker.NetPool): it
// does nothing, holding the container — and so its network namespace —
// until SIGTERM or SIGINT, then exits 0.
func Pause() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	return 0
}
