// qc-delay holds, reorders and duplicates the packets a node sends over
// chosen links, from user space: this machine's kernel has no sch_netem, but
// it has iptables' NFQUEUE target. The fault (nemesis/slow_network.py) runs
// one qc-delay per fault and node, inside the node's own network namespace
// (a namespace node's or a container's), and sends it the node's packets
// bound for the chosen links by NFQUEUE rules in the fault's own iptables
// chain, hooked from OUTPUT.
//
// Why this shape:
//   - A verdict may come in any order, so a packet is held by simply not
//     giving its verdict until its time: the kernel keeps it meanwhile, and
//     nothing is copied (only the metadata is read, unless a copy is to be
//     sent). Jitter reorders packets as netem's does, by their send times
//     crossing.
//   - The verdict is NF_REPEAT with the fault's own mark bit added: the
//     packet goes through OUTPUT again, past this fault's chain (its first
//     rule returns what carries the bit) and into the next fault's, so
//     delay, reorder and duplicate stack on a node as netem's would. An
//     NF_ACCEPT would skip the rest of the table, and another fault's chain.
//   - A copy (duplicate) is the packet as queued (its checksum made whole
//     by the kernel before copying) written again through a raw socket that
//     carries the same mark.
//   - The rules say --queue-bypass: while no qc-delay listens, packets pass.
//     On SIGTERM, or after -lifetime (a daemon a killed run left behind), it
//     lets every packet it holds go at once before it exits, and writes
//     what it did to -stats.
//
// The pidfile is written once the queue is bound: the rules come after it.
//
//	qc-delay -queue 5601 -mark 0x100000 -delay 100ms -jitter 10ms -correlation 0.25 \
//	    -pidfile P -stats S
//	qc-delay -simulate 10000 -delay 100ms ...   the decisions only, one a line:
//	                                            "<held, µs> <copied 0|1>"
package main

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	nfqueue "github.com/florianl/go-nfqueue/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

type packet struct {
	id   uint32
	mark uint32
	due  time.Time
	copy []byte // the packet to send a second time, if any
	seq  uint64 // arrival order: equal times keep it
}

type byDue []*packet

func (h byDue) Len() int { return len(h) }
func (h byDue) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].seq < h[j].seq
	}
	return h[i].due.Before(h[j].due)
}
func (h byDue) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *byDue) Push(x any)   { *h = append(*h, x.(*packet)) }
func (h *byDue) Pop() any {
	old := *h
	p := old[len(old)-1]
	*h = old[:len(old)-1]
	return p
}

type stats struct {
	Queued        uint64  `json:"queued"`
	Held          uint64  `json:"held"`
	AtOnce        uint64  `json:"at-once"`
	Duplicated    uint64  `json:"duplicated"`
	MeanHoldMs    float64 `json:"mean-hold-ms"`
	MaxWaiting    int     `json:"max-waiting"`
	VerdictErrors uint64  `json:"verdict-errors"`
	KernelDropped int64   `json:"kernel-dropped"` // queue full (/proc/net/netfilter/nfnetlink_queue)
	UserDropped   int64   `json:"user-dropped"`   // our socket's buffer full
	Ended         string  `json:"ended"`
}

type delayer struct {
	nf      *nfqueue.Nfqueue
	mark    uint32
	raw     int // raw socket for copies; -1 without
	mu      sync.Mutex
	waiting byDue
	wake    chan struct{}
	closing bool
	seq     uint64

	queued, held, atOnce, duplicated, verdictErrors atomic.Uint64
	holdNs                                          atomic.Int64
	maxWaiting                                      int
}

// release gives a packet its verdict (back through OUTPUT, marked) and
// sends its copy, if any.
func (d *delayer) release(p *packet) {
	if err := d.nf.SetVerdictWithOption(p.id, nfqueue.NfRepeat, nfqueue.WithMark(p.mark)); err != nil {
		d.verdictErrors.Add(1)
	}
	if p.copy != nil && d.raw >= 0 && len(p.copy) >= 20 && p.copy[0]>>4 == 4 {
		to := &unix.SockaddrInet4{}
		copy(to.Addr[:], p.copy[16:20])
		if unix.Sendto(d.raw, p.copy, 0, to) == nil {
			d.duplicated.Add(1)
		}
	}
}

