package main

// The history contract (harness/history/contract.py) as far as a conversion
// needs it: one line's validation, the rows of its messages with their roles
// (roles.py), and what the merge in file order checks and counts (pairing,
// index, the manifest's facts). Where the Python writer would raise, this
// returns errUnsure: the exact reader then names the line in its words.

const nemesisProcess = "nemesis"

// roles.py's codes
const (
	roleAttempt         = 0
	roleAck             = 1
	roleFail            = 2
	roleInfo            = 3
	roleDeliver         = 5
	roleDrainRead       = 6
	roleEffect          = 7
	roleUncommittedRead = 8
	roleReset           = 9
	roleNone            = -1
)

func isType(t string) bool {
	return t == "invoke" || t == "ok" || t == "fail" || t == "info"
}

func isPaired(f string) bool { // PAIRED_FS, also MESSAGE_FS
	return f == "send" || f == "receive" || f == "drain" || f == "txn"
}

func isValueF(f string) bool { return isPaired(f) || f == "effects" } // VALUE_FS

func isReset(f string) bool { // RESET_FS
	return f == "assign" || f == "subscribe" || f == "revoke" || f == "crash"
}

// role: roles.py's role(f, typ, mop); roleNone where it counts for nothing
func role(f, typ, mop string) int8 {
	if f == "send" || (f == "txn" && mop == "send") {
		switch typ {
		case "invoke":
			return roleAttempt
		case "ok":
			return roleAck
		case "fail":
			return roleFail
		case "info":
			return roleInfo
		}
		return roleNone
	}
	if f == "txn" && mop == "receive" {
		switch typ {
		case "ok":
			return roleDeliver
		case "fail", "info":
			return roleUncommittedRead
		}
		return roleNone
	}
	if typ != "ok" {
		if isReset(f) && typ == "info" {
			return roleReset
		}
		return roleNone
	}
	switch {
	case f == "receive":
		return roleDeliver
	case f == "drain":
		return roleDrainRead
	case f == "effects":
		return roleEffect
	case isReset(f):
		return roleReset
	}
	return roleNone
}

func intOrNull(n *node) bool { return n.isNull() || n.kind == kInt }

// listOfObjects: _list_of_objects: a list whose items are objects or null,
// whose `ints` are ints or null
func listOfObjects(items *node, ints ...string) bool {
	if !items.is(kArray) {
		return false
	}
	for _, it := range items.vals {
		if it.kind == kNull {
			continue
		}
		if it.kind != kObject {
			return false
		}
		for _, k := range ints {
			if !intOrNull(it.get(k)) {
				return false
			}
		}
	}
	return true
}

// messages: _msg_errors: a list of message objects, each with an int id and
// partition/offset ints where present and not null
func messages(msgs *node) bool {
	if !msgs.is(kArray) {
		return false
	}
	for _, m := range msgs.vals {
		if m.kind != kObject {
			return false
		}
		if !m.get("id").is(kInt) {
			return false
		}
		for _, k := range [...]string{"partition", "offset"} {
			if !intOrNull(m.get(k)) {
				return false
			}
		}
	}
	return true
}

func shapeOK(v *node) bool { // _shape_errors
	if msgs := v.get("msgs"); !msgs.isNull() && !listOfObjects(msgs, "id", "partition", "offset") {
		return false
	}
	if mops := v.get("mops"); !mops.isNull() {
		if !listOfObjects(mops) {
			return false
		}
		for _, mop := range mops.vals {
			if mop.kind == kNull {
				continue
			}
			if msgs := mop.get("msgs"); !msgs.isNull() && !listOfObjects(msgs, "id", "partition", "offset") {
				return false
			}
		}
	}
	if effects := v.get("effects"); !effects.isNull() && !listOfObjects(effects, "id", "count") {
		return false
	}
	return true
}

func valueOK(f, typ string, v *node) bool { // _value_errors
	if !isValueF(f) {
		return true
	}
	if !v.isNull() && v.kind != kObject {
		return false
	}
	if !v.isNull() && !shapeOK(v) {
		return false
	}
	if f == "send" || ((f == "receive" || f == "drain") && typ == "ok") {
		return !v.isNull() && v.has("msgs") && messages(v.get("msgs"))
	}
	if f == "txn" {
		mops := v.get("mops") // nil where v is null
		if !mops.is(kArray) {
			return false
		}
		for _, mop := range mops.vals {
			if mop.kind != kObject {
				return false
			}
			mf := mop.get("f")
			if !mf.is(kString) || (mf.s != "send" && mf.s != "receive") {
				return false
			}
			// mop.get("msgs") or []: null or an empty list is no messages
			if msgs := mop.get("msgs"); !msgs.isNull() && !messages(msgs) {
				return false
			}
		}
	}
	if f == "effects" && typ == "ok" {
		effects := v.get("effects") // nil where v is null
		if !effects.is(kArray) {
			return false
		}
		for _, e := range effects.vals {
			if e.kind != kObject {
				return false
			}
			if !e.get("id").is(kInt) || !e.get("count").is(kInt) {
				return false
			}
		}
	}
	return true
}

// opInfo is what the merge in file order needs of one op.
type opInfo struct {
	line      int // in its chunk, from 1
	index     int64
	proc      int64
	nemesis   bool
	f, typ    string
	hasOffset bool  // a message op with a message at an offset
	sent      idSet // a send's message ids, which its completion must repeat
}

// idSet: a send's ids as a multiset fingerprint (count, sum, sum of a mix):
// the merge compares an invoke's with its completion's; a difference is
// left to the exact reader, which names it
type idSet struct{ n, sum, mixed uint64 }

func idsOf(msgs *node) (s idSet) {
	if !msgs.is(kArray) {
		return s
	}
	for _, m := range msgs.vals {
		if id := m.get("id"); id.is(kInt) {
			x := uint64(id.i)
			s.n++
			s.sum += x
			x ^= x >> 33 // splitmix64's finaliser
			x *= 0xff51afd7ed558ccd
			x ^= x >> 33
			s.mixed += x
		}
	}
	return s
}

// checkOp: validate_op without the index's place (the merge checks it).
func checkOp(op *node) (opInfo, bool) {
	var o opInfo
	if op.kind != kObject {
		return o, false
	}
	for _, k := range [...]string{"index", "time", "process", "type", "f"} {
		if !op.has(k) {
			return o, false
		}
	}
	index, time, p := op.get("index"), op.get("time"), op.get("process")
	typ, f := op.get("type"), op.get("f")
	if index.kind != kInt || time.kind != kInt {
		return o, false
	}
	switch {
	case p.kind == kInt:
		o.proc = p.i
	case p.kind == kString && p.s == nemesisProcess:
		o.nemesis = true
	default:
		return o, false
	}
	if !typ.is(kString) || !isType(typ.s) || !f.is(kString) {
		return o, false
	}
	for _, k := range [...]string{"node", "error"} {
		if x := op.get(k); !x.isNull() && x.kind != kString {
			return o, false
		}
	}
	o.index, o.f, o.typ = index.i, f.s, typ.s
	if !o.nemesis && !valueOK(o.f, o.typ, op.get("value")) {
		return o, false
	}
	if !o.nemesis && o.f == "send" {
		o.sent = idsOf(op.get("value").get("msgs"))
	}
	return o, true
}
