// qc-convert makes a history.jsonl columnar: the sidecar's two Parquet
// files (harness/history/sidecar.py's schemas and rows) and, on stdout, the
// facts its manifest needs. Blocks of lines are parsed and checked on every
// core; their results are merged in file order (the index's place, the
// pairing of invokes and completions, the facts) and written by one writer
// per file.
//
//	qc-convert --ops OPS.parquet --msgs MSGS.parquet HISTORY.jsonl
//
// Exit 0: written, facts on stdout. Exit 3: a line it is not sure of (one
// the contract refuses, or one it reads differently from the exact reader):
// nothing is left behind, and the caller checks the history the exact way,
// which names the line. Exit 2: the files could not be read or written.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
)

const blockBytes = 16 << 20

type unsure struct{ why string }

func (u unsure) Error() string { return u.why }

func main() {
	opsPath := flag.String("ops", "", "the ops Parquet file to write")
	msgsPath := flag.String("msgs", "", "the msgs Parquet file to write")
	flag.Parse()
	if flag.NArg() != 1 || *opsPath == "" || *msgsPath == "" {
		fmt.Fprintln(os.Stderr, "usage: qc-convert --ops OPS --msgs MSGS HISTORY")
		os.Exit(2)
	}
	facts, err := convert(flag.Arg(0), *opsPath, *msgsPath)
	var u unsure
	switch {
	case errors.As(err, &u):
		fmt.Fprintln(os.Stderr, u.why)
		os.Exit(3)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out, _ := json.Marshal(facts)
	fmt.Println(string(out))
}

// block: a run of whole lines (the last block may end in a partial line)
type block struct {
	data  []byte
	final bool // the file's last block: its last line may lack its newline
}

type blockResult struct {
	lines     int // lines in the block, a partial last one included
	ops       []opInfo
	truncated int // the partial last line left out (a crashed run's), from 1; 0 if none
	bad       error
	line      int // the bad line, in the block, from 1
	recs      records
}

func convert(history, opsPath, msgsPath string) (map[string]any, error) {
	f, err := os.Open(history)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := newWriters(opsPath, msgsPath)
	if err != nil {
		return nil, err
	}
	facts, err := run(f, w)
	if cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		w.remove()
		return nil, err
	}
	if err := w.commit(); err != nil {
		w.remove()
		return nil, err
	}
	return facts, nil
}

