package main

import (
	"math/rand"
	"time"
)

// Settings are netem's, by the same names: every packet is held Delay,
// give or take up to Jitter (uniform), each draw weighing in the previous
// one by DelayCorr; a share Reorder of the packets (correlation
// ReorderCorr) goes out at once instead, overtaking the ones held before
// it; a share Duplicate (DuplicateCorr) goes out twice.
type Settings struct {
	Delay         time.Duration
	Jitter        time.Duration
	DelayCorr     float64
	Reorder       float64
	ReorderCorr   float64
	Duplicate     float64
	DuplicateCorr float64
}

// crandom is netem's correlated random number (get_crandom): each draw is
// the fresh one weighed by 1-rho plus the previous draw weighed by rho. It
// is scaled to [0, 1) rather than taken modulo a range as netem's tabledist
// does, so the correlation survives for any jitter.
type crandom struct {
	rho  float64
	last float64
}

func newCrandom(rho float64, rng *rand.Rand) crandom {
	return crandom{rho: rho, last: rng.Float64()}
}

func (c *crandom) next(rng *rand.Rand) float64 {
	v := rng.Float64()
	if c.rho == 0 {
		return v
	}
	v = v*(1-c.rho) + c.last*c.rho
	c.last = v
	return v
}

// Netem decides, packet after packet, how long each is held and whether it
// goes out twice. One goroutine only (the queue's reader) calls Decide.
type Netem struct {
	s       Settings
	rng     *rand.Rand
	delay   crandom
	reorder crandom
	dup     crandom
}

func NewNetem(s Settings, seed int64) *Netem {
	rng := rand.New(rand.NewSource(seed))
	return &Netem{
		s:       s,
		rng:     rng,
		delay:   newCrandom(s.DelayCorr, rng),
		reorder: newCrandom(s.ReorderCorr, rng),
		dup:     newCrandom(s.DuplicateCorr, rng),
	}
}

// Decide returns how long the next packet is held (0: at once) and whether
// a copy of it goes out too.
func (n *Netem) Decide() (time.Duration, bool) {
	dup := n.s.Duplicate > 0 && n.dup.next(n.rng) < n.s.Duplicate
	if n.s.Reorder > 0 && n.reorder.next(n.rng) < n.s.Reorder {
		return 0, dup
	}
	hold := n.s.Delay
	if n.s.Jitter > 0 {
		u := n.delay.next(n.rng)
		hold += time.Duration((2*u - 1) * float64(n.s.Jitter))
	}
	if hold < 0 {
		hold = 0
	}
	return hold, dup
}
