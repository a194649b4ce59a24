package time

import (
	"sync/atomic"
	"syscall"
)

// queuecheck's clock fault for a Go server (workloads/nats/dist.py builds
// nats-server with this file added to package time, and Now calling
// qcShift): the wall clock Now gives is the host's plus an offset read from
// the file QUEUECHECK_CLOCK_FILE names ("+1.500", the form libfaketime reads,
// workloads/components/faketime.py), at most once a second. The monotonic
// reading is left alone, as under libfaketime's FAKETIME_DONT_FAKE_MONOTONIC:
// timers and durations keep the host's pace. Without the variable, Now is
// the host's.
//
// Now runs on the scheduler's own stack too (timers), where a system call or
// an allocation is fatal: it only loads the offset, which a goroutine of
// this package's init reads from the file.
var qcClockOffset atomic.Int64 // nanoseconds

func init() {
	path, ok := syscall.Getenv("QUEUECHECK_CLOCK_FILE")
	if !ok || path == "" {
		return
	}
	qcRefresh(path) // right from the start
	go func() {
		for {
			Sleep(Second)
			qcRefresh(path)
		}
	}()
}

func qcRefresh(path string) {
	if off, ok := qcReadOffset(path); ok {
		qcClockOffset.Store(off)
	}
}

func qcShift(sec int64, nsec int32) (int64, int32) {
	off := qcClockOffset.Load()
	if off == 0 {
		return sec, nsec
	}
	n := int64(nsec) + off%1e9
	sec += off / 1e9
	if n < 0 {
		n += 1e9
		sec--
	} else if n >= 1e9 {
		n -= 1e9
		sec++
	}
	return sec, int32(n)
}

// qcReadOffset parses "[+-]S[.F]" (F up to nine digits) from the file.
func qcReadOffset(path string) (int64, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	var buf [64]byte
	n, err := syscall.Read(fd, buf[:])
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return 0, false
	}
	b := buf[:n]
	neg := false
	if b[0] == '+' || b[0] == '-' {
		neg = b[0] == '-'
		b = b[1:]
	}
	var whole, frac int64
	digits, scale := 0, int64(1e9)
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		whole = whole*10 + int64(b[i]-'0')
		digits++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if scale > 1 {
				scale /= 10
				frac += int64(b[i]-'0') * scale
			}
		}
	}
	if digits == 0 || whole > 1e8 {
		return 0, false
	}
	off := whole*1e9 + frac
	if neg {
		off = -off
	}
	return off, true
}