func run(f io.Reader, w *writers) (map[string]any, error) {
	workers := runtime.NumCPU()
	jobs := make(chan func(), workers)
	order := make(chan chan blockResult, workers+1)
	stop := make(chan struct{})
	defer close(stop)
	for i := 0; i < workers; i++ {
		go func() {
			for job := range jobs {
				job()
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() { // the reader: blocks of whole lines, in order
		defer close(order)
		defer close(jobs)
		readErr <- readBlocks(f, func(b block) bool {
			done := make(chan blockResult, 1)
			select {
			case order <- done:
			case <-stop:
				return false
			}
			select {
			case jobs <- func() { done <- parseBlock(b) }:
				return true
			case <-stop:
				return false
			}
		})
	}()
	m := newMerge()
	for done := range order {
		r := <-done
		if err := m.add(r); err != nil {
			return nil, err
		}
		w.write(r.recs)
	}
	if err := <-readErr; err != nil {
		return nil, err
	}
	return m.facts()
}

func readBlocks(f io.Reader, emit func(block) bool) error {
	var carry []byte
	for {
		buf := make([]byte, len(carry)+blockBytes)
		copy(buf, carry)
		n, err := io.ReadFull(f, buf[len(carry):])
		buf = buf[:len(carry)+n]
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			return err
		}
		if eof {
			if len(buf) > 0 && !emit(block{data: buf, final: true}) {
				return nil
			}
			return nil
		}
		cut := bytes.LastIndexByte(buf, '\n')
		if cut < 0 { // one line longer than a block: read on
			carry = buf
			continue
		}
		carry = append([]byte(nil), buf[cut+1:]...)
		if !emit(block{data: buf[:cut+1]}) {
			return nil
		}
	}
}

// isBlank: Python's bytes.strip() leaves nothing (its whitespace: space,
// \t, \n, \r, \v, \f)
func isBlank(line []byte) bool {
	for _, c := range line {
		switch c {
		case ' ', '\t', '\n', '\r', '\v', '\f':
		default:
			return false
		}
	}
	return true
}

var errEOF = errors.New("the line ends inside its JSON")

func parseBlock(b block) (r blockResult) {
	var ps parser
	rb := newRecordBuilders()
	defer func() { r.recs = rb.finish() }()
	data := b.data
	for len(data) > 0 {
		r.lines++
		cut := bytes.IndexByte(data, '\n')
		var line []byte
		if cut < 0 {
			line, data = data, nil
		} else {
			line, data = data[:cut+1], data[cut+1:]
		}
		if isBlank(line) {
			continue
		}
		op, err := parseLine(&ps, line)
		if err != nil {
			// the file's last line, without its newline, cut inside its JSON:
			// a crashed run's partial write (read_history leaves it out)
			if cut < 0 && b.final && errors.Is(err, errEOF) {
				r.truncated = r.lines
				return r
			}
			r.bad, r.line = unsure{"not JSON as the exact reader takes it"}, r.lines
			return r
		}
		info, ok := checkOp(op)
		if !ok {
			r.bad, r.line = unsure{"breaks the contract"}, r.lines
			return r
		}
		info.line = r.lines
		if err := rb.add(op, &info, line); err != nil {
			r.bad, r.line = err, r.lines
			return r
		}
		r.ops = append(r.ops, info)
	}
	return r
}

// merge: what needs the ops in file order
type merge struct {
	lines, nOps                         int
	effectsOps, drainsInvoked, drainsOK int
	offsetOps, okTxns                   int
	open                                map[int64]openInvoke
	tally                               map[tallyKey]int
	truncated                           int
}

type openInvoke struct {
	f     string
	index int64
	sent  idSet
}

type tallyKey struct {
	f, typ string
	client bool
}

func newMerge() *merge {
	return &merge{open: map[int64]openInvoke{}, tally: map[tallyKey]int{}}
}

func (m *merge) add(r blockResult) error {
	for i := range r.ops {
		o := &r.ops[i]
		line := m.lines + o.line
		if o.index != int64(m.nOps) {
			return unsure{fmt.Sprintf("line %d: index %d, expected %d", line, o.index, m.nOps)}
		}
		if !o.nemesis && isPaired(o.f) { // Pairing.check
			opened, isOpen := m.open[o.proc]
			if o.typ == "invoke" {
				if isOpen {
					return unsure{fmt.Sprintf("line %d: process %d invokes while open", line, o.proc)}
				}
				m.open[o.proc] = openInvoke{o.f, o.index, o.sent}
			} else {
				if !isOpen || opened.f != o.f {
					return unsure{fmt.Sprintf("line %d: %s %s has no open invoke", line, o.typ, o.f)}
				}
				if o.f == "send" && o.sent != opened.sent {
					return unsure{fmt.Sprintf("line %d: %s send names other ids than its invoke", line, o.typ)}
				}
				delete(m.open, o.proc)
			}
		}
		m.nOps++
		client := !o.nemesis
		if client {
			if o.f == "effects" && o.typ == "ok" {
				m.effectsOps++
			}
			if o.f == "drain" && o.typ == "invoke" {
				m.drainsInvoked++
			}
			if o.f == "drain" && o.typ == "ok" {
				m.drainsOK++
			}
			if o.f == "txn" && o.typ == "ok" {
				m.okTxns++
			}
			if o.hasOffset {
				m.offsetOps++
			}
		}
		if (client && (o.f == "crash" || o.f == "txn")) || (!client && strings.HasPrefix(o.f, "start-")) {
			m.tally[tallyKey{o.f, o.typ, client}]++
		}
	}
	if r.bad != nil {
		return unsure{fmt.Sprintf("line %d: %v", m.lines+r.line, r.bad)}
	}
	if r.truncated > 0 {
		m.truncated = m.lines + r.truncated
	}
	m.lines += r.lines
	return nil
}

func (m *merge) facts() (map[string]any, error) {
	if m.nOps == 0 {
		return nil, unsure{"no operations"}
	}
	open := []int64{}
	for _, o := range m.open {
		if o.f == "send" || o.f == "txn" {
			open = append(open, o.index)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i] < open[j] })
	tally := [][]any{}
	for k, n := range m.tally {
		tally = append(tally, []any{k.f, k.typ, k.client, n})
	}
	sort.Slice(tally, func(i, j int) bool {
		a, b := tally[i], tally[j]
		if a[0] != b[0] {
			return a[0].(string) < b[0].(string)
		}
		if a[1] != b[1] {
			return a[1].(string) < b[1].(string)
		}
		return !a[2].(bool) && b[2].(bool)
	})
	var truncated any
	if m.truncated > 0 {
		truncated = m.truncated
	}
	return map[string]any{
		"ops":            m.nOps,
		"lines":          m.lines,
		"effects_ops":    m.effectsOps,
		"drains_invoked": m.drainsInvoked,
		"drains_ok":      m.drainsOK,
		"offset_ops":     m.offsetOps,
		"ok_txns":        m.okTxns,
		"open_invokes":   open,
		"tally":          tally,
		"truncated_line": truncated,
	}, nil
}