// hold is the queue's callback: one goroutine, in arrival order.
func (d *delayer) hold(nm *Netem, a nfqueue.Attribute) int {
	if a.PacketID == nil {
		return 0
	}
	d.queued.Add(1)
	wait, dup := nm.Decide()
	p := &packet{id: *a.PacketID, mark: d.mark}
	if a.Mark != nil {
		p.mark |= *a.Mark
	}
	if dup && a.Payload != nil {
		p.copy = append([]byte(nil), *a.Payload...)
	}
	d.mu.Lock()
	if wait <= 0 || d.closing {
		d.mu.Unlock()
		d.atOnce.Add(1)
		d.release(p)
		return 0
	}
	d.held.Add(1)
	d.holdNs.Add(int64(wait))
	d.seq++
	p.seq = d.seq
	p.due = time.Now().Add(wait)
	heap.Push(&d.waiting, p)
	if len(d.waiting) > d.maxWaiting {
		d.maxWaiting = len(d.waiting)
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return 0
}

// send releases each held packet at its time, until ctx ends.
func (d *delayer) send(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	for {
		d.mu.Lock()
		var due []*packet
		now := time.Now()
		for len(d.waiting) > 0 && !d.waiting[0].due.After(now) {
			due = append(due, heap.Pop(&d.waiting).(*packet))
		}
		next := time.Hour
		if len(d.waiting) > 0 {
			next = d.waiting[0].due.Sub(now)
		}
		d.mu.Unlock()
		for _, p := range due {
			d.release(p)
		}
		if len(due) > 0 {
			continue // time went by while releasing: look again
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-d.wake: // a new packet may be due sooner (Go >= 1.23: Reset drops a stale tick)
		case <-timer.C:
		}
	}
}

// flush lets every held packet go at once; from then on none is held.
func (d *delayer) flush() {
	d.mu.Lock()
	d.closing = true
	rest := d.waiting
	d.waiting = nil
	d.mu.Unlock()
	for rest.Len() > 0 {
		d.release(heap.Pop(&rest).(*packet))
	}
}

// queueDrops reads the kernel's counts for queue q in this namespace.
func queueDrops(q uint16) (int64, int64) {
	b, err := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 7 && f[0] == strconv.Itoa(int(q)) {
			k, _ := strconv.ParseInt(f[5], 10, 64)
			u, _ := strconv.ParseInt(f[6], 10, 64)
			return k, u
		}
	}
	return -1, -1
}

