package main

// A JSON parser for one history line that accepts no more than the Python
// reader (orjson) does: strict UTF-8, no lone surrogate escapes, no number
// outside what it can tell apart (an int that does not fit 64 bits is left
// to the exact reader), and no duplicate keys (orjson keeps the last, Spark
// may not). Whatever it is unsure of is an error, and an error sends the
// whole history to the exact reader: being stricter is safe, never laxer.

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

type kind uint8

const (
	kNull kind = iota
	kBool
	kInt   // a number literal without fraction or exponent that fits int64
	kFloat // any other number literal
	kString
	kArray
	kObject
)

type node struct {
	kind  kind
	i     int64
	s     string // a string's text, unescaped
	keys  []string
	vals  []*node // an object's values (beside keys) or an array's items
	start int     // the node's text in the line (a nemesis value is kept as text)
	end   int
}

// is: the node is there and of kind k (an absent key's node is nil)
func (n *node) is(k kind) bool { return n != nil && n.kind == k }

func (n *node) get(key string) *node {
	if !n.is(kObject) {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

func (n *node) has(key string) bool {
	if !n.is(kObject) {
		return false
	}
	for _, k := range n.keys {
		if k == key {
			return true
		}
	}
	return false
}

// isNull: JSON null, or absent (Python's .get gives None for both).
func (n *node) isNull() bool { return n == nil || n.kind == kNull }

var errUnsure = errors.New("not JSON as the exact reader takes it")

const maxDepth = 500 // orjson's limit is 1024: deeper lines go to the exact reader

type parser struct {
	b     []byte
	p     int
	depth int
	pool  []node
}

func (ps *parser) alloc() *node {
	if len(ps.pool) == 0 {
		ps.pool = make([]node, 256)
	}
	n := &ps.pool[0]
	ps.pool = ps.pool[1:]
	return n
}

func parseLine(ps *parser, b []byte) (*node, error) {
	if !utf8.Valid(b) {
		return nil, errUnsure
	}
	ps.b, ps.p, ps.depth = b, 0, 0
	ps.ws()
	n, err := ps.value()
	if err != nil {
		return nil, err
	}
	ps.ws()
	if ps.p != len(b) {
		return nil, errUnsure
	}
	return n, nil
}

// fail: the line ended where more JSON was due (errEOF: no JSON parser takes
// it either, as a crashed run's partial last line), or something else is
// wrong (errUnsure)
func (ps *parser) fail() error {
	if ps.p >= len(ps.b) {
		return errEOF
	}
	return errUnsure
}

func (ps *parser) ws() {
	for ps.p < len(ps.b) {
		switch ps.b[ps.p] {
		case ' ', '\t', '\n', '\r':
			ps.p++
		default:
			return
		}
	}
}

func (ps *parser) lit(word string) bool {
	if len(ps.b)-ps.p >= len(word) && string(ps.b[ps.p:ps.p+len(word)]) == word {
		ps.p += len(word)
		return true
	}
	return false
}

func (ps *parser) value() (*node, error) {
	if ps.p >= len(ps.b) {
		return nil, errEOF
	}
	n := ps.alloc()
	*n = node{start: ps.p}
	switch c := ps.b[ps.p]; {
	case c == '{' || c == '[':
		k, closing := kObject, byte('}')
		if c == '[' {
			k, closing = kArray, ']'
		}
		if err := ps.container(n, k, closing); err != nil {
			return nil, err
		}
	case c == '"':
		s, err := ps.str()
		if err != nil {
			return nil, err
		}
		n.kind, n.s = kString, s
	case c == 't' || c == 'f' || c == 'n':
		word := map[byte]string{'t': "true", 'f': "false", 'n': "null"}[c]
		if !ps.lit(word) {
			if rest := ps.b[ps.p:]; len(rest) < len(word) && string(rest) == word[:len(rest)] {
				return nil, errEOF
			}
			return nil, errUnsure
		}
		n.kind = map[byte]kind{'t': kBool, 'f': kBool, 'n': kNull}[c]
	case c == '-' || (c >= '0' && c <= '9'):
		if err := ps.number(n); err != nil {
			return nil, err
		}
	default:
		return nil, errUnsure
	}
	n.end = ps.p
	return n, nil
}

// container: an object's members or an array's items, up to `closing`
func (ps *parser) container(n *node, k kind, closing byte) error {
	ps.depth++
	if ps.depth > maxDepth {
		return errUnsure
	}
	n.kind = k
	ps.p++ // { or [
	ps.ws()
	if ps.p < len(ps.b) && ps.b[ps.p] == closing {
		ps.p++
		ps.depth--
		return nil
	}
	for {
		ps.ws()
		if k == kObject {
			if err := ps.key(n); err != nil {
				return err
			}
		}
		v, err := ps.value()
		if err != nil {
			return err
		}
		n.vals = append(n.vals, v)
		ps.ws()
		if ps.p >= len(ps.b) {
			return errEOF
		}
		switch ps.b[ps.p] {
		case ',':
			ps.p++
		case closing:
			ps.p++
			ps.depth--
			return nil
		default:
			return errUnsure
		}
	}
}

// key: an object member's key and its colon; a duplicate is unsure
func (ps *parser) key(n *node) error {
	if ps.p >= len(ps.b) || ps.b[ps.p] != '"' {
		return ps.fail()
	}
	k, err := ps.str()
	if err != nil {
		return err
	}
	for _, seen := range n.keys {
		if seen == k {
			return errUnsure
		}
	}
	ps.ws()
	if ps.p >= len(ps.b) || ps.b[ps.p] != ':' {
		return ps.fail()
	}
	ps.p++
	ps.ws()
	n.keys = append(n.keys, k)
	return nil
}

// number: JSON's grammar; an int literal must fit int64 (Python's reader
// takes a bigger one as an int the contract refuses, or as no JSON at all).
func (ps *parser) number(n *node) error {
	b, start := ps.b, ps.p
	if b[ps.p] == '-' {
		ps.p++
	}
	if ps.p >= len(b) {
		return errEOF
	}
	if b[ps.p] == '0' {
		ps.p++
	} else if b[ps.p] >= '1' && b[ps.p] <= '9' {
		ps.digits()
	} else {
		return errUnsure
	}
	integer := true
	if ps.p < len(b) && b[ps.p] == '.' {
		integer = false
		ps.p++
		if !ps.digits() {
			return ps.fail()
		}
	}
	if ps.p < len(b) && (b[ps.p] == 'e' || b[ps.p] == 'E') {
		integer = false
		ps.p++
		if ps.p < len(b) && (b[ps.p] == '+' || b[ps.p] == '-') {
			ps.p++
		}
		if !ps.digits() {
			return ps.fail()
		}
	}
	if !integer {
		// a float beyond a double's range is JSON to the exact reader's
		// second parse, not to orjson's first: left to it
		if _, err := strconv.ParseFloat(string(b[start:ps.p]), 64); err != nil {
			return errUnsure
		}
		n.kind = kFloat
		return nil
	}
	i, err := strconv.ParseInt(string(b[start:ps.p]), 10, 64)
	if err != nil {
		return errUnsure
	}
	n.kind, n.i = kInt, i
	return nil
}

// digits: one or more decimal digits, skipped
func (ps *parser) digits() bool {
	from := ps.p
	for ps.p < len(ps.b) && ps.b[ps.p] >= '0' && ps.b[ps.p] <= '9' {
		ps.p++
	}
	return ps.p > from
}

func hexval(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

func (ps *parser) hex4() (rune, bool) {
	if len(ps.b)-ps.p < 4 {
		return 0, false // the caller's fail() tells a cut line apart
	}
	var r rune
	for i := 0; i < 4; i++ {
		h := hexval(ps.b[ps.p+i])
		if h < 0 {
			return 0, false
		}
		r = r<<4 | h
	}
	ps.p += 4
	return r, true
}

func (ps *parser) str() (string, error) {
	b := ps.b
	ps.p++ // "
	start := ps.p
	for ps.p < len(b) && b[ps.p] != '"' && b[ps.p] != '\\' && b[ps.p] >= 0x20 {
		ps.p++
	}
	if ps.p < len(b) && b[ps.p] == '"' {
		s := string(b[start:ps.p])
		ps.p++
		return s, nil
	}
	out := append([]byte(nil), b[start:ps.p]...)
	for ps.p < len(b) {
		c := b[ps.p]
		switch {
		case c == '"':
			ps.p++
			return string(out), nil
		case c < 0x20:
			return "", errUnsure
		case c != '\\':
			out = append(out, c)
			ps.p++
			continue
		}
		ps.p++
		if ps.p >= len(b) {
			return "", errEOF
		}
		e := b[ps.p]
		ps.p++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := ps.hex4()
			if !ok {
				return "", ps.cutEscape()
			}
			if utf16.IsSurrogate(r) {
				// only a high surrogate followed by an escaped low one
				if r >= 0xDC00 || !ps.lit(`\u`) {
					return "", ps.fail()
				}
				r2, ok := ps.hex4()
				if !ok {
					return "", ps.cutEscape()
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return "", errUnsure
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", errUnsure
		}
	}
	return "", errEOF
}

// cutEscape: a \u escape with fewer than four characters before the line's end
func (ps *parser) cutEscape() error {
	if len(ps.b)-ps.p < 4 {
		return errEOF
	}
	return errUnsure
}
