package main

// One Parquet writer per file, each on its own goroutine, so encoding the
// two files overlaps the parsing. Files are written under temporary names
// and take their own only once everything is written (commit).

import (
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

const rowGroupRows = 1 << 20

type fileWriter struct {
	target, tmp string
	file        *os.File
	pw          *pqarrow.FileWriter
	in          chan arrow.RecordBatch
	done        chan error
}

func newFileWriter(target string, schema *arrow.Schema) (*fileWriter, error) {
	tmp := filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+".native")
	os.RemoveAll(tmp)
	file, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(rowGroupRows),
	)
	pw, err := pqarrow.NewFileWriter(schema, file, props, pqarrow.DefaultWriterProps())
	if err != nil {
		file.Close()
		os.Remove(tmp)
		return nil, err
	}
	w := &fileWriter{target: target, tmp: tmp, file: file, pw: pw,
		in: make(chan arrow.RecordBatch, 2), done: make(chan error, 1)}
	go func() {
		var err error
		for rec := range w.in {
			if err == nil && rec.NumRows() > 0 {
				err = w.pw.WriteBuffered(rec)
			}
			rec.Release()
		}
		if cerr := w.pw.Close(); err == nil {
			err = cerr
		}
		w.done <- err
	}()
	return w, nil
}

type writers struct{ ops, msgs *fileWriter }

func newWriters(opsPath, msgsPath string) (*writers, error) {
	ops, err := newFileWriter(opsPath, opsSchema)
	if err != nil {
		return nil, err
	}
	msgs, err := newFileWriter(msgsPath, msgsSchema)
	if err != nil {
		close(ops.in)
		<-ops.done
		os.Remove(ops.tmp)
		return nil, err
	}
	return &writers{ops: ops, msgs: msgs}, nil
}

// write: hands a block's records to the two writers (an error of theirs
// comes out of close)
func (w *writers) write(r records) {
	w.ops.in <- r.ops
	w.msgs.in <- r.msgs
}

// close: waits for both files to be written; the first error
func (w *writers) close() error {
	var first error
	for _, f := range []*fileWriter{w.ops, w.msgs} {
		close(f.in)
		if err := <-f.done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// commit: the files take their names (replacing an older sidecar's, which
// Spark's conversion leaves as directories)
func (w *writers) commit() error {
	for _, f := range []*fileWriter{w.ops, w.msgs} {
		if err := os.RemoveAll(f.target); err != nil {
			return err
		}
		if err := os.Rename(f.tmp, f.target); err != nil {
			return err
		}
	}
	return nil
}

func (w *writers) remove() {
	for _, f := range []*fileWriter{w.ops, w.msgs} {
		os.Remove(f.tmp)
	}
}