func writeAtomically(path string, data []byte) error {
	tmp := path + ".partial"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "qc-delay: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	queue := flag.Uint("queue", 0, "the NFQUEUE number to serve")
	markFlag := flag.String("mark", "0", "the mark bit added to every packet let go (hex with 0x)")
	delay := flag.Duration("delay", 0, "how long each packet is held")
	jitter := flag.Duration("jitter", 0, "give or take this much, uniformly")
	corr := flag.Float64("correlation", 0, "of each delay with the previous one, 0..1")
	reorder := flag.Float64("reorder", 0, "share of packets sent at once, overtaking held ones")
	reorderCorr := flag.Float64("reorder-correlation", 0, "0..1")
	duplicate := flag.Float64("duplicate", 0, "share of packets sent twice")
	duplicateCorr := flag.Float64("duplicate-correlation", 0, "0..1")
	pidfile := flag.String("pidfile", "", "written once the queue is bound")
	statsFile := flag.String("stats", "", "what it did, written at exit (JSON)")
	lifetime := flag.Duration("lifetime", time.Hour, "exits by itself after this long")
	maxQueue := flag.Uint("max-queue", 65536, "packets the kernel keeps for it at most")
	seed := flag.Int64("seed", time.Now().UnixNano(), "random seed")
	simulate := flag.Int("simulate", 0, "print the decisions for this many packets and exit")
	flag.Parse()

	s := Settings{*delay, *jitter, *corr, *reorder, *reorderCorr, *duplicate, *duplicateCorr}
	for name, v := range map[string]float64{
		"correlation": s.DelayCorr, "reorder": s.Reorder, "reorder-correlation": s.ReorderCorr,
		"duplicate": s.Duplicate, "duplicate-correlation": s.DuplicateCorr,
	} {
		if v < 0 || v > 1 {
			fail("-%s %g: must be in [0, 1]", name, v)
		}
	}
	if s.Delay < 0 || s.Jitter < 0 {
		fail("-delay and -jitter must not be negative")
	}
	nm := NewNetem(s, *seed)
	if *simulate > 0 {
		w := make([]byte, 0, 1<<16)
		for i := 0; i < *simulate; i++ {
			hold, dup := nm.Decide()
			c := 0
			if dup {
				c = 1
			}
			w = fmt.Appendf(w, "%d %d\n", hold.Microseconds(), c)
			if len(w) > 60000 {
				os.Stdout.Write(w)
				w = w[:0]
			}
		}
		os.Stdout.Write(w)
		return
	}
	if *queue == 0 || *queue > 65535 || *pidfile == "" {
		fail("-queue (1..65535) and -pidfile are needed")
	}
	mark, err := strconv.ParseUint(*markFlag, 0, 32)
	if err != nil || mark == 0 {
		fail("-mark %q: a non-zero 32-bit mark is needed", *markFlag)
	}

	copyMode, packetLen := uint8(nfqueue.NfQnlCopyMeta), uint32(0)
	if s.Duplicate > 0 {
		copyMode, packetLen = nfqueue.NfQnlCopyPacket, 0xffff
	}
	nf, err := nfqueue.Open(&nfqueue.Config{
		NfQueue:      uint16(*queue),
		MaxPacketLen: packetLen,
		MaxQueueLen:  uint32(*maxQueue),
		Copymode:     copyMode,
	})
	if err != nil {
		fail("opening the netfilter queue: %v", err)
	}
	_ = nf.SetOption(netlink.NoENOBUFS, true)
	if rc, err := nf.Con.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
		})
	}
	d := &delayer{nf: nf, mark: uint32(mark), raw: -1, wake: make(chan struct{}, 1)}
	if s.Duplicate > 0 {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			fail("raw socket for copies: %v", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(mark)); err != nil {
			fail("marking the raw socket: %v", err)
		}
		d.raw = fd
	}

	ctx, cancel := context.WithCancel(context.Background())
	err = nf.RegisterWithErrorFunc(ctx, func(a nfqueue.Attribute) int { return d.hold(nm, a) },
		func(e error) int {
			if ctx.Err() != nil {
				return 1
			}
			var op *netlink.OpError
			if errors.As(e, &op) && (op.Timeout() || op.Temporary()) {
				return 0
			}
			fmt.Fprintf(os.Stderr, "qc-delay: receiving: %v\n", e)
			return 0
		})
	if err != nil {
		fail("binding queue %d: %v", *queue, err)
	}
	sending, stopSending := context.WithCancel(context.Background())
	go d.send(sending)
	if err := writeAtomically(*pidfile, []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		fail("writing %s: %v", *pidfile, err)
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	ended := "stopped"
	select {
	case <-signals:
	case <-time.After(*lifetime):
		ended = "lifetime over"
	}
	stopSending()
	d.flush()
	k, u := queueDrops(uint16(*queue))
	cancel()
	nf.Close()

	st := stats{
		Queued: d.queued.Load(), Held: d.held.Load(), AtOnce: d.atOnce.Load(),
		Duplicated: d.duplicated.Load(), MaxWaiting: d.maxWaiting,
		VerdictErrors: d.verdictErrors.Load(), KernelDropped: k, UserDropped: u, Ended: ended,
	}
	if st.Held > 0 {
		st.MeanHoldMs = float64(d.holdNs.Load()) / float64(st.Held) / 1e6
	}
	if *statsFile != "" {
		b, _ := json.Marshal(st)
		_ = writeAtomically(*statsFile, append(b, '\n'))
	}
	if b, err := os.ReadFile(*pidfile); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
		os.Remove(*pidfile)
	}
}
