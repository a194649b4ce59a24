package main

// The sidecar's rows of one block, in sidecar.py's schemas (OPS_SCHEMA,
// MSGS_SCHEMA), built as sidecar.py's message_rows builds them.

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func nullable(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

var (
	i64 = arrow.PrimitiveTypes.Int64
	str = arrow.BinaryTypes.String

	opsSchema = arrow.NewSchema([]arrow.Field{
		nullable("index", i64),
		nullable("time", i64),
		nullable("proc", i64),
		nullable("nemesis", arrow.FixedWidthTypes.Boolean),
		nullable("type", str),
		nullable("f", str),
		nullable("value", str), // a nemesis op's value as JSON text
	}, nil)
	msgsSchema = arrow.NewSchema([]arrow.Field{
		nullable("index", i64),
		nullable("proc", i64),
		nullable("f", str),
		nullable("type", str),
		nullable("mop", str),
		nullable("pos", i64),
		nullable("id", i64),
		nullable("n", i64),
		nullable("queue", str),
		nullable("partition", i64),
		nullable("offset", i64),
		nullable("role", arrow.PrimitiveTypes.Int8),
	}, nil)
)

type records struct{ ops, msgs arrow.RecordBatch }

type recordBuilders struct {
	ops, msgs *array.RecordBuilder
}

func newRecordBuilders() *recordBuilders {
	return &recordBuilders{
		ops:  array.NewRecordBuilder(memory.DefaultAllocator, opsSchema),
		msgs: array.NewRecordBuilder(memory.DefaultAllocator, msgsSchema),
	}
}

func (rb *recordBuilders) finish() records {
	defer rb.ops.Release()
	defer rb.msgs.Release()
	return records{rb.ops.NewRecordBatch(), rb.msgs.NewRecordBatch()}
}

func putInt(b array.Builder, n *node) {
	if n.isNull() {
		b.AppendNull()
	} else {
		b.(*array.Int64Builder).Append(n.i)
	}
}

func putStr(b array.Builder, s string, ok bool) {
	if ok {
		b.(*array.StringBuilder).Append(s)
	} else {
		b.AppendNull()
	}
}

// compact: a JSON text without the whitespace between its tokens
func compact(text []byte) string {
	out := make([]byte, 0, len(text))
	inString, escaped := false, false
	for _, c := range text {
		switch {
		case inString:
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case c == '"':
			inString = true
		}
		out = append(out, c)
	}
	return string(out)
}

// add: the op's row and its messages' rows (all or none: a message naming
// its queue by a non-string leaves the block unsure before anything is kept)
func (rb *recordBuilders) add(op *node, o *opInfo, line []byte) error {
	var rows []msgRow
	if !o.nemesis {
		var err error
		if rows, err = messageRows(op, o); err != nil {
			return err
		}
	}
	ob := rb.ops
	ob.Field(0).(*array.Int64Builder).Append(o.index)
	ob.Field(1).(*array.Int64Builder).Append(op.get("time").i)
	if o.nemesis {
		ob.Field(2).AppendNull()
	} else {
		ob.Field(2).(*array.Int64Builder).Append(o.proc)
	}
	ob.Field(3).(*array.BooleanBuilder).Append(o.nemesis)
	ob.Field(4).(*array.StringBuilder).Append(o.typ)
	ob.Field(5).(*array.StringBuilder).Append(o.f)
	v := op.get("value")
	if o.nemesis && !v.isNull() {
		ob.Field(6).(*array.StringBuilder).Append(compact(line[v.start:v.end]))
	} else {
		ob.Field(6).AppendNull()
	}
	mb := rb.msgs
	for i := range rows {
		r := &rows[i]
		mb.Field(0).(*array.Int64Builder).Append(o.index)
		mb.Field(1).(*array.Int64Builder).Append(o.proc)
		mb.Field(2).(*array.StringBuilder).Append(o.f)
		mb.Field(3).(*array.StringBuilder).Append(o.typ)
		putStr(mb.Field(4), r.mop, r.hasMop)
		mb.Field(5).(*array.Int64Builder).Append(r.pos)
		putInt(mb.Field(6), r.id)
		if r.marker {
			mb.Field(7).AppendNull()
		} else if r.effect {
			putInt(mb.Field(7), r.count)
		} else {
			mb.Field(7).(*array.Int64Builder).Append(1)
		}
		putStr(mb.Field(8), r.queue, r.hasQueue)
		putInt(mb.Field(9), r.partition)
		putInt(mb.Field(10), r.offset)
		if r.role == roleNone {
			mb.Field(11).AppendNull()
		} else {
			mb.Field(11).(*array.Int8Builder).Append(r.role)
		}
	}
	return nil
}

type msgRow struct {
	mop               string
	hasMop, hasQueue  bool
	marker, effect    bool
	pos               int64
	id, count         *node
	queue             string
	partition, offset *node
	role              int8
}

// messageRows: sidecar.py's message_rows for a client op
func messageRows(op *node, o *opInfo) ([]msgRow, error) {
	if isReset(o.f) {
		if r := role(o.f, o.typ, ""); r != roleNone {
			return []msgRow{{marker: true, role: r}}, nil
		}
		return nil, nil
	}
	v := op.get("value")
	if !isValueF(o.f) || !v.is(kObject) {
		return nil, nil
	}
	var out []msgRow
	var at int64 // the place in the op, across a txn's mops
	put := func(mop string, hasMop bool, items *node, effects bool) error {
		r := role(o.f, o.typ, mop)
		if !items.is(kArray) {
			return nil
		}
		for _, x := range items.vals {
			pos := at
			at++
			if x.kind != kObject {
				continue
			}
			row := msgRow{mop: mop, hasMop: hasMop, pos: pos, id: x.get("id"), role: r}
			if effects {
				row.effect, row.count = true, x.get("count")
			} else {
				q := x.get("queue")
				if !q.isNull() && q.kind != kString {
					return unsure{"a message names its queue by a non-string"}
				}
				row.hasQueue = !q.isNull()
				if row.hasQueue {
					row.queue = q.s
				}
				row.partition, row.offset = x.get("partition"), x.get("offset")
				if !row.offset.isNull() {
					o.hasOffset = true
				}
			}
			out = append(out, row)
		}
		return nil
	}
	var err error
	switch o.f {
	case "txn":
		if mops := v.get("mops"); mops.is(kArray) {
			for _, mop := range mops.vals {
				if mop.kind != kObject {
					continue
				}
				mf := mop.get("f") // validated: "send" or "receive"
				if err = put(mf.s, true, mop.get("msgs"), false); err != nil {
					return nil, err
				}
			}
		}
	case "effects":
		err = put("", false, v.get("effects"), true)
	default:
		err = put("", false, v.get("msgs"), false)
	}
	return out, err
}
